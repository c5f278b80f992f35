// The special functions (ops/special.h): float64 values against TF 2.21 literals (the tf.math
// call named at each row, on the same inputs) with poles, 0, negative x, +-inf and NaN, the
// lower dtypes against float64, the dtypes TF rejects, gradients against TF's literals (xlogy's
// zeros) and central finite differences in float64, and traced against eager; every device.
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn_more.h"
#include "ops/reduce.h"
#include "ops/special.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

tf::Tensor f64(const std::vector<double>& v) {
  return tf::detail::from_doubles(v, tf::TensorShape{static_cast<int64_t>(v.size())}, tf::float64);
}

using Unary = tf::Tensor (*)(const tf::Tensor&);
using Binary = tf::Tensor (*)(const tf::Tensor&, const tf::Tensor&);

// tf.math.lgamma / digamma / polygamma(n, x) on these x (float64, TF 2.21).
const std::vector<double> kGammaX = {-2.5, -1.0, -0.5,  0.0,  1e-8, 0.5,   1.0, 2.0,
                                     3.7,  10.0, 100.0, 1e10, kInf, -kInf, kNan};

// sum(f(x) * w) against central differences, float64, gradient w.r.t. input k (the others
// held at xs0).
void check_fd(const char* name, const std::function<tf::Tensor(const std::vector<tf::Tensor>&)>& f,
              const std::vector<std::vector<double>>& xs0, size_t k) {
  INFO(name << " w.r.t. input " << k);
  std::vector<tf::Tensor> xs;
  for (const auto& v : xs0) xs.push_back(f64(v));
  auto f_k = [&](const tf::Tensor& x) {
    auto ys = xs;
    ys[k] = x;
    return f(ys);
  };
  tf::testing::check_gradient(f_k, xs[k].shape(), xs0[k], 1e-6, 1e-6);
}

}  // namespace

TEST_CASE("special: gamma family equals TF at special points", "[cpu][cuda][special]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    const auto x = f64(kGammaX);
    // tf.math.lgamma (float64).
    check_values(tf::math::lgamma(x),
                 {-0.05624371649767407, kInf, 1.2655121234846454, kInf, 18.42068073818021,
                  0.5723649429247001, 0.0, 0.0, 1.428072326665388, 12.80182748008147,
                  359.13420536957545, 220258509288.81058, kInf, kInf, kNan},
                 1e-14, 1e-15);
    // tf.math.digamma, and tf.math.polygamma(0., x), equal.
    const std::vector<double> psi = {1.1031566406452433,
                                     kNan,
                                     0.03648997397857645,
                                     kNan,
                                     -100000000.57721566,
                                     -1.9635100260214227,
                                     -0.5772156649015323,
                                     0.42278433509846747,
                                     1.167153539361511,
                                     2.2517525890667214,
                                     4.600161852738088,
                                     23.025850929890456,
                                     kInf,
                                     kNan,
                                     kNan};
    check_values(tf::math::digamma(x), psi, 1e-14, 1e-15);
    auto n = [&](double v) { return tf::math::polygamma(f64({v}), x); };
    check_values(n(0), psi, 1e-14, 1e-15);
    // tf.math.polygamma(n, x) for n = 1, 2, 3; non-integer and negative n give NaN.
    check_values(n(1),
                 {9.539246644989124, kInf, 8.934802200544679, kInf, 1e+16, 4.93480220054468,
                  1.6449340668482266, 0.6449340668482266, 0.31003785767003833, 0.10516633568168576,
                  0.010050166663333573, 1.00000000005e-10, 0.0, kInf, kNan},
                 1e-13, 0);
    check_values(
        n(2),
        {-0.1082040516417282, kNan, -0.82879664423432, kNan, -2e+24, -16.828796644234316,
         -2.404113806319188, -0.4041138063191886, -0.09539530872855405, -0.011049834970802069,
         -0.00010100499983335001, -1.0000000001e-20, -0.0, kNan, kNan},
        1e-13, 0);
    check_values(
        n(3),
        {194.74787621918756, kInf, 193.40909103400242, kInf, 5.999999999999999e+32,
         97.40909103400242, 6.493939402266829, 0.4939394022668293, 0.05827921795656364,
         0.0023199013042898686, 2.030199990001333e-06, 2.0000000003000003e-30, 0.0, kInf, kNan},
        1e-13, 0);
    check_values(n(1.5), std::vector<double>(kGammaX.size(), kNan), 0, 0);
    check_values(n(-1), std::vector<double>(kGammaX.size(), kNan), 0, 0);
  }
}

TEST_CASE("special: erfinv ndtri bessel xlogy igamma equal TF", "[cpu][cuda][special]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.math.erfinv (float64) for the special values; the finite ones are mpmath's (50
    // digits): TF's own float64 erfinv is 8e-8 off at 1e-10 and 4e-12 at +0.999999 (where it
    // is not even odd), tapeflow's is within 2.2e-16.
    check_values(tf::math::erfinv(f64({-1.5, -1.0, -0.999999, -0.5, 0.0, 1e-10, 0.3, 0.9, 0.999999,
                                       1.0, 1.5, kNan})),
                 {kNan, -kInf, -3.458910737275499, -0.4769362762044699, 0.0, 8.862269254527581e-11,
                  0.2724627147267543, 1.1630871536766743, 3.458910737275499, kInf, kNan, kNan},
                 5e-16, 0);
    // tf.math.ndtri (float64).
    check_values(
        tf::math::ndtri(
            f64({-0.1, 0.0, 1e-300, 1e-10, 0.025, 0.3, 0.5, 0.9, 0.999999, 1.0, 1.1, kNan})),
        {kNan, -kInf, -37.0470962993612, -6.361340902404056, -1.9599639845400545,
         -0.5244005127080409, 0.0, 1.2815515655446004, 4.753424308817087, kInf, kNan, kNan},
        1e-14, 0);
    // tf.math.bessel_i0e and bessel_i1e (float64).
    const auto b =
        f64({-800., -30., -2.5, -0.1, 0.0, 1e-5, 0.5, 3.0, 15.0, 25.0, 800., kInf, -kInf, kNan});
    check_values(
        tf::math::bessel_i0e(b),
        {0.014106945005869183, 0.07314594648223728, 0.27004644161220276, 0.9071009257823008, 1.0,
         0.9999900000749995, 0.6450352704491502, 0.24300035416182536, 0.1038995314488227,
         0.0801967735474367, 0.014106945005869183, 0.0, 0.0, kNan},
        1e-14, 0);
    const auto i1 = tf::math::bessel_i1e(b);
    check_values(
        i1,
        {-0.014098125406526996, -0.07191633059864753, -0.20658464953126654, -0.04529844680880933,
         0.0, 4.999950000312499e-06, 0.15642080318487162, 0.19682671329730084, 0.10037417504516664,
         0.07857611331929276, 0.014098125406526996, 0.0, -0.0, kNan},
        1e-14, 0);
    CHECK(std::signbit(tf::detail::to_double_vector(i1)[12]));  // i1e(-inf) = -0
    // tf.math.xlogy / xdivy / xlog1py (float64): 0 wherever x == 0, NaN and inf y included.
    const auto xa = f64({0., 0., 0., 0., 1., 2., -1., 1., 0., 3.});
    const auto ya = f64({0., -1., kNan, kInf, 0., 3., 0.5, -1., 1., 1e-300});
    check_values(
        tf::math::xlogy(xa, ya),
        {0, 0, 0, 0, -kInf, 2.197224577336219, 0.6931471805599453, kNan, 0, -2072.326583694641},
        1e-15, 0);
    check_values(tf::math::xdivy(xa, ya), {0, 0, 0, 0, kInf, 0.6666666666666666, -2, -1, 0, 3e300},
                 1e-15, 0);
    check_values(tf::math::xlog1py(xa, ya),
                 {0, 0, 0, 0, 0, 2.772588722239781, -0.4054651081081644, -kInf, 0, 3e-300}, 1e-15,
                 0);
    // tf.math.log_sigmoid (float64).
    check_values(tf::math::log_sigmoid(f64({-1000., -20., -1., 0., 1., 20., 1000., kNan})),
                 {-1000.0, -20.000000002061153, -1.3132616875182228, -0.6931471805599453,
                  -0.3132616875182228, -2.061153620314381e-09, -0.0, kNan},
                 1e-15, 0);
    // tf.math.igamma / igammac (float64), with TF's values at a = 0, x = 0, +-inf and NaN.
    const auto a =
        f64({0., 0., -1., 0.5, 0.5, 1., 1., 3., 3., 10., 100., 100., 1e-3, kInf, 2., kNan});
    const auto z =
        f64({0., 1., 1., 0., 0.2, 1., kInf, 2., 30., 12., 90., 110., 1e-3, 1., kNan, 1.});
    check_values(tf::math::igamma(a, z),
                 {0.0, kNan, kNan, 0.0, 0.47291074313446185, 0.6321205588285578, 1.0,
                  0.32332358381693643, 0.9999999999549898, 0.757607838329488, 0.15822098918642064,
                  0.8417213299399123, 0.9936876467088608, 0.0, kNan, kNan},
                 1e-13, 0);
    check_values(tf::math::igammac(a, z),
                 {kNan, kNan, kNan, 1.0, 0.5270892568655381, 0.36787944117144233, 0.0,
                  0.6766764161830636, 4.501016648012131e-11, 0.24239216167051197,
                  0.8417790108135794, 0.15827867006008764, 0.006312353291139217, 1.0, kNan, kNan},
                 1e-13, 0);
    check_values(tf::math::igamma(f64({1}), f64({-1})), {kNan}, 0, 0);
    // Broadcasting and a C++ scalar: polygamma(1, [1, 2]).
    check_values(tf::math::polygamma(tf::Tensor(1.0), f64({1, 2})),
                 {1.6449340668482266, 0.6449340668482266}, 1e-14, 0);
  }
}

TEST_CASE("special: lower dtypes round the float64 result and TF's dtypes are kept",
          "[cpu][cuda][special]") {
  struct Row {
    const char* name;
    Unary f;
    std::vector<tf::DType> dtypes;
    double lo, hi;
  };
  const std::vector<Row> rows = {
      {"lgamma", tf::math::lgamma, {tf::float16, tf::float32}, -4.5, 8},
      {"digamma", tf::math::digamma, {tf::float16, tf::float32}, -4.5, 8},
      {"erfinv", tf::math::erfinv, {tf::float32}, -0.99, 0.99},
      {"ndtri", tf::math::ndtri, {tf::float32}, 0.01, 0.99},
      {"bessel_i0e", tf::math::bessel_i0e, {tf::float16, tf::float32}, -30, 30},
      {"bessel_i1e", tf::math::bessel_i1e, {tf::float16, tf::float32}, -30, 30},
      {"log_sigmoid", tf::math::log_sigmoid, {tf::float16, tf::bfloat16, tf::float32}, -30, 30},
  };
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    for (const auto& r : rows) {
      INFO(r.name);
      const auto v = tf::testing::random_values(64, r.lo, r.hi, 4);
      for (auto dt : r.dtypes) {
        INFO(tf::dtype_name(dt));
        const auto x = tf::detail::from_doubles(v, {64}, dt);
        const auto want = tf::detail::to_double_vector(r.f(tf::cast(x, tf::float64)));
        check_values(r.f(x), want, tf::testing::rtol_of(dt), 1e-3 * tf::testing::rtol_of(dt));
      }
    }
    // TF registers no bfloat16 lgamma/digamma/bessel, no float16 erfinv/ndtri/polygamma/igamma.
    const auto h = tf::detail::from_doubles({0.5}, {1}, tf::float16);
    const auto bf = tf::detail::from_doubles({0.5}, {1}, tf::bfloat16);
    require_error([&] { tf::math::lgamma(bf); }, {"lgamma", "bfloat16"});
    require_error([&] { tf::math::bessel_i1e(bf); }, {"bessel_i1e", "bfloat16"});
    require_error([&] { tf::math::erfinv(h); }, {"erfinv", "float16"});
    require_error([&] { tf::math::ndtri(h); }, {"ndtri", "float16"});
    require_error([&] { tf::math::igamma(h, h); }, {"igamma", "float16"});
    require_error([&] { tf::math::polygamma(h, h); }, {"polygamma", "float16"});
    require_error([&] { tf::math::digamma(tf::constant({1, 2})); }, {"digamma", "int32"});
    require_error([&] { tf::math::log_sigmoid(tf::constant({1, 2})); }, {"log_sigmoid", "int32"});
    require_error([&] { tf::math::xlogy(f64({1, 2}), f64({1, 2, 3})); }, {"xlogy"});
    check_values(tf::math::xlogy(bf, bf), {-0.34657359}, 1e-2, 0);
  }
}

TEST_CASE("special: gradients equal TF at zeros", "[cpu][cuda][special]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    struct Row {
      Binary f;
      std::vector<double> gx, gy;
    };
    // TF 2.21: d/dx and d/dy of f(x, y) at x = [0, 0, 2, 0], y = [0, 3, 3, -1], float64.
    const std::vector<Row> rows = {
        {tf::math::xlogy, {0, 0, 1.0986122886681096, 0}, {0, 0, 0.6666666666666666, 0}},
        {tf::math::xdivy, {0, 0, 0.3333333333333333, 0}, {0, 0, -0.2222222222222222, 0}},
        {tf::math::xlog1py, {0, 0, 1.3862943611198906, 0}, {0, 0, 0.5, 0}},
    };
    for (const auto& r : rows) {
      const auto x = f64({0, 0, 2, 0}), y = f64({0, 3, 3, -1});
      tf::GradientTape tape;
      tape.watch(std::vector<tf::Tensor>{x, y});
      const auto out = tf::reduce_sum(r.f(x, y));
      const auto g = tape.gradient(out, std::vector<tf::Tensor>{x, y});
      check_values(g[0], r.gx, 1e-15, 0);
      check_values(g[1], r.gy, 1e-15, 0);
    }
    // lgamma, digamma, bessel_i0e, bessel_i1e at [0.3, 1.7, -1.3, 4]; erfinv at [-0.7, 0, 0.4];
    // igamma w.r.t. x at a = [0.5, 2, 3], x = [0.2, 3, 1] (TF 2.21).
    const auto xg = f64({0.3, 1.7, -1.3, 4.0});
    const std::vector<std::pair<Unary, std::vector<double>>> unary = {
        {tf::math::lgamma,
         {-3.502524222200133, 0.20854787487349347, 2.8825405488661673, 1.2561176684318007}},
        {tf::math::digamma,
         {12.245364546107734, 0.7932328301639984, 14.53687624413708, 0.28382295573711525}},
        {tf::math::bessel_i0e,
         {-0.645203064542709, -0.12196288138397754, 0.1831273248889313, -0.028251081721551413}},
        {tf::math::bessel_i1e,
         {0.2706111957432463, -0.00659759308572444, 0.015975334235176553, -0.016436628154057414}},
    };
    for (const auto& [f, want] : unary) {
      tf::GradientTape tape;
      tape.watch(xg);
      const auto y = tf::reduce_sum(f(xg));
      check_values(tape.gradient(y, xg), want, 1e-13, 0);
    }
    {
      const auto p = f64({-0.7, 0.0, 0.4});
      tf::GradientTape tape;
      tape.watch(p);
      const auto y = tf::reduce_sum(tf::math::erfinv(p));
      check_values(tape.gradient(y, p), {1.516363217333765, 0.8862269254527579, 1.0168562004306123},
                   1e-13, 0);
    }
    {
      // w.r.t. both (a in the series region at x = 0.2 and 1, in the continued fraction's at
      // a = 2, x = 3); igammac's are the negatives (TF 2.21).
      const auto a = f64({0.5, 2, 3}), z = f64({0.2, 3, 1});
      const std::vector<double> ga = {-0.8201614064863386, -0.19742541957920223,
                                      -0.10645935294394225};
      const std::vector<double> gz = {1.0328830949345564, 0.14936120510359185, 0.18393972058572114};
      for (bool complement : {false, true}) {
        tf::GradientTape tape;
        tape.watch(std::vector<tf::Tensor>{a, z});
        const auto y =
            tf::reduce_sum(complement ? tf::math::igammac(a, z) : tf::math::igamma(a, z));
        const auto g = tape.gradient(y, std::vector<tf::Tensor>{a, z});
        const double s = complement ? -1 : 1;
        check_values(g[0], {s * ga[0], s * ga[1], s * ga[2]}, 1e-13, 0);
        check_values(g[1], {s * gz[0], s * gz[1], s * gz[2]}, 1e-13, 0);
      }
    }
    // bessel_i1e'(0) = 0.5 (TF's special case).
    const auto zero = f64({0.0});
    tf::GradientTape tape;
    tape.watch(zero);
    const auto y = tf::reduce_sum(tf::math::bessel_i1e(zero));
    check_values(tape.gradient(y, zero), {0.5}, 0, 0);
    // At a float32 denormal too, where 1 / x overflows (TF 2.21: 0.5).
    const auto tiny = tf::constant<float>({1e-40f, -1e-40f}, {2});
    tf::GradientTape tape32;
    tape32.watch(tiny);
    const auto y32 = tf::reduce_sum(tf::math::bessel_i1e(tiny));
    check_values(tape32.gradient(y32, tiny), {0.5, 0.5}, 0, 0);
  }
}

TEST_CASE("special: gradients match finite differences", "[cpu][cuda][special]") {
  using V = const std::vector<tf::Tensor>&;
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    const std::vector<double> pos = {0.3, 1.7, 2.9, 7.5}, mixed = {-1.3, -0.4, 0.6, 3.1};
    const std::vector<double> unit = {-0.8, -0.2, 0.1, 0.7}, prob = {0.05, 0.3, 0.6, 0.97};
    check_fd(
        "lgamma", [](V x) { return tf::math::lgamma(x[0]); }, {mixed}, 0);
    check_fd(
        "digamma", [](V x) { return tf::math::digamma(x[0]); }, {mixed}, 0);
    check_fd(
        "polygamma", [](V x) { return tf::math::polygamma(x[0], x[1]); }, {{1, 2, 3, 1}, mixed}, 1);
    check_fd(
        "erfinv", [](V x) { return tf::math::erfinv(x[0]); }, {unit}, 0);
    check_fd(
        "ndtri", [](V x) { return tf::math::ndtri(x[0]); }, {prob}, 0);
    check_fd(
        "bessel_i0e", [](V x) { return tf::math::bessel_i0e(x[0]); }, {mixed}, 0);
    check_fd(
        "bessel_i1e", [](V x) { return tf::math::bessel_i1e(x[0]); }, {mixed}, 0);
    check_fd(
        "log_sigmoid", [](V x) { return tf::math::log_sigmoid(x[0]); }, {mixed}, 0);
    for (size_t k : {0, 1}) {
      check_fd(
          "xlogy", [](V x) { return tf::math::xlogy(x[0], x[1]); }, {mixed, pos}, k);
      check_fd(
          "xdivy", [](V x) { return tf::math::xdivy(x[0], x[1]); }, {mixed, pos}, k);
      check_fd(
          "xlog1py", [](V x) { return tf::math::xlog1py(x[0], x[1]); }, {mixed, pos}, k);
    }
    // Both sides of x = a + 1 (the series and the continued fraction).
    const std::vector<double> ia = {0.3, 1.7, 2.9, 7.5}, ix = {0.5, 3, 1, 12};
    for (size_t k : {0, 1}) {
      check_fd(
          "igamma", [](V v) { return tf::math::igamma(v[0], v[1]); }, {ia, ix}, k);
      check_fd(
          "igammac", [](V v) { return tf::math::igammac(v[0], v[1]); }, {ia, ix}, k);
    }
    // Second order: lgamma'' = polygamma(1, x), through nested tapes.
    const auto x = f64(pos);
    tf::GradientTape outer;
    outer.watch(x);
    tf::Tensor first;
    {
      tf::GradientTape inner;
      inner.watch(x);
      first = inner.gradient(tf::reduce_sum(tf::math::lgamma(x)), x);
    }
    const auto second = outer.gradient(tf::reduce_sum(first), x);
    check_values(second, tf::detail::to_double_vector(tf::math::polygamma(tf::Tensor(1.0), x)),
                 1e-14, 0);
  }
}

TEST_CASE("special: traced equals eager", "[cpu][cuda][special]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    auto f = tf::function([](const tf::Tensor& x, const tf::Tensor& y) {
      return tf::math::lgamma(y) + tf::math::digamma(y) + tf::math::erfinv(x) +
             tf::math::ndtri(x * 0.5 + 0.5) + tf::math::bessel_i0e(x) + tf::math::bessel_i1e(y) +
             tf::math::xlogy(x, y) + tf::math::xdivy(x, y) + tf::math::xlog1py(x, y) +
             tf::math::log_sigmoid(x) + tf::math::igamma(y, y) + tf::math::igammac(y, x + 1) +
             tf::math::polygamma(tf::Tensor(2.0f), y);
    });
    const auto x =
        tf::detail::from_doubles(tf::testing::random_values(16, -0.9, 0.9, 2), {16}, tf::float32);
    const auto y =
        tf::detail::from_doubles(tf::testing::random_values(16, 0.2, 5, 3), {16}, tf::float32);
    const auto eager = tf::math::lgamma(y) + tf::math::digamma(y) + tf::math::erfinv(x) +
                       tf::math::ndtri(x * 0.5 + 0.5) + tf::math::bessel_i0e(x) +
                       tf::math::bessel_i1e(y) + tf::math::xlogy(x, y) + tf::math::xdivy(x, y) +
                       tf::math::xlog1py(x, y) + tf::math::log_sigmoid(x) + tf::math::igamma(y, y) +
                       tf::math::igammac(y, x + 1) + tf::math::polygamma(tf::Tensor(2.0f), y);
    tf::testing::check_close(f(x, y), eager, 1e-6, 1e-6);
  }
}

TEST_CASE("special: betainc equals TF with its gradient", "[cpu][cuda][special]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.math.betainc (float64, TF 2.21): NaN for a or b <= 0 and x outside [0, 1].
    const auto a = f64({0.5, 2., 3., 1., 0., -1., 2., 2., 2., 1e-3, 100., 2., kNan});
    const auto b = f64({0.5, 3., 1., 1., 1., 1., 2., 2., 2., 1e-3, 200., 0., 1.});
    const auto x = f64({0.2, 0.7, 0.999, 0., 0.5, 0.5, -0.1, 1., 1.1, 0.5, 0.3, 0.5, 0.5});
    check_values(tf::math::betainc(a, b, x),
                 {0.29516723530086664, 0.9163, 0.997002999, 0.0, kNan, kNan, kNan, 1.0, kNan,
                  0.49999999999999994, 0.10884306564490925, kNan, kNan},
                 1e-12, 0);
    // Broadcasting a C++ scalar: I_x(1, 1) = x.
    check_values(tf::math::betainc(tf::Tensor(1.0), tf::Tensor(1.0), f64({0.25, 0.5})), {0.25, 0.5},
                 1e-15, 0);
    require_error([&] { tf::math::betainc(a, b, f64({0.5, 0.5})); }, {"betainc"});
    const auto h = tf::detail::from_doubles({0.5}, {1}, tf::float16);
    require_error([&] { tf::math::betainc(h, h, h); }, {"betainc", "float16"});
    // TF's gradient w.r.t. x; none for a and b (TF returns None).
    const auto ga = f64({0.5, 2., 3.}), gb = f64({0.5, 3., 1.5}), gx = f64({0.2, 0.7, 0.4});
    tf::GradientTape tape;
    tape.watch(std::vector<tf::Tensor>{ga, gb, gx});
    const auto y = tf::reduce_sum(tf::math::betainc(ga, gb, gx));
    const auto g = tape.gradient(y, std::vector<tf::Tensor>{ga, gb, gx});
    check_values(g[2], {0.7957747154594766, 0.7560000000000001, 0.8133265027035578}, 1e-13, 0);
    CHECK(!g[0].defined());
    CHECK(!g[1].defined());
    using V = const std::vector<tf::Tensor>&;
    check_fd(
        "betainc", [](V v) { return tf::math::betainc(v[0], v[1], v[2]); },
        {{0.5, 2, 3, 7}, {0.5, 3, 1.5, 2}, {0.2, 0.7, 0.4, 0.9}}, 2);
    // Traced equals eager.
    auto f = tf::function([](const tf::Tensor& p, const tf::Tensor& q, const tf::Tensor& r) {
      return tf::math::betainc(p, q, r);
    });
    tf::testing::check_close(f(ga, gb, gx), tf::math::betainc(ga, gb, gx), 1e-15, 0);
  }
}

TEST_CASE("special: digamma's float16 gradient goes through float32", "[cpu][cuda][special]") {
  // polygamma (the derivative) has float32/float64 kernels only, as TF's; digamma accepts
  // float16, and so does its gradient: trigamma in float32, rounded to float16.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const std::vector<double> xs = {0.5, 1.0, 2.5, 10.0};
    // trigamma(x) = polygamma(1, x).
    const std::vector<double> want = {4.934802200544679, 1.6449340668482264, 0.4903577561002349,
                                      0.10516633568168575};
    {
      const tf::DType d = tf::float16;  // (digamma has no bfloat16 kernel, as TF)
      const tf::Tensor x = tf::cast(tf::constant(xs), d);
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor g = tape.gradient(tf::reduce_sum(tf::math::digamma(x)), x);
      CHECK(g.dtype() == d);
      check_values(g, want, 4e-3, 0);
    }
  }
}

TEST_CASE("special: bessel_i0, bessel_i1, zeta and lbeta equal TF", "[cpu][cuda][special]") {
  using V = const std::vector<tf::Tensor>&;
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.math.bessel_i0 / bessel_i1 in float64 (TF 2.21); at 712 TF overflows to inf, the true
    // values are 2.2e307 (I0 = I0e * e^712, with I0e(712) = 0.0149485...).
    const auto v = f64({0.0, 0.5, -1.0, 10.0, 700.0});
    check_values(
        tf::math::bessel_i0(v),
        {1.0, 1.0634833707413238, 1.2660658777520082, 2815.7166284662544, 1.5295933476718735e+302},
        1e-14, 0);
    check_values(tf::math::bessel_i1(v),
                 {0.0, 0.25789430539089619, -0.56515910399248503, 2670.9883037012551,
                  1.5285003902339004e+302},
                 1e-14, 0);
    const double i0_712 = tf::math::bessel_i0(f64({712.0})).numpy<double>()[0];
    CHECK(std::isfinite(i0_712));
    CHECK(i0_712 == Approx(tf::math::bessel_i0e(f64({712.0})).numpy<double>()[0] * std::exp(356.0) *
                           std::exp(356.0))
                        .epsilon(1e-13));
    // float32: TF gives inf at 89 (its float32 arithmetic overflows); I0(89) is 1.9e37 (the
    // series summed in float64 here gives 1.901241929906526e+37 and I1(89) 1.89053044910686e+37).
    const auto f = tf::cast(f64({-30.0, 89.0, kInf, -kInf, kNan}), tf::float32);
    check_values(tf::math::bessel_i0(f), {7.8167232e+11, 1.9012419e+37, kInf, kInf, kNan}, 1e-6, 0);
    check_values(tf::math::bessel_i1(f), {-7.6853202e+11, 1.8905305e+37, kInf, -kInf, kNan}, 1e-6,
                 0);
    CHECK(tf::math::bessel_i0(tf::cast(v, tf::float16)).dtype() == tf::float16);
    require_error([&] { tf::math::bessel_i0(tf::cast(v, tf::bfloat16)); },
                  {"[bessel_i0] expects a float16, float32 or float64 tensor", "bfloat16"});

    // tf.math.zeta(x, q): poles and domain edges as TF.
    check_values(tf::math::zeta(f64({2.0, 3.0, 1.0, 0.5, 2.0, 3.0, 2.0, 4.5}),
                                f64({1.0, 2.0, 1.0, 1.0, -1.0, -2.0, 0.5, 3.0})),
                 {1.6449340668482266, 0.2020569031595943, kInf, kNan, kInf, kNan, 4.93480220054468,
                  0.01051333693729505},
                 1e-14, 0);
    require_error([&] { tf::math::zeta(tf::cast(v, tf::float16), tf::cast(v, tf::float16)); },
                  {"[zeta] expects a float32 or float64 tensor", "float16"});

    // tf.math.lbeta over the last axis; an empty axis gives -inf, one element 0.
    const auto m = tf::detail::from_doubles({1.0, 2.0, 3.0, 0.5, 0.5, 4.0}, {2, 3}, tf::float64);
    check_values(tf::math::lbeta(m), {-4.0943445622221, -0.2415644752704904}, 1e-13, 0);
    check_values(tf::math::lbeta(f64({2.5})), {0.0}, 0, 0);
    check_values(tf::math::lbeta(tf::zeros({2, 0}, tf::float64)), {-kInf, -kInf}, 0, 0);
    check_values(tf::math::lbeta(f64({0.0, 1.0})), {kInf}, 0, 0);
    require_error([&] { tf::math::lbeta(tf::Tensor(1.0)); },
                  {"[lbeta] expects a tensor of rank >= 1", "()"});
    require_error([&] { tf::math::lbeta(tf::constant({1, 2})); }, {"[lbeta]", "int32"});

    // Gradients as TF 2.21: zeta w.r.t. q (none w.r.t. x), lbeta, I0, I1 (0.5 at 0 for I1).
    const auto zx = f64({2.0, 3.0}), zq = f64({1.0, 2.5});
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(zx);
    tape.watch(zq);
    tape.watch(m);
    const auto w = f64({0.0, 0.5, -1.0, 3.0});
    tape.watch(w);
    const auto z = tf::reduce_sum(tf::math::zeta(zx, zq));
    CHECK_FALSE(tape.gradient(z, zx).defined());
    check_values(tape.gradient(z, zq), {-2.404113806319188, -0.11195292440862604}, 1e-13, 0);
    const auto lb = tf::reduce_sum(tf::math::lbeta(m) * f64({1.0, -2.0}));
    check_values(tape.gradient(lb, m),
                 {-2.283333333333333, -1.2833333333333332, -0.7833333333333332, 6.939255388906447,
                  6.939255388906447, 0.5},
                 1e-13, 1e-15);
    check_values(tape.gradient(tf::reduce_sum(tf::math::bessel_i0(w)), w),
                 {0.0, 0.2578943053908962, -0.565159103992485, 3.9533702174026093}, 1e-14, 0);
    // TF 2.21 gives 1 at x = 0 (its _BesselI1Grad imputes 1); I1(x) = x / 2 + x^3 / 16 + ...,
    // so the derivative there is 0.5, as i1e's (whose gradient TF does give as 0.5).
    check_values(tape.gradient(tf::reduce_sum(tf::math::bessel_i1(w)), w),
                 {0.5, 0.5476947599595314, 0.7009067737595231, 3.563002513397487}, 1e-14, 0);

    const std::vector<double> mixed = {-1.3, -0.4, 0.6, 3.1}, pos = {0.3, 1.7, 2.9, 7.5};
    check_fd(
        "bessel_i0", [](V x) { return tf::math::bessel_i0(x[0]); }, {mixed}, 0);
    check_fd(
        "bessel_i1", [](V x) { return tf::math::bessel_i1(x[0]); }, {mixed}, 0);
    check_fd(
        "zeta", [](V x) { return tf::math::zeta(x[0], x[1]); }, {{2.5, 3, 4, 1.5}, pos}, 1);
    check_fd(
        "lbeta",
        [](V x) {
          return tf::math::lbeta(tf::reshape(x[0], {2, 2}));
        },
        {pos}, 0);
  }
}
