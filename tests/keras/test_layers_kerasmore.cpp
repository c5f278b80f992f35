// keras::layers::Conv1DTranspose, GroupQueryAttention and SpectralNormalization against
// Keras 3.15 on the same inputs and weights (values, tf.GradientTape gradients, the updated
// vector_u and kernel), float64 central finite differences, weight names, summary rows, traced
// (None batch) equals eager, every device, and the errors.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_more.h"
#include "keras/losses.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_decomp.h"
#include "ops/linalg_more.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;

namespace {

// numpy's ((arange(n) * a + b) % m - off) / den, reshaped: X inputs (7, 3, 11, 4, 5), K kernels
// (5, 1, 13, 8, 6), B biases (3, 1, 5, 8, 2), in the dtype asked.
tf::Tensor pattern(const tf::TensorShape& s, int a, int b, int m, double den, int off,
                   tf::DType dt = tf::float32) {
  std::vector<double> v(static_cast<size_t>(s.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ((static_cast<int64_t>(i) * a + b) % m - off) / den;
  return tf::detail::from_doubles(v, s, dt);
}
tf::Tensor X(const tf::TensorShape& s) {
  return pattern(s, 7, 3, 11, 4.0, 5);
}
tf::Tensor Kp(const tf::TensorShape& s, double scale = 1.0, tf::DType dt = tf::float32) {
  return pattern(s, 5, 1, 13, 8.0 / scale, 6, dt);
}
tf::Tensor Bp(const tf::TensorShape& s, double scale = 1.0, tf::DType dt = tf::float32) {
  return pattern(s, 3, 1, 5, 8.0 / scale, 2, dt);
}
tf::Tensor f32(const std::vector<double>& v, const tf::TensorShape& s) {
  return tf::detail::from_doubles(v, s, tf::float32);
}
bool is_bias(const tf::Variable& v) {
  const std::string n = v.name().substr(0, v.name().rfind(':'));
  return n.size() >= 4 && n.compare(n.size() - 4, 4, "bias") == 0;
}
void set_pattern_weights(const K::Layer& layer, double scale = 1.0) {
  std::vector<tf::Tensor> values;
  for (const tf::Variable& v : layer.weights())
    values.push_back(is_bias(v) ? Bp(v.shape(), scale, v.dtype())
                                : Kp(v.shape(), scale, v.dtype()));
  layer.set_weights(values);
}
std::vector<std::pair<std::string, tf::TensorShape>> weight_list(const K::Layer& layer) {
  std::vector<std::pair<std::string, tf::TensorShape>> out;
  for (const tf::Variable& v : layer.weights())
    out.emplace_back(v.name().substr(0, v.name().rfind(':')), v.shape());
  return out;
}
// The checkpoint names: Keras' weight paths ("<layer>/<sub-layer>/<weight>") less the root
// layer's name for its sub-layers' weights, as tapeflow tracks them.
std::vector<std::pair<std::string, tf::TensorShape>> tracked_list(const K::Layer& layer) {
  std::vector<std::pair<std::string, tf::TensorShape>> out;
  for (const auto& [n, v] : layer.tracked_variables()) out.emplace_back(n, v.shape());
  return out;
}
std::vector<double> vals(const tf::Tensor& t) {
  return tf::cast(t, tf::float64).numpy<double>();
}
struct Float64Layers {
  Float64Layers() { K::backend::set_floatx(tf::float64); }
  ~Float64Layers() { K::backend::set_floatx(tf::float32); }
};

// Central finite differences of loss(ins) = sum(f(ins) * w) (w fixed) against the tape's
// gradients, for every element of the inputs and of `vars`.
void check_finite_differences(const std::vector<tf::Tensor>& ins,
                              const std::function<tf::Tensor(const std::vector<tf::Tensor>&)>& f,
                              std::vector<tf::Variable> vars) {
  const tf::Tensor w0 = f(ins);
  const tf::Tensor w = pattern(w0.shape(), 3, 2, 7, 3.0, 3, tf::float64);
  auto loss_of = [&](const std::vector<tf::Tensor>& xs) { return tf::reduce_sum(f(xs) * w); };
  tf::GradientTape tape(tf::TapeOptions{.persistent = true});
  for (const tf::Tensor& x : ins) tape.watch(x);
  const tf::Tensor loss = loss_of(ins);
  const double eps = 1e-6;
  for (size_t a = 0; a < ins.size(); ++a) {
    CAPTURE(a);
    const tf::Tensor g = tape.gradient(loss, ins[a]);
    std::vector<double> xv = vals(ins[a]), num(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      auto at = [&](double d) {
        std::vector<double> v = xv;
        v[i] += d;
        std::vector<tf::Tensor> moved = ins;
        moved[a] = tf::detail::from_doubles(v, ins[a].shape(), tf::float64);
        return loss_of(moved).item<double>();
      };
      num[i] = (at(eps) - at(-eps)) / (2 * eps);
    }
    tf::testing::check_values(g, num, 1e-6, 1e-8);
  }
  const std::vector<tf::Tensor> wgrads = tape.gradient(loss, vars);
  for (size_t k = 0; k < vars.size(); ++k) {
    CAPTURE(vars[k].name());
    const tf::Tensor orig = vars[k].value();
    std::vector<double> wv = vals(orig), wn(wv.size());
    for (size_t i = 0; i < wv.size(); ++i) {
      auto at = [&](double d) {
        std::vector<double> v = wv;
        v[i] += d;
        vars[k].assign(tf::detail::from_doubles(v, orig.shape(), tf::float64));
        return loss_of(ins).item<double>();
      };
      wn[i] = (at(eps) - at(-eps)) / (2 * eps);
    }
    vars[k].assign(orig);
    tf::testing::check_values(wgrads[k], wn, 1e-6, 1e-8);
  }
}

// Summary row of `cls` holds `shape`.
void check_summary_row(const std::string& s, const std::string& cls, const std::string& shape) {
  const size_t at = s.find(cls);
  REQUIRE(at != std::string::npos);
  const size_t eol = s.find('\n', at);
  CHECK(s.substr(at, eol - at).find(shape) != std::string::npos);
}

// Literals printed by Keras 3.15 / TF 2.21 (CPU, float32), weights and inputs set from the
// patterns above (/tmp/tfvenv, keras.layers.* with layer.set_weights / variable.assign):
// Conv1DTranspose y = layer(x), gx, gk = tape.gradient(sum(square(y)), [x, layer.kernel]) for
// "S2same" Conv1DTranspose(4, 3, strides=2, padding="same") on x (2, 5, 3), "Op1"
// Conv1DTranspose(2, 3, strides=2, output_padding=1) on (1, 4, 3) and "Tanh"
// Conv1DTranspose(3, 2, activation="tanh", use_bias=False) on (2, 4, 2).
const std::vector<double> kS2same_y = {
    0.34375,  0.5625,   0.5625,   0.5625,   -1.09375, -0.46875, 0.34375, 0.34375,  0.78125,
    1.46875,  -0.5,     -0.4375,  -1.03125, -0.59375, 0.4375,   0.25,    0.90625,  1.625,
    -0.3125,  -0.625,   -0.96875, -0.71875, 0.53125,  0.15625,  1.03125, 1.78125,  -0.125,
    -0.8125,  -0.90625, -0.84375, 0.625,    0.0625,   -0.5625,  0.90625, -0.28125, -0.65625,
    0.1875,   0.75,     -1.34375, -1.40625, -1.375,   0.625,    0.375,   0.125,    0.25,
    0.625,    -1.25,    -1.5,     -1,       1.21875,  0.78125,  0.34375, 0.3125,   0.5,
    -1.15625, -1.59375, 0.84375,  -0.6875,  -0.40625, -0.53125, 0.375,   1.0625,   0.3125,
    0.375,    -0.75,    -1.5625,  -0.5625,  -0.375,   0.4375,   0.9375,  0.40625,  0.28125,
    -0.625,   -1.40625, -0.375,   -0.5625,  0.5,      0.8125,   0.5,     0.1875};

const std::vector<double> kS2same_gx = {
    -4.1953125, 7.015625,   -2.6953125, -5.71875,  5.0703125,  -2.421875,  -6.3984375, 5.21875,
    -3.0703125, -6.046875,  2.9609375,  -0.625,    4.4296875,  -1.625,     -4.53125,   6.765625,
    -0.7109375, -6.0546875, 3.2578125,  1.9453125, -7.8984375, -0.0859375, -4.09375,   6.3203125,
    2.328125,   -4.2890625, 5.2421875,  2.2421875, -3.234375,  3.171875};

const std::vector<double> kS2same_gk = {
    -11.09375, 6.5625,   4.453125,   -6.59375,  14.25,     -14.921875, 1.65625,  1.28125,
    -4.421875, 1.78125,  0.5,        -1.640625, 8.875,     -9.25,      1.84375,  10.3125,
    -8.25,     3.09375,  -10.703125, 1.140625,  9.03125,   -9.578125,  0.578125, 10.90625,
    -4.59375,  6.015625, -2.796875,  -10.59375, 14.515625, -8.5,       2.125,    -1.015625,
    -2.609375, 3.875,    -2.734375,  -0.578125};

const std::vector<double> kOp1_y = {0.34375, 0.5625,  0.4375,   1.0625,   -0.625, 0.0625, 0.46875,
                                    0.90625, -0.5625, 0.15625,  0.5,      0.75,   -0.5,   0.25,
                                    0.53125, 0.59375, -0.90625, -0.84375, -0.125, 0.25};

const std::vector<double> kOp1_gx = {-1.0859375, 3.046875, -1.3515625, 0.6171875,
                                     2.4453125,  -1.71875, 0.5859375,  2.140625,
                                     -1.6875,    -1.28125, 3.3125,     -2.25};

const std::vector<double> kOp1_gk = {2.96875,  -1.734375, 0.953125, -1.59375, 2.015625, -0.046875,
                                     -3.46875, 3.3125,    -0.5625,  -5.40625, 6.1875,   -0.4375,
                                     4.734375, -4.34375,  0.84375,  1.3125,   0,        0.75};

const std::vector<double> kTanh_y = {
    0.30270973,  -0.65342367, -0.78661889,  0.48633599,  0.68779022,  -0.062418744,
    -0.77440917, 0.38528401,  0.5545997,    0.46211714,  -0.88669509, -0.062418744,
    0.46211714,  0.53258729,  -0.73407155,  0.15499075,  0.30270973,  0.70390558,
    -0.71932757, 0.4371888,   0.5545997,    -0.79824275, 0.3583574,   0.5545997,
    0.41157004,  -0.8931933,  -0.062418744, 0.53258729,  0.46211714,  -0.6709671};

const std::vector<double> kTanh_gx = {-1.5102186, 1.2236532,   0.28324258, -0.59853077,
                                      0.9950366,  -0.47496033, -1.702455,  0.86349142,
                                      0.64137316, -1.1896523,  1.4040356,  -1.2447762,
                                      0.94632268, -0.48248625, -1.6963272, 0.88554686};

const std::vector<double> kTanh_gk = {-3.0957201, 1.1834748,  2.85883,     -3.0101624,
                                      2.420929,   -1.9538977, -0.35999119, 4.0297818,
                                      -2.2016664, 0.42636344, 1.3967687,   -3.3521671};

const std::vector<double> kGqa_out = {
    -0.17744927,  0.028897613,  0.036907982,  -0.32831085, 0.19909883,   -0.012894969,
    0.13824135,   0.02417456,   -0.087050922, 0.024682131, -0.040499039, 0.023470104,
    0.0013204422, -0.067956053, 0.06587553,   -0.13715583, 0.19933376,   0.066966146,
    -0.32588154,  0.14523177,   -0.075192384, 0.14022559,  0.0575611,    -0.22243926,
    0.079453439,  -0.14498056,  0.25413424,   0.073450185, -0.3634575,   0.15472968};

const std::vector<double> kGqa_scores = {
    0.40557048, 0.25398755, 0,          0.34044182, 0.29166076, 0,          0.38451296, 0.32382625,
    0.40739533, 0.3005988,  0.2920059,  0,          0.29580489, 0.38416311, 0,          0.320032,
    0.34168977, 0,          0.30253488, 0.35577533, 0.34459743, 0.34572959, 0.30967298, 0,
    0.33290508, 0.23668581, 0,          0.43040904, 0.31844294, 0,          0.44573888, 0.23581818,
    0.40741679, 0.29460371, 0.29797953, 0,          0.28215519, 0.35229322, 0,          0.36555159,
    0.28804681, 0,          0.41757223, 0.29438096, 0.24254407, 0.38703001, 0.37042585, 0,
    0,          0.35398778, 0.30609789, 0.33991429, 0.28044394, 0.2487793,  0.23230024, 0.23847656,
    0.51967007, 0.48032993, 0,          0,          0,          0.28776109, 0.39576161, 0.31647733,
    0.31085461, 0.25321445, 0.19871254, 0.23721842, 0.46999785, 0.53000212, 0,          0,
    0,          0.34731469, 0.30350694, 0.34917837, 0.24697985, 0.23938186, 0.24308822, 0.27055007,
    0.50586927, 0.49413073, 0,          0,          0,          0.34991291, 0.30252209, 0.34756497,
    0.3462044,  0.24018072, 0.15829839, 0.25531647, 0.48679659, 0.51320338, 0,          0};

const std::vector<double> kGqa_gq = {
    -0.00066560227, 0.0044394145,   0.010251511,    0.0026818784,  0.0077868965,  0.0072362167,
    0.0080268458,   0.0087335538,   0.010194944,    0.010985573,   -0.0010156521, -0.00050828699,
    0.00016088603,  -0.00067163602, -0.00016427075, -0.0019503401, -0.0060048667, -0.0094947908,
    0.0075036427,   0.0034491154,   -0.0022327732,  -0.0027338755, -0.0032376398, -0.0066658463,
    -0.0071669491,  -0.0091067646,  -0.0068137432,  -0.00547163,   -0.036987972,  -0.034694951};

const std::vector<double> kGqa_gv = {
    -0.12996423,  -0.10319414,  -0.1452221,   -0.11845201,  0.15049657,  -0.13370988,
    -0.085047565, -0.079808384, -0.098864749, -0.093625553, 0.11247308,  -0.10744273,
    -0.059647989, -0.022743046, -0.072093219, -0.035188269, 0.076429784, -0.047633491,
    -0.11481155,  -0.088732317, -0.13496794,  -0.1088887,   0.14941242,  -0.1290451,
    -0.22203553,  -0.12358323,  -0.25257766,  -0.15412533,  0.25588849,  -0.18466742,
    -0.30943865,  -0.17756653,  -0.35468721,  -0.22281514,  0.36476988,  -0.26806375,
    -0.12785053,  -0.081830963, -0.14417496,  -0.098155394, 0.14629309,  -0.11447982,
    -0.1465607,   -0.088223986, -0.1689451,   -0.11060838,  0.17611203,  -0.13299279};

const std::vector<double> kGqa_gkq = {
    -0.0033317362,  0.0045700632,   -0.0012411973, 0.0020760517,  0.0019709542,  -0.066312924,
    0.011719414,    -0.068598457,   -0.0029369681, 0.00057570729, 8.0455095e-05, -0.0025515892,
    -0.021025237,   0.087173209,    -0.006158011,  0.062913284,   -0.0037266447, 0.0047250632,
    0.00030422554,  -0.00014184299, 0.04734996,    0.017837655,   0.013135618,   0.029452134,
    -0.0012117303,  0.0019633393,   -0.0011103412, 0.001906018,   -0.027554709,  -0.063862488,
    -0.00026522763, -0.067622803,   0.00011019199, -0.0017573463, 0.00020230201, -0.0023333277,
    -0.019975033,   0.073150821,    -0.0018701795, 0.053981811};

const std::vector<double> kGqa_causal = {
    0.031249985,  0.16699219,   0.06640625,  -0.04687503, 1.1175871e-08, -0.11702903,
    -0.036755145, 0.011816017,  -0.23376788, 0.16970371,  -0.040499039,  0.023470104,
    0.0013204422, -0.067956053, 0.06587553,  0.054687493, -0.040039048,  0.035156246,
    0.02148436,   -0.060546875, -0.13444072, 0.22067893,  0.063719369,   -0.32997575,
    0.12602895,   -0.11947113,  0.10730374,  0.059429273, -0.29659277,   0.12412427};

const std::vector<double> kGqa_self = {
    -0.066423595, -0.0752296,   0.055168252, -0.18157811, 0.097891495,  -0.13627197,
    0.037739053,  0.032846905,  -0.29435295, 0.13753638,  -0.012695298, -0.18001303,
    0.0045572929, -0.043619782, 0.026041657, -0.13081136, 0.3978731,    0.038769923,
    -0.30240947,  0.15039408,   -0.13945794, 0.35684595,  0.0360865,    -0.2888031,
    0.14753726,   -0.13323964,  0.41211659,  0.033329021, -0.29277873,  0.13731438};

const std::vector<double> kSn_inf = {-0.40625, 0.125, -1.1875, -0.53125, 0.3125, 0.9375};

const std::vector<double> kSn_train = {-0.34761143, 0.15106159, -0.93991506,
                                       -0.44654989, 0.2994692,  0.74203819};

const std::vector<double> kSn_u = {0.15742224, -0.5604924, 0.81305993};

const std::vector<double> kSn_k = {-0.49469215, 0,           0.49469215,   -0.29681528,
                                   0.19787686,  -0.59363055, -0.098938428, 0.39575371,
                                   -0.39575371, 0.098938428, 0.59363055,   -0.19787686};

const std::vector<double> kSn_train2 = {-0.33985355, 0.15450953, -0.90715939,
                                        -0.43534404, 0.29774523, 0.71617854};

const std::vector<double> kSn_u2 = {0.03533376, -0.59326357, 0.80423248};

const std::vector<double> kSn_conv = {1.2075311,  -0.93238676, -0.72557741, -0.2379691,
                                      0.15652066, 0.53152066,  0.28789696,  -0.42564958};

const std::vector<double> kSn_cu = {-0.68031198, 0.73292267};

const std::vector<double> kSn_ck = {
    -0.37536088,  0,           0.37536088,  -0.22521652, 0.15014435, -0.45043305,
    -0.075072177, 0.30028871,  -0.30028871, 0.075072177, 0.45043305, -0.15014435,
    0.22521652,   -0.37536088, 0,           0.37536088};

}  // namespace

TEST_CASE("Conv1DTranspose matches Keras 3.15 values and gradients", "[cpu][cuda][keras]") {
  struct Case {
    const char* what;
    L::Conv1DTranspose layer;
    tf::TensorShape input, output;
    std::vector<std::pair<std::string, tf::TensorShape>> weights;
    const std::vector<double>*y, *gx, *gk;
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    std::vector<Case> cases = {
        {"s2same",
         L::Conv1DTranspose(4, 3, {.strides = 2, .padding = "same", .name = "a"}),
         {2, 5, 3},
         {2, 10, 4},
         {{"a/kernel", {3, 4, 3}}, {"a/bias", {4}}},
         &kS2same_y,
         &kS2same_gx,
         &kS2same_gk},
        {"op1",
         L::Conv1DTranspose(2, 3, {.strides = 2, .output_padding = 1, .name = "b"}),
         {1, 4, 3},
         {1, 10, 2},
         {{"b/kernel", {3, 2, 3}}, {"b/bias", {2}}},
         &kOp1_y,
         &kOp1_gx,
         &kOp1_gk},
        {"tanh",
         L::Convolution1DTranspose(3, 2, {.activation = "tanh", .use_bias = false, .name = "c"}),
         {2, 4, 2},
         {2, 5, 3},
         {{"c/kernel", {2, 3, 2}}},
         &kTanh_y,
         &kTanh_gx,
         &kTanh_gk}};
    for (Case& c : cases) {
      INFO(c.what);
      c.layer.build({tf::None, c.input[1], c.input[2]});
      set_pattern_weights(c.layer);
      CHECK(weight_list(c.layer) == c.weights);
      CHECK(c.layer.output_shape() == tf::TensorShape({tf::None, c.output[1], c.output[2]}));
      const tf::Tensor x = X(c.input);
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(x);
      const tf::Tensor y = c.layer(x);
      const tf::Tensor loss = tf::reduce_sum(tf::square(y));
      REQUIRE(y.shape() == c.output);
      tf::testing::check_values(y, *c.y, 1e-5, 1e-6);
      tf::testing::check_values(tape.gradient(loss, x), *c.gx, 1e-5, 1e-5);
      tf::testing::check_values(tape.gradient(loss, c.layer.kernel()), *c.gk, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("Conv1DTranspose gradients match central finite differences", "[cpu][keras]") {
  Float64Layers f64;
  for (const L::Conv1DTransposeOptions& o :
       {L::Conv1DTransposeOptions{.strides = 2, .padding = "same"},
        L::Conv1DTransposeOptions{.strides = 3, .output_padding = 1, .activation = "tanh"},
        L::Conv1DTransposeOptions{.padding = "same", .dilation_rate = 2}}) {
    L::Conv1DTranspose layer(2, 3, o);
    layer.build({tf::None, 4, 3});
    set_pattern_weights(layer);
    const tf::Tensor x = pattern({2, 4, 3}, 7, 3, 11, 4.0, 5, tf::float64);
    check_finite_differences(
        {x}, [&](const auto& ins) { return layer(ins[0]); }, layer.trainable_variables());
  }
}

// TF's CPU kernel has no dilated transposed convolution (Keras 3.15 raises there), so the dilated
// layer is checked against the undilated one whose kernel has the dilation's zeros in it.
TEST_CASE("Conv1DTranspose with dilation equals a kernel with zeros inserted",
          "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const char* padding : {"valid", "same"}) {
      INFO(padding);
      L::Conv1DTranspose dilated(2, 3, {.padding = padding, .dilation_rate = 2});
      L::Conv1DTranspose wide(2, 5, {.padding = padding});
      dilated.build({tf::None, 4, 3});
      wide.build({tf::None, 4, 3});
      set_pattern_weights(dilated);
      const std::vector<double> k = vals(dilated.kernel().value());  // (3, 2, 3)
      std::vector<double> kw(5 * 6, 0.0);
      for (size_t t = 0; t < 3; ++t)
        for (size_t j = 0; j < 6; ++j) kw[2 * t * 6 + j] = k[t * 6 + j];
      wide.set_weights({f32(kw, {5, 2, 3}), dilated.bias().value()});
      const tf::Tensor x = X({2, 4, 3});
      const tf::Tensor y = dilated(x);
      CHECK(y.shape() == tf::TensorShape({2, std::string(padding) == "same" ? 4 : 8, 2}));
      tf::testing::check_close(y, wide(x), 1e-6, 1e-6);
    }
  }
}

TEST_CASE("Conv1DTranspose names summary traced and errors", "[cpu][keras]") {
  // Keras 3.15: Sequential([Input((5, 3)), Conv1DTranspose(2, 3, strides=2)]).summary():
  // (None, 11, 2), 20 parameters.
  K::Sequential model({L::Conv1DTranspose(2, 3, {.strides = 2, .input_shape = {5, 3}})});
  CHECK(model.count_params() == 20);
  const std::string s = model.summary_string(140);
  INFO(s);
  check_summary_row(s, "(Conv1DTranspose)", "(None, 11, 2)");
  CHECK(L::Conv1DTranspose(2, 2).name().rfind("conv1d_transpose", 0) == 0);
  // Traced with a None batch equals eager; so does a None number of steps (each concrete
  // length traces its own graph).
  const tf::Tensor x = X({4, 5, 3});
  for (const tf::TensorSpec& spec :
       {tf::TensorSpec({tf::None, 5, 3}), tf::TensorSpec({tf::None, tf::None, 3})}) {
    tf::FunctionOptions opts;
    opts.input_signature = {spec};
    auto f = tf::function([&](const tf::Tensor& in) { return model(in); }, opts);
    tf::testing::check_close(f(x), model(x), 1e-6, 1e-6);
    const tf::Tensor part = tf::slice(x, {0, 0, 0}, {2, 5, 3});
    tf::testing::check_close(f(part), model(part), 1e-6, 1e-6);
  }
  using tf::testing::require_error;
  require_error([] { L::Conv1DTranspose(0, 3); },
                {"[Conv1DTranspose]", "filters must be positive"});
  require_error([] { L::Conv1DTranspose(2, 3, {.padding = "causal"}); },
                {"[Conv1DTranspose]", "padding", "causal"});
  require_error([] { L::Conv1DTranspose(2, 3, {.strides = 2, .output_padding = 2}); },
                {"[Conv1DTranspose]", "output_padding 2", "less than strides 2"});
  require_error([] { L::Conv1DTranspose(2, 3, {.strides = 2, .dilation_rate = 2}); },
                {"[Conv1DTranspose]", "strides > 1 together with dilation_rate > 1"});
  require_error([] { L::Conv1DTranspose(2, 3, {.data_format = "NCW"}); },
                {"[Conv1DTranspose]", "data_format must be \"channels_last\" or", "NCW"});
  require_error(
      [] {
        (void)L::Conv1DTranspose(2, 3)(tf::ones({4, 3}));
      },
      {"(Conv1DTranspose) needs inputs (batch, steps, channels) of rank 3", "(None, 3)"});
  require_error([&] { (void)model(tf::ones({1, 5, 4})); }, {"is incompatible with the layer"});
}

// GroupQueryAttention(head_dim=2, num_query_heads=4, num_key_value_heads=2) built for query
// (2, 3, 5), value (2, 4, 6), key (2, 4, 5), weights K / 2 and B / 2: out, scores =
// layer(q, v, key=k, attention_mask=am, return_attention_scores=True), gq, gv, gkq =
// tape.gradient(sum(square(out)), [q, v, query kernel]); "causal" layer(q, v, key=k,
// use_causal_mask=True); "self" a second such layer built for (q, q) and called
// layer(q, q, query_mask=qm, value_mask=qm) (a fully masked query row: Keras' fused path).
struct GqaInputs {
  tf::Tensor q = X({2, 3, 5});
  tf::Tensor v = pattern({2, 4, 6}, 3, 2, 7, 4.0, 3);
  tf::Tensor k = pattern({2, 4, 5}, 5, 4, 9, 4.0, 4);
  tf::Tensor am =
      tf::cast(tf::convert_to_tensor(std::vector<double>{1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0,
                                                         0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
                                     tf::TensorShape({2, 3, 4})),
               tf::bool_);
  tf::Tensor qm = tf::cast(
      tf::convert_to_tensor(std::vector<double>{1, 1, 0, 1, 1, 1}, tf::TensorShape({2, 3})),
      tf::bool_);
};

TEST_CASE("GroupQueryAttention matches Keras 3.15 values and gradients", "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const GqaInputs in;
    L::GroupQueryAttention gqa(2, 4, 2, {.name = "gqa"});
    gqa.build(in.q.shape(), in.v.shape(), in.k.shape());
    const std::vector<std::pair<std::string, tf::TensorShape>> want = {
        {"query/kernel", {5, 4, 2}},
        {"query/bias", {4, 2}},
        {"key/kernel", {5, 2, 2}},
        {"key/bias", {2, 2}},
        {"value/kernel", {6, 2, 2}},
        {"value/bias", {2, 2}},
        {"attention_output/kernel", {4, 2, 5}},
        {"attention_output/bias", {5}}};
    CHECK(tracked_list(gqa) == want);
    set_pattern_weights(gqa, 0.5);
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(in.q);
    tape.watch(in.v);
    const auto [out, scores] =
        gqa.call_with_scores(in.q, in.v, {.key = in.k, .attention_mask = in.am});
    const tf::Tensor loss = tf::reduce_sum(tf::square(out));
    REQUIRE(out.shape() == tf::TensorShape({2, 3, 5}));
    REQUIRE(scores.shape() == tf::TensorShape({2, 4, 3, 4}));
    tf::testing::check_values(out, kGqa_out, 1e-5, 1e-6);
    tf::testing::check_values(scores, kGqa_scores, 1e-5, 1e-6);
    tf::testing::check_values(tape.gradient(loss, in.q), kGqa_gq, 1e-4, 1e-6);
    tf::testing::check_values(tape.gradient(loss, in.v), kGqa_gv, 1e-4, 1e-6);
    tf::testing::check_values(tape.gradient(loss, gqa.query_dense().weights()[0]), kGqa_gkq, 1e-4,
                              1e-6);
    // The fused path (no scores) agrees.
    tf::testing::check_values(gqa(in.q, in.v, {.key = in.k, .attention_mask = in.am}), kGqa_out,
                              1e-5, 1e-6);
    tf::testing::check_values(gqa(in.q, in.v, {.key = in.k, .use_causal_mask = true}), kGqa_causal,
                              1e-5, 1e-6);
    L::GroupedQueryAttention self(2, 4, 2);
    self.build(in.q.shape(), in.q.shape());
    set_pattern_weights(self, 0.5);
    tf::testing::check_values(self(in.q, in.q, {.query_mask = in.qm, .value_mask = in.qm}),
                              kGqa_self, 1e-5, 1e-6);
  }
}

TEST_CASE("GroupQueryAttention gradients match central finite differences", "[cpu][keras]") {
  Float64Layers f64;
  const GqaInputs in;
  auto f64t = [](const tf::Tensor& t) { return tf::cast(t, tf::float64); };
  for (const bool scores : {false, true}) {
    CAPTURE(scores);
    L::GroupQueryAttention gqa(2, 6, 3);
    gqa.build(in.q.shape(), in.v.shape(), in.k.shape());
    set_pattern_weights(gqa, 0.5);
    check_finite_differences(
        {f64t(in.q), f64t(in.v), f64t(in.k)},
        [&](const auto& ins) {
          const L::MultiHeadAttentionCall a{.key = ins[2], .attention_mask = in.am};
          return scores ? gqa.call_with_scores(ins[0], ins[1], a).output : gqa(ins[0], ins[1], a);
        },
        gqa.trainable_variables());
  }
}

TEST_CASE("GroupQueryAttention summary traced and errors", "[cpu][keras]") {
  L::GroupQueryAttention gqa(4, 4, 2);
  CHECK(gqa.name().rfind("grouped_query_attention", 0) == 0);
  K::Sequential model({gqa});
  model.build({tf::None, 6, 8});
  // Keras: 8*4*4+16 + 2*(8*2*4+8) + 4*4*8+8 = 144 + 144 + 136 = 424 parameters.
  CHECK(model.count_params() == 424);
  const std::string s = model.summary_string(140);
  INFO(s);
  check_summary_row(s, "(GroupedQueryAttention)", "(None, 6, 8)");
  const tf::Tensor x = X({3, 6, 8});
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 6, 8})};
  auto f = tf::function([&](const tf::Tensor& in) { return model(in); }, opts);
  tf::testing::check_close(f(x), model(x), 1e-6, 1e-6);
  auto g = tf::function(
      [&](const tf::Tensor& q, const tf::Tensor& v) {
        return gqa(q, v, {.use_causal_mask = true});
      },
      {.input_signature = {tf::TensorSpec({tf::None, 6, 8}), tf::TensorSpec({tf::None, 6, 8})}});
  const tf::Tensor v = tf::slice(X({4, 6, 8}), {1, 0, 0}, {3, 6, 8});
  tf::testing::check_close(g(x, v), gqa(x, v, {.use_causal_mask = true}), 1e-6, 1e-6);
  using tf::testing::require_error;
  require_error([] { L::GroupQueryAttention(4, 6, 4); },
                {"[GroupQueryAttention]",
                 "num_query_heads must be divisible by "
                 "num_key_value_heads",
                 "num_query_heads=6, num_key_value_heads=4"});
  require_error([] { L::GroupQueryAttention(0, 2, 1); }, {"head_dim must be positive"});
  require_error([] { L::GroupQueryAttention(2, 2, 1, {.dropout = 1.0}); }, {"dropout"});
  require_error([&] { (void)gqa(tf::ones({2, 6})); }, {"expected ndim=3", "(2, 6)"});
  require_error(
      [&] {
        (void)gqa(x, tf::ones({3, 6, 5}));
      },
      {"was built for value and key features 8 and 8", "(3, 6, 5)"});
  require_error(
      [&] {
        (void)gqa(x, x, {.attention_mask = tf::ones({3, 6, 5})});
      },
      {"attention_mask of shape (3, 6, 5) does not broadcast", "(3, 6, 6)"});
  require_error(
      [&] {
        (void)gqa(x, x, {.query_mask = tf::ones({3, 5})});
      },
      {"query_mask must have shape (batch, T)", "(3, 5)"});
}

// SpectralNormalization(Dense(3)) built for (None, 4): kernel K (4, 3), bias B (3,), vector_u
// [[0.3, -0.2, 0.5]], x = X (2, 4): "inf" layer(x, training=False), "train" layer(x,
// training=True) and then vector_u "u" and the dense kernel "k"; "train2" / "u2" a second
// training call. SpectralNormalization(Conv2D(2, 2), power_iterations=3) built for (None, 3, 3,
// 2): kernel K, bias B, vector_u [[0.1, 0.7]], x = X (1, 3, 3, 2): "conv" layer(x,
// training=True), then vector_u "cu" and kernel "ck".
TEST_CASE("SpectralNormalization matches Keras 3.15", "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    L::Dense dense(3, {.name = "dense"});
    L::SpectralNormalization sn(dense, 1, "sn");
    sn.build({tf::None, 4});
    // The checkpoint names: the wrapper's own weight, then the wrapped layer's.
    const std::vector<std::pair<std::string, tf::TensorShape>> want = {
        {"sn/vector_u", {1, 3}}, {"dense/kernel", {4, 3}}, {"dense/bias", {3}}};
    CHECK(tracked_list(sn) == want);
    // Keras' weights order: dense/kernel, vector_u, dense/bias (its wrapper tracks the kernel as
    // its own weight).
    const std::vector<std::pair<std::string, tf::TensorShape>> keras_order = {
        {"dense/kernel", {4, 3}}, {"sn/vector_u", {1, 3}}, {"dense/bias", {3}}};
    CHECK(weight_list(sn) == keras_order);
    CHECK(sn.trainable_variables().size() == 2);
    CHECK(sn.non_trainable_variables().size() == 1);
    CHECK(sn.count_params() == 18);
    CHECK(sn.layer().name() == "dense");
    dense.kernel().assign(Kp({4, 3}));
    dense.bias().assign(Bp({3}));
    sn.vector_u().assign(f32({0.3, -0.2, 0.5}, {1, 3}));
    const tf::Tensor x = X({2, 4});
    tf::testing::check_values(sn(x, false), kSn_inf, 1e-6, 1e-6);
    tf::testing::check_values(sn(x, true), kSn_train, 1e-5, 1e-6);
    tf::testing::check_values(sn.vector_u().value(), kSn_u, 1e-5, 1e-6);
    tf::testing::check_values(dense.kernel().value(), kSn_k, 1e-5, 1e-6);
    tf::testing::check_values(sn(x, true), kSn_train2, 1e-5, 1e-6);
    tf::testing::check_values(sn.vector_u().value(), kSn_u2, 1e-5, 1e-6);

    L::Conv2D conv(2, 2);
    L::SpectralNormalization snc(conv, 3);
    snc.build({tf::None, 3, 3, 2});
    CHECK(snc.vector_u().shape() == tf::TensorShape({1, 2}));
    conv.kernel().assign(Kp({2, 2, 2, 2}));
    conv.bias().assign(Bp({2}));
    snc.vector_u().assign(f32({0.1, 0.7}, {1, 2}));
    tf::testing::check_values(snc(X({1, 3, 3, 2}), true), kSn_conv, 1e-5, 1e-6);
    tf::testing::check_values(snc.vector_u().value(), kSn_cu, 1e-5, 1e-6);
    tf::testing::check_values(conv.kernel().value(), kSn_ck, 1e-5, 1e-6);
  }
}

TEST_CASE("SpectralNormalization weights follow Keras order in get_weights and set_weights",
          "[cpu][cuda][keras]") {
  // Keras 3.15: sn = SpectralNormalization(Dense(3)); sn.build((None, 4)); [w.path for w in
  // sn.weights] is [".../dense/kernel", ".../vector_u", ".../dense/bias"] (trainable: kernel,
  // bias); sn.set_weights([K, u, b]); sn(x, training=True) gives y, then get_weights() the
  // normalised kernel, the new vector_u and the bias.
  const tf::Tensor k = tf::constant(
      {{0.5f, -0.2f, 0.1f}, {0.3f, 0.8f, -0.4f}, {-0.6f, 0.2f, 0.7f}, {0.1f, -0.3f, 0.2f}});
  const tf::Tensor u = tf::constant({{0.6f, -0.3f, 0.2f}});
  const tf::Tensor b = tf::constant({0.1f, -0.2f, 0.05f});
  const tf::Tensor x = tf::constant({{1.0f, -0.5f, 0.25f, 2.0f}, {-1.5f, 0.5f, 1.0f, 0.0f}});
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    L::Dense dense(3);
    L::SpectralNormalization sn(dense);
    sn.build({tf::None, 4});
    const std::vector<tf::Variable> w = sn.weights();
    REQUIRE(w.size() == 3);
    CHECK(w[0].handle_id() == dense.kernel().handle_id());
    CHECK(w[1].handle_id() == sn.vector_u().handle_id());
    CHECK(w[2].handle_id() == dense.bias().handle_id());
    const std::vector<tf::Variable> tw = sn.trainable_variables();
    REQUIRE(tw.size() == 2);
    CHECK(tw[0].handle_id() == dense.kernel().handle_id());
    CHECK(tw[1].handle_id() == dense.bias().handle_id());
    sn.set_weights({k, u, b});
    tf::testing::check_values(sn(x, true),
                              {0.5640547871589661, -1.5341575145721436, 1.065119743347168,
                               -1.2921643257141113, 0.8441233038902283, 0.4560478925704956},
                              1e-5, 1e-6);
    const std::vector<tf::Tensor> after = sn.get_weights();
    REQUIRE(after.size() == 3);
    tf::testing::check_values(
        after[0],
        {0.5800684690475464, -0.23202739655971527, 0.11601369827985764, 0.3480410873889923,
         0.9281095862388611, -0.46405479311943054, -0.6960821747779846, 0.23202739655971527,
         0.8120958209037781, 0.11601369827985764, -0.3480410873889923, 0.23202739655971527},
        1e-5, 1e-6);
    tf::testing::check_values(
        after[1], {0.7364469170570374, -0.6617031097412109, -0.14069433510303497}, 1e-5, 1e-6);
    tf::testing::check_values(after[2], {0.1, -0.2, 0.05}, 1e-7, 0);
    // Arrays in the old order (vector_u first) no longer fit: the shapes name the mismatch.
    tf::testing::require_error(
        [&] {
          sn.set_weights({u, k, b});
        },
        {"set_weights", "(4, 3)", "(1, 3)"});
  }
}

TEST_CASE("SpectralNormalization traced training summary and errors", "[cpu][keras]") {
  // A traced training call updates vector_u and the kernel as an eager one does.
  const tf::Tensor x = X({2, 4});
  L::Dense dense(3);
  L::SpectralNormalization sn(dense);
  sn.build({tf::None, 4});
  auto reset = [&] {
    dense.kernel().assign(Kp({4, 3}));
    dense.bias().assign(Bp({3}));
    sn.vector_u().assign(f32({0.3, -0.2, 0.5}, {1, 3}));
  };
  reset();
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 4})};
  auto f = tf::function([&](const tf::Tensor& in) { return sn(in, true); }, opts);
  tf::testing::check_values(f(x), kSn_train, 1e-5, 1e-6);
  tf::testing::check_values(sn.vector_u().value(), kSn_u, 1e-5, 1e-6);
  tf::testing::check_values(f(x), kSn_train2, 1e-5, 1e-6);
  tf::testing::check_values(sn.vector_u().value(), kSn_u2, 1e-5, 1e-6);
  // Gradients reach the wrapped kernel (not through sigma): those of the updated kernel.
  reset();
  tf::GradientTape tape;
  const tf::Tensor y = sn(x, true);
  const tf::Tensor gk = tape.gradient(tf::reduce_sum(y), dense.kernel());
  tf::testing::check_close(gk, tf::matmul(x, tf::ones({2, 3}), true, false), 1e-6, 1e-6);
  // An all-zero kernel stays as it is (Keras' cond), and so does vector_u (from the call above).
  dense.kernel().assign(tf::zeros({4, 3}));
  (void)sn(x, true);
  tf::testing::check_values(dense.kernel().value(), std::vector<double>(12, 0.0), 0, 0);
  tf::testing::check_values(sn.vector_u().value(), kSn_u, 1e-5, 1e-6);
  // Keras 3.15: Sequential([Input((4,)), SpectralNormalization(Dense(3))]).summary():
  // (None, 3), 18 parameters.
  K::Sequential model({L::SpectralNormalization(L::Dense(3))});
  model.build({tf::None, 4});
  CHECK(model.count_params() == 18);
  const std::string s = model.summary_string(140);
  INFO(s);
  check_summary_row(s, "(SpectralNormalization)", "(None, 3)");
  using tf::testing::require_error;
  require_error(
      [] {
        L::SpectralNormalization(L::Flatten()).build({tf::None, 4, 2});
      },
      {"(SpectralNormalization)", "no weight \"kernel\" nor \"embeddings\"", "(Flatten)",
       "(None, 4, 2)"});
  require_error([] { L::SpectralNormalization(L::Dense(2), 0); },
                {"[SpectralNormalization]", "power_iterations must be positive"});
  require_error([] { L::SpectralNormalization(K::Layer()); }, {"needs a layer to wrap"});
}

TEST_CASE("GroupQueryAttention self-attention masks and dropout", "[cpu][keras]") {
  const GqaInputs in;
  L::GroupQueryAttention gqa(2, 4, 2, {.dropout = 0.5, .seed = 7});
  gqa.build(in.q.shape(), in.q.shape());
  set_pattern_weights(gqa, 0.5);
  L::GroupQueryAttention plain(2, 4, 2);
  plain.build(in.q.shape(), in.q.shape());
  set_pattern_weights(plain, 0.5);
  // The plain call is self-attention; with a mask (Keras' layer(x, x) on a masked x) the mask is
  // the query's and the value's: Keras 3.15's "self" literal.
  tf::testing::check_values(plain.call_with_mask(in.q, in.qm, false).output, kGqa_self, 1e-5, 1e-6);
  tf::testing::check_close(plain(in.q), plain(in.q, in.q), 0, 0);
  // Dropout only in training: inference equals the layer without dropout (Keras' explicit path,
  // so the fully masked row's output is the output bias alone), training differs from it and
  // its scores are those of inference.
  const L::MultiHeadAttentionCall masked{.query_mask = in.qm, .value_mask = in.qm};
  const auto ref = plain.call_with_scores(in.q, in.q, masked);
  tf::testing::check_close(gqa(in.q, in.q, masked), ref.output, 1e-6, 1e-6);
  L::MultiHeadAttentionCall train = masked;
  train.training = true;
  const auto dropped = gqa.call_with_scores(in.q, in.q, train);
  tf::testing::check_close(dropped.scores, ref.scores, 1e-6, 1e-6);
  CHECK(tf::reduce_max(tf::abs(dropped.output - ref.output)).item<float>() > 1e-3f);
  const std::vector<double> y = vals(ref.output), bias = vals(plain.output_dense().weights()[1]);
  for (size_t e = 0; e < 5; ++e) CHECK(y[2 * 5 + e] == Approx(bias[e]).epsilon(1e-6));
}

TEST_CASE("SpectralNormalization wraps Embedding and trains in a model", "[cpu][keras]") {
  L::Embedding emb(6, 4);
  L::SpectralNormalization sn(emb);
  const tf::Tensor ids = tf::cast(
      tf::convert_to_tensor(std::vector<double>{0, 5, 2, 3}, tf::TensorShape({2, 2})), tf::int32);
  const tf::Tensor eager = sn(ids);
  CHECK(eager.shape() == tf::TensorShape({2, 2, 4}));
  // Keras 3.15 casts the output to the ids' int32; tapeflow keeps the float embeddings.
  CHECK(eager.dtype() == tf::float32);
  tf::testing::check_close(eager, emb(ids), 0, 0);
  CHECK(sn.vector_u().shape() == tf::TensorShape({1, 4}));
  // In training the embeddings are divided by their largest singular value: afterwards the
  // power iteration from the new vector_u sees sigma close to 1.
  for (int i = 0; i < 30; ++i) (void)sn(ids, true);
  const tf::Tensor w = emb.weights()[0].value();
  const tf::Tensor u = sn.vector_u().value();
  const tf::Tensor v = tf::matmul(u, w, false, true);
  const double sigma = tf::reduce_sum(tf::matmul(v, w) * u).item<float>() /
                       tf::reduce_sum(tf::square(v)).item<float>();
  CHECK(sigma == Approx(1.0).epsilon(1e-3));

  // fit runs the training assignments inside its traced step; the loss goes down and vector_u
  // moves.
  tf::random::set_seed(5);
  K::Sequential model({L::SpectralNormalization(L::Dense(8, {.activation = "tanh"})),
                       L::SpectralNormalization(L::Dense(1))});
  model.build({tf::None, 3});
  const tf::Tensor x = tf::random::normal({32, 3}, 0, 1, tf::float32, 1);
  const tf::Tensor y = tf::reduce_sum(x, {1}, true) * tf::Tensor(0.3f);
  const tf::Tensor u0 = model.non_trainable_variables()[0].value();
  model.compile(K::optimizers::Adam(1e-2), K::losses::MeanSquaredError());
  const auto h = model.fit(x, y, {.epochs = 20, .batch_size = 8, .verbose = 0});
  const auto& loss = h.history.at("loss");
  CHECK(loss.back() < 0.7 * loss.front());
  CHECK(tf::reduce_max(tf::abs(model.non_trainable_variables()[0].value() - u0)).item<float>() >
        1e-4f);
}

TEST_CASE("the constructor spellings of docs/keras.md configure the kerasmore layers",
          "[cpu][keras]") {
  L::Conv1DTranspose c(8, 3, {.strides = 2, .padding = "same"});
  CHECK(c(tf::ones({1, 5, 2})).shape() == tf::TensorShape({1, 10, 8}));
  L::SpectralNormalization d(L::Dense(10));
  CHECK(d(tf::ones({2, 3})).shape() == tf::TensorShape({2, 10}));
  L::SpectralNormalization e(L::Conv2D(8, 3), /*power_iterations=*/2);
  CHECK(e(tf::ones({1, 5, 5, 2}), true).shape() == tf::TensorShape({1, 3, 3, 8}));
  L::GroupQueryAttention g(16, 8, 2);
  const tf::Tensor q = tf::ones({2, 3, 4}), v = tf::ones({2, 5, 4});
  const auto [out, scores] = g.call_with_scores(q, v);
  CHECK(out.shape() == tf::TensorShape({2, 3, 4}));
  CHECK(scores.shape() == tf::TensorShape({2, 8, 3, 5}));
  CHECK(g(q, v, {.key = v, .use_causal_mask = true}).shape() == tf::TensorShape({2, 3, 4}));
  CHECK(g.query_dense().weights()[0].shape() == tf::TensorShape({4, 8, 16}));
  CHECK(g.key_dense().weights()[0].shape() == tf::TensorShape({4, 2, 16}));
  CHECK(g.output_dense().weights()[0].shape() == tf::TensorShape({8, 16, 4}));
}

TEST_CASE("SpectralNormalization trains under mixed_float16", "[cpu][keras]") {
  // The power iteration reads the float32 variables and assigns float32 (Keras casts to the
  // variables' dtypes); the output is float16.
  namespace mp = tf::keras::mixed_precision;
  mp::set_global_policy("mixed_float16");
  L::Dense dense(3);
  L::SpectralNormalization sn(dense);
  mp::reset_global_policy();
  const tf::Tensor x = tf::ones({2, 4});
  const tf::Tensor y = sn(x, true);
  CHECK(y.dtype() == tf::float16);
  CHECK(sn.vector_u().dtype() == tf::float32);
  CHECK(dense.kernel().dtype() == tf::float32);
  // vector_u carries the power iteration over the calls: after a few training calls the
  // kernel's largest singular value is 1.
  for (int i = 0; i < 20; ++i) CHECK(sn(x, true).dtype() == tf::float16);
  const tf::Tensor s = tf::linalg::svd(dense.kernel().value(), false, false).s;
  CHECK(tf::detail::to_double_vector(s)[0] == Approx(1.0).epsilon(1e-3));
}

TEST_CASE("Conv1DTranspose on zero steps gives Keras' bias-only output", "[cpu][keras]") {
  // Keras 3.15: Conv1DTranspose(4, 3, bias_initializer=Constant(0.5)) on (2, 0, 3) gives
  // (2, 2, 4) of 0.5; with padding="same", (2, 0, 4).
  L::Conv1DTranspose valid(4, 3, {.bias_initializer = tf::keras::initializers::Constant(0.5)});
  const tf::Tensor y = valid(tf::zeros({2, 0, 3}));
  CHECK(y.shape() == tf::TensorShape({2, 2, 4}));
  tf::testing::check_values(y, std::vector<double>(16, 0.5));
  L::Conv1DTranspose same(4, 3, {.padding = "same"});
  CHECK(same(tf::zeros({2, 0, 3})).shape() == tf::TensorShape({2, 0, 4}));
}

// Keras 3.15 GroupQueryAttention(2, 4, 2) with the weights and inputs of GqaInputs (K / 2, B / 2):
// "mask4" layer(q, v, key=k, attention_mask=am4, return_attention_scores=True), am4 the (2, 4, 3,
// 4) mask (arange(96) * 5 + 1) % 7 != 0, "mask4b1" with am4[:1]; "window" a layer with
// sliding_window=2 built for (q, q): layer(q, q) and layer(q, q, use_causal_mask=True,
// return_attention_scores=True); "gate" a layer with use_gate=True: out = layer(q, v, key=k),
// tf.GradientTape gradients of sum(square(out)) for q and gate/kernel.
namespace {
const std::vector<double> kGqa_mask4_out = {
    -0.091929734, 0.044365764,  -0.0013374761, -0.14881131,  0.066216394, -0.06901595,
    0.027443588,  -0.012221249, -0.19170469,   0.083257303,  -0.1166471,  0.022663854,
    0.039033119,  -0.26521888,  0.21744895,    -0.088539198, 0.1260733,   0.052252956,
    -0.24453926,  0.081430107,  -0.087659173,  0.18455093,   0.054866783, -0.26498041,
    0.11708632,   -0.029317867, 0.034492612,   0.086546488,  -0.16351251, 0.091284476};
const std::vector<double> kGqa_mask4_scores = {
    0.32180712, 0.20153095, 0.20653233, 0.27012962, 0,          0.35452524, 0.35038775, 0.29508698,
    0.40739533, 0.3005988,  0.2920059,  0,          0.21331702, 0.27703571, 0.27885908, 0.23078816,
    0.33507797, 0.31603104, 0,          0.34889096, 0.24923854, 0.2500574,  0.22397856, 0.27672559,
    0.33431306, 0,          0.23345752, 0.4322294,  0.2219664,  0.30296326, 0.31069633, 0.1643739,
    0,          0.29086351, 0.29419649, 0.41493994, 0.29053342, 0.36275417, 0.34671232, 0,
    0.20188949, 0.29910865, 0.29267275, 0.20632908, 0.26526147, 0.42328039, 0,          0.31145817,
    0.28663576, 0.25252223, 0.21835931, 0.24248272, 0.3733176,  0,          0.30923033, 0.31745204,
    0.27067697, 0.25018615, 0.23559844, 0.24353836, 0,          0.28776109, 0.39576161, 0.31647733,
    0.40752766, 0.3319619,  0.26051039, 0,          0.2175342,  0.24530661, 0.28226885, 0.25489038,
    0.35829967, 0.31999159, 0,          0.32170868, 0.24697985, 0.23938186, 0.24308822, 0.27055007,
    0.33525848, 0,          0.32388067, 0.34086096, 0.28241625, 0.25109181, 0.21708493, 0.24940698,
    0,          0.36736366, 0.24212214, 0.39051425, 0.31085786, 0.32772067, 0.36142147, 0};
const std::vector<double> kGqa_mask4b1_out = {
    -0.091929734, 0.044365764,  -0.0013374761, -0.14881131,  0.066216394, -0.06901595,
    0.027443588,  -0.012221249, -0.19170469,   0.083257295,  -0.1166471,  0.022663854,
    0.039033119,  -0.26521888,  0.21744895,    -0.028361581, 0.046094112, 0.083057173,
    -0.15779538,  0.082860909,  -0.07100974,   0.14223072,   0.069377154, -0.22632068,
    0.085382938,  -0.12869906,  0.24328163,    0.043000139,  -0.29806423, 0.10049392};
const std::vector<double> kGqa_window_out = {
    -0.066423595, -0.0752296,    0.055168252, -0.18157811,  0.097891495, -0.056602959,
    -0.11654294,  -0.0063082501, -0.10727268, 0.050718382,  0.11698344,  -0.4948715,
    0.030030232,  0.15005916,    -0.09224765, -0.032252781, 0.36871025,  0.027222518,
    -0.13674626,  0.052891396,   -0.13945794, 0.35684595,   0.0360865,   -0.2888031,
    0.14753726,   -0.19596827,   0.54991257,  0.074374244,  -0.4533546,  0.19442327};
const std::vector<double> kGqa_window_causal_out = {
    -0.27832028, 0.4541015,   -0.052734364, -0.41992182,  0.26171872,  -0.13627195,
    0.037739046, 0.032846905, -0.29435295,  0.13753638,   0.11698344,  -0.4948715,
    0.030030228, 0.15005916,  -0.09224765,  -0.018554688, 0.15234375,  -0.052734375,
    0.02148436,  0.027343754, -0.051180027, 0.32326099,   0.022827566, -0.1187361,
    0.053387746, -0.19596827, 0.54991257,   0.074374244,  -0.4533546,  0.19442327};
const std::vector<double> kGqa_window_causal_scores = {
    0.99999994, 0, 0, 0.51699787, 0.48300219, 0, 0, 0.49274987, 0.50725007,
    0.99999994, 0, 0, 0.50746584, 0.49253413, 0, 0, 0.47249275, 0.52750725,
    0.99999994, 0, 0, 0.63044536, 0.36955464, 0, 0, 0.50284839, 0.49715155,
    0.99999994, 0, 0, 0.55557323, 0.44442677, 0, 0, 0.48903954, 0.51096046,
    0.99999994, 0, 0, 0.50310737, 0.49689266, 0, 0, 0.47981286, 0.52018714,
    0.99999994, 0, 0, 0.55697942, 0.44302061, 0, 0, 0.54112315, 0.45887685,
    0.99999994, 0, 0, 0.53481549, 0.46518445, 0, 0, 0.49723792, 0.50276214,
    0.99999994, 0, 0, 0.64072096, 0.35927901, 0, 0, 0.53176486, 0.46823511};
const std::vector<double> kGqa_gate_out = {
    -0.094953276, 0.093279094,  0.010976736,  -0.16327512,  0.099147938,  -0.071257181,
    0.085491724,  0.0044057248, -0.15722811,  0.092023239,  -0.082441986, 0.076574862,
    0.014711566,  -0.16410835,  0.097084932,  -0.071076006, 0.12866715,   0.028101297,
    -0.1772479,   0.074845888,  -0.077039585, 0.13332285,   0.03016598,   -0.1767416,
    0.075135335,  -0.072455108, 0.12419191,   0.031789042,  -0.18147855,  0.078074902};
const std::vector<double> kGqa_gate_gq = {
    -0.00062841247, 0.00097185455,  0.0030858605,  0.0056128958,  0.0072131618,   -0.0024078274,
    -0.0013386513,  0.00060814118,  0.0016162603,  0.0026854365,  -0.00031375594, 0.00099861063,
    0.003282791,    0.0039010413,   0.0052134078,  -0.0023887204, -0.001912985,   -0.0014557277,
    -0.00052848365, -5.2748248e-05, -0.001757581,  -0.001300848,  -0.0014464161,  -0.0019706828,
    -0.0015139496,  -0.0027419832,  -0.0023422202, -0.002280642,  -0.00045231555, -5.2552088e-05};
const std::vector<double> kGqa_gate_gkernel = {
    -0.0030656673, -0.0022851552, -0.0010158698, -4.9630122e-05, -0.0027019565, -0.0013887429,
    -0.0027402521, 0.00029354542, 0.0069852034,  0.0019592675,   0.0013841968,  0.00032592856,
    0.0083681904,  0.00010314691, 0.006085821,   -0.00047607001, -0.0098607987, 0.0036558202,
    -0.0019661679, 0.00078344916, -0.0087981569, 0.017612381,    -0.012064259,  0.0069987522,
    0.0041858554,  0.00020596629, 0.0006666726,  7.2801078e-05,  0.0036160504,  -0.0072991592,
    0.0050963,     -0.0024407378, 0.0066023222,  -0.0019835923,  0.0013566681,  -0.00071246736,
    0.0075756977,  -0.0059445174, 0.006380219,   -0.0026720564};
}  // namespace

tf::Tensor gqa_mask4() {
  std::vector<double> m(96);
  for (size_t i = 0; i < m.size(); ++i) m[i] = (i * 5 + 1) % 7 != 0;
  return tf::cast(tf::convert_to_tensor(m, tf::TensorShape({2, 4, 3, 4})), tf::bool_);
}

TEST_CASE("GroupQueryAttention per-head masks sliding window and gate match Keras 3.15",
          "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const GqaInputs in;
    const tf::Tensor am4 = gqa_mask4();
    L::GroupQueryAttention gqa(2, 4, 2);
    gqa.build(in.q.shape(), in.v.shape(), in.k.shape());
    set_pattern_weights(gqa, 0.5);
    const auto [out, scores] =
        gqa.call_with_scores(in.q, in.v, {.key = in.k, .attention_mask = am4});
    tf::testing::check_values(out, kGqa_mask4_out, 1e-5, 1e-6);
    tf::testing::check_values(scores, kGqa_mask4_scores, 1e-5, 1e-6);
    tf::testing::check_values(gqa(in.q, in.v, {.key = in.k, .attention_mask = am4}), kGqa_mask4_out,
                              1e-5, 1e-6);
    const tf::Tensor am4b1 = tf::slice(am4, {0, 0, 0, 0}, {1, 4, 3, 4});
    tf::testing::check_values(gqa(in.q, in.v, {.key = in.k, .attention_mask = am4b1}),
                              kGqa_mask4b1_out, 1e-5, 1e-6);
    // A rank-4 mask with the causal mask: each head's mask and the causal mask, per batch row.
    const tf::Tensor causal4 =
        tf::logical_and(am4, tf::cast(tf::linalg::band_part(tf::ones({3, 4}), -1, 0), tf::bool_));
    tf::testing::check_close(
        gqa(in.q, in.v, {.key = in.k, .attention_mask = am4, .use_causal_mask = true}),
        gqa(in.q, in.v, {.key = in.k, .attention_mask = causal4}), 1e-6, 1e-6);

    L::GroupQueryAttention window(2, 4, 2, {.sliding_window = 2});
    window.build(in.q.shape(), in.q.shape());
    set_pattern_weights(window, 0.5);
    tf::testing::check_values(window(in.q), kGqa_window_out, 1e-5, 1e-6);
    const auto [wout, wscores] = window.call_with_scores(in.q, in.q, {.use_causal_mask = true});
    tf::testing::check_values(wout, kGqa_window_causal_out, 1e-5, 1e-6);
    tf::testing::check_values(wscores, kGqa_window_causal_scores, 1e-5, 1e-6);

    L::GroupQueryAttention gated(2, 4, 2, {.use_gate = true});
    gated.build(in.q.shape(), in.v.shape(), in.k.shape());
    const std::vector<std::pair<std::string, tf::TensorShape>> want = {
        {"query/kernel", {5, 4, 2}},
        {"query/bias", {4, 2}},
        {"key/kernel", {5, 2, 2}},
        {"key/bias", {2, 2}},
        {"gate/kernel", {5, 4, 2}},
        {"gate/bias", {4, 2}},
        {"value/kernel", {6, 2, 2}},
        {"value/bias", {2, 2}},
        {"attention_output/kernel", {4, 2, 5}},
        {"attention_output/bias", {5}}};
    CHECK(tracked_list(gated) == want);
    set_pattern_weights(gated, 0.5);
    REQUIRE(gated.gate_dense().defined());
    CHECK_FALSE(gqa.gate_dense().defined());
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(in.q);
    const tf::Tensor gout = gated(in.q, in.v, {.key = in.k});
    const tf::Tensor loss = tf::reduce_sum(tf::square(gout));
    tf::testing::check_values(gout, kGqa_gate_out, 1e-5, 1e-6);
    tf::testing::check_values(tape.gradient(loss, in.q), kGqa_gate_gq, 1e-4, 1e-6);
    tf::testing::check_values(tape.gradient(loss, gated.gate_dense().weights()[0]),
                              kGqa_gate_gkernel, 1e-4, 1e-6);
  }
}

TEST_CASE(
    "GroupQueryAttention gate and window gradients match finite differences traced and errors",
    "[cpu][keras]") {
  using tf::testing::require_error;
  const GqaInputs in;
  {
    Float64Layers f64;
    auto f64t = [](const tf::Tensor& t) { return tf::cast(t, tf::float64); };
    L::GroupQueryAttention gqa(2, 4, 2, {.sliding_window = 3, .use_gate = true});
    gqa.build(in.q.shape(), in.v.shape(), in.k.shape());
    set_pattern_weights(gqa, 0.5);
    check_finite_differences(
        {f64t(in.q), f64t(in.v), f64t(in.k)},
        [&](const auto& ins) {
          return gqa(ins[0], ins[1], {.key = ins[2], .attention_mask = gqa_mask4()});
        },
        gqa.trainable_variables());
  }
  // Traced (unknown batch) equals eager, with the window and a per-head mask.
  L::GroupQueryAttention gqa(2, 4, 2, {.sliding_window = 2, .use_gate = true});
  gqa.build(in.q.shape(), in.v.shape(), in.k.shape());
  set_pattern_weights(gqa, 0.5);
  const tf::Tensor am4 = gqa_mask4();
  auto traced = tf::function(
      [&](tf::Tensor q, tf::Tensor v, tf::Tensor k, tf::Tensor m) {
        return gqa(q, v, {.key = k, .attention_mask = m});
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3, 5}, tf::float32),
                                              tf::TensorSpec({tf::None, 4, 6}, tf::float32),
                                              tf::TensorSpec({tf::None, 4, 5}, tf::float32),
                                              tf::TensorSpec({tf::None, 4, 3, 4}, tf::bool_)}});
  tf::testing::check_close(traced(in.q, in.v, in.k, am4),
                           gqa(in.q, in.v, {.key = in.k, .attention_mask = am4}), 1e-6, 1e-6);
  // Mixed precision: the gate computes in float16 and the output is float16.
  {
    K::mixed_precision::set_global_policy("mixed_float16");
    L::GroupQueryAttention half(2, 4, 2, {.use_gate = true});
    K::mixed_precision::reset_global_policy();
    const tf::Tensor y = half(in.q, in.v, {.key = in.k, .attention_mask = am4});
    CHECK(y.dtype() == tf::float16);
    CHECK(tf::reduce_all(tf::math::is_finite(y)).item<bool>());
  }
  require_error([] { L::GroupQueryAttention(2, 4, 2, {.sliding_window = 0}); },
                {"[GroupQueryAttention]", "sliding_window must be unset or a positive integer"});
  require_error(
      [&] {
        (void)gqa(in.q, in.v, {.key = in.k, .attention_mask = tf::ones({2, 3, 3, 4}, tf::bool_)});
      },
      {"attention_mask of shape (2, 3, 3, 4) does not broadcast",
       "(batch, num_query_heads, T, S) = (2, 4, 3, 4)"});
  L::GroupQueryAttention selfwin(2, 4, 2, {.sliding_window = 2});
  auto unknown_self = tf::function(
      [&](tf::Tensor q) { return selfwin(q); },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({2, tf::None, 5}, tf::float32)}});
  // An unknown sequence length: the window follows each call's length (one trace per length).
  tf::testing::check_close(unknown_self(in.q), selfwin(in.q), 1e-6, 1e-6);
  const tf::Tensor q5 = X({2, 5, 5});
  tf::testing::check_close(unknown_self(q5), selfwin(q5), 1e-6, 1e-6);
}
