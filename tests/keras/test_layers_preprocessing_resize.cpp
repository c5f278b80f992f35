// keras.layers.Resizing with tf::image::resize's other methods (bicubic, area, lanczos3/5) and
// antialias, alone and with crop_to_aspect_ratio / pad_to_aspect_ratio: values against Keras
// 3.15 literals on every device, uint8 images rounded and saturated, traced against eager.
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_preprocessing.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace layers = tf::keras::layers;
using tf::testing::check_values;

namespace {

struct ResizeLayerCase {
  int64_t height, width;
  const char* interpolation;
  bool antialias, crop, pad;
  double fill_value;
  std::vector<double> want;
};
// clang-format off
// keras.layers.Resizing(h, w, interpolation, antialias, crop_to_aspect_ratio, pad_to_aspect_ratio,
// fill_value)(x) (Keras 3.15),
// x = (1, 5, 6, 2) ((i * 37) % 101) / 100 in float32.
const std::vector<ResizeLayerCase> kCases = {
    {3, 4, "bicubic", false, false, false, 0.0, {0.183116823, 0.433255285, 0.624716163, 0.554207206,
        0.375119269, 0.656532824, 0.549518824, 0.178358942, 0.754671514, 0.30635035, 0.25648436,
        0.721171916, 1.0035156, 0.268828124, 0.505328476, 0.683649659, 0.472873509, 0.811641097,
        0.257664979, 0.333467185, 0.632961094, 0.435792804, 0.417752504, 0.556744754}},
    {3, 4, "lanczos3", true, true, false, 0.0, {0.227305144, 0.35501349, 0.589308202, 0.46798569,
        0.441931993, 0.709587216, 0.611107409, 0.177668542, 0.494243681, 0.586756527, 0.46837011,
        0.595179975, 0.792285502, 0.516232371, 0.279575944, 0.57785368, 0.571642458, 0.433990389,
        0.689925849, 0.342190713, 0.412642747, 0.467097491, 0.630713642, 0.361734688}},
    {7, 4, "area", false, false, true, 0.25, {0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25,
        0.248518512, 0.263333321, 0.387777746, 0.40259257, 0.33740741, 0.352222204, 0.476666629,
        0.192222208, 0.288888901, 0.546666682, 0.602222264, 0.411111146, 0.488888949, 0.746666729,
        0.353333354, 0.386666656, 0.635185182, 0.444074035, 0.424814731, 0.607777715, 0.797777712,
        0.382222146, 0.512592554, 0.545925856, 0.457777709, 0.603333175, 0.546666682, 0.243333235,
        0.433333218, 0.578888834, 0.522222161, 0.443333238, 0.361111224, 0.52555573, 0.201111153,
        0.365555644, 0.450000107, 0.315185279, 0.290000081, 0.454444617, 0.24999997, 0.24999997,
        0.24999997, 0.24999997, 0.24999997, 0.24999997, 0.24999997, 0.24999997}},
    {8, 9, "lanczos5", false, false, false, 0.0, {-0.100720488, 0.354468822, 0.373332024,
        0.0878989473, 0.891462624, 0.203164056, 0.542758107, 0.87178576, 0.0757336915, 0.82023102,
        0.325314671, 0.389948785, 0.973473132, 0.240135938, 0.967029929, 0.123764634, 0.6771608,
        -0.00449640304, 0.0466358773, 0.642196298, 0.204543427, 0.381512672, 0.619793355,
        0.149501368, 0.784155846, 0.433559358, 0.431681156, 0.739758849, 0.286073714, 0.821309268,
        0.586506546, 0.619897544, 0.585580826, 0.250487119, 0.384873748, 0.0718438178, 0.522740364,
        0.752363741, 0.21086219, 0.745860219, 0.168582201, 0.443128616, 0.753619254, 0.179323971,
        0.859413803, 0.582915783, 0.587391615, 1.00917351, 0.383172542, 0.794349551, 0.157299682,
        0.505481124, 0.00816607662, 0.490700036, 0.896337032, 0.276803583, 0.614048839, 0.667901278,
        0.16343078, 0.961868525, 0.252040714, 0.621552467, 0.77078563, 0.489255607, 1.08139479,
        0.429262429, 0.785256386, 0.245196357, 0.32083869, 0.583386183, 0.173760772, 0.94807893,
        0.556733966, 0.0419212095, 0.770344257, 0.406613916, 0.732172251, 0.744803607, 0.357857823,
        0.560737371, 0.543468833, 0.500744462, 0.838982046, 0.368447334, 0.662749231, 0.0281313807,
        0.623004198, 0.322098732, 0.760597825, 0.713196456, 0.1127076, 0.499299884, 0.566465259,
        0.484518826, 1.01259255, 0.195650101, 0.748808861, -0.0191733874, 0.525644124, 0.407084167,
        0.317699254, 0.810676098, 0.0812724903, 0.546871185, 0.527050555, 0.244139895, 0.9702124,
        0.237636238, 0.333985895, 0.918156147, 0.494402826, 0.73951298, 0.536449611, 0.370102257,
        0.359317511, 0.168690711, 0.474015266, 0.25024116, 0.549343705, 0.55644083, 0.30070278,
        0.840498567, 0.342350543, 0.608487427, 0.529496074, 0.347803593, 0.67944324, 0.994496286,
        0.563308954, 0.866235435, 0.102434434, 0.749863982, -0.1364602, 0.600050986, 0.402831614,
        0.169768959, 0.957848489, 0.118214309, 0.748336196, 0.786836147, 0.289054394, 0.902101159,
        0.162991479, 0.635531127}},
    {2, 3, "bilinear", true, false, false, 0.0, {0.430129915, 0.478766322, 0.562840939, 0.559829593,
        0.502077997, 0.445779294, 0.515259683, 0.544220746, 0.519261301, 0.430170417, 0.495389581,
        0.511233747}},
};
// Resizing(3, 3, interpolation="bicubic")(u), u = uint8 [[0, 255], [128, 30]] (1, 2, 2, 1) -> uint8
const std::vector<double> kUint8Bicubic = {0, 131, 255, 59, 103, 148, 144, 76, 7};
// clang-format on

tf::Tensor resize_input() {
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 101) / 100.0;
  return tf::detail::from_doubles(v, {1, 5, 6, 2}, tf::float32);
}

layers::Resizing make(const ResizeLayerCase& c) {
  return layers::Resizing(c.height, c.width,
                          {.interpolation = c.interpolation,
                           .crop_to_aspect_ratio = c.crop,
                           .pad_to_aspect_ratio = c.pad,
                           .fill_value = c.fill_value,
                           .antialias = c.antialias});
}

}  // namespace

TEST_CASE("Resizing with bicubic area and lanczos methods gives Keras values",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = resize_input();
    for (const auto& c : kCases) {
      INFO(c.interpolation << " antialias " << c.antialias << " crop " << c.crop << " pad "
                           << c.pad);
      const tf::Tensor y = make(c)(x);
      CHECK(y.shape() == tf::TensorShape({1, c.height, c.width, 2}));
      CHECK(y.dtype() == tf::float32);
      check_values(y, c.want, 1e-5, 2e-6);
    }
    // Integer images come back rounded and clipped to their dtype (bicubic overshoots).
    const tf::Tensor u =
        tf::cast(tf::constant(std::vector<int32_t>{0, 255, 128, 30}, {1, 2, 2, 1}), tf::uint8);
    const tf::Tensor yu = layers::Resizing(3, 3, {.interpolation = "bicubic"})(u);
    CHECK(yu.dtype() == tf::uint8);
    check_values(yu, kUint8Bicubic, 0, 0);
  }
}

TEST_CASE("Resizing with lanczos3 and antialias traced equals eager",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const layers::Resizing layer(3, 4, {.interpolation = "lanczos3", .antialias = true});
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 5, 6, 2})};
    auto f = tf::function([&](const tf::Tensor& x) { return layer(x); }, opts);
    for (int64_t n : {1, 2}) {
      const tf::Tensor x =
          tf::detail::from_doubles(tf::testing::random_values(static_cast<size_t>(n * 60), 0, 1, 3),
                                   {n, 5, 6, 2}, tf::float32);
      tf::testing::check_close(f(x), layer(x), 1e-6, 1e-6);
    }
    CHECK(f.tracing_count() == 1);
  }
}
