// interleave with num_parallel_calls: the deterministic order equals the sequential
// interleave's (itself checked against TF 2.21 in test_dataset_more.cpp) for every cycle, block
// and thread count; deterministic = false gives the same elements; the slots are read on
// several threads at once; errors arrive at their element's place; an iterator dropped early
// stops its threads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::data::AUTOTUNE;
using tf::data::Dataset;
using tf::data::Element;
using tf::data::UNKNOWN_CARDINALITY;

namespace {

std::vector<double> firsts(const Dataset& ds) {
  std::vector<double> out;
  for (const Element& e : ds) out.push_back(tf::detail::to_double_vector(e.at(0))[0]);
  return out;
}

// Input x opens range(100 x, 100 x + (x * 7) % 5): inner datasets of 0 to 4 elements, so the
// slots end at different times and some are empty.
Dataset uneven(tf::Tensor x) {
  const int64_t v = x.item<int64_t>();
  return Dataset::range(100 * v, 100 * v + (v * 7) % 5);
}

}  // namespace

TEST_CASE("parallel interleave gives the sequential interleave's order", "[cpu][data]") {
  const Dataset in = Dataset::range(1, 23);
  for (int64_t cycle : {1, 2, 3, 5}) {
    for (int64_t block : {1, 2, 3}) {
      const std::vector<double> want = firsts(in.interleave(uneven, cycle, block));
      for (int64_t threads : {int64_t{1}, int64_t{2}, int64_t{4}, AUTOTUNE}) {
        CAPTURE(cycle, block, threads);
        const Dataset par = in.interleave(uneven, cycle, block, threads);
        CHECK(firsts(par) == want);
        CHECK(par.cardinality() == UNKNOWN_CARDINALITY);
        // deterministic = false: the same elements, in some order.
        std::vector<double> any = firsts(in.interleave(uneven, cycle, block, threads, false));
        std::vector<double> sorted_want = want;
        std::sort(any.begin(), any.end());
        std::sort(sorted_want.begin(), sorted_want.end());
        CHECK(any == sorted_want);
      }
    }
  }
  // TF's documented example (range(1, 6), each repeated 6 times, cycle 2, block 4), in parallel.
  CHECK(firsts(Dataset::range(1, 6).interleave(
            [](tf::Tensor x) { return Dataset::from_tensors({x}).repeat(6); }, 2, 4, 2)) ==
        std::vector<double>{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3,
                            3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5});
  // An empty input, and a second pass over the same dataset.
  CHECK(firsts(Dataset::range(0).interleave(uneven, 2, 1, 2)).empty());
  const Dataset twice = in.interleave(uneven, 3, 2, 3);
  CHECK(firsts(twice) == firsts(twice));
}

TEST_CASE("parallel interleave reads its slots on several threads at once", "[cpu][data]") {
  // Each inner element sleeps 2 ms; with 4 threads over a cycle of 4 the reads overlap (the
  // sequential interleave never runs two at once).
  std::atomic<int> active{0}, most{0};
  auto slow = [&](tf::Tensor x) {
    return Dataset::range(4).map([&active, &most, x](tf::Tensor v) {
      const int now = ++active;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --active;
      return std::vector<tf::Tensor>{x, v};
    });
  };
  const std::vector<double> got = firsts(Dataset::range(8).interleave(slow, 4, 1, 4));
  CHECK(got.size() == 32);
  CHECK(most.load() >= 2);
  most = 0;
  CHECK(firsts(Dataset::range(8).interleave(slow, 4, 1)) == got);
  CHECK(most.load() == 1);
}

TEST_CASE("parallel interleave: errors arrive at their place and early stops join", "[cpu][data]") {
  // fn fails for input 3: the elements before it (in the sequential order) come first.
  auto failing = [](tf::Tensor x) -> Dataset {
    if (x.item<int64_t>() == 3) throw tf::InvalidArgumentError("no dataset for 3");
    return Dataset::range(10 * x.item<int64_t>(), 10 * x.item<int64_t>() + 2);
  };
  for (bool deterministic : {true, false}) {
    CAPTURE(deterministic);
    std::vector<double> before;
    auto it = Dataset::range(1, 6).interleave(failing, 2, 1, 2, deterministic).begin();
    tf::testing::require_error(
        [&] {
          for (; it != std::default_sentinel; ++it)
            before.push_back(tf::detail::to_double_vector((*it).at(0))[0]);
        },
        {"no dataset for 3"});
    if (deterministic) CHECK(before == std::vector<double>{10, 20, 11, 21});
  }
  // An inner dataset that fails at its second element.
  auto inner_fails = [](tf::Tensor x) {
    return Dataset::range(3).map([x](tf::Tensor v) -> std::vector<tf::Tensor> {
      if (x.item<int64_t>() == 2 && v.item<int64_t>() == 1)
        throw tf::InvalidArgumentError("inner failure");
      return {v + x * 10};
    });
  };
  std::vector<double> seen;
  tf::testing::require_error(
      [&] {
        for (const Element& e : Dataset::range(1, 4).interleave(inner_fails, 2, 1, 2))
          seen.push_back(tf::detail::to_double_vector(e.at(0))[0]);
      },
      {"inner failure"});
  CHECK(seen == std::vector<double>{10, 20, 11});
  // Leaving the loop early destroys the iterator, which stops and joins its threads.
  for (int rep = 0; rep < 20; ++rep) {
    int n = 0;
    for (const Element& e : Dataset::range(1000).interleave(uneven, 4, 2, 4)) {
      (void)e;
      if (++n == 3) break;
    }
    CHECK(n == 3);
  }
  tf::testing::require_error([] { Dataset::range(3).interleave(uneven, 2, 1, 0); },
                             {"Dataset.interleave", "num_parallel_calls must be positive"});
  tf::testing::require_error([] { Dataset::range(3).interleave(uneven, 0, 1, 2); },
                             {"cycle_length must be positive"});
  tf::testing::require_error([] { Dataset::range(3).interleave(uneven, 2, 0, 2); },
                             {"block_length must be positive"});
}
