// Adversarial uses of the core API: tensors made from values that do not fill their shape,
// shapes with negative, huge and overflowing dimensions, reads of the wrong kind (item of many
// elements, numpy of every C++ type), factories with odd sizes and steps, Variables assigned
// values of other shapes and dtypes, and devices that do not exist. A tensor that reads back,
// or a tf::Error naming what refused — never another exception, a crash or a huge allocation.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::make;

namespace {

constexpr int64_t kBig = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

}  // namespace

TEST_CASE("adversarial: shapes, factories and reads", "[adversarial]") {
  const std::vector<std::vector<int64_t>> dims = {{},
                                                  {0},
                                                  {3},
                                                  {-1},
                                                  {-2},
                                                  {kBig},
                                                  {kMax},
                                                  {kBig, kBig},
                                                  {0, kMax},
                                                  {kMax, 0},
                                                  {2, -1, 3},
                                                  {1, 1, 1, 1, 1, 1, 1, 1},
                                                  {1, 1, 1, 1, 1, 1, 1, 1, 1}};
  for (const auto& d : dims) {
    std::string what = "shape (";
    for (int64_t x : d) what += std::to_string(x) + ",";
    what += ")";
    adversarial::probe_readable(
        what + " zeros", [&] { return std::vector<tf::Tensor>{tf::zeros(tf::TensorShape(d))}; });
    adversarial::probe_readable(what + " constant of 3 values", [&] {
      return std::vector<tf::Tensor>{tf::constant(std::vector<float>{1, 2, 3}, tf::TensorShape(d))};
    });
    adversarial::probe_readable(what + " reshape", [&] {
      return std::vector<tf::Tensor>{tf::reshape(tf::ones({3}), tf::TensorShape(d))};
    });
    adversarial::probe_readable(what + " fill", [&] {
      return std::vector<tf::Tensor>{tf::fill(tf::TensorShape(d), tf::constant(2.0f))};
    });
  }
  for (const auto& [start, limit, delta] :
       std::vector<std::tuple<double, double, double>>{{0, 10, 0},
                                                       {0, 10, -1},
                                                       {0, 1e300, 1e-300},
                                                       {0, 1e18, 1},
                                                       {std::nan(""), 1, 1},
                                                       {0, INFINITY, 1},
                                                       {10, 0, -3},
                                                       {0, 0, 1}})
    for (tf::DType d : {tf::float32, tf::float64, tf::int32, tf::int64})
      adversarial::probe_readable(
          "range(" + std::to_string(start) + ", " + std::to_string(limit) + ", " +
              std::to_string(delta) + ") " + std::string(tf::dtype_name(d)),
          [&] { return std::vector<tf::Tensor>{tf::range(start, limit, delta, d)}; });
  for (int64_t n : {int64_t{-1}, int64_t{0}, int64_t{1}, kBig, kMax}) {
    adversarial::probe_readable("eye " + std::to_string(n),
                                [&] { return std::vector<tf::Tensor>{tf::eye(n, 2)}; });
    adversarial::probe_readable("linspace " + std::to_string(n),
                                [&] { return std::vector<tf::Tensor>{tf::linspace(0.0, 1.0, n)}; });
  }
  // Reads of the wrong kind.
  for (const tf::TensorShape& s : adversarial::kShapes)
    for (tf::DType d : tf::testing::kAllDTypes) {
      const tf::Tensor x = make(s, d, true);
      const std::string what = describe(x);
      adversarial::probe_readable(what + " reads", [&] {
        (void)x.numpy<float>();
        (void)x.numpy<int64_t>();
        (void)x.numpy<uint8_t>();
        (void)x.numpy<bool>();
        (void)x.item<double>();
        return std::vector<tf::Tensor>{x};
      });
      adversarial::probe_readable(what + " to a device that does not exist", [&] {
        tf::DeviceScope scope("/device:CPU:9");
        return std::vector<tf::Tensor>{x + x};
      });
      adversarial::probe_readable(what + " Variable assigns", [&] {
        tf::Variable v(x, "v");
        for (const tf::TensorShape& s2 : adversarial::kShapes)
          for (tf::DType d2 : {d, tf::float32, tf::int64}) {
            INFO("assign " << describe(make(s2, d2, false)));
            try {
              v.assign(make(s2, d2, false, 2));
              v.assign_add(make(s2, d2, true, 3));
              v.assign_sub(make(s2, d2, false, 4));
            } catch (const tf::Error& e) {
              CHECK(std::string(e.what()).rfind('[', 0) == 0);
            }
          }
        return std::vector<tf::Tensor>{v.value()};
      });
    }
}
