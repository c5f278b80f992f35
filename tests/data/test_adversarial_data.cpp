// Adversarial inputs for tf::data (data/dataset.h, data/csv.h, data/idx.h): every Dataset
// factory and transformation with bad or extreme arguments (0, negative, 2^40, the int64
// limits), odd element structures (scalars, empty tensors, varying shapes, ranks, dtypes and
// component counts, elements without components), user functions that throw or return odd
// results, and missing, empty, truncated and garbage files. Each probe builds the dataset, reads
// its cardinality and iterates it (at most kCap elements): readable elements, as many as the
// cardinality says when it is known, or a tf::Error naming the transformation. A user
// function's own exception reaches the loop unchanged (docs/data.md, "map and filter").
// Not probed, because they never end by design (as in TF): a huge batch, shuffle buffer, skip,
// shard, shift or window over an infinite input, a huge parallel interleave cycle over one (the
// cycle is filled first), and inputs that never yield again: an infinite input whose interleaved
// datasets are all empty, a filter that keeps nothing under repeat(), a choice dataset that
// keeps choosing an exhausted dataset.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "support/adversarial.h"
#include "support/temp_dir.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
using adversarial::describe;
using adversarial::kShapes;
using adversarial::make;
using tf::data::Dataset;
using tf::data::Element;
using tf::data::INFINITE_CARDINALITY;
using tf::data::UNKNOWN_CARDINALITY;
using tf::testing::kAllDTypes;
using tf::testing::TempDir;

namespace {

constexpr int64_t kCap = 200;
constexpr int64_t kHuge = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
// Counts, sizes and indices: invalid, ordinary, huge.
const std::vector<int64_t> kCounts = {kMin, -2, -1, 0, 1, 2, 3, kHuge, kMax};

bool huge(int64_t n) {
  return n >= kHuge;
}

std::string str(int64_t n) {
  return n == kMax    ? "INT64_MAX"
         : n == kMin  ? "INT64_MIN"
         : n == kHuge ? "2^40"
                      : std::to_string(n);
}

int64_t value(const tf::Tensor& t) {
  return t.item<int64_t>();
}

// The tensors of the first kCap elements of ds, after checking that an iteration that ends
// agrees with ds's cardinality (and an infinite one reaches kCap).
std::vector<tf::Tensor> drain(const Dataset& ds) {
  const int64_t card = ds.cardinality();
  CHECK(card >= UNKNOWN_CARDINALITY);
  std::vector<tf::Tensor> out;
  int64_t n = 0;
  for (auto it = ds.begin(); n < kCap && it != ds.end(); ++it, ++n)
    for (const tf::Tensor& t : *it) out.push_back(t);
  if (card == INFINITE_CARDINALITY) CHECK(n == kCap);
  if (card >= 0) CHECK(n == std::min(card, kCap));
  return out;
}

// adversarial::probe for datasets: the dataset f builds is drained; an error must be a
// tf::Error naming one of `ops` (the transformation probed, or one it runs, e.g. the
// padded_batch of a bucket).
void probe_ds(const std::vector<std::string>& ops, const std::string& inputs,
              const std::function<Dataset()>& f) {
  INFO(ops[0] << "(" << inputs << ")");
  try {
    for (const tf::Tensor& t : drain(f())) {
      REQUIRE(t.defined());
      REQUIRE(static_cast<int64_t>(t.numpy<double>().size()) == t.num_elements());
    }
  } catch (const tf::Error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(std::any_of(ops.begin(), ops.end(), [&](const std::string& op) {
      return message.find(op) != std::string::npos;
    }));
  } catch (const std::exception& e) {
    FAIL("not a tf::Error: " << e.what());
  }
}
void probe_ds(const char* op, const std::string& inputs, const std::function<Dataset()>& f) {
  probe_ds(std::vector<std::string>{op}, inputs, f);
}

// Values equal, NaN to NaN and -0.0 to -0.0.
bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return false;
    if (!std::isnan(a[i]) && (a[i] != b[i] || std::signbit(a[i]) != std::signbit(b[i])))
      return false;
  }
  return true;
}

// The first components of every element, as int64 values.
std::vector<int64_t> values_of(const Dataset& ds) {
  std::vector<int64_t> out;
  for (const Element& e : ds) out.push_back(value(e[0]));
  return out;
}

// Inputs with odd element structures (and the cardinalities a transformation must handle).
std::vector<std::pair<std::string, Dataset>> odd_inputs() {
  return {
      {"range(5)", Dataset::range(5)},
      {"empty", Dataset()},
      {"rows of float32 (4, 3) specials",
       Dataset::from_tensor_slices(make({4, 3}, tf::float32, true))},
      {"rows of (3, 0)", Dataset::from_tensor_slices(make({3, 0}, tf::int64, false))},
      {"varying sizes", Dataset::range(5).map([](tf::Tensor x) {
         return tf::fill(tf::TensorShape{value(x) % 3}, x);
       })},
      {"varying ranks",
       Dataset::range(5).map([](tf::Tensor x) { return value(x) % 2 ? x : tf::reshape(x, {1}); })},
      {"varying dtypes", Dataset::range(4).map([](tf::Tensor x) {
         return value(x) % 2 ? tf::cast(x, tf::float32) : x;
       })},
      {"varying component counts", Dataset::range(4).map([](Element e) {
         if (value(e[0]) % 2) e.push_back(e[0]);
         return e;
       })},
      {"no components", Dataset::range(3).map([](Element) { return Element{}; })},
      {"filtered (unknown cardinality)",
       Dataset::range(6).filter([](tf::Tensor x) { return value(x) % 2 == 0; })},
      {"infinite", Dataset::range(3).repeat()},
  };
}

bool infinite(const Dataset& ds) {
  return ds.cardinality() == INFINITE_CARDINALITY;
}

// The user function's exception must reach the loop as it was thrown: the same type (not a
// wrapping tf::Error) and message. docs/data.md documents it ("Exceptions thrown by fn reach the
// loop that iterates the dataset"); TF runs dataset functions as graphs whose op errors keep
// their type (an InvalidArgumentError of an assert inside map stays one), and C++ has no
// Python boundary that would turn a foreign exception into TF's UnknownError.
template <class E>
void require_passes_through(const std::string& what, const std::function<Dataset()>& f,
                            const std::string& message) {
  INFO(what);
  try {
    drain(f());
    FAIL("the function's exception did not reach the loop");
  } catch (const E& e) {
    CHECK(typeid(e) == typeid(E));
    CHECK(std::string(e.what()) == message);
  } catch (const std::exception& e) {
    FAIL("another exception: " << e.what());
  }
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("adversarial: from_tensor_slices, from_tensors, from_generator, range and counter",
          "[adversarial]") {
  for (tf::DType d : kAllDTypes)
    for (bool special : {false, true})
      for (size_t i = 0; i < kShapes.size(); ++i) {
        const tf::Tensor x = make(kShapes[i], d, special);
        const std::string what = describe(x);
        probe_ds("Dataset.from_tensor_slices", what, [&] {
          Dataset ds = Dataset::from_tensor_slices(x);
          // The rows read back are x's values (NaN, infinities and -0.0 too), in order.
          std::vector<double> rows;
          for (const Element& e : ds) {
            REQUIRE(e.size() == 1);
            CHECK(e[0].dtype() == d);
            for (double v : e[0].numpy<double>()) rows.push_back(v);
          }
          CHECK(same_values(rows, x.numpy<double>()));
          return ds;
        });
        probe_ds("Dataset.from_tensors", what, [&] { return Dataset::from_tensors({x, x}); });
        for (const auto& s2 : kShapes) {
          const tf::Tensor y = make(s2, kAllDTypes[(i + 3) % kAllDTypes.size()], special, 2);
          probe_ds("Dataset.from_tensor_slices", what + ", " + describe(y), [&] {
            return Dataset::from_tensor_slices({x, y});
          });
        }
      }
  probe_ds("Dataset.from_tensor_slices", "no tensors",
           [] { return Dataset::from_tensor_slices(std::vector<tf::Tensor>{}); });
  probe_ds("Dataset.from_tensor_slices", "undefined",
           [] { return Dataset::from_tensor_slices(tf::Tensor()); });
  probe_ds("Dataset.from_tensors", "no tensors", [] { return Dataset::from_tensors({}); });
  probe_ds("Dataset.from_tensors", "undefined",
           [] { return Dataset::from_tensors({tf::Tensor()}); });

  // from_generator: elements that break the signature, an empty signature, a null factory.
  using Gen = Dataset::Generator;
  const std::vector<std::pair<std::string, std::function<Gen()>>> generators = {
      {"ok",
       [] {
         return [i = 0]() mutable -> std::optional<Element> {
           if (i == 3) return std::nullopt;
           return Element{tf::fill(tf::TensorShape{i++}, tf::constant(int64_t{7}))};
         };
       }},
      {"infinite",
       [] {
         return []() -> std::optional<Element> { return Element{tf::zeros({2}, tf::int64)}; };
       }},
      {"wrong dtype",
       [] {
         return []() -> std::optional<Element> { return Element{tf::zeros({2}, tf::float32)}; };
       }},
      {"wrong rank",
       [] {
         return []() -> std::optional<Element> { return Element{tf::zeros({2, 2}, tf::int64)}; };
       }},
      {"two components",
       [] {
         return []() -> std::optional<Element> {
           return Element{tf::zeros({2}, tf::int64), tf::zeros({2}, tf::int64)};
         };
       }},
      {"no components", [] { return []() -> std::optional<Element> { return Element{}; }; }},
      {"undefined",
       [] { return []() -> std::optional<Element> { return Element{tf::Tensor()}; }; }},
      {"null generator", [] { return Gen(); }},
  };
  for (const auto& [name, factory] : generators) {
    probe_ds("Dataset.from_generator", name, [&] {
      return Dataset::from_generator(factory, {tf::TensorSpec({tf::None}, tf::int64)});
    });
    probe_ds("Dataset.from_generator", name + ", empty signature",
             [&] { return Dataset::from_generator(factory, {}); });
  }
  probe_ds("Dataset.from_generator", "null factory",
           [] { return Dataset::from_generator(nullptr, {tf::TensorSpec({}, tf::int64)}); });

  // range: start + i * step inside the bounds, never wrapping, with the int64 limits.
  const std::vector<std::array<int64_t, 3>> ranges = {
      {0, 0, 1},
      {0, 10, 0},
      {kMin, kMax, 1},
      {kMax, kMin, -1},
      {kMax - 2, kMax, 1},
      {kMin + 2, kMin, -1},
      {kMax - 1, kMax, kMax},
      {0, kMax, kMax},
      {kMin, kMax, kMax},
      {kMax, kMin, kMin},
      {5, 0, 1},
      {0, 5, -1},
      {-5, 5, 3},
      {kMin, kMin, -1},
      {0, 10, kMin},
      {kMax, kMax, 1},
      {kMin, 0, kHuge},
      {0, kMax, kHuge},
  };
  for (const auto& [start, stop, step] : ranges)
    probe_ds("Dataset.range", str(start) + ", " + str(stop) + ", " + str(step), [&] {
      Dataset ds = Dataset::range(start, stop, step);
      __int128 want = start;
      int64_t i = 0;
      for (auto it = ds.begin(); i < kCap && it != ds.end(); ++it, ++i, want += step) {
        REQUIRE(value((*it)[0]) == static_cast<int64_t>(want));
        CHECK((step > 0 ? want < stop : want > stop));
      }
      return ds;
    });
  for (int64_t stop : kCounts)
    probe_ds("Dataset.range", str(stop), [&] { return Dataset::range(stop); });

  // counter: TF's is from_tensors(0).repeat().scan(start, state + step), whose int64 addition
  // wraps; so does tapeflow's (well defined, not signed overflow).
  for (const auto& [start, step] : std::vector<std::pair<int64_t, int64_t>>{
           {kMax - 3, 1}, {kMin + 3, -1}, {0, kMax}, {5, 0}, {kMin, kMin}, {kMax, kHuge}})
    probe_ds("Dataset.counter", str(start) + ", " + str(step), [&] {
      Dataset ds = Dataset::counter(start, step);
      uint64_t want = static_cast<uint64_t>(start);
      int64_t i = 0;
      for (auto it = ds.begin(); i < kCap && it != ds.end(); ++it, ++i) {
        REQUIRE(value((*it)[0]) == static_cast<int64_t>(want));
        want += static_cast<uint64_t>(step);
      }
      return ds;
    });
}

TEST_CASE("adversarial: batch, padded_batch, rebatch and unbatch", "[adversarial]") {
  const std::vector<std::pair<std::string, std::vector<tf::TensorShape>>> padded_shapes = {
      {"none", {}},
      {"{None}", {{tf::None}}},
      {"{()}", {{}}},
      {"{(1)}", {{1}}},
      {"{(2^40)}", {{kHuge}}},
      {"{(INT64_MAX)}", {{kMax}}},
      {"{(2^40, None)}", {{kHuge, tf::None}}},
      {"{None, None}", {{tf::None}, {tf::None}}},
      {"{(None, None)}", {{tf::None, tf::None}}},
      {"{(0)}", {{0}}},
  };
  const std::vector<std::pair<std::string, std::vector<tf::Tensor>>> padding_values = {
      {"none", {}},
      {"int64 -1", {tf::constant(int64_t{-1})}},
      {"float32 NaN", {tf::constant(std::numeric_limits<float>::quiet_NaN())}},
      {"vector", {tf::constant({1.0f, 2.0f})}},
      {"undefined", {tf::Tensor()}},
      {"two", {tf::constant(int64_t{0}), tf::constant(int64_t{0})}},
  };
  for (const auto& [name, input] : odd_inputs()) {
    const bool inf = infinite(input);
    for (int64_t n : kCounts)
      for (bool drop : {false, true}) {
        if (inf && huge(n)) continue;
        const std::string what = name + ", " + str(n) + (drop ? ", drop" : "");
        probe_ds("Dataset.batch", what, [&] { return input.batch(n, drop); });
        probe_ds("Dataset.rebatch", what, [&] { return input.rebatch(n, drop); });
        probe_ds({"Dataset.rebatch", "Dataset.batch"}, "batch(2) of " + what,
                 [&] { return input.batch(2).rebatch(n, drop); });
        probe_ds({"Dataset.rebatch", "Dataset.batch"}, "batch(3, drop) of " + what,
                 [&] { return input.batch(3, true).rebatch(n, drop); });
      }
    for (int64_t n : {int64_t{-1}, int64_t{0}, int64_t{2}, kHuge})
      for (bool drop : {false, true}) {
        if (inf && huge(n)) continue;
        for (const auto& [sname, shapes] : padded_shapes)
          for (const auto& [vname, values] : padding_values)
            probe_ds("Dataset.padded_batch",
                     name + ", " + str(n) + ", shapes " + sname + ", values " + vname,
                     [&] { return input.padded_batch(n, shapes, values, drop); });
      }
    probe_ds("Dataset.unbatch", name, [&] { return input.unbatch(); });
    probe_ds({"Dataset.unbatch", "Dataset.batch"}, "batch(2) of " + name,
             [&] { return input.batch(2).unbatch(); });
    probe_ds({"Dataset.unbatch", "Dataset.padded_batch"}, "padded_batch(2) of " + name,
             [&] { return input.padded_batch(2).unbatch().unbatch(); });
  }
  // Components whose first dimensions differ, and batches of empty rows.
  probe_ds("Dataset.unbatch", "(2,) and (3,)", [] {
    return Dataset::from_tensors({tf::zeros({2}), tf::zeros({3})}).unbatch();
  });
  probe_ds("Dataset.unbatch", "(0, 3) and (0,)", [] {
    return Dataset::from_tensors({tf::zeros({0, 3}), tf::zeros({0})}).repeat(3).unbatch();
  });
  probe_ds("Dataset.rebatch", "(2,) and (3,)", [] {
    return Dataset::from_tensors({tf::zeros({2}), tf::zeros({3})}).rebatch(2);
  });
  probe_ds("Dataset.rebatch", "(2, 1) then (2, 2)", [] {
    return Dataset::from_tensors({tf::zeros({2, 1})})
        .concatenate(Dataset::from_tensors({tf::zeros({2, 2})}))
        .rebatch(3);
  });

  // The padded values land where they belong, with the special values kept.
  const Dataset ragged = Dataset::range(1, 4).map(
      [](tf::Tensor x) { return tf::fill(tf::TensorShape{value(x)}, tf::constant(-0.0)); });
  const auto batches = ragged.padded_batch(2, {{4}}, {tf::constant(std::nan(""))});
  std::vector<std::vector<double>> got;
  for (const Element& e : batches) got.push_back(e[0].numpy<double>());
  const double nan = std::nan("");
  REQUIRE(got.size() == 2);
  CHECK(same_values(got[0], {-0.0, nan, nan, nan, -0.0, -0.0, nan, nan}));
  CHECK(same_values(got[1], {-0.0, -0.0, -0.0, nan}));
}

TEST_CASE("adversarial: shuffle, repeat, take, skip, shard, prefetch, enumerate and cache",
          "[adversarial]") {
  for (const auto& [name, input] : odd_inputs()) {
    const bool inf = infinite(input);
    for (int64_t n : kCounts) {
      const std::string what = name + ", " + str(n);
      if (!(inf && huge(n)))
        for (std::optional<int64_t> seed : {std::optional<int64_t>(), std::optional<int64_t>(kMin)})
          for (bool reshuffle : {false, true})
            probe_ds("Dataset.shuffle", what + (reshuffle ? ", reshuffle" : ""), [&] {
              Dataset ds = input.shuffle(n, seed, reshuffle);
              drain(ds);  // a second epoch below
              return ds;
            });
      probe_ds("Dataset.repeat", what, [&] { return input.repeat(n); });
      probe_ds("Dataset.take", what, [&] { return input.take(n); });
      // skip(-1) of an infinite dataset is empty, but TF's cardinality rule says infinite.
      if (!(inf && (huge(n) || n == -1)))
        probe_ds("Dataset.skip", what, [&] { return input.skip(n); });
      for (int64_t index : kCounts)
        if (!(inf && huge(n)))
          probe_ds("Dataset.shard", what + ", " + str(index),
                   [&] { return input.shard(n, index); });
      probe_ds("Dataset.prefetch", what, [&] { return input.prefetch(n); });
      probe_ds("Dataset.enumerate", what, [&] {
        Dataset ds = input.enumerate(n);
        // The counter is start, start + 1, ...: never wrapping past INT64_MAX.
        __int128 want = n;
        int64_t i = 0;
        for (auto it = ds.begin(); i < kCap && it != ds.end(); ++it, ++i, ++want)
          REQUIRE(value((*it)[0]) == static_cast<int64_t>(want));
        return ds;
      });
    }
    probe_ds("Dataset.cache", name, [&] {
      Dataset ds = input.cache();
      drain(ds);  // fills the cache unless infinite; the probe replays it
      return ds;
    });
    probe_ds("Dataset.prefetch", name + ", AUTOTUNE",
             [&] { return input.prefetch(tf::data::AUTOTUNE).prefetch(tf::data::AUTOTUNE); });
  }
  // A shuffle is a permutation of its input, whatever the buffer size.
  for (int64_t buffer : {int64_t{1}, int64_t{7}, kHuge, kMax})
    for (const Dataset& input :
         {Dataset::range(50), Dataset::from_tensor_slices(tf::cast(tf::range(50), tf::int64))}) {
      std::vector<int64_t> v = values_of(input.shuffle(buffer, 3));
      std::sort(v.begin(), v.end());
      CHECK(v == values_of(Dataset::range(50)));
    }
  // repeat(n) of a dataset known to be empty ends at once, however large n is.
  CHECK(values_of(Dataset().repeat(kMax)).empty());
  CHECK(values_of(Dataset::range(0).repeat(kHuge).take(3)).empty());
  // enumerate up to INT64_MAX: the counter does not wrap.
  const auto enumerated = [](int64_t start) {
    std::vector<int64_t> out;
    auto it = Dataset::range(3).enumerate(start).begin();
    try {
      for (; it != std::default_sentinel; ++it) out.push_back(value((*it)[0]));
    } catch (const tf::InvalidArgumentError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains("Dataset.enumerate"));
      out.push_back(0);  // marks the error
    }
    return out;
  };
  CHECK(enumerated(kMax - 2) == std::vector<int64_t>{kMax - 2, kMax - 1, kMax});
  CHECK(enumerated(kMax - 1) == std::vector<int64_t>{kMax - 1, kMax, 0});
}

TEST_CASE("adversarial: window and flat_map over windows", "[adversarial]") {
  const std::vector<int64_t> sizes = {-1, 0, 1, 2, 3, kHuge, kMax};
  const std::vector<int64_t> shifts = {kMin, -2, -1, 0, 1, 2, kHuge, kMax};
  const std::vector<int64_t> strides = {-1, 0, 1, 2, kHuge, kMax};
  for (const auto& [name, input] : odd_inputs()) {
    const bool inf = infinite(input);
    for (int64_t size : sizes)
      for (int64_t shift : shifts)
        for (int64_t stride : strides)
          for (bool drop : {false, true}) {
            if (inf && (huge(size) || huge(shift) || huge(stride))) continue;
            probe_ds("Dataset.window",
                     name + ", " + str(size) + ", " + str(shift) + ", " + str(stride) +
                         (drop ? ", drop" : ""),
                     [&] { return input.window(size, shift, stride, drop); });
          }
  }
  // A window whose span passes INT64_MAX holds the elements that exist.
  for (int64_t stride : {kHuge, kMax}) {
    CHECK(values_of(Dataset::range(7).window(kHuge, 1, stride)) ==
          std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});
    CHECK(Dataset::range(7).window(kHuge, 1, stride).cardinality() == 7);
    CHECK(values_of(Dataset::range(7).window(kHuge, 1, stride, true)).empty());
    CHECK(Dataset::range(7).window(kHuge, 1, stride, true).cardinality() == 0);
  }
  CHECK(Dataset::range(7).window(2, kMax).cardinality() == 1);
  std::vector<std::vector<double>> one;
  for (const Element& e : Dataset::range(7).window(2, kMax)) one.push_back(e[0].numpy<double>());
  CHECK(one == std::vector<std::vector<double>>{{0, 1}});

  // TF's ds.window(...).flat_map(...): the windows' rows, nothing, or a failing inner dataset.
  const Dataset windows = Dataset::range(10).window(3, 1);
  probe_ds("Dataset.flat_map", "rows", [&] {
    return windows.flat_map([](tf::Tensor w) { return Dataset::from_tensor_slices(w); });
  });
  probe_ds("Dataset.flat_map", "nothing",
           [&] { return windows.flat_map([](tf::Tensor) { return Dataset(); }); });
  probe_ds("Dataset.flat_map", "infinite",
           [&] { return windows.flat_map([](tf::Tensor) { return Dataset::counter(); }); });
  probe_ds({"Dataset.flat_map", "Dataset.batch"}, "batch(0)", [&] {
    return windows.flat_map([](tf::Tensor w) { return Dataset::from_tensor_slices(w).batch(0); });
  });
  probe_ds({"Dataset.flat_map", "Dataset.from_tensor_slices"}, "scalar slices", [&] {
    return windows.flat_map(
        [](tf::Tensor w) { return Dataset::from_tensor_slices(tf::reduce_sum(w)); });
  });
  probe_ds("Dataset.flat_map", "two arguments",
           [&] { return windows.flat_map([](tf::Tensor, tf::Tensor) { return Dataset(); }); });
}

TEST_CASE("adversarial: map, filter and take_while with odd functions", "[adversarial]") {
  using Fn = std::function<Element(Element)>;
  const std::vector<std::pair<std::string, Fn>> maps = {
      {"no components", [](Element) { return Element{}; }},
      {"undefined", [](Element) { return Element{tf::Tensor()}; }},
      {"varying shapes",
       [](Element e) {
         return Element{tf::zeros(tf::TensorShape{value(e[0]) % 4, 2})};
       }},
      {"empty tensors",
       [](Element) {
         return Element{tf::zeros({0, 3}, tf::bool_)};
       }},
      {"special values",
       [](Element e) {
         return Element{make({2}, tf::float16, true), e[0]};
       }},
  };
  for (const auto& [name, fn] : maps) {
    probe_ds("Dataset.map", name, [&] { return Dataset::range(6).map(fn); });
    probe_ds({"Dataset.map", "Dataset.batch"}, name + " then batch",
             [&] { return Dataset::range(6).map(fn).batch(3); });
    for (int64_t calls : {kMin, int64_t{-2}, int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{3}})
      for (bool deterministic : {true, false}) {
        const std::string what = name + ", num_parallel_calls " + str(calls);
        probe_ds("Dataset.map", what,
                 [&] { return Dataset::range(6).map(fn, calls, deterministic); });
        probe_ds({"Dataset.map", "Dataset.batch"}, what + " then batch",
                 [&] { return Dataset::range(6).map(fn, calls, deterministic).batch(3); });
        probe_ds({"Dataset.map", "Dataset.padded_batch"}, what + " then padded_batch",
                 [&] { return Dataset::range(6).map(fn, calls, deterministic).padded_batch(3); });
      }
  }
  // A function taking the wrong number of tensors.
  probe_ds("Dataset.map", "two arguments",
           [] { return Dataset::range(3).map([](tf::Tensor a, tf::Tensor) { return a; }); });
  probe_ds("Dataset.map", "two arguments, parallel",
           [] { return Dataset::range(3).map([](tf::Tensor a, tf::Tensor) { return a; }, 2); });
  // Thread counts past what any machine starts (capped), and AUTOTUNE.
  for (int64_t calls : {kHuge, kMax, tf::data::AUTOTUNE})
    probe_ds("Dataset.map", "num_parallel_calls " + str(calls),
             [&] { return Dataset::range(50).map([](tf::Tensor x) { return x; }, calls); });

  // Predicates returning what is not a bool scalar: TF asks for a scalar tf.bool.
  using Pred = std::function<tf::Tensor(tf::Tensor)>;
  const std::vector<std::pair<std::string, Pred>> preds = {
      {"bool scalar", [](tf::Tensor x) { return tf::constant(value(x) % 2 == 0); }},
      {"int64 scalar", [](tf::Tensor x) { return x; }},
      {"float NaN", [](tf::Tensor) { return tf::constant(std::nanf("")); }},
      {"bool (2,)",
       [](tf::Tensor) {
         return tf::constant({true, false});
       }},
      {"bool (1, 1)", [](tf::Tensor) { return tf::constant({{true}}); }},
      {"bool (0,)", [](tf::Tensor) { return tf::zeros({0}, tf::bool_); }},
      {"undefined", [](tf::Tensor) { return tf::Tensor(); }},
  };
  for (const auto& [name, pred] : preds) {
    probe_ds("Dataset.filter", name, [&] { return Dataset::range(5).filter(pred); });
    probe_ds("Dataset.take_while", name, [&] { return Dataset::range(5).take_while(pred); });
    probe_ds("Dataset.filter", name + " then repeat",
             [&] { return Dataset::range(5).filter(pred).repeat(3); });
  }
}

namespace {

// Every user function of a pipeline throwing `error` at element 2: the loop gets it unchanged.
template <class E>
void check_user_errors(const std::string& message) {
  const auto raise = [message](const tf::Tensor& x) {
    if (value(x) == 2) throw E(message);
  };
  const std::vector<std::pair<std::string, std::function<Dataset()>>> pipelines = {
      {"map",
       [&] {
         return Dataset::range(5).map([=](tf::Tensor x) {
           raise(x);
           return x;
         });
       }},
      {"map prefetched",
       [&] {
         return Dataset::range(5)
             .map([=](tf::Tensor x) {
               raise(x);
               return x;
             })
             .prefetch(1);
       }},
      {"parallel map",
       [&] {
         return Dataset::range(5).map(
             [=](tf::Tensor x) {
               raise(x);
               return x;
             },
             2);
       }},
      {"parallel map, nondeterministic",
       [&] {
         return Dataset::range(5).map(
             [=](tf::Tensor x) {
               raise(x);
               return x;
             },
             3, false);
       }},
      {"filter",
       [&] {
         return Dataset::range(5).filter([=](tf::Tensor x) {
           raise(x);
           return true;
         });
       }},
      {"take_while",
       [&] {
         return Dataset::range(5).take_while([=](tf::Tensor x) {
           raise(x);
           return true;
         });
       }},
      {"flat_map",
       [&] {
         return Dataset::range(5).flat_map([=](tf::Tensor x) {
           raise(x);
           return Dataset::range(2);
         });
       }},
      {"interleave",
       [&] {
         return Dataset::range(5).interleave(
             [=](tf::Tensor x) {
               raise(x);
               return Dataset::range(2);
             },
             2, 1);
       }},
      {"parallel interleave",
       [&] {
         return Dataset::range(5).interleave(
             [=](tf::Tensor x) {
               raise(x);
               return Dataset::range(2);
             },
             2, 1, 2);
       }},
      {"inner dataset of a parallel interleave",
       [&] {
         return Dataset::range(1).interleave(
             [=](tf::Tensor) {
               return Dataset::range(5).map([=](tf::Tensor x) {
                 raise(x);
                 return x;
               });
             },
             3, 2, 3, false);
       }},
      {"scan",
       [&] {
         return Dataset::range(5).scan(tf::constant(int64_t{0}), [=](tf::Tensor s, tf::Tensor x) {
           raise(x);
           return std::pair{s, x};
         });
       }},
      {"group_by_window key",
       [&] {
         return Dataset::range(5).group_by_window(
             [=](tf::Tensor x) {
               raise(x);
               return int64_t{0};
             },
             [](int64_t, Dataset w) { return w; }, 2);
       }},
      {"group_by_window reduce",
       [&] {
         return Dataset::range(5).group_by_window([](tf::Tensor x) { return value(x); },
                                                  [=](int64_t k, Dataset w) {
                                                    raise(tf::constant(k));
                                                    return w;
                                                  },
                                                  1);
       }},
      {"bucket_by_sequence_length length",
       [&] {
         return Dataset::range(5).bucket_by_sequence_length(
             [=](tf::Tensor x) {
               raise(x);
               return int64_t{1};
             },
             {3}, {2, 2});
       }},
      {"from_generator",
       [&] {
         return Dataset::from_generator(
             [=] {
               return [=, i = int64_t{0}]() mutable -> std::optional<Element> {
                 raise(tf::constant(i));
                 return Element{tf::constant(i++)};
               };
             },
             {tf::TensorSpec({}, tf::int64)});
       }},
      {"from_generator factory",
       [&] {
         return Dataset::from_generator(
             [=]() -> Dataset::Generator {
               raise(tf::constant(int64_t{2}));
               return nullptr;
             },
             {tf::TensorSpec({}, tf::int64)});
       }},
  };
  for (const auto& [name, pipeline] : pipelines)
    require_passes_through<E>(name + " throwing " + message, pipeline, message);
  // reduce is not a dataset: the exception leaves the call.
  try {
    Dataset::range(5).reduce(tf::constant(int64_t{0}), [=](tf::Tensor s, tf::Tensor x) {
      raise(x);
      return s;
    });
    FAIL("reduce: no exception");
  } catch (const E& e) {
    CHECK(typeid(e) == typeid(E));
    CHECK(std::string(e.what()) == message);
  }
}

}  // namespace

TEST_CASE("adversarial: user functions that throw", "[adversarial]") {
  check_user_errors<tf::InvalidArgumentError>("[user_fn] element 2 is bad");
  check_user_errors<std::runtime_error>("user boom");
  check_user_errors<std::out_of_range>("user index");
}

TEST_CASE("adversarial: interleave with bad cycles, blocks and thread counts", "[adversarial]") {
  const std::vector<int64_t> cycles = {kMin, -2, -1, 0, 1, 3, kHuge, kMax};
  const std::vector<int64_t> blocks = {-1, 0, 1, 2, kHuge, kMax};
  const std::vector<int64_t> calls = {kMin, -2, -1, 0, 1, 2, kHuge};
  using Fn = std::function<Dataset(tf::Tensor)>;
  const std::vector<std::pair<std::string, Fn>> inner = {
      {"range(x)", [](tf::Tensor x) { return Dataset::range(value(x)); }},
      {"nothing", [](tf::Tensor) { return Dataset(); }},
      {"counter", [](tf::Tensor x) { return Dataset::counter(value(x)); }},
      {"batch(0)", [](tf::Tensor x) { return Dataset::range(value(x)).batch(0); }},
  };
  for (const auto& [name, fn] : inner)
    for (int64_t cycle : cycles)
      for (int64_t block : blocks) {
        const std::string what = name + ", " + str(cycle) + ", " + str(block);
        probe_ds({"Dataset.interleave", "Dataset.batch"}, what,
                 [&] { return Dataset::range(5).interleave(fn, cycle, block); });
        if (name != "nothing")  // would never yield
          probe_ds({"Dataset.interleave", "Dataset.batch"}, what + " over an infinite input",
                   [&] { return Dataset::range(5).repeat().interleave(fn, cycle, block); });
      }
  for (int64_t cycle : cycles)
    for (int64_t block : blocks)
      for (size_t i = 0; i < calls.size(); ++i) {
        const int64_t n = calls[i];
        const bool deterministic = (i + static_cast<size_t>(block & 1)) % 2 == 0;
        const std::string what = str(cycle) + ", " + str(block) + ", " + str(n);
        for (const auto& [name, fn] : inner)
          probe_ds({"Dataset.interleave", "Dataset.batch"}, name + ", " + what, [&] {
            return Dataset::range(5).interleave(fn, cycle, block, n, deterministic);
          });
      }
  // A huge cycle holds the datasets that exist, in TF's order.
  const auto two = [](tf::Tensor x) { return Dataset::from_tensors({x}).repeat(2); };
  for (int64_t cycle : {kHuge, kMax}) {
    CHECK(values_of(Dataset::range(3).interleave(two, cycle, 1)) ==
          std::vector<int64_t>{0, 1, 2, 0, 1, 2});
    CHECK(values_of(Dataset::range(3).interleave(two, cycle, 1, 2)) ==
          std::vector<int64_t>{0, 1, 2, 0, 1, 2});
    CHECK(values_of(Dataset::range(3).interleave(two, cycle, 1, kHuge)) ==
          std::vector<int64_t>{0, 1, 2, 0, 1, 2});
  }
}

TEST_CASE("adversarial: zip, concatenate, choose_from_datasets and sample_from_datasets",
          "[adversarial]") {
  const auto inputs = odd_inputs();
  probe_ds("Dataset.zip", "nothing", [] { return Dataset::zip({}); });
  for (const auto& [a, da] : inputs)
    for (const auto& [b, db] : inputs) {
      probe_ds("Dataset.zip", a + ", " + b, [&] { return Dataset::zip({da, db}); });
      probe_ds("Dataset.concatenate", a + ", " + b, [&] { return da.concatenate(db); });
      probe_ds("Dataset.choose_from_datasets", a + ", " + b, [&] {
        return Dataset::choose_from_datasets({da, db}, Dataset::range(2).repeat(4), false);
      });
      probe_ds("Dataset.sample_from_datasets", a + ", " + b, [&] {
        return Dataset::sample_from_datasets({da, db}, {}, 5, true);
      });
    }
  probe_ds("Dataset.concatenate", "int64 then float32", [] {
    return Dataset::range(3).concatenate(Dataset::from_tensor_slices(tf::zeros({2})));
  });
  probe_ds("Dataset.zip", "one dataset twice", [] {
    const Dataset r = Dataset::range(4);
    return Dataset::zip({r, r, r.take(2)});
  });

  const std::vector<std::pair<std::string, Dataset>> choices = {
      {"int64", Dataset::range(2).repeat(3)},
      {"int32", Dataset::from_tensor_slices(tf::constant({0, 1}))},
      {"out of range", Dataset::from_tensor_slices(tf::constant({int64_t{0}, int64_t{5}}))},
      {"negative", Dataset::from_tensor_slices(tf::constant({int64_t{-1}}))},
      {"INT64_MIN", Dataset::from_tensor_slices(tf::constant({kMin}))},
      {"vectors", Dataset::from_tensors({tf::constant({int64_t{0}, int64_t{1}})})},
      {"two components", Dataset::zip({Dataset::range(2), Dataset::range(2)})},
      {"no components", Dataset::range(2).map([](Element) { return Element{}; })},
      {"empty", Dataset()},
      {"counter", Dataset::counter()},
  };
  for (const auto& [name, choice] : choices)
    for (bool stop : {false, true}) {
      probe_ds("Dataset.choose_from_datasets", name, [&] {
        return Dataset::choose_from_datasets({Dataset::range(3), Dataset::range(10, 12)}, choice,
                                             stop);
      });
    }
  probe_ds("Dataset.choose_from_datasets", "no datasets",
           [] { return Dataset::choose_from_datasets({}, Dataset::range(1)); });

  const double inf = std::numeric_limits<double>::infinity();
  const double big = std::numeric_limits<double>::max();
  const std::vector<std::vector<double>> weights = {
      {},     {1},        {1, 2, 3},   {-1, 1},     {std::nan(""), 1}, {inf, 1},
      {0, 0}, {big, big}, {1e-320, 0}, {0, 1e-320}, {-0.0, 1},         {big, 1e-320},
  };
  for (const auto& w : weights)
    for (std::optional<int64_t> seed : {std::optional<int64_t>(), std::optional<int64_t>(kMin)})
      for (bool stop : {false, true}) {
        std::string what;
        for (double v : w) what += std::to_string(v) + " ";
        probe_ds("Dataset.sample_from_datasets", what, [&] {
          return Dataset::sample_from_datasets({Dataset::range(3).repeat(), Dataset::range(10, 12)},
                                               w, seed, stop);
        });
      }
  probe_ds("Dataset.sample_from_datasets", "no datasets",
           [] { return Dataset::sample_from_datasets({}); });
  // Weights whose sum overflows still draw both datasets about equally (not only the last).
  std::vector<int64_t> drawn = values_of(
      Dataset::sample_from_datasets({Dataset::from_tensors({tf::constant(int64_t{0})}).repeat(),
                                     Dataset::from_tensors({tf::constant(int64_t{1})}).repeat()},
                                    {big, big}, 7)
          .take(kCap));
  const auto ones = std::count(drawn.begin(), drawn.end(), 1);
  CHECK(ones > kCap / 4);
  CHECK(ones < 3 * kCap / 4);
}

TEST_CASE("adversarial: group_by_window, bucket_by_sequence_length, scan and reduce",
          "[adversarial]") {
  using Key = std::function<tf::Tensor(tf::Tensor)>;
  const std::vector<std::pair<std::string, Key>> keys = {
      {"x % 3", [](tf::Tensor x) { return tf::constant(value(x) % 3); }},
      {"int32", [](tf::Tensor x) { return tf::constant(static_cast<int32_t>(value(x) % 2)); }},
      {"float", [](tf::Tensor) { return tf::constant(1.5f); }},
      {"vector", [](tf::Tensor x) { return tf::constant({value(x)}); }},
      {"extremes", [](tf::Tensor x) { return tf::constant(value(x) % 2 ? kMax : kMin); }},
      {"undefined", [](tf::Tensor) { return tf::Tensor(); }},
  };
  using Reduce = Dataset::GroupReduceFn;
  const std::vector<std::pair<std::string, Reduce>> reduces = {
      {"batch(2)", [](int64_t, Dataset w) { return w.batch(2); }},
      {"nothing", [](int64_t, Dataset) { return Dataset(); }},
      {"counter", [](int64_t k, Dataset) { return Dataset::counter(k); }},
      {"null", nullptr},
  };
  for (const auto& [kname, key] : keys)
    for (const auto& [rname, reduce] : reduces) {
      for (int64_t size : kCounts)
        probe_ds({"Dataset.group_by_window", "Dataset.batch"},
                 kname + ", " + rname + ", " + str(size),
                 [&] { return Dataset::range(7).group_by_window(key, reduce, size); });
      for (int64_t size : {kMin, int64_t{0}, int64_t{-1}, int64_t{2}, kMax})
        probe_ds({"Dataset.group_by_window", "Dataset.batch"},
                 kname + ", " + rname + ", window_size_func " + str(size), [&] {
                   return Dataset::range(7).group_by_window(
                       key, reduce, std::function<int64_t(int64_t)>([=](int64_t) { return size; }));
                 });
    }

  // Sequences of lengths 0..4, bucketed with odd boundaries, batch sizes and padding.
  const Dataset sequences = Dataset::range(9).map(
      [](tf::Tensor x) { return tf::fill(tf::TensorShape{value(x) % 5}, x); });
  const auto length = [](tf::Tensor s) { return s.shape()[0]; };
  const std::vector<std::vector<int64_t>> boundaries = {
      {}, {3}, {3, 5}, {5, 3}, {3, 3}, {kMin, kMax}, {0}, {-5, 0}, {1, kHuge}};
  const std::vector<std::vector<int64_t>> batch_sizes = {{1},    {2, 2},     {2, 2, 2},
                                                         {0, 1}, {-1, 1, 1}, {kHuge, kMax, 1}};
  const std::vector<std::vector<tf::TensorShape>> shapes = {{}, {{tf::None}}, {{2}}, {{}}};
  for (const auto& b : boundaries)
    for (const auto& s : batch_sizes)
      for (const auto& p : shapes)
        for (bool pad_to_boundary : {false, true})
          for (bool no_padding : {false, true}) {
            std::string what = "boundaries";
            for (int64_t v : b) what += " " + str(v);
            what += ", batch sizes";
            for (int64_t v : s) what += " " + str(v);
            what += ", " + std::to_string(p.size()) + " padded shapes";
            what += pad_to_boundary ? ", pad to boundary" : "";
            what += no_padding ? ", no padding" : "";
            probe_ds({"Dataset.bucket_by_sequence_length", "Dataset.padded_batch", "Dataset.batch"},
                     what, [&] {
                       return sequences.bucket_by_sequence_length(length, b, s, p, {},
                                                                  pad_to_boundary, no_padding);
                     });
          }

  // scan: states that change structure, and odd outputs.
  const std::vector<std::pair<std::string, Element>> states = {
      {"int64", {tf::constant(int64_t{0})}},
      {"none", {}},
      {"undefined", {tf::Tensor()}},
      {"two", {tf::constant(int64_t{0}), tf::constant(1.0f)}},
  };
  using ScanFn = std::function<std::pair<Element, Element>(Element, Element)>;
  const std::vector<std::pair<std::string, ScanFn>> scans = {
      {"keep",
       [](Element s, Element e) {
         return std::pair{s, e};
       }},
      {"to float",
       [](Element s, Element e) {
         for (tf::Tensor& t : s) t = tf::cast(t, tf::float32);
         return std::pair{s, e};
       }},
      {"drop state",
       [](Element, Element e) {
         return std::pair{Element{}, e};
       }},
      {"undefined output",
       [](Element s, Element) {
         return std::pair{s, Element{tf::Tensor()}};
       }},
      {"no output",
       [](Element s, Element) {
         return std::pair{s, Element{}};
       }},
  };
  for (const auto& [sname, state] : states)
    for (const auto& [fname, fn] : scans) {
      probe_ds("Dataset.scan", sname + ", " + fname,
               [&] { return Dataset::range(4).scan(state, fn); });
      adversarial::probe("Dataset.reduce", sname + ", " + fname, [&] {
        return Dataset::range(4).reduce(
            state, [&](Element s, Element e) { return fn(std::move(s), std::move(e)).first; });
      });
    }
  adversarial::probe("Dataset.scan", "Tensor overload on two components", [] {
    return drain(Dataset::zip({Dataset::range(2), Dataset::range(2)})
                     .scan(tf::constant(int64_t{0}), [](tf::Tensor s, tf::Tensor x) {
                       return std::pair{s, x};
                     }));
  });
}

TEST_CASE("adversarial: cache, save and load with bad paths and files", "[adversarial]") {
  TempDir dir;
  write_bytes(dir / "file", "not a directory");
  const std::vector<std::pair<std::string, std::string>> bad_paths = {
      {"a missing directory", dir / "missing/cache"},
      {"under a regular file", dir / "file/cache"},
      {"a directory", dir.path().string()},
  };
  for (const auto& [name, path] : bad_paths) {
    probe_ds("Dataset.cache", name, [&] { return Dataset::range(5).cache(path); });
    adversarial::probe("Dataset.save", name, [&] {
      Dataset::range(5).save(path);
      return drain(Dataset::load(path));
    });
    adversarial::probe("Dataset.load", name, [&] { return drain(Dataset::load(path)); });
  }
  adversarial::probe("Dataset.save", "the infinite dataset", [&] {
    Dataset::range(3).repeat().save(dir / "infinite");
    return std::vector<tf::Tensor>{};
  });
  adversarial::probe("Dataset.save", "empty path", [&] {
    Dataset::range(3).save("");
    return std::vector<tf::Tensor>{};
  });
  for (int64_t shard : {kMin, int64_t{-1}, int64_t{0}, kMax})
    adversarial::probe("Dataset.save", "shard " + str(shard), [&] {
      Dataset::range(3).save(dir / "sharded", [=](tf::Tensor) { return shard; });
      return drain(Dataset::load(dir / "sharded"));
    });
  adversarial::probe("Dataset.load", "wrong element_spec", [&] {
    Dataset::range(3).save(dir / "saved");
    return drain(Dataset::load(dir / "saved", {tf::TensorSpec({2}, tf::float32)}));
  });

  // Every odd input written to a cache file by one iteration and read back by the next, and
  // saved and loaded: the same elements, or an error naming the cache (or save).
  int k = 0;
  for (const auto& [name, input] : odd_inputs()) {
    const std::string file = dir / ("odd" + std::to_string(k) + ".cache");
    const std::string saved = dir / ("odd" + std::to_string(k++) + ".saved");
    tf::testing::capture_stderr([&] {  // the warning for an infinite input stopped early
      probe_ds("Dataset.cache", name, [&] {
        Dataset ds = input.cache(file);
        const std::vector<tf::Tensor> first = drain(ds);
        const std::vector<tf::Tensor> again = drain(ds);
        REQUIRE(first.size() == again.size());
        for (size_t i = 0; i < first.size(); ++i)
          CHECK(same_values(first[i].numpy<double>(), again[i].numpy<double>()));
        return ds;
      });
    });
    if (!infinite(input))
      adversarial::probe("Dataset.save", name, [&] {
        input.save(saved);
        const std::vector<tf::Tensor> loaded = drain(Dataset::load(saved));
        const std::vector<tf::Tensor> original = drain(input);
        REQUIRE(loaded.size() == original.size());
        for (size_t i = 0; i < loaded.size(); ++i)
          CHECK(same_values(loaded[i].numpy<double>(), original[i].numpy<double>()));
        return loaded;
      });
  }

  // A partial iteration leaves no file; a complete one writes it; a second concurrent writer is
  // refused; another pipeline of a different length finds the file and is refused.
  const std::string file = dir / "partial.cache";
  const Dataset cached =
      Dataset::range(5).map([](tf::Tensor x) { return x * int64_t{3}; }).cache(file);
  const std::string log = tf::testing::capture_stderr([&] {
    auto it = cached.begin();
    ++it;
    ++it;
    CHECK_THROWS_AS(drain(cached), tf::AlreadyExistsError);
  });
  CHECK_THAT(log, Catch::Matchers::Contains("partial cache is discarded"));
  CHECK(!fs::exists(file));
  CHECK(!fs::exists(file + ".lockfile"));
  CHECK(values_of(cached) == std::vector<int64_t>{0, 3, 6, 9, 12});
  CHECK(fs::exists(file));
  CHECK(values_of(Dataset::range(100, 105).cache(file)) == std::vector<int64_t>{0, 3, 6, 9, 12});
  probe_ds("Dataset.cache", "another length", [&] { return Dataset::range(3).cache(file); });

  // Garbage, empty and truncated cache files: a DataLossError naming the cache.
  const std::string valid = read_bytes(file);
  REQUIRE(valid.size() > 40);
  const std::vector<std::pair<std::string, std::string>> garbage = {
      {"empty", ""},
      {"garbage", std::string("\x00\xff garbage \x01\x02", 14)},
      {"header only", valid.substr(0, 32)},
      {"truncated", valid.substr(0, valid.size() - 9)},
      {"one byte short", valid.substr(0, valid.size() - 1)},
      {"a byte flipped",
       [&] {
         std::string s = valid;
         s[40] = static_cast<char>(s[40] ^ 0x5a);
         return s;
       }()},
      {"trailing bytes", valid + "xx"},
  };
  for (const auto& [name, bytes] : garbage) {
    write_bytes(file, bytes);
    try {
      drain(Dataset::range(5).cache(file));
      FAIL("a corrupt cache file was read: " << name);
    } catch (const tf::DataLossError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains("Dataset.cache"));
    }
    fs::create_directories(dir / "garbage.saved");
    write_bytes(dir / "garbage.saved/manifest", bytes);
    adversarial::probe("Dataset.load", name,
                       [&] { return drain(Dataset::load(dir / "garbage.saved")); });
  }
  // A cache of elements without components reads back as it was written.
  const Dataset empties = Dataset::range(3).map([](Element) { return Element{}; });
  const std::string file2 = dir / "empties.cache";
  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t n = 0;
    for (const Element& e : empties.cache(file2)) {
      CHECK(e.empty());
      ++n;
    }
    CHECK(n == 3);
  }
}

TEST_CASE("adversarial: CsvDataset and read_idx on missing, empty, truncated and garbage files",
          "[adversarial]") {
  namespace tfe = tf::data::experimental;
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> csv_files = {
      {"empty", ""},
      {"header only", "a,b\n"},
      {"ok", "1,2.5\n3,nan\n"},
      {"short record", "1,2\n3\n"},
      {"long record", "1,2,3\n"},
      {"open quote", "1,\"2\n"},
      {"after quote", "1,\"2\"x\n"},
      {"garbage", std::string("\x00\xff\x01,\x80\n\r\n,,,\n", 11)},
      {"huge numbers", "99999999999999999999,1e999\n"},
      {"specials", " +inf , -0 \n-nan,\"\"\n"},
      {"no newline", std::string(10000, '7')},
      {"crlf", "1,2\r\n\r\n"},
  };
  const std::vector<std::pair<std::string, std::vector<tf::Tensor>>> defaults = {
      {"int64, float", {tf::zeros({0}, tf::int64), tf::constant(-1.0f)}},
      {"int32, float64", {tf::constant(int32_t{7}), tf::zeros({0}, tf::float64)}},
      {"one column", {tf::constant(1.0f)}},
      {"none", {}},
      {"bool", {tf::constant(true), tf::constant(1.0f)}},
      {"float16", {tf::zeros({}, tf::float16), tf::constant(1.0f)}},
      {"vector", {tf::constant({1.0f, 2.0f}), tf::constant(1.0f)}},
      {"(1, 1)", {tf::zeros({1, 1}), tf::constant(1.0f)}},
      {"undefined", {tf::Tensor(), tf::constant(1.0f)}},
  };
  const std::vector<std::pair<std::string, tfe::CsvOptions>> options = {
      {"default", {}},
      {"header", {.header = true}},
      {"na_value", {.na_value = "nan"}},
      {"no quotes", {.use_quote_delim = false}},
      {"select 0, 1", {.select_cols = {0, 1}}},
      {"select -1", {.select_cols = {-1, 0}}},
      {"select unsorted", {.select_cols = {1, 0}}},
      {"select huge", {.select_cols = {0, 1 << 30}}},
      {"exclude 5", {.exclude_cols = {5}}},
      {"exclude 0", {.exclude_cols = {0}}},
      {"both", {.select_cols = {0}, .exclude_cols = {1}}},
      {"quote delimiter", {.field_delim = '"'}},
      {"NUL delimiter", {.field_delim = '\0'}},
  };
  std::vector<std::string> paths;
  for (const auto& [name, text] : csv_files) {
    paths.push_back(dir / (name + ".csv"));
    write_bytes(paths.back(), text);
  }
  paths.push_back(dir / "missing.csv");
  paths.push_back(dir.path().string());  // a directory
  for (const std::string& path : paths)
    for (const auto& [dname, d] : defaults)
      for (const auto& [oname, o] : options)
        probe_ds("CsvDataset", path + ", " + dname + ", " + oname,
                 [&] { return tfe::CsvDataset({path}, d, o); });
  probe_ds("CsvDataset", "no files", [&] { return tfe::CsvDataset({}, defaults[0].second); });
  probe_ds("CsvDataset", "all files", [&] { return tfe::CsvDataset(paths, defaults[0].second); });

  // IDX: a valid file of each dtype, then damaged ones.
  const std::string good = dir / "good.idx";
  tf::data::write_idx(good, make({3, 2}, tf::float32, true), false);
  const std::string valid = read_bytes(good);
  const std::string gz = dir / "good.idx.gz";
  tf::data::write_idx(gz, make({40, 50}, tf::float64, false), true);
  const std::string valid_gz = read_bytes(gz);
  using namespace std::string_literals;
  const std::vector<std::pair<std::string, std::string>> idx_files = {
      {"empty", ""},
      {"one byte", "\x00"s},
      {"bad magic", "\x01\x02\x08\x01\x00\x00\x00\x01\x05"s},
      {"unknown type", "\x00\x00\x07\x01\x00\x00\x00\x01\x05"s},
      {"rank 0", "\x00\x00\x08\x00\x05"s},
      {"rank 9", "\x00\x00\x08\x09"s + std::string(36, '\x01') + "\x05"s},
      {"truncated dims", "\x00\x00\x08\x02\x00\x00"s},
      {"huge dims", "\x00\x00\x0e\x04"s + std::string(16, '\xff')},
      {"huge and zero dims", "\x00\x00\x0e\x03\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff"s},
      {"truncated data", valid.substr(0, valid.size() - 3)},
      {"trailing data", valid + "x"},
      {"gzip garbage", "\x1f\x8b garbage"s},
      {"gzip truncated", valid_gz.substr(0, valid_gz.size() / 2)},
      {"gzip without trailer", valid_gz.substr(0, valid_gz.size() - 4)},
      {"gzip trailing junk", valid_gz + "junk"},
      {"gzip flipped",
       [&] {
         std::string s = valid_gz;
         s[s.size() / 2] = static_cast<char>(s[s.size() / 2] ^ 0x10);
         return s;
       }()},
  };
  int n = 0;
  for (const auto& [name, bytes] : idx_files) {
    const std::string path = dir / ("bad_" + std::to_string(n++) + ".idx");
    write_bytes(path, bytes);
    adversarial::probe("read_idx", name, [&] { return tf::data::read_idx(path); });
  }
  adversarial::probe("read_idx", "missing", [&] { return tf::data::read_idx(dir / "nothing"); });
  adversarial::probe("read_idx", "directory", [&] { return tf::data::read_idx(dir.path()); });
  CHECK(same_values(tf::data::read_idx(good).numpy<double>(),
                    make({3, 2}, tf::float32, true).numpy<double>()));
  // write_idx of what IDX cannot hold, and into a missing directory.
  const std::vector<std::pair<std::string, tf::Tensor>> unwritable = {
      {"bool", make({2}, tf::bool_, true)}, {"int64", make({2}, tf::int64, true)},
      {"scalar", tf::constant(1.0f)},       {"undefined", tf::Tensor()},
      {"empty", tf::zeros({0, 3})},
  };
  for (const auto& [name, t] : unwritable)
    for (bool compress : {false, true}) {
      adversarial::probe("write_idx", name, [&] {
        tf::data::write_idx(dir / "out.idx", t, compress);
        return tf::data::read_idx(dir / "out.idx");
      });
      adversarial::probe("write_idx", name + " into a missing directory", [&] {
        tf::data::write_idx(dir / "missing/out.idx", t, compress);
        return tf::Tensor();
      });
    }
}
