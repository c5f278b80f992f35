// Adversarial collectives and inputs on a MirroredStrategy of logical CPUs: replicas that
// all-reduce tensors of every dtype and of empty, scalar and mismatched shapes with special
// values (each replica its own shape and dtype), strategy.reduce of mismatched per-replica
// values with and without an axis, and distributed datasets of odd global batches. Each step
// returns the exact reduction (SUM of the replicas' values in replica order) or raises the same
// tf::Error on the caller — never a hang, a crash or a mixed result; the strategy stays usable.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "distribute_testing.h"
#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using adversarial::describe;
using adversarial::make;
using distribute_testing::cpus;
using distribute_testing::split_cpu;

namespace {

const std::vector<tf::TensorShape> kShapes = {{}, {0}, {3}, {2, 3}, {3, 2}, {0, 3}};
const std::vector<tf::DType> kDTypes = {tf::float32, tf::float64, tf::float16,
                                        tf::int32,   tf::int64,   tf::bool_};

// Runs f: the values it returns are checked by `check`; a tf::Error must name an op.
template <class F, class C>
void probe_step(const std::string& what, F&& f, C&& check) {
  INFO(what);
  try {
    check(f());
  } catch (const tf::Error& e) {
    CHECK(std::string(e.what()).rfind('[', 0) == 0);
  } catch (const std::exception& e) {
    FAIL("not a tf::Error: " << e.what());
  }
}

}  // namespace

TEST_CASE("adversarial: all-reduces of mismatched replicas and odd values",
          "[adversarial][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  for (const tf::TensorShape& s0 : kShapes)
    for (const tf::TensorShape& s1 : kShapes)
      for (tf::DType d0 : kDTypes)
        for (tf::DType d1 : {d0, tf::float32})
          for (bool special : {false, true}) {
            const std::vector<tf::Tensor> values = {make(s0, d0, special, 1),
                                                    make(s1, d1, special, 2)};
            const std::string what = describe(values[0]) + " and " + describe(values[1]) +
                                     (special ? " (special values)" : "");
            for (ds::ReduceOp op : {ds::ReduceOp::SUM, ds::ReduceOp::MEAN}) {
              probe_step(
                  "all_reduce of " + what,
                  [&] {
                    return strategy.run([&] {
                      auto* ctx = ds::get_replica_context();
                      return ctx->all_reduce(
                          op, values[static_cast<size_t>(ctx->replica_id_in_sync_group())]);
                    });
                  },
                  [&](const ds::PerReplica<tf::Tensor>& r) {
                    // Only equal shapes and dtypes reduce; every replica gets the same tensor.
                    REQUIRE(s0 == s1);
                    REQUIRE(d0 == d1);
                    const std::vector<double> a = r[0].numpy<double>(), b = r[1].numpy<double>();
                    REQUIRE(a.size() == b.size());
                    for (size_t i = 0; i < a.size(); ++i)
                      CHECK((a[i] == b[i] || (a[i] != a[i] && b[i] != b[i])));
                  });
              probe_step(
                  "strategy.reduce of " + what,
                  [&] {
                    const ds::PerReplica<tf::Tensor> pr(values);
                    std::vector<tf::Tensor> out = {strategy.reduce(op, pr)};
                    for (int axis : {0, -1, 5}) out.push_back(strategy.reduce(op, pr, axis));
                    return out;
                  },
                  [&](const std::vector<tf::Tensor>& out) {
                    for (const tf::Tensor& t : out)
                      CHECK(t.numpy<double>().size() == static_cast<size_t>(t.num_elements()));
                  });
            }
          }
  // Still usable after all of that.
  auto ok = strategy.run(
      [] { return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({2})); });
  tf::testing::check_values(ok[0], {2, 2}, 0, 0);
}

TEST_CASE("adversarial: distributed datasets of odd global batches", "[adversarial][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(3));
  const std::vector<tf::TensorShape> batches = {{}, {0}, {1}, {2}, {3}, {7, 2}, {0, 4}, {2, 0}};
  for (const tf::TensorShape& s : batches)
    for (tf::DType d : {tf::float32, tf::int64, tf::bool_}) {
      const tf::Tensor x = make(s, d, false, 3);
      std::vector<std::vector<tf::Tensor>> data = {{x, x}, {x}};
      probe_step(
          "a global batch " + describe(x),
          [&] {
            int64_t rows = 0;
            for (const auto& per_replica : strategy.experimental_distribute_dataset(data)) {
              auto counts = strategy.run(
                  [](const std::vector<tf::Tensor>& local) {
                    return local.empty() || local[0].rank() == 0 ? int64_t{1} : local[0].shape()[0];
                  },
                  per_replica);
              for (int r = 0; r < 3; ++r) rows += counts[r];
            }
            return rows;
          },
          [&](int64_t rows) { CHECK(rows >= 0); });
    }
}
