// The layers of keras/layers_extra.h (and SpatialDropout3D) against Keras 3.15.1 on TF 2.21:
// RMSNormalization values and gradients (tf.GradientTape of sum(y * cos(0.3 i)) with
// scale = 1 + 0.1 cos(i)), the adaptive poolings, CategoryEncoding, Discretization,
// IntegerLookup, AlphaDropout's statistics, Lambda's output shapes, float64 finite
// differences, traced functions with a None batch, and every device.
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_extra.h"
#include "keras/layers_misc.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace layers = tf::keras::layers;
using tf::testing::check_values;

namespace {

std::vector<double> vals(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}
// sin(a * i) in float32, the reference script's inputs.
tf::Tensor sines(const tf::TensorShape& shape, double a) {
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(a * double(i)));
  return tf::constant(v, shape);
}
// sin(0.37 i) * 2 + 0.1 i, (2, 3, 4), float32.
tf::Tensor x24() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i)
    v[i] = static_cast<float>(std::sin(0.37 * i) * 2.0) + 0.1f * static_cast<float>(i);
  return tf::constant(v, {2, 3, 4});
}
tf::Tensor cotangent(const tf::TensorShape& shape, tf::DType dtype) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.3 * double(i));
  return tf::cast(tf::convert_to_tensor(v, shape), dtype);
}
// Sets the RMSNormalization scale to 1 + 0.1 cos(i).
void set_scale(const layers::RMSNormalization& l) {
  tf::Variable s = l.scale();
  std::vector<double> v(static_cast<size_t>(s.shape().num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1 + 0.1 * std::cos(double(i));
  s.assign(tf::cast(tf::convert_to_tensor(v, s.shape()), s.dtype()));
}
// y, dy/dx and dy/dscale of sum(y * cotangent).
std::vector<tf::Tensor> rms_grads(const layers::RMSNormalization& l, const tf::Tensor& x) {
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  const tf::Tensor y = l(x);
  const tf::Tensor loss = tf::reduce_sum(y * cotangent(y.shape(), y.dtype()));
  return {y, tape.gradient(loss, x), tape.gradient(loss, l.scale())};
}

}  // namespace

static_assert(std::is_same_v<layers::MaxPool2D, layers::MaxPooling2D>);
static_assert(std::is_same_v<layers::GlobalAvgPool3D, layers::GlobalAveragePooling3D>);
static_assert(std::is_same_v<layers::Convolution2DTranspose, layers::Conv2DTranspose>);
static_assert(std::is_same_v<layers::SeparableConvolution1D, layers::SeparableConv1D>);

TEST_CASE("RMSNormalization matches Keras values and gradients on every device",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    layers::RMSNormalization last;
    CHECK(last.name().rfind("rms_normalization", 0) == 0);
    last.build({tf::None, 3, 4});
    CHECK(last.scale().shape() == tf::TensorShape({4}));
    set_scale(last);
    auto g = rms_grads(last, x24());
    // keras.layers.RMSNormalization() with scale 1 + 0.1 cos(i).
    check_values(g[0], {0.0,        0.6358198,  1.0875068,  1.380769,  1.19296,    1.1578203,
                        0.9530595,  0.7141738,  1.8634855,  0.8079435, -0.0834338, -0.6589932,
                        -1.4716432, -1.3406658, -0.6802218, 0.2680827, 0.4293111,  0.7925138,
                        1.0663821,  1.2882329,  1.0506387,  1.0850809, 0.9928371,  0.8803845},
                 1e-5, 1e-6);
    check_values(g[1], {0.8060316,  0.4766979,  0.088348,   -0.253058,  0.1884699,  0.0416408,
                        -0.0916429, -0.2006003, -0.3361254, -1.0068675, -1.4277462, -1.6638134,
                        -0.2337438, 0.0958672,  -0.0255206, -0.7020108, -0.0472118, 0.002492,
                        0.0118957,  0.0023194,  0.0401154,  0.0219828,  -0.0155651, -0.0458706},
                 1e-4, 1e-5);
    check_values(g[2], {1.2947462, 2.1978462, 2.8353496, 3.2024834}, 1e-5, 1e-6);
    // keras.layers.RMSNormalization(axis=[1, 2], epsilon=1e-3).
    layers::RMSNormalization both(std::vector<int>{1, 2}, 1e-3);
    both.build({tf::None, 3, 4});
    CHECK(both.scale().shape() == tf::TensorShape({3, 4}));
    set_scale(both);
    g = rms_grads(both, x24());
    check_values(g[0], {0.0,        0.5601437,  0.9580703, 1.2164282, 1.4430621,  1.6082197,
                        1.5516959,  1.2135407,  0.7386923, 0.3082716, -0.0352888, -0.3237753,
                        -0.2998231, -0.2731386, -0.138584, 0.0546174, 0.3120067,  0.661369,
                        1.043115,   1.3151568,  1.404436,  1.3961293, 1.4160678,  1.4586333},
                 1e-5, 1e-6);
    check_values(g[1], {0.7100967,  0.6133032,  0.4415285,  0.2682432,  0.1119204,  -0.0611215,
                        -0.2585965, -0.4284591, -0.5208988, -0.5538827, -0.5827963, -0.6153755,
                        -0.3033722, -0.2236188, -0.1408799, -0.0861443, -0.0511671, -0.0118243,
                        0.0276937,  0.0369992,  0.0056371,  -0.0356124, -0.0523446, -0.0512415},
                 1e-4, 1e-5);
    check_values(g[2],
                 {0.2444263, 0.6958111, 0.8959568, 0.8264486, 0.588684, 0.3537103, 0.2823945,
                  0.4511171, 0.8156585, 1.2292311, 1.5069754, 1.5088974},
                 1e-5, 1e-6);
  }
}

TEST_CASE("RMSNormalization gradients match finite differences in float64", "[cpu][keras]") {
  tf::keras::backend::set_floatx(tf::float64);
  layers::RMSNormalization l(std::vector<int>{1, 2}, 1e-3);
  tf::keras::backend::set_floatx(tf::float32);
  const tf::Tensor x = tf::cast(x24(), tf::float64);
  l.build({tf::None, 3, 4});
  set_scale(l);
  const auto g = rms_grads(l, x);
  REQUIRE(g[0].dtype() == tf::float64);
  const tf::Tensor c = cotangent(g[0].shape(), tf::float64);
  auto loss = [&](const tf::Tensor& in) { return tf::reduce_sum(l(in) * c).item<double>(); };
  const double h = 1e-6;
  const std::vector<double> fd = tf::testing::central_differences(
      [&](const std::vector<double>& v) { return loss(tf::convert_to_tensor(v, x.shape())); },
      vals(x), h);
  check_values(g[1], fd, 1e-6, 1e-7);
  tf::Variable s = l.scale();
  const auto w = vals(s.value());
  const std::vector<double> wfd = tf::testing::central_differences(
      [&](const std::vector<double>& v) {
        s.assign(tf::convert_to_tensor(v, s.shape()));
        return loss(x);
      },
      w, h);
  check_values(g[2], wfd, 1e-6, 1e-7);
}

TEST_CASE("RMSNormalization refuses bad axes and mismatched inputs", "[cpu][keras]") {
  tf::testing::require_error([] { layers::RMSNormalization(std::vector<int>{}); },
                             {"RMSNormalization", "axis"});
  tf::testing::require_error([] { layers::RMSNormalization(0, -1.0); },
                             {"RMSNormalization", "epsilon"});
  layers::RMSNormalization l(3);
  tf::testing::require_error(
      [&] {
        l(tf::ones({2, 3, 4}));
      },
      {"RMSNormalization", "axis 3", "(None, 3, 4)"});
  layers::RMSNormalization m;
  m(tf::ones({2, 4}));
  tf::testing::require_error([&] { m(tf::ones({2, 5})); }, {m.name(), "(2, 5)"});
}

TEST_CASE("the adaptive poolings match Keras on every device", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x3 = sines({2, 7, 3}, 0.3);
    // keras.layers.AdaptiveAveragePooling1D(3) and AdaptiveMaxPooling1D(4).
    layers::AdaptiveAveragePooling1D a1(3);
    CHECK(a1.name().rfind("adaptive_average_pooling1d", 0) == 0);
    check_values(a1(x3),
                 {0.5857248306274414, 0.6969229578971863, 0.7458669543266296, 0.31956902146339417,
                  0.105521060526371, -0.11795276403427124, -0.7309383749961853, -0.7448720932006836,
                  -0.6922686696052551, 0.5934571623802185, 0.7013800740242004, 0.746650755405426,
                  0.30815747380256653, 0.09305953979492188, -0.13035111129283905,
                  -0.733485221862793, -0.7436667084693909, -0.6874186992645264},
                 1e-5, 1e-6);
    check_values(
        layers::AdaptiveMaxPooling1D(4)(x3),
        {0.7833269238471985,   0.9320390820503235,  0.9974949955940247,  0.9738476276397705,
         0.9320390820503235,   0.9974949955940247,  0.42737987637519836, 0.14112000167369843,
         -0.15774568915367126, -0.7727645039558411, -0.5506855249404907, -0.279415488243103,
         0.7936678528785706,   0.937999963760376,   0.9985433220863342,  0.9698898196220398,
         0.937999963760376,    0.9985433220863342,  0.41211849451065063, 0.12445442378520966,
         -0.17432677745819092, -0.7619835734367371, -0.5365729331970215, -0.2632317841053009},
        1e-6, 1e-7);
    // keras.layers.AdaptiveAveragePooling2D((3, 2)) and AdaptiveMaxPooling2D((3, 2)).
    const tf::Tensor x4 = sines({2, 7, 5, 3}, 0.3);
    const tf::Tensor a2 = layers::AdaptiveAveragePooling2D({3, 2})(x4);
    CHECK(a2.shape() == tf::TensorShape({2, 3, 2, 3}));
    check_values(
        a2,
        {-0.11140665411949158,  -0.07939033210277557, -0.040282316505908966, 0.11442021280527115,
         0.13522803783416748,   0.14395636320114136,  0.1392153650522232,    0.12192823737859726,
         0.09374962002038956,   -0.06810734421014786, -0.10261551290750504,  -0.1279572993516922,
         -0.14228002727031708,  -0.14279469847679138, -0.1305539458990097,   0.009689156897366047,
         0.051764145493507385,  0.08921519666910172,  -0.1033293604850769,   -0.06900464743375778,
         -0.028515934944152832, 0.12138094753026962,  0.13894684612751007,   0.1441010981798172,
         0.1355782151222229,    0.11503785103559494,  0.0842214822769165,    -0.07853695005178452,
         -0.11075647920370102,  -0.13308246433734894, -0.14372949302196503,  -0.1406242996454239,
         -0.12495756894350052,  0.021733827888965607, 0.06288029998540878,   0.09840982407331467},
        1e-4, 1e-6);
    check_values(layers::AdaptiveMaxPooling2D({3, 2})(x4),
                 {0.9738476276397705, 0.9320390820503235, 0.9974949955940247, 0.9738476276397705,
                  0.937999963760376,  0.9985433220863342, 0.9656577706336975, 0.9491245746612549,
                  0.9997928738594055, 0.9611527323722839, 0.9491245746612549, 0.9997928738594055,
                  0.9563759565353394, 0.9491245746612549, 0.9997928738594055, 0.9611527323722839,
                  0.9542850852012634, 0.9999937415122986, 0.9513287544250488, 0.9591758251190186,
                  0.9999118447303772, 0.9513287544250488, 0.9637953639030457, 0.9995473027229309,
                  0.9404289722442627, 0.9722157716751099, 0.9989001154899597, 0.9345794320106506,
                  0.9722157716751099, 0.997970461845398,  0.928465723991394,  0.9722157716751099,
                  0.997970461845398,  0.9345794320106506, 0.976014256477356,  0.997970461845398},
                 1e-6, 1e-7);
    // keras.layers.AdaptiveAveragePooling3D((2, 3, 2)) and AdaptiveMaxPooling3D((3, 2, 2)).
    const tf::Tensor x5 = sines({2, 5, 4, 3, 2}, 0.3);
    check_values(
        layers::AdaptiveAveragePooling3D({2, 3, 2})(x5),
        {0.3749927,  0.2909068,  0.1808351,  0.0546099,  -0.3071007, -0.386005,  -0.4304288,
         -0.4364035, -0.2354449, -0.1155045, 0.0147536,  0.1436938,  -0.317465,  -0.3928027,
         -0.4330525, -0.4346189, -0.2228619, -0.1012059, 0.0294905,  0.1575526,  0.4187344,
         0.4387911,  0.4196519,  0.3630264,  0.1780019,  0.2885754,  0.3733712,  0.4248149,
         0.3501365,  0.2563419,  0.139649,   0.0104817,  -0.3371054, -0.4050582, -0.4368283,
         -0.4295779, 0.3410462,  0.2442227,  0.1255836,  -0.0042736, -0.3463592, -0.4105022,
         -0.4379762, -0.4263271, -0.1836591, -0.0576888, 0.0734347,  0.1979984},
        1e-5, 1e-6);
    check_values(
        layers::AdaptiveMaxPooling3D({3, 2, 2})(x5),
        {0.9985433, 0.9698898, 0.9985433, 0.997495,  0.5920735, 0.8037844, 0.9436957, 0.9993094,
         0.9985433, 0.9698898, 0.9985433, 0.9698898, 0.9997929, 0.9611527, 0.9997929, 0.9999937,
         0.3812505, 0.0910224, 0.3747003, 0.6319552, 0.9999118, 0.9591758, 0.9999118, 0.9999937,
         0.9989001, 0.9681424, 0.9989001, 0.9995473, 0.9460126, 0.8079734, 0.5977604, 0.3341512,
         0.9989001, 0.9760143, 0.9989001, 0.9979705, 0.6948037, 0.8763093, 0.9795368, 0.9952652,
         0.9967588, 0.9760143, 0.9967588, 0.9284657, 0.9934902, 0.9827824, 0.9934902, 0.9952652},
        1e-6, 1e-6);
  }
}

TEST_CASE("the adaptive poolings: gradients shapes errors and one trace for every batch",
          "[cpu][keras]") {
  // Finite differences of sum(pool(x) * c) in float64 (overlapping bins: L = 7 to 3).
  tf::keras::backend::set_floatx(tf::float64);
  layers::AdaptiveAveragePooling2D avg({3, 2});
  layers::AdaptiveMaxPooling2D mx({3, 2});
  tf::keras::backend::set_floatx(tf::float32);
  const tf::Tensor x = tf::cast(sines({1, 7, 5, 2}, 0.7), tf::float64);
  for (tf::keras::Layer* l : std::vector<tf::keras::Layer*>{&avg, &mx}) {
    CAPTURE(l->name());
    const tf::Tensor c = cotangent({1, 3, 2, 2}, tf::float64);
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor g = tape.gradient(tf::reduce_sum((*l)(x)*c), x);
    auto loss = [&](const std::vector<double>& v) {
      return tf::reduce_sum((*l)(tf::convert_to_tensor(v, x.shape())) * c).item<double>();
    };
    const auto xv = vals(x);
    std::vector<double> fd(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      auto p = xv, m = xv;
      p[i] += 1e-6;
      m[i] -= 1e-6;
      fd[i] = (loss(p) - loss(m)) / 2e-6;
    }
    check_values(g, fd, 1e-6, 1e-7);
  }
  // Output shapes with a None batch, and a traced call serving two batch sizes.
  CHECK(avg.impl().compute_output_shape({tf::None, 9, 9, 4}).to_string() == "(None, 3, 2, 4)");
  layers::AdaptiveMaxPooling1D p1(2);
  auto f = tf::function([&](tf::Tensor t) { return p1(t); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 5, 3})}});
  for (int64_t n : {2, 4}) {
    const tf::Tensor in = tf::random::normal({n, 5, 3}, 0, 1, tf::float32, n);
    check_values(f(in), vals(p1(in)));
  }
  tf::testing::require_error([] { layers::AdaptiveAveragePooling1D(0); },
                             {"AdaptiveAveragePooling1D", "output_size"});
  layers::AdaptiveAveragePooling2D bad(2);
  tf::testing::require_error([&] { bad(tf::ones({2, 4, 4})); }, {bad.name(), "ndim=4"});
}

TEST_CASE("CategoryEncoding matches Keras and refuses out-of-range ids", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.layers.CategoryEncoding(num_tokens=5, output_mode=...).
    layers::CategoryEncoding one(5, "one_hot");
    CHECK(one.name().rfind("category_encoding", 0) == 0);
    check_values(one(tf::constant<int64_t>({3, 2, 0, 1}, {4})),
                 {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0});
    check_values(one(tf::constant<int32_t>({3, 2}, {2, 1})), {0, 0, 0, 1, 0, 0, 0, 1, 0, 0});
    layers::CategoryEncoding multi(5);
    check_values(multi(tf::constant<int64_t>({0, 1, 0, 0, 1, 2, 3, 1}, {4, 2})),
                 {1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0});
    // A rank-1 input is one example (Keras).
    const tf::Tensor r1 = multi(tf::constant<int64_t>({3, 2, 0}, {3}));
    CHECK(r1.shape() == tf::TensorShape({5}));
    check_values(r1, {1, 0, 1, 1, 0});
    layers::CategoryEncoding count(5, "count");
    const tf::Tensor ids = tf::constant<int64_t>({0, 1, 1, 0, 0, 4}, {2, 3});
    check_values(count(ids), {1, 2, 0, 0, 0, 2, 0, 0, 0, 1});
    check_values(count(ids, tf::constant<float>({.1f, .2f, .3f, .4f, .5f, .6f}, {2, 3})),
                 {0.1, 0.5, 0, 0, 0, 0.9, 0, 0, 0, 0.6}, 1e-6, 1e-7);
    tf::testing::require_error(
        [&] {
          count(tf::constant<int64_t>({0, 7}, {1, 2}));
        },
        {count.name(), "num_tokens 5", "from 0 to 7"});
    tf::testing::require_error(
        [&] {
          multi(ids, tf::ones({2, 3}));
        },
        {multi.name(), "count_weights", "\"count\""});
    tf::testing::require_error([&] { one(ids); }, {one.name(), "one_hot", "(2, 3)"});
  }
  tf::testing::require_error([] { layers::CategoryEncoding(5, "tf_idf"); },
                             {"CategoryEncoding", "tf_idf"});
  // Traced: the encoding with a None batch.
  layers::CategoryEncoding enc(4, "count");
  auto f = tf::function(
      [&](tf::Tensor t) { return enc(t); },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 2}, tf::int64)}});
  check_values(f(tf::constant<int64_t>({3, 3, 0, 1, 2, 2}, {3, 2})),
               {0, 0, 0, 2, 1, 1, 0, 0, 0, 0, 2, 0});
}

TEST_CASE("Discretization buckets and adapts as Keras", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.layers.Discretization(bin_boundaries=[0., 1., 2.5]).
    layers::Discretization d({0.0, 1.0, 2.5});
    CHECK(d.name().rfind("discretization", 0) == 0);
    const tf::Tensor y = d(tf::constant<float>({-1.5f, 1.0f, 2.0f, 0.5f, 3.0f, 0.0f}, {2, 3}));
    CHECK(y.dtype() == tf::int64);
    check_values(y, {0, 2, 2, 1, 3, 1});
    check_values(d(tf::constant<int32_t>({-1, 1, 2, 0, 3, 0}, {2, 3})), {0, 2, 2, 1, 3, 1});
    // Compared in float32, as TF's Bucketize: 1.0000001f is above 1.
    check_values(layers::Discretization({0.1, 1.0})(tf::constant<float>({0.1f, 1.0000001f}, {2})),
                 {1, 2});
  }
  // adapt: keras.layers.Discretization(num_bins=...).adapt(data).bin_boundaries.
  auto d4 = layers::Discretization::with_num_bins(4);
  std::vector<float> twenty(20);
  for (int i = 0; i < 20; ++i) twenty[i] = float(i);
  d4.adapt(tf::constant(twenty, {20}));
  CHECK(d4.bin_boundaries() == std::vector<double>{4.0, 9.0, 14.0});
  auto d3 = layers::Discretization::with_num_bins(3);
  d3.adapt(tf::constant<double>({0.3, -1.2, 2.5, 0.9, 4.1, -0.2, 1.7}, {7}));
  const auto b3 = d3.bin_boundaries();
  REQUIRE(b3.size() == 2);
  CHECK(b3[0] == Approx(-0.03333336487412453).epsilon(1e-6));
  CHECK(b3[1] == Approx(1.4333332777023315).epsilon(1e-6));
  auto d5 = layers::Discretization::with_num_bins(5);
  d5.adapt(tf::constant<double>({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, {4, 3}));
  const auto b5 = d5.bin_boundaries();
  REQUIRE(b5.size() == 4);
  CHECK(b5[0] == Approx(1.4));
  CHECK(b5[1] == Approx(3.0));
  CHECK(b5[2] == Approx(5.0));
  CHECK(b5[3] == Approx(5.6));
  check_values(d5(tf::constant<float>({1.0f, 1.4f, 6.0f}, {3})), {0, 1, 4});
  // Fewer values than bins: Keras keeps the sorted values but the last.
  auto few = layers::Discretization::with_num_bins(5);
  few.adapt(tf::constant<double>({3, 1, 2}, {3}));
  CHECK(few.bin_boundaries() == std::vector<double>{1.0, 2.0});
  auto ties = layers::Discretization::with_num_bins(2);
  ties.adapt(tf::constant<double>({5, 5, 5, 1, 1}, {5}));
  REQUIRE(ties.bin_boundaries().size() == 1);
  CHECK(ties.bin_boundaries()[0] == Approx(2.999999761581421).epsilon(1e-7));
  // More values than 1 / epsilon: Keras' summary of every step-th value.
  std::vector<float> big(1000);
  for (int i = 0; i < 1000; ++i)
    big[i] = static_cast<float>(std::sin(0.37 * i) * 3.0) + 0.01f * static_cast<float>(i);
  auto q4 = layers::Discretization::with_num_bins(4);
  q4.adapt(tf::constant(big, {1000}));
  check_values(tf::constant(q4.bin_boundaries(), {3}),
               {2.416982412338257, 4.982864856719971, 7.532996654510498}, 1e-6, 1e-6);
  auto q7 = layers::Discretization::with_num_bins(7, /*epsilon=*/0.05);
  q7.adapt(tf::constant(big, {1000}));
  check_values(tf::constant(q7.bin_boundaries(), {6}),
               {0.859158992767334, 2.8227105140686035, 4.275924205780029, 5.692317485809326,
                7.143681049346924, 9.111783981323242},
               1e-6, 1e-6);
  std::vector<float> ramp(250);
  for (int i = 0; i < 250; ++i) ramp[i] = static_cast<float>(i);
  auto q3 = layers::Discretization::with_num_bins(3);
  q3.adapt(tf::constant(ramp, {250}));
  check_values(tf::constant(q3.bin_boundaries(), {2}), {82.3333511352539, 165.6666717529297}, 1e-6,
               1e-6);
  tf::testing::require_error(
      [] {
        layers::Discretization({1.0, 0.0});
      },
      {"Discretization", "sorted"});
  tf::testing::require_error([] { layers::Discretization::with_num_bins(1); },
                             {"Discretization", "num_bins"});
  auto unadapted = layers::Discretization::with_num_bins(3);
  tf::testing::require_error([&] { unadapted(tf::ones({2})); }, {"adapt() first"});
  layers::Discretization fixed({0.5});
  tf::testing::require_error([&] { fixed.adapt(tf::ones({2})); }, {"num_bins"});
}

TEST_CASE("IntegerLookup matches Keras lookups inversions encodings and adapt",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.layers.IntegerLookup(vocabulary=[12, 36, 1138, 42], ...).
    layers::IntegerLookup il({12, 36, 1138, 42});
    CHECK(il.name().rfind("integer_lookup", 0) == 0);
    CHECK(il.get_vocabulary() == std::vector<int64_t>{-1, 12, 36, 1138, 42});
    CHECK(il.vocabulary_size() == 5);
    const tf::Tensor y = il(tf::constant<int64_t>({12, 1138, 42, 42, 1000, 36}, {2, 3}));
    CHECK(y.dtype() == tf::int64);
    check_values(y, {1, 3, 4, 4, 0, 2});
    check_values(il(tf::constant<int32_t>({12, 7}, {2})), {1, 0});
    layers::IntegerLookup inv({.vocabulary = {12, 36, 1138, 42}, .invert = true});
    check_values(inv(tf::constant<int64_t>({1, 3, 4, 4, 0, 2}, {2, 3})),
                 {12, 1138, 42, 42, -1, 36});
    check_values(inv(tf::constant<int64_t>({1, 9}, {1, 2})), {12, -1});
    layers::IntegerLookup mh({.vocabulary = {12, 36, 1138, 42}, .output_mode = "multi_hot"});
    check_values(mh(tf::constant<int64_t>({12, 1138, 12, 42, 1000, 36}, {2, 3})),
                 {0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
    layers::IntegerLookup cnt({.vocabulary = {12, 36, 1138, 42}, .output_mode = "count"});
    check_values(cnt(tf::constant<int64_t>({12, 1138, 12, 42, 1000, 36}, {2, 3})),
                 {0, 2, 0, 1, 0, 1, 0, 1, 0, 1});
    layers::IntegerLookup oh({.vocabulary = {12, 36, 1138, 42}, .output_mode = "one_hot"});
    check_values(oh(tf::constant<int64_t>({12, 1138, 7}, {3})),
                 {0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0});
    layers::IntegerLookup masked({.vocabulary = {12, 36}, .mask_token = 0});
    CHECK(masked.get_vocabulary() == std::vector<int64_t>{0, -1, 12, 36});
    check_values(masked(tf::constant<int64_t>({12, 0, 7}, {1, 3})), {2, 0, 1});
    // With an encoding the mask token has no index and masked tokens encode to nothing:
    // keras.layers.IntegerLookup(vocabulary=[10, 20, 30], mask_token=0, output_mode=...).
    layers::IntegerLookup mmh(
        {.vocabulary = {10, 20, 30}, .mask_token = 0, .output_mode = "multi_hot"});
    CHECK(mmh.get_vocabulary() == std::vector<int64_t>{-1, 10, 20, 30});
    CHECK(mmh.vocabulary_size() == 4);
    check_values(mmh(tf::constant<int64_t>({10, 0, 7, 30, 30, 0}, {2, 3})),
                 {1, 1, 0, 0, 0, 0, 0, 1});
    layers::IntegerLookup mcount(
        {.vocabulary = {10, 20, 30}, .mask_token = 0, .output_mode = "count"});
    check_values(mcount(tf::constant<int64_t>({10, 0, 7, 30, 30, 0}, {2, 3})),
                 {1, 1, 0, 0, 0, 0, 0, 2});
    layers::IntegerLookup moh(
        {.vocabulary = {10, 20, 30}, .mask_token = 0, .output_mode = "one_hot"});
    check_values(moh(tf::constant<int64_t>({10, 0, 7, 30}, {4})),
                 {0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1});
    layers::IntegerLookup mstrict(
        {.vocabulary = {10, 20, 30}, .num_oov_indices = 0, .mask_token = 0});
    CHECK(mstrict.get_vocabulary() == std::vector<int64_t>{0, 10, 20, 30});
    check_values(mstrict(tf::constant<int64_t>({10, 30, 0}, {1, 3})), {1, 3, 0});
    layers::IntegerLookup strict({.vocabulary = {12, 36}, .num_oov_indices = 0});
    check_values(strict(tf::constant<int64_t>({36, 12}, {2})), {1, 0});
    tf::testing::require_error(
        [&] {
          strict(tf::constant<int64_t>({12, 9}, {1, 2}));
        },
        {strict.name(), "num_oov_indices 0"});
  }
  // adapt: most frequent first, ties larger token first (Keras 3.15).
  layers::IntegerLookup a;
  a.adapt(tf::constant<int64_t>({12, 1138, 42, 42, 42, 1138, 1138, 1138, 12}, {3, 3}));
  CHECK(a.get_vocabulary() == std::vector<int64_t>{-1, 1138, 42, 12});
  layers::IntegerLookup ties;
  ties.adapt(tf::constant<int32_t>({5, 3, 9, 3, 5, 9, 1, 7, 7}, {9}));
  CHECK(ties.get_vocabulary() == std::vector<int64_t>{-1, 9, 7, 5, 3, 1});
  layers::IntegerLookup capped({.max_tokens = 3});
  capped.adapt(tf::constant<int64_t>({5, 3, 9, 3, 5, 9, 1, 7, 7, 7}, {10}));
  CHECK(capped.get_vocabulary() == std::vector<int64_t>{-1, 7, 9});
  // Traced with a None batch.
  layers::IntegerLookup t({12, 36, 1138, 42});
  auto f =
      tf::function([&](tf::Tensor x) { return t(x); },
                   tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None}, tf::int64)}});
  check_values(f(tf::constant<int64_t>({42, 5, 36}, {3})), {4, 0, 2});
  // num_oov_indices = 0 traced: an unknown token is -1 (no check is possible on symbols).
  layers::IntegerLookup strict_t({.vocabulary = {12, 36}, .num_oov_indices = 0});
  auto g =
      tf::function([&](tf::Tensor x) { return strict_t(x); },
                   tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None}, tf::int64)}});
  check_values(g(tf::constant<int64_t>({36, 5, 12}, {3})), {1, -1, 0});
  // Errors.
  tf::testing::require_error([] { layers::IntegerLookup({.num_oov_indices = -1}); },
                             {"IntegerLookup", "num_oov_indices must be >= 0"});
  tf::testing::require_error(
      [] {
        layers::IntegerLookup({1, 2, 1});
      },
      {"IntegerLookup", "1 twice"});
  tf::testing::require_error(
      [] { layers::IntegerLookup({.vocabulary = {1}, .output_mode = "count", .invert = true}); },
      {"IntegerLookup", "invert"});
  layers::IntegerLookup empty;
  tf::testing::require_error([&] { empty(tf::constant<int64_t>({1}, {1})); },
                             {empty.name(), "adapt()"});
  layers::IntegerLookup floats({1, 2});
  tf::testing::require_error([&] { floats(tf::ones({2})); }, {floats.name(), "float32"});
}

TEST_CASE("IntegerLookup spreads unknown tokens over several OOV indices as Keras' floormod",
          "[cpu][cuda][keras]") {
  // keras.layers.IntegerLookup(vocabulary=[12, 36, 1138, 42], num_oov_indices=n, ...)(x) with
  // x = [[12, 1138, 42], [42, 1000, -37], [0, 7, 5]] (Keras 3.15).
  const std::vector<int64_t> vocab = {12, 36, 1138, 42};
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = tf::constant<int64_t>({12, 1138, 42, 42, 1000, -37, 0, 7, 5}, {3, 3});
    layers::IntegerLookup three({.vocabulary = vocab, .num_oov_indices = 3});
    CHECK(three.get_vocabulary() == std::vector<int64_t>{-1, -1, -1, 12, 36, 1138, 42});
    CHECK(three.vocabulary_size() == 7);
    check_values(three(x), {3, 5, 6, 6, 1, 2, 0, 1, 2});
    check_values(three(tf::cast(x, tf::int32)), {3, 5, 6, 6, 1, 2, 0, 1, 2});
    layers::IntegerLookup masked({.vocabulary = vocab, .num_oov_indices = 3, .mask_token = 0});
    CHECK(masked.get_vocabulary() == std::vector<int64_t>{0, -1, -1, -1, 12, 36, 1138, 42});
    check_values(masked(x), {4, 6, 7, 7, 2, 3, 0, 2, 3});
    layers::IntegerLookup mh(
        {.vocabulary = vocab, .num_oov_indices = 2, .output_mode = "multi_hot"});
    check_values(mh(x), {0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0});
    layers::IntegerLookup cnt(
        {.vocabulary = vocab, .num_oov_indices = 2, .mask_token = 0, .output_mode = "count"});
    check_values(cnt(x), {0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0});
    layers::IntegerLookup token({.vocabulary = vocab, .num_oov_indices = 3, .oov_token = -5});
    CHECK(token.get_vocabulary() == std::vector<int64_t>{-5, -5, -5, 12, 36, 1138, 42});
    layers::IntegerLookup inv({.vocabulary = vocab, .num_oov_indices = 3, .invert = true});
    check_values(inv(tf::constant<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {1, 8})),
                 {-1, -1, -1, 12, 36, 1138, 42, -1});
  }
  // adapt keeps max_tokens minus the OOV indices: Keras' [-1, -1, 6, 3, 4].
  layers::IntegerLookup a({.num_oov_indices = 2, .max_tokens = 5});
  a.adapt(tf::constant<int64_t>({3, 3, 3, 4, 4, 5, 6, 6, 6, 6}, {10}));
  CHECK(a.get_vocabulary() == std::vector<int64_t>{-1, -1, 6, 3, 4});
  // Traced with a None batch.
  layers::IntegerLookup t({.vocabulary = vocab, .num_oov_indices = 3});
  auto f =
      tf::function([&](tf::Tensor v) { return t(v); },
                   tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None}, tf::int64)}});
  check_values(f(tf::constant<int64_t>({42, 1000, -37, 5}, {4})), {6, 1, 2, 2});
}

TEST_CASE("AlphaDropout keeps mean and variance and is the identity in inference",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = tf::random::normal({200, 500}, 0, 1, tf::float32, 3);
    layers::AlphaDropout drop(0.2, {}, 7);
    CHECK(drop.name().rfind("alpha_dropout", 0) == 0);
    check_values(drop(x), vals(x));
    const auto y = vals(drop(x, true));
    const auto xv = vals(x);
    // Keras' affine map: dropped elements become a * alpha_p + b.
    const double alpha_p = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
    const double a = std::pow(0.8 * (1 + 0.2 * alpha_p * alpha_p), -0.5);
    const double b = -a * alpha_p * 0.2;
    double mean = 0, sq = 0;
    size_t dropped = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      mean += y[i];
      sq += y[i] * y[i];
      if (std::abs(y[i] - (a * alpha_p + b)) < 1e-5) {
        ++dropped;
      } else {
        REQUIRE(y[i] == Approx(a * xv[i] + b).margin(1e-5));
      }
    }
    mean /= double(y.size());
    const double var = sq / double(y.size()) - mean * mean;
    CHECK(std::abs(mean) < 0.02);
    CHECK(std::abs(var - 1.0) < 0.03);
    CHECK(std::abs(double(dropped) / double(y.size()) - 0.2) < 0.01);
    // noise_shape (0, 1): one draw per row.
    layers::AlphaDropout rows(0.5, {0, 1}, 3);
    const auto r = vals(rows(tf::ones({50, 8}), true));
    for (size_t i = 0; i < 50; ++i)
      for (size_t j = 1; j < 8; ++j) REQUIRE(r[i * 8 + j] == r[i * 8]);
  }
  tf::testing::require_error([] { layers::AlphaDropout(1.5); }, {"AlphaDropout", "rate"});
  layers::AlphaDropout shaped(0.5, {0, 1, 1});
  tf::testing::require_error(
      [&] {
        shaped(tf::ones({2, 3}), true);
      },
      {shaped.name(), "noise_shape"});
}

TEST_CASE("SpatialDropout3D drops whole channels", "[cpu][keras]") {
  layers::SpatialDropout3D sd(0.5, 11);
  CHECK(sd.name().rfind("spatial_dropout3d", 0) == 0);
  const tf::Tensor x = tf::ones({4, 2, 3, 2, 6});
  check_values(sd(x), vals(x));
  const auto y = vals(sd(x, true));
  size_t kept = 0;
  for (size_t n = 0; n < 4; ++n)
    for (size_t c = 0; c < 6; ++c) {
      const double first = y[n * 72 + c];
      REQUIRE((first == 0.0 || first == 2.0));
      kept += first == 2.0;
      for (size_t p = 0; p < 12; ++p) REQUIRE(y[n * 72 + p * 6 + c] == first);
    }
  CHECK(kept > 0);
  CHECK(kept < 24);
  tf::testing::require_error([&] { sd(tf::ones({2, 3, 4, 5})); }, {sd.name(), "ndim=5"});
}

TEST_CASE("Lambda applies its function and infers output shapes", "[cpu][keras]") {
  layers::Lambda twice([](const tf::Tensor& x) { return x * 2.0; });
  CHECK(twice.name().rfind("lambda", 0) == 0);
  check_values(twice(tf::constant<float>({1, 2}, {2})), {2, 4});
  // A Sequential learns its shapes through the probe; an explicit output_shape wins.
  layers::Lambda flat([](const tf::Tensor& x) {
    return tf::reshape(x, {x.shape()[0], x.shape()[1] * x.shape()[2]});
  });
  K::Sequential model({flat, layers::Dense(2)});
  model.build({tf::None, 3, 4});
  CHECK(flat.output_shape().to_string() == "(None, 12)");
  CHECK(model(tf::ones({5, 3, 4})).shape() == tf::TensorShape({5, 2}));
  layers::Lambda declared([](const tf::Tensor& x) { return tf::reduce_sum(x, -1); },
                          [](const tf::TensorShape& s) {
                            return tf::TensorShape({s[0], s[1]});
                          });
  CHECK(declared.impl().compute_output_shape({tf::None, 3, 4}).to_string() == "(None, 3)");
  // Gradients flow through it, eagerly and traced.
  layers::Lambda sq([](const tf::Tensor& x) { return tf::square(x); });
  auto grad = [&](const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    return tape.gradient(tf::reduce_sum(sq(x)), x);
  };
  const tf::Tensor x = tf::constant<float>({1, -2, 3}, {3});
  check_values(grad(x), {2, -4, 6});
  auto f = tf::function([&](tf::Tensor t) { return grad(t); });
  check_values(f(x), {2, -4, 6});
  layers::Lambda broken([](const tf::Tensor& x) { return tf::reshape(x, {7}); });
  tf::testing::require_error(
      [&] {
        broken.impl().compute_output_shape({tf::None, 3});
      },
      {broken.name(), "output_shape"});
}

TEST_CASE("the constructor spellings of docs/keras.md configure the extra layers", "[cpu][keras]") {
  using namespace tf::keras::layers;
  const tf::Tensor img = tf::ones({2, 9, 9, 3});
  CHECK(SpatialDropout3D(0.2)(tf::ones({2, 3, 3, 3, 2}), true).shape() ==
        tf::TensorShape({2, 3, 3, 3, 2}));
  CHECK(AlphaDropout(0.1)(img, true).shape() == img.shape());
  CHECK(RMSNormalization()(img).shape() == img.shape());
  RMSNormalization both(std::vector<int>{1, 2}, 1e-5);
  CHECK(both(img).shape() == img.shape());
  CHECK(both.scale().shape() == tf::TensorShape({9, 9}));
  CHECK(AdaptiveAveragePooling2D({7, 7})(img).shape() == tf::TensorShape({2, 7, 7, 3}));
  CHECK(AdaptiveMaxPooling1D(4)(tf::ones({2, 10, 3})).shape() == tf::TensorShape({2, 4, 3}));
  CHECK(Lambda([](const tf::Tensor& x) { return tf::square(x); })(img).shape() == img.shape());
  CHECK(CategoryEncoding(10, "one_hot")(tf::constant<int64_t>({3, 9}, {2})).shape() ==
        tf::TensorShape({2, 10}));
  CHECK(Discretization({0.0, 1.0, 2.5})(img).dtype() == tf::int64);
  CHECK(IntegerLookup({12, 36, 1138})(tf::constant<int64_t>({36}, {1})).item<int64_t>() == 2);
  CHECK(IntegerLookup({.vocabulary = {12, 36}, .invert = true})(tf::constant<int64_t>({2}, {1}))
            .item<int64_t>() == 36);
  MaxPool2D pool;
  AvgPool1D avg;
  GlobalAvgPool2D gap;
  CHECK(gap(img).shape() == tf::TensorShape({2, 3}));
  CHECK(pool(img).shape() == tf::TensorShape({2, 4, 4, 3}));
  CHECK(avg(tf::ones({2, 10, 3})).shape() == tf::TensorShape({2, 5, 3}));
}
