// keras.layers.Solarization, RandomInvert, RandomPosterization, AutoContrast, RandomSharpness,
// RandomErasing, RandomGaussianBlur, RandomColorDegeneration, Equalization, RandomShear, MixUp
// and CutMix (keras/layers_augment.h):
// Keras 3.15's values where the draw is fixed (a factor at an extreme or an empty range), plain
// references on the layer's own draws where it is not, the identity at inference, new draws per
// call, traced against eager, errors.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_augment.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace layers = tf::keras::layers;
using layers::Factor;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// Inputs: x = ((i * 53) % 97) / 96 * 255 shaped (n, h, w, c), as the Python script that made the
// literals below.
tf::Tensor input(int64_t n = 2, int64_t h = 2, int64_t w = 3, int64_t c = 3) {
  std::vector<double> v(static_cast<size_t>(n * h * w * c));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 53) % 97) / 96.0 * 255;
  return tf::detail::from_doubles(v, {n, h, w, c}, tf::float32);
}
tf::Tensor scaled(const tf::Tensor& x, double a, double b = 0.0) {
  return x * tf::detail::from_doubles({a}, {}, tf::float32) +
         tf::detail::from_doubles({b}, {}, tf::float32);
}
std::vector<double> values(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}
// The k-th (k = 0, 1, ...) per-image uniform draw in [0, 1) of a layer seeded `seed` right after
// tf::random::set_seed(global): the same ops in the same order.
std::vector<std::vector<double>> draws(int64_t global, int64_t seed, int64_t n, int k) {
  tf::random::set_seed(global);
  std::vector<std::vector<double>> d;
  for (int i = 0; i < k; ++i)
    d.push_back(values(tf::random::uniform({n, 1, 1, 1}, 0, 1, tf::float32, seed)));
  tf::random::set_seed(global);
  return d;
}
// Traced with a None batch: one trace serves batches of 1 and 3, equal to eager (a layer whose
// draws are fixed by its factor).
void check_traced(const tf::keras::Layer& layer, int64_t h, int64_t w, int64_t c) {
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, h, w, c})};
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 3}) {
    const tf::Tensor x = input(n, h, w, c);
    check_close(f(x), layer(x, true), 1e-6, 1e-4);
  }
  CHECK(f.tracing_count() == 1);
}
tf::Tensor image(const tf::Tensor& t, int64_t b) {
  return tf::slice(t, {b, 0, 0, 0}, {1, -1, -1, -1});
}

// Solarization(value_range=(0, 1))(x / 255 - 0.1, training=True) (Keras 3.15)
const std::vector<double> kSolarUnit = {
    1,           0.547916651, 1,           0.45416674,  0.912500024, 0.36041674,
    0.818750024, 0.26666674,  0.725000024, 0.172916725, 0.631250024, 1,
    0.537500024, 0.995833337, 0.443749994, 0.902083337, 0.349999994, 0.808333337,
    0.256249994, 0.714583337, 0.162499994, 0.620833337, 1,           0.527083337,
    0.985416651, 0.433333337, 0.891666651, 0.339583337, 0.797916651, 0.245833337,
    0.704166651, 0.152083337, 0.610416651, 1,           0.516666651, 0.975000024};
// RandomInvert((1, 1), value_range=(0, 200))(x, training=True) (Keras 3.15)
const std::vector<double> kInvert = {
    200,       59.21875,  176.09375, 35.3125, 152.1875,  11.40625, 128.28125, -12.5, 104.375,
    -36.40625, 80.46875,  197.34375, 56.5625, 173.4375,  32.65625, 149.53125, 8.75,  125.625,
    -15.15625, 101.71875, -39.0625,  77.8125, 194.6875,  53.90625, 170.78125, 30,    146.875,
    6.09375,   122.96875, -17.8125,  99.0625, -41.71875, 75.15625, 192.03125, 51.25, 168.125};
// RandomPosterization((3, 3))(x, training=True) (Keras 3.15)
const std::vector<double> kPoster = {0,   128, 0,   160, 32,  160, 64,  192, 64,  224, 96,  0,
                                     128, 0,   160, 32,  160, 64,  192, 96,  224, 96,  0,   128,
                                     0,   160, 32,  192, 64,  192, 96,  224, 96,  0,   128, 0};
// RandomPosterization((5, 5), value_range=(0, 1))(x / 255, training=True) (Keras 3.15)
const std::vector<double> kPosterUnit = {
    0,           0.533333361, 0.0627451017, 0.627451003,  0.156862751, 0.721568644, 0.250980407,
    0.815686285, 0.345098048, 0.909803927,  0.43921569,   0,           0.533333361, 0.0941176489,
    0.627451003, 0.188235298, 0.721568644,  0.282352954,  0.815686285, 0.376470596, 0.909803927,
    0.470588237, 0,           0.564705908,  0.0941176489, 0.65882355,  0.188235298, 0.752941191,
    0.282352954, 0.847058833, 0.376470596,  0.941176474,  0.470588237, 0,           0.564705908,
    0.0941176489};
// AutoContrast()(xc, training=False) (Keras 3.15)
const std::vector<double> kAuto = {
    0,          146.123596, 22.9213524, 177.640442, 45.8426971, 200.561798, 77.3595505, 223.483154,
    100.280899, 255,        123.20224,  0,          154.719086, 22.9213486, 177.640457, 54.4382019,
    200.561798, 77.3595428, 232.078644, 100.280899, 255,        131.79776,  0,          154.719101,
    31.5168533, 177.640442, 54.4382057, 209.157288, 77.3595505, 232.078644, 108.876411, 255,
    131.79776,  8.59550858, 154.719101, 31.5168571, 174.941864, 23.5,       200.561798, 71.162796,
    23.5,       100.280899, 255,        23.5,       0,          151.220932, 23.5,       177.640457,
    47.441864,  23.5,       77.3595581, 231.279083, 23.5,       255,        127.5,      23.5,
    154.719101, 23.720932,  23.5,       54.4382057, 207.558136, 23.5,       232.078659, 103.779068,
    23.5,       131.79776,  0,          23.5,       31.5168571, 183.837219, 23.5,       209.157303};
// AutoContrast(value_range=(0, 1))(xc / 255) (Keras 3.15)
const std::vector<double> kAutoUnit = {0,
                                       0.57303369,
                                       0.0898876265,
                                       0.696629167,
                                       0.179775283,
                                       0.786516845,
                                       0.303370774,
                                       0.876404524,
                                       0.393258423,
                                       1,
                                       0.483146042,
                                       0,
                                       0.606741488,
                                       0.0898876414,
                                       0.696629226,
                                       0.21348314,
                                       0.786516845,
                                       0.303370744,
                                       0.910112321,
                                       0.393258423,
                                       1,
                                       0.516853988,
                                       0,
                                       0.606741548,
                                       0.123595506,
                                       0.696629167,
                                       0.213483155,
                                       0.820224643,
                                       0.303370774,
                                       0.910112321,
                                       0.42696631,
                                       1,
                                       0.516853988,
                                       0.0337078758,
                                       0.606741548,
                                       0.123595521,
                                       0.686046541,
                                       0.0921568647,
                                       0.786516845,
                                       0.279069781,
                                       0.0921568647,
                                       0.393258423,
                                       1,
                                       0.0921568647,
                                       0,
                                       0.593023241,
                                       0.0921568647,
                                       0.696629226,
                                       0.186046526,
                                       0.0921568647,
                                       0.303370804,
                                       0.906976819,
                                       0.0921568647,
                                       1,
                                       0.5,
                                       0.0921568647,
                                       0.606741548,
                                       0.0930232629,
                                       0.0921568647,
                                       0.213483155,
                                       0.813953459,
                                       0.0921568647,
                                       0.910112381,
                                       0.40697673,
                                       0.0921568647,
                                       0.516853988,
                                       0,
                                       0.0921568647,
                                       0.123595521,
                                       0.720930278,
                                       0.0921568647,
                                       0.820224702};
// RandomSharpness((0.2, 0.2))(xs, training=True) (Keras 3.15)
const std::vector<double> kSharp = {
    19.8605785, 104.370193, 38.25,      125.088943, 60.0721169, 145.685089, 80.6682739, 154.389435,
    89.3725967, 174.98558,  98.0769196, 33.0600967, 111.685089, 33.6730804, 118.182693, 54.3918304,
    151.896637, 74.9879761, 167.588943, 110.17308,  191.495178, 122.187508, 52.8798103, 134.20192,
    76.7860565, 146.216339, 76.9086609, 156.146637, 79.2379837, 152.959137, 85.9807739, 183.48558,
    106.57692,  55.5360603, 136.858185, 79.4423141, 148.872589, 79.5649109, 172.778854, 103.471161,
    172.901459, 115.48558,  175.84375,  110.82692,  33.9182701, 103.225967, 48.9975967, 121.615387,
    67.1418304, 152.754807, 87.7379837, 161.459137, 96.4423141, 182.055298, 117.038467, 40.1298065,
    125.74279,  44.4206734, 128.930283, 50.9182701, 151.365387, 73.353363,  157.862976, 100.814903,
    186.427887, 109.519226, 44.5024071, 130.115387, 65.0985565, 138.819717, 73.802887,  159.415863,
    80.6682663, 153.286057, 99.0576935, 192.639435, 115.730774, 50.7139473, 147.483185, 78.1754837,
    159.497589, 90.1899109, 171.512024, 114.096161, 183.526443, 114.21875,  207.432709, 119.980774,
    43.0721169, 140.57692,  61.7067261, 147.319717, 70.4110565, 174.168274, 104.86058,  186.182693,
    116.875008, 47.5673141, 140.78125,  71.4735565, 140.903854, 83.4879837, 151.569717, 74.6610641,
    160.274033, 72.209137,  168.610565, 90.5985565, 30.9759636, 116.588943, 51.5721169, 125.293274,
    60.2764473, 145.88942,  80.8725967, 154.59375,  89.5769196, 164.033661, 97.9134674, 19.9014435};
// RandomSharpness((0.9, 0.9), value_range=(0, 1))(xs / 255, training=True) (Keras 3.15)
const std::vector<double> kSharpUnit = {0,
                                        0.74246788,
                                        0.0187500045,
                                        0.852884531,
                                        0.123397425,
                                        0.963942289,
                                        0.234455138,
                                        1,
                                        0.407692313,
                                        1,
                                        0.580929518,
                                        0,
                                        0.728525639,
                                        0.0669871718,
                                        0.913301229,
                                        0.177403837,
                                        0.955769181,
                                        0.288461506,
                                        1,
                                        0.323237181,
                                        1,
                                        0.479166627,
                                        0,
                                        0.635096133,
                                        0,
                                        0.791025639,
                                        0.0839743614,
                                        0.957852602,
                                        0.290544897,
                                        1,
                                        0.474038482,
                                        1,
                                        0.585096121,
                                        0,
                                        0.64551276,
                                        0,
                                        0.801442266,
                                        0.0943910182,
                                        0.895192266,
                                        0.188141018,
                                        1,
                                        0.344070494,
                                        1,
                                        0.587179482,
                                        0,
                                        0.845673084,
                                        0.0597756431,
                                        0.968269229,
                                        0.183653846,
                                        1,
                                        0.29471153,
                                        1,
                                        0.467948675,
                                        1,
                                        0.579006433,
                                        0,
                                        0.752243638,
                                        0.108012795,
                                        0.954326928,
                                        0.292788446,
                                        1,
                                        0.394230753,
                                        1,
                                        0.469391018,
                                        1,
                                        0.642628193,
                                        0,
                                        0.753685832,
                                        0.0241987258,
                                        0.926923037,
                                        0.197435886,
                                        1,
                                        0.380288452,
                                        1,
                                        0.502884626,
                                        1,
                                        0.634455085,
                                        0,
                                        0.687179446,
                                        0,
                                        0.843108952,
                                        0.136057645,
                                        0.999038398,
                                        0.229807645,
                                        1,
                                        0.447916657,
                                        1,
                                        0.636538506,
                                        0,
                                        0.747596145,
                                        0.0905448645,
                                        0.931089759,
                                        0.263782054,
                                        1,
                                        0.302403867,
                                        1,
                                        0.458333313,
                                        0,
                                        0.552083313,
                                        0,
                                        0.770192266,
                                        0.000961527228,
                                        0.933173001,
                                        0.265865386,
                                        1,
                                        0.497435868,
                                        1,
                                        0.620032012,
                                        0,
                                        0.702884614,
                                        0,
                                        0.876121759,
                                        0.146634609,
                                        0.987179458,
                                        0.257692307,
                                        1,
                                        0.430929482,
                                        1,
                                        0.606089711,
                                        0};
// RandomColorDegeneration((0.3, 0.3))(x, training=True) (Keras 3.15)
const std::vector<double> kDegen = {
    25.6091728, 124.156044, 42.3435478, 144.918457, 63.1059647, 161.652832, 97.3257751, 195.87265,
    114.06015,  207.823212, 126.010719, 44.1982231, 123.669106, 41.8566055, 140.403473, 76.0764084,
    174.623276, 92.8107834, 195.385696, 113.573204, 212.120071, 102.419739, 20.6072407, 119.154114,
    54.8270493, 153.373917, 71.5614166, 174.136337, 92.3238373, 190.870712, 126.543655, 225.09053,
    143.27803,  33.5776825, 132.124557, 50.3120575};
// RandomColorDegeneration((-0.9, -0.9))(x, training=True) (Keras 3.15)
const std::vector<double> kDegenNeg = {
    0,          190.65686,  0,   223.994598, 1.93210602, 255,        0, 255,        40.3195648,
    255,        100.092834, 0,   202.742691, 0,          248.164551, 0, 241.130157, 19.0676575,
    255,        52.4053955, 255, 181.490784, 0,          226.912659, 0, 219.878235, 0,
    253.215973, 31.1534843, 255, 24.1190491, 255,        69.5409241, 0, 198.626312, 0};

// RandomGaussianBlur((1, 1), 3, (0.8, 0.8))(xs, training=True) (Keras 3.15)
const std::vector<double> kBlur = {
    39.1317863, 73.8008194, 52.9766006, 90.5283279, 80.5919571, 108.721115, 98.7847366, 94.7692795,
    84.8329086, 112.962067, 88.3087845, 60.9446983, 94.4398193, 41.4709816, 76.1400146, 63.0494957,
    123.323288, 81.2422867, 121.433212, 112.998154, 145.339462, 122.187492, 99.035553,  131.376831,
    122.941803, 123.138481, 99.9865265, 122.921227, 80.8402328, 94.2524872, 69.3118744, 129.585663,
    87.5046616, 101.691795, 134.033096, 125.598045, 125.794724, 102.642776, 149.700989, 126.549034,
    126.745705, 118.310661, 114.46669,  104.530312, 62.4493217, 61.5959473, 72.9163437, 75.4407654,
    79.2710266, 107.400192, 97.4638214, 110.876083, 83.5119781, 129.068863, 101.704773, 77.0514908,
    105.180649, 61.4107285, 78.6520462, 43.11092,   109.182007, 73.6408768, 90.8822021, 94.9400101,
    123.069176, 98.4158936, 71.0518036, 116.608673, 89.2445908, 102.656853, 92.7204819, 120.84964,
    76.8521729, 79.3765793, 90.6969757, 137.671341, 95.5903549, 85.6539688, 144.658096, 121.506126,
    136.419739, 113.267776, 128.181366, 137.174026, 137.370712, 114.218742, 161.276962, 112.616005,
    70.5350037, 130.808777, 91.1512756, 119.280441, 77.1994476, 130.837616, 107.685661, 140.026962,
    116.875,    93.7230453, 140.78125,  117.629303, 117.825981, 126.818642, 118.878372, 76.7973785,
    104.926544, 44.0082932, 110.821945, 57.8531036, 68.9658051, 97.0949707, 87.1585922, 83.1431427,
    73.2067642, 101.335938, 91.3995514, 104.811813, 77.4477234, 99.31633,   78.4921036, 42.9509773};
// RandomGaussianBlur((1, 1), 5, (0.5, 0.5), value_range=(0, 1))(xs / 255, training=True)
// (Keras 3.15)
const std::vector<double> kBlur5 = {
    0.0803646296, 0.424821645, 0.155173153, 0.501674294, 0.273283988, 0.585187912, 0.356984526,
    0.584443271,  0.356126219, 0.668136418, 0.428239435, 0.126695395, 0.490888745, 0.136846229,
    0.480883867,  0.234170184, 0.630706131, 0.317893505, 0.650899887, 0.396813452, 0.744572043,
    0.479116172,  0.21330598,  0.561363101, 0.306898415, 0.570053399, 0.304545313, 0.62161696,
    0.308594525,  0.609286606, 0.3261576,   0.722846568, 0.409880877, 0.223548666, 0.571545422,
    0.317249089,  0.580746591, 0.315117717, 0.674233735, 0.408476621, 0.671841264, 0.417363733,
    0.702364028,  0.473707289, 0.160922974, 0.420299709, 0.235436171, 0.495108217, 0.279847682,
    0.591780007,  0.363570988, 0.664187789, 0.362535745, 0.747904897, 0.446071833, 0.206412807,
    0.518345177,  0.217109323, 0.487993181, 0.207314178, 0.615579665, 0.334900439, 0.605784416,
    0.402611554,  0.714515626, 0.474884897, 0.173294947, 0.558454275, 0.257012039, 0.557385743,
    0.329148293,  0.641109109, 0.327785462, 0.587457359, 0.40259397,  0.760005414, 0.447221071,
    0.218592674,  0.613132238, 0.347414553, 0.622229099, 0.356715709, 0.63125658,  0.450231105,
    0.713456631,  0.447710514, 0.807128727, 0.511075854, 0.198081791, 0.594589472, 0.300220191,
    0.612152517,  0.299339861, 0.641556799, 0.376048744, 0.723807454, 0.458164781, 0.192535862,
    0.551833332,  0.286105365, 0.54928875,  0.368355989, 0.603063166, 0.29004088,  0.602182806,
    0.257406145,  0.686019063, 0.332004964, 0.169125319, 0.481267333, 0.252820253, 0.480469882,
    0.25215283,   0.564005554, 0.3355591,   0.63622278,  0.334678799, 0.667720497, 0.398043662,
    0.117393009};
// RandomErasing((1, 1), (1, 1), fill_value=[10, 300, -5])(x, training=True) (Keras 3.15)
const std::vector<double> kErase = {10, 255, 0, 10, 255, 0, 10, 255, 0, 10, 255, 0,
                                    10, 255, 0, 10, 255, 0, 10, 255, 0, 10, 255, 0,
                                    10, 255, 0, 10, 255, 0, 10, 255, 0, 10, 255, 0};

// Equalization()(xe, training=True) (Keras 3.15)
const std::vector<double> kEqual = {
    0,   100, 0,   163, 100, 216, 72,  100, 70,  235, 100, 0,   144, 100, 216, 52,  100, 70,
    216, 100, 255, 124, 100, 139, 33,  100, 70,  196, 100, 216, 105, 100, 139, 13,  100, 0,
    177, 100, 216, 85,  100, 139, 248, 100, 0,   150, 100, 216, 59,  100, 70,  222, 100, 255,
    131, 100, 139, 39,  100, 70,  203, 100, 255, 111, 100, 139, 20,  100, 70,  183, 100, 216,
    92,  100, 139, 255, 100, 0,   157, 100, 216, 65,  100, 70,  229, 100, 255, 137, 100, 216,
    46,  100, 70,  209, 100, 255, 118, 100, 139, 26,  100, 70,  190, 100, 216, 98,  100, 139,
    7,   100, 0,   170, 100, 216, 78,  100, 139, 242, 100, 0};
// Equalization(value_range=(0, 1), bins=16)(xe / 255, training=True) (Keras 3.15)
const std::vector<double> kEqual16 = {
    0,           0.392156869, 0,           0.639215708, 0.392156869,
    0.847058833, 0.278431386, 0.392156869, 0.274509817, 0.917647064,
    0.392156869, 0,           0.556862772, 0.392156869, 0.847058833,
    0.137254909, 0.392156869, 0.274509817, 0.831372559, 0.392156869,
    1,           0.470588237, 0.392156869, 0.545098066, 0.0549019612,
    0.392156869, 0.274509817, 0.776470602, 0.392156869, 0.847058833,
    0.360784322, 0.392156869, 0.545098066, 0,           0.392156869,
    0,           0.694117665, 0.392156869, 0.847058833, 0.278431386,
    0.392156869, 0.545098066, 1,           0.392156869, 0,
    0.556862772, 0.392156869, 0.847058833, 0.196078435, 0.392156869,
    0.274509817, 0.917647064, 0.392156869, 1,           0.470588237,
    0.392156869, 0.545098066, 0.137254909, 0.392156869, 0.274509817,
    0.776470602, 0.392156869, 1,           0.41568628,  0.392156869,
    0.545098066, 0,           0.392156869, 0.274509817, 0.694117665,
    0.392156869, 0.847058833, 0.360784322, 0.392156869, 0.545098066,
    1,           0.392156869, 0,           0.639215708, 0.392156869,
    0.847058833, 0.196078435, 0.392156869, 0.274509817, 0.917647064,
    0.392156869, 1,           0.556862772, 0.392156869, 0.847058833,
    0.137254909, 0.392156869, 0.274509817, 0.831372559, 0.392156869,
    1,           0.41568628,  0.392156869, 0.545098066, 0.0549019612,
    0.392156869, 0.274509817, 0.776470602, 0.392156869, 0.847058833,
    0.360784322, 0.392156869, 0.545098066, 0,           0.392156869,
    0,           0.639215708, 0.392156869, 0.847058833, 0.278431386,
    0.392156869, 0.545098066, 1,           0.392156869, 0};
// RandomShear(0.3, 0.2).transform_images(x, shear_factor (0.3, 0.2) per image) (Keras 3.15)
const std::vector<double> kShearPlus = {
    0,          140.78125,  23.90625,   174.78125,  57.90625,   198.6875,   91.90625,   129.625,
    115.8125,   112.093742, 149.8125,   32.9375,    183.8125,   66.9375,    207.71875,  99.875,
    163.359375, 123.78125,  161.287491, 80.4843903, 185.193741, 114.484375, 74.9062424, 138.390625,
    108.906242, 172.390625, 86.4343796, 234.28125,  117.40625,  52.0625114, 45.1562462, 185.9375,
    69.0625,    116.875015, 103.0625,   140.78125,  137.0625,   112.943733, 160.96875,  116.024994,
    133.131256, 78.0937576, 78.6250076, 167.874985, 50.9999962, 67.734375,  182.75,     91.6406174,
    206.656265, 115.54686,  230.562531, 139.453125, 22.5781155, 163.359375, 46.4843674, 161.500015,
    70.3906174, 37.1875,    177.96875,  61.09375,   201.875,    85,         225.78125,  119,
    208.25,     142.90625,  36.125,     176.90625,  60.03125,   210.90625,  94.03125,   234.8125,
    128.03125,  62.6874962, 151.9375,   224.453125, 107.578125, 68,         141.578125, 86.5406189,
    165.48439,  105.081253, 127.340637, 128.987488, 125.268738, 116.609375, 149.174988, 178.499985,
    61.6249962, 202.40625,  143.96875,  130.15625,  167.875,    143.543747, 47.28125,   167.449997,
    81.2812653, 118.999992, 105.187515, 152.999985, 139.1875,   84.1500092, 228.96875,  112.09375,
    46.7500114, 11.9531212, 152.734375, 35.8593712, 150.875015, 59.7656174, 174.781265, 83.6718674,
    198.687515, 107.57811,  222.593765, 131.484375, 14.6093655, 239.0625,   122.1875,   5.3125};
// RandomShear(0.3, 0.2).transform_images(x, shear_factor (-0.3, -0.2) per image) (Keras 3.15)
const std::vector<double> kShearMinus = {
    0,          140.78125,  23.90625,   164.6875,   47.8125,    188.59375,  71.71875,   212.5,
    95.625,     236.40625,  119.53125,  2.65625,    143.4375,   26.5625,    167.34375,  50.46875,
    191.25,     74.375,     155.65625,  116.078125, 179.5625,   129.890625, 85.1593781, 153.796875,
    135.043762, 136.690628, 50.7343674, 165.962494, 64.546875,  128.03125,  100.9375,   241.71875,
    124.84375,  74.2687531, 194.4375,   98.1750031, 115.493744, 91.375,     139.399994, 105.187485,
    91.3750153, 129.09375,  105.187515, 142.90625,  108.481255, 151.40625,  34.53125,   175.3125,
    132.015625, 87.2843781, 155.921875, 54.7187271, 169.734375, 78.6249847, 183.546875, 82.1312408,
    207.45314,  101.096863, 174.887482, 104.390633, 201.875,    85,         225.78125,  108.90625,
    249.6875,   132.8125,   15.9375,    156.71875,  39.84375,   180.625,    63.75,      204.53125,
    87.65625,   228.4375,   111.5625,   252.34375,  135.46875,  18.59375,   177.171875, 96.3687439,
    139.240616, 74.109375,  168.512512, 98.015625,  151.40625,  111.828125, 175.312515, 125.640625,
    153.053146, 149.546875, 45.15625,   185.9375,   69.0625,    131.856247, 138.65625,  124.84375,
    152.46875,  76.8187485, 176.375,    111.243752, 128.349991, 135.149994, 173.081238, 87.1249924,
    196.987488, 95.625,     236.40625,  119.53125,  81.3874969, 217.015625, 105.293755, 91.6937637,
    113.95314,  115.600006, 127.76564,  36.6562386, 151.67189,  50.4687347, 165.48439,  69.2218628};
// RandomShear(0.5, 0, 'nearest', 'constant', 7).transform_images(x, shear_factor (0.5, 0))
// (Keras 3.15)
const std::vector<double> kShearConst = {
    0,         140.78125, 23.90625,  164.6875,  47.8125,   188.59375, 71.71875,  212.5,
    95.625,    236.40625, 119.53125, 2.65625,   143.4375,  26.5625,   167.34375, 215.15625,
    98.28125,  239.0625,  122.1875,  5.3125,    146.09375, 29.21875,  170,       53.125,
    193.90625, 77.03125,  217.8125,  7,         7,         7,         7.96875,   148.75,
    31.875,    172.65625, 55.78125,  196.5625,  79.6875,   220.46875, 103.59375, 244.375,
    127.5,     10.625,    7,         7,         7,         223.125,   106.25,    247.03125,
    130.15625, 13.28125,  154.0625,  37.1875,   177.96875, 61.09375,  7,         7,
    7,         7,         7,         7,         201.875,   85,        225.78125, 108.90625,
    249.6875,  132.8125,  15.9375,   156.71875, 39.84375,  180.625,   63.75,     204.53125,
    87.65625,  228.4375,  111.5625,  159.375,   42.5,      183.28125, 66.40625,  207.1875,
    90.3125,   231.09375, 114.21875, 255,       138.125,   21.25,     162.03125, 7,
    7,         7,         209.84375, 92.96875,  233.75,    116.875,   0,         140.78125,
    23.90625,  164.6875,  47.8125,   188.59375, 71.71875,  212.5,     7,         7,
    7,         167.34375, 50.46875,  191.25,    74.375,    215.15625, 98.28125,  239.0625,
    122.1875,  5.3125,    7,         7,         7,         7,         7,         7};

}  // namespace

TEST_CASE("Solarization inverts above the threshold as Keras", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input();
    // The defaults (threshold 0, no addition) invert every pixel.
    const tf::Tensor y = layers::Solarization()(x, true);
    CHECK(y.shape() == x.shape());
    CHECK(y.dtype() == tf::float32);
    check_close(y, scaled(x, -1, 255), 1e-6, 1e-4);
    check_values(layers::Solarization(0.0, 0.0, {0, 1})(scaled(x, 1 / 255.0, -0.1), true),
                 kSolarUnit, 1e-5, 1e-5);
    check_close(layers::Solarization(0.5, 0.5)(x, false), x, 0, 0);
    // Random addition and threshold: a plain reference on the layer's two draws.
    const int64_t n = 4;
    const tf::Tensor xb = input(n);
    const auto d = draws(21, 7, n, 2);
    const tf::Tensor yb = layers::Solarization(Factor{0.1, 0.3}, 0.8, {0, 255}, 7)(xb, true);
    const auto xv = values(xb), yv = values(yb);
    int inverted = 0, kept = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t b = i / 18;
      const double add = 0.1 + (0.3 * 255 - 0.1) * d[0][b], thr = 0.8 * 255 * d[1][b];
      const double v = std::clamp(xv[i] + add, 0.0, 255.0);
      const double want = v < thr ? v : 255 - v;
      (v < thr ? kept : inverted) += 1;
      CHECK(yv[i] == Approx(want).epsilon(1e-4).margin(1e-3));
    }
    CHECK(kept > 0);
    CHECK(inverted > 0);
  }
  check_traced(layers::Solarization(), 2, 3, 3);
  require_error([] { layers::Solarization(1.5); }, {"[Solarization]", "addition_factor", "1.5"});
  require_error(
      [] {
        layers::Solarization(0.0, Factor{-0.5, 0.5});
      },
      {"[Solarization]", "threshold_factor", "-0.5"});
  require_error([] { layers::Solarization(0.0, 0.0, {1, 1}); }, {"[Solarization]", "value_range"});
  require_error([] { layers::Solarization()(tf::zeros({2, 3}), true); }, {"rank 3"});
}

TEST_CASE("RandomInvert inverts whole images with the drawn probability",
          "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input();
    check_values(layers::RandomInvert(Factor{1, 1}, {0, 200})(x, true), kInvert, 1e-6, 1e-4);
    check_close(layers::RandomInvert(0.0)(x, true), x, 0, 0);
    check_close(layers::RandomInvert(Factor{1, 1})(x, false), x, 0, 0);
    // Factor 1 gives a probability p in [0, 1) and a threshold u: image b inverts when u < p.
    const int64_t n = 16;
    const tf::Tensor xb = input(n);
    const auto d = draws(5, 3, n, 2);
    const tf::Tensor yb = layers::RandomInvert(1.0, {0, 255}, 3)(xb, true);
    const tf::Tensor inv = scaled(xb, -1, 255);
    int count = 0;
    for (int64_t b = 0; b < n; ++b) {
      const bool flip = d[1][static_cast<size_t>(b)] < d[0][static_cast<size_t>(b)];
      count += flip ? 1 : 0;
      check_close(image(yb, b), image(flip ? inv : xb, b), 0, 0);
    }
    CHECK(count > 0);
    CHECK(count < n);
    // Unseeded calls draw anew: over 8 calls of a batch of 16, not all the same.
    const layers::RandomInvert layer(Factor{0.5, 0.5});
    const auto first = values(layer(xb, true));
    bool differs = false;
    for (int i = 0; i < 8 && !differs; ++i) differs = values(layer(xb, true)) != first;
    CHECK(differs);
  }
  check_traced(layers::RandomInvert(Factor{1, 1}), 2, 3, 3);
  require_error([] { layers::RandomInvert(1.5); }, {"[RandomInvert]", "factor", "1.5"});
  require_error([] { layers::RandomInvert(Factor{2, 3}); }, {"[RandomInvert]", "(2, 3)"});
}

TEST_CASE("RandomPosterization keeps the drawn number of bits", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input();
    check_values(layers::RandomPosterization(Factor{3, 3})(x, true), kPoster, 0, 1e-4);
    check_values(layers::RandomPosterization(Factor{5, 5}, {0, 1})(scaled(x, 1 / 255.0), true),
                 kPosterUnit, 1e-5, 1e-6);
    check_close(layers::RandomPosterization(Factor{8, 8})(x, true), tf::floor(x), 0, 0);
    check_close(layers::RandomPosterization(3)(x, false), x, 0, 0);
    // Factor 4 keeps 1, 2 or 3 bits per image: floor(u * 3) + 1 from the layer's draw.
    const int64_t n = 12;
    const tf::Tensor xb = input(n);
    const auto d = draws(9, 2, n, 1);
    const auto yv = values(layers::RandomPosterization(4, {0, 255}, 2)(xb, true));
    const auto xv = values(xb);
    std::vector<int> seen(4, 0);
    for (size_t i = 0; i < xv.size(); ++i) {
      const int bits = 1 + static_cast<int>(std::floor(static_cast<float>(d[0][i / 18]) * 3.0f));
      seen[static_cast<size_t>(std::min(bits, 3))] = 1;
      const double step = std::ldexp(1.0, 8 - bits);
      CHECK(yv[i] == std::floor(std::floor(xv[i]) / step) * step);
    }
    CHECK(seen[1] + seen[2] + seen[3] >= 2);
  }
  check_traced(layers::RandomPosterization(Factor{2, 2}), 2, 3, 3);
  require_error([] { layers::RandomPosterization(9); }, {"[RandomPosterization]", "9"});
  require_error(
      [] {
        layers::RandomPosterization(Factor{9, 10});
      },
      {"[RandomPosterization]", "(9, 10)"});
}

TEST_CASE("AutoContrast stretches each channel as Keras", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Image 1's channel 1 is constant (kept as it is).
    std::vector<double> v = values(input(2, 3, 4, 3));
    for (size_t i = 36; i < 72; i += 3) v[i + 1] = 7.0;
    for (double& e : v) e = e * 0.5 + 20;
    const tf::Tensor x = tf::detail::from_doubles(v, {2, 3, 4, 3}, tf::float32);
    const tf::Tensor y = layers::AutoContrast()(x, false);
    CHECK(y.shape() == x.shape());
    check_values(y, kAuto, 1e-5, 1e-3);
    check_close(layers::AutoContrast()(x, true), y, 0, 0);
    check_values(layers::AutoContrast({0, 1})(scaled(x, 1 / 255.0), true), kAutoUnit, 1e-5, 1e-5);
    // A single image (rank 3).
    const tf::Tensor x3 = tf::squeeze(image(x, 0), {0});
    check_values(layers::AutoContrast()(x3, true),
                 std::vector<double>(kAuto.begin(), kAuto.begin() + 36), 1e-5, 1e-3);
  }
  check_traced(layers::AutoContrast(), 3, 4, 3);
  require_error([] { layers::AutoContrast({5, 5}); }, {"[AutoContrast]", "value_range", "(5, 5)"});
}

TEST_CASE("RandomSharpness blends with the smoothed image as Keras",
          "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input(2, 4, 5, 3);
    const tf::Tensor y = layers::RandomSharpness(Factor{0.2, 0.2})(x, true);
    CHECK(y.shape() == x.shape());
    check_values(y, kSharp, 1e-5, 1e-3);
    check_values(layers::RandomSharpness(Factor{0.9, 0.9}, {0, 1})(scaled(x, 1 / 255.0), true),
                 kSharpUnit, 1e-5, 1e-5);
    // Factor 0.5 exactly: s = 1 leaves the image as it is.
    check_close(layers::RandomSharpness(Factor{0.5, 0.5})(x, true), x, 1e-6, 1e-4);
    check_close(layers::RandomSharpness(0.5)(x, false), x, 0, 0);
    // Random factors stay inside value_range.
    for (double e : values(layers::RandomSharpness(1.0, {0, 255}, 3)(input(6, 4, 5, 3), true)))
      CHECK((e >= 0 && e <= 255));
  }
  check_traced(layers::RandomSharpness(Factor{0.3, 0.3}), 4, 5, 3);
  require_error([] { layers::RandomSharpness(-0.5); }, {"[RandomSharpness]", "-0.5"});
}

TEST_CASE("RandomColorDegeneration blends towards grey as Keras", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input();
    check_values(layers::RandomColorDegeneration(Factor{0.3, 0.3})(x, true), kDegen, 1e-5, 1e-3);
    check_values(layers::RandomColorDegeneration(Factor{-0.9, -0.9})(x, true), kDegenNeg, 1e-5,
                 1e-3);
    check_close(layers::RandomColorDegeneration(0.5)(x, false), x, 0, 0);
    // A random factor in (-0.6, 0.6): image b uses the layer's draw.
    const int64_t n = 4;
    const tf::Tensor xb = input(n);
    const auto d = draws(13, 6, n, 1);
    const tf::Tensor yb = layers::RandomColorDegeneration(0.6, {0, 255}, 6)(xb, true);
    for (int64_t b = 0; b < n; ++b) {
      const double u = static_cast<float>(d[0][static_cast<size_t>(b)]) * 1.2f - 0.6f;
      check_close(image(yb, b), image(layers::RandomColorDegeneration(Factor{u, u})(xb, true), b),
                  1e-5, 1e-3);
    }
  }
  check_traced(layers::RandomColorDegeneration(Factor{0.4, 0.4}), 2, 3, 3);
  require_error([] { layers::RandomColorDegeneration(2.0); }, {"[RandomColorDegeneration]", "2"});
  require_error(
      [] {
        layers::RandomColorDegeneration(0.5)(tf::zeros({1, 2, 2, 4}), true);
      },
      {"[RandomColorDegeneration]", "3 channels", "(1, 2, 2, 4)"});
}

TEST_CASE("Augmentation layers repeat their draws after set_seed", "[cpu][keras][augment]") {
  const tf::Tensor x = input(8);
  const auto run = [&](const tf::keras::Layer& l) {
    tf::random::set_seed(42);
    const auto a = values(l(x, true));
    const auto b = values(l(x, true));
    tf::random::set_seed(42);
    CHECK(values(l(x, true)) == a);
    CHECK(values(l(x, true)) == b);
    return a != b;
  };
  int changed = 0;
  changed += run(layers::Solarization(0.5, 0.5, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomInvert(1.0, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomPosterization(8, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomSharpness(1.0, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomColorDegeneration(1.0, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomErasing(1.0, 0.5, {}, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomGaussianBlur(1.0, 3, 1.0, {0, 255}, 1)) ? 1 : 0;
  changed += run(layers::RandomShear(0.5, 0.5, {.seed = 1})) ? 1 : 0;
  changed += run(layers::MixUp(0.5, 1)) ? 1 : 0;
  changed += run(layers::CutMix(1.0, 1)) ? 1 : 0;
  // Each layer draws anew on its second call.
  CHECK(changed == 10);
}

TEST_CASE("RandomErasing fills the drawn box of the chosen images", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input();
    // Scale 1 erases the whole image; fill values are clipped to value_range.
    const tf::Tensor y = layers::RandomErasing(Factor{1, 1}, Factor{1, 1}, {10, 300, -5})(x, true);
    CHECK(y.shape() == x.shape());
    check_values(y, kErase, 0, 0);
    check_close(layers::RandomErasing(0.0)(x, true), x, 0, 0);
    check_close(layers::RandomErasing()(x, false), x, 0, 0);
    // Random boxes and choices: a plain reference on the layer's six draws (width and height
    // scales, x and y offsets, probability, threshold).
    const int64_t n = 8, H = 6, W = 7;
    const tf::Tensor xb = input(n, H, W, 3);
    const auto d = draws(3, 11, n, 6);
    const auto yv =
        values(layers::RandomErasing(1.0, Factor{0.1, 0.6}, {-1}, {0, 255}, 11)(xb, true));
    const auto xv = values(xb);
    int erased = 0, images = 0;
    for (int64_t b = 0; b < n; ++b) {
      const auto u = [&](int k) { return d[static_cast<size_t>(k)][static_cast<size_t>(b)]; };
      const double rw = std::sqrt(0.1 + 0.5 * u(0)) * W, rh = std::sqrt(0.1 + 0.5 * u(1)) * H;
      const double x0 = u(2) * (W - rw), y0 = u(3) * (H - rh);
      const bool on = u(5) < u(4);
      images += on ? 1 : 0;
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t c = 0; c < 3; ++c) {
            const auto at = static_cast<size_t>(((b * H + i) * W + j) * 3 + c);
            // Pixels on a box edge may round either way in float32: skip them.
            const double ex = std::min(std::abs(j - x0), std::abs(j - x0 - rw));
            const double ey = std::min(std::abs(i - y0), std::abs(i - y0 - rh));
            if (ex < 1e-4 || ey < 1e-4) continue;
            const bool in = on && j >= x0 && j < x0 + rw && i >= y0 && i < y0 + rh;
            erased += in ? 1 : 0;
            CHECK(yv[at] == (in ? 0.0 : xv[at]));
          }
    }
    CHECK(images > 0);
    CHECK(images < n);
    CHECK(erased > 0);
    // Noise fill (fill_value empty) stays inside value_range and changes the erased pixels.
    const auto noisy = values(layers::RandomErasing(Factor{1, 1}, Factor{1, 1})(xb, true));
    int changed = 0;
    for (size_t i = 0; i < noisy.size(); ++i) {
      CHECK((noisy[i] >= 0 && noisy[i] <= 255));
      changed += noisy[i] != xv[i] ? 1 : 0;
    }
    CHECK(changed > static_cast<int>(noisy.size()) / 4);
  }
  check_traced(layers::RandomErasing(Factor{1, 1}, Factor{1, 1}, {7}), 2, 3, 3);
  require_error([] { layers::RandomErasing(1.5); }, {"[RandomErasing]", "factor", "1.5"});
  require_error([] { layers::RandomErasing(1.0, 2.0); }, {"[RandomErasing]", "scale", "2"});
  require_error(
      [] {
        layers::RandomErasing(1.0, 0.5, {1, 2});
      },
      {"[RandomErasing]", "fill_value", "2 values"});
  require_error(
      [] {
        layers::RandomErasing(1.0, 0.5, {1, 2, 3})(tf::zeros({1, 2, 2, 1}), true);
      },
      {"[RandomErasing]", "3 channels", "(1, 2, 2, 1)"});
}

TEST_CASE("RandomGaussianBlur blurs as Keras with a fixed sigma", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = input(2, 4, 5, 3);
    const tf::Tensor y = layers::RandomGaussianBlur(Factor{1, 1}, 3, Factor{0.8, 0.8})(x, true);
    CHECK(y.shape() == x.shape());
    check_values(y, kBlur, 1e-5, 1e-3);
    check_values(layers::RandomGaussianBlur(Factor{1, 1}, 5, Factor{0.5, 0.5}, {0, 1})(
                     scaled(x, 1 / 255.0), true),
                 kBlur5, 1e-5, 1e-6);
    check_close(layers::RandomGaussianBlur(0.0)(x, true), x, 0, 0);
    check_close(layers::RandomGaussianBlur()(x, false), x, 0, 0);
    // Factor 1: image b is blurred when the threshold draw is below the probability draw.
    const int64_t n = 12;
    const tf::Tensor xb = input(n, 4, 5, 3);
    const auto d = draws(8, 4, n, 2);
    const tf::Tensor yb =
        layers::RandomGaussianBlur(1.0, 3, Factor{0.8, 0.8}, {0, 255}, 4)(xb, true);
    const tf::Tensor all = layers::RandomGaussianBlur(Factor{1, 1}, 3, Factor{0.8, 0.8})(xb, true);
    int blurred = 0;
    for (int64_t b = 0; b < n; ++b) {
      const bool on = d[1][static_cast<size_t>(b)] < d[0][static_cast<size_t>(b)];
      blurred += on ? 1 : 0;
      check_close(image(yb, b), image(on ? all : xb, b), 1e-6, 1e-4);
    }
    CHECK(blurred > 0);
    CHECK(blurred < n);
  }
  check_traced(layers::RandomGaussianBlur(Factor{1, 1}, 3, Factor{0.7, 0.7}), 4, 5, 3);
  require_error([] { layers::RandomGaussianBlur(1.0, 4); },
                {"[RandomGaussianBlur]", "kernel_size", "4"});
  require_error([] { layers::RandomGaussianBlur(1.0, 3, 1.5); },
                {"[RandomGaussianBlur]", "sigma", "1.5"});
}

TEST_CASE("Equalization maps each channel through its batch histogram as Keras",
          "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // xe: input(2, 4, 5, 3) with channel 1 constant (kept) and channel 2 rounded to multiples
    // of 64 (few bins).
    std::vector<double> v = values(input(2, 4, 5, 3));
    for (size_t i = 0; i < v.size(); i += 3) {
      v[i + 1] = 100;
      v[i + 2] = std::round(v[i + 2] / 64) * 64;
    }
    const tf::Tensor x = tf::detail::from_doubles(v, {2, 4, 5, 3}, tf::float32);
    const tf::Tensor y = layers::Equalization()(x, true);
    CHECK(y.shape() == x.shape());
    check_values(y, kEqual, 0, 1e-3);
    check_values(layers::Equalization({0, 1}, 16)(scaled(x, 1 / 255.0), true), kEqual16, 1e-5,
                 1e-6);
    check_close(layers::Equalization()(x, false), x, 0, 0);
  }
  check_traced(layers::Equalization({0, 255}, 64), 4, 5, 3);
  require_error([] { layers::Equalization({0, 255}, 0); }, {"[Equalization]", "bins", "0"});
  require_error([] { layers::Equalization({3, 3}); }, {"[Equalization]", "value_range"});
}

TEST_CASE("RandomShear shears by the signed Keras factors", "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const int64_t n = 2;
    const tf::Tensor x = input(n, 4, 5, 3);
    // Factors (0.3, 0.3) and (0.2, 0.2): every image shears by +-(0.3, 0.2), the sign from the
    // layer's first draw.
    int minus = 0;
    for (int64_t global : {13, 14, 15, 16}) {
      const auto d = draws(global, 6, n, 1);
      const tf::Tensor y =
          layers::RandomShear(Factor{0.3, 0.3}, Factor{0.2, 0.2}, {.seed = 6})(x, true);
      CHECK(y.shape() == x.shape());
      for (int64_t b = 0; b < n; ++b) {
        const bool neg = d[0][static_cast<size_t>(b)] > 0.5;
        minus += neg ? 1 : 0;
        const auto& want = neg ? kShearMinus : kShearPlus;
        check_values(image(y, b),
                     std::vector<double>(want.begin() + b * 60, want.begin() + (b + 1) * 60), 1e-5,
                     1e-3);
      }
    }
    CHECK(minus > 0);
    CHECK(minus < 8);
    const layers::RandomShear constant(
        Factor{0.5, 0.5}, 0.0,
        {.fill_mode = "constant", .interpolation = "nearest", .fill_value = 7.0});
    // Nearest and constant 7: the Keras literal for the images whose sign is +.
    int checked = 0;
    for (int64_t global : {3, 4, 5, 6}) {
      const auto d = draws(global, 1, n, 1);
      const tf::Tensor yc = layers::RandomShear(
          Factor{0.5, 0.5}, 0.0,
          {.fill_mode = "constant", .interpolation = "nearest", .seed = 1, .fill_value = 7.0})(
          x, true);
      for (int64_t b = 0; b < n; ++b) {
        if (d[0][static_cast<size_t>(b)] > 0.5) continue;
        ++checked;
        check_values(
            image(yc, b),
            std::vector<double>(kShearConst.begin() + b * 60, kShearConst.begin() + (b + 1) * 60),
            1e-6, 1e-4);
      }
    }
    CHECK(checked > 0);
    check_close(constant(x, false), x, 0, 0);
    check_close(layers::RandomShear()(x, true), x, 0, 0);
  }
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 4, 5, 3})};
  const layers::RandomShear layer(0.4, 0.4, {.fill_mode = "constant"});
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 3}) CHECK(f(input(n, 4, 5, 3)).shape() == tf::TensorShape({n, 4, 5, 3}));
  CHECK(f.tracing_count() == 1);
  require_error([] { layers::RandomShear(1.5); }, {"[RandomShear]", "x_factor", "1.5"});
  require_error(
      [] {
        layers::RandomShear(0.1, Factor{-0.2, 0.2});
      },
      {"[RandomShear]", "y_factor", "-0.2"});
  require_error([] { layers::RandomShear(0.1, 0.1, {.fill_mode = "mirror"}); },
                {"[RandomShear]", "fill_mode", "mirror"});
}

TEST_CASE("the docs/keras.md augmentation pipeline runs in training and inference",
          "[cpu][keras][augment]") {
  using namespace layers;  // NOLINT(google-build-using-namespace): the docs' spelling
  auto augment = tf::keras::Sequential({RandomSharpness(0.5), RandomColorDegeneration(0.3),
                                        Solarization(0.0, 0.9), RandomErasing(0.25),
                                        RandomShear(0.1, 0.1), Equalization(), AutoContrast()});
  const tf::Tensor images = input(4, 6, 7, 3);
  const tf::Tensor batch = augment(images, true);
  CHECK(batch.shape() == images.shape());
  for (double e : values(batch)) CHECK((e >= 0 && e <= 255));
  // Inference: only AutoContrast acts.
  check_close(augment(images, false), AutoContrast()(images, false), 0, 0);
}

// MixUp of images x_b = b and one-hot labels e_b: label row b is lambda_b e_b + (1 - lambda_b)
// e_p(b), which recovers lambda_b and p(b) (when p(b) != b) to check the images' mix, the
// permutation and the Beta(alpha, alpha) distribution of lambda.
void check_mixup(double alpha, double var, double below_01) {
  const int64_t n = 400;
  std::vector<double> xs(static_cast<size_t>(n)), ls(static_cast<size_t>(n * n), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    xs[static_cast<size_t>(b)] = static_cast<double>(b);
    ls[static_cast<size_t>(b * n + b)] = 1.0;
  }
  const tf::Tensor x = tf::detail::from_doubles(xs, {n, 1, 1, 1}, tf::float32);
  const tf::Tensor labels = tf::detail::from_doubles(ls, {n, n}, tf::float32);
  const auto [mx, ml] = layers::MixUp(alpha, 5).call_with_labels(x, labels, true);
  CHECK(mx.shape() == x.shape());
  CHECK(ml.shape() == labels.shape());
  const auto xv = values(mx), lv = values(ml);
  std::vector<int> used(static_cast<size_t>(n), 0);
  std::vector<double> lambdas;
  for (int64_t b = 0; b < n; ++b) {
    const auto row = [&](int64_t j) { return lv[static_cast<size_t>(b * n + j)]; };
    int64_t p = b;
    for (int64_t j = 0; j < n; ++j)
      if (j != b && row(j) != 0.0) p = j;
    if (p != b) used[static_cast<size_t>(p)] += 1;
    const double lambda = p == b ? 1.0 : row(b);
    if (p != b) lambdas.push_back(lambda);
    CHECK((lambda >= 0 && lambda <= 1));
    CHECK(row(b) + (p == b ? 0.0 : row(p)) == Approx(1).margin(1e-5));
    CHECK(xv[static_cast<size_t>(b)] ==
          Approx(lambda * static_cast<double>(b) + (1 - lambda) * static_cast<double>(p))
              .margin(2e-3 * n));
  }
  // A permutation: no image is used twice. A lambda within float32 rounding of 1 (or p(b) = b)
  // leaves the label row e_b and hides p(b); Beta(0.2, 0.2) gives a few.
  const auto hidden = static_cast<int64_t>(n - static_cast<int64_t>(lambdas.size()));
  CHECK(std::count(used.begin(), used.end(), 1) == n - hidden);
  CHECK(hidden < n / 10);
  REQUIRE(lambdas.size() > 350);
  double mean = 0, m2 = 0, below = 0;
  for (double l : lambdas) {
    mean += l;
    m2 += l * l;
    below += l < 0.1 ? 1 : 0;
  }
  const auto m = static_cast<double>(lambdas.size());
  mean /= m;
  // Beta(alpha, alpha): mean 1/2, variance 1 / (4 (2 alpha + 1)), P(lambda < 0.1) from 10^7
  // numpy.random.Generator.beta draws.
  CHECK(mean == Approx(0.5).margin(0.09));
  CHECK(m2 / m - mean * mean == Approx(var).margin(0.035));
  CHECK(below / m == Approx(below_01).margin(0.1));
}

TEST_CASE("MixUp mixes images and labels with Beta weights and a permutation",
          "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(31);
    check_mixup(0.2, 0.178586, 0.336673);
    check_mixup(2.0, 0.05, 0.028011);
    tf::detail::clear_random_seed();
    const tf::Tensor x = input(4);
    check_close(layers::MixUp()(x, false), x, 0, 0);
    const auto [ix, il] = layers::MixUp().call_with_labels(x, tf::ones({4, 2}), false);
    check_close(ix, x, 0, 0);
    check_close(il, tf::ones({4, 2}), 0, 0);
    // A single image mixes with itself.
    const tf::Tensor x3 = tf::squeeze(image(x, 0), {0});
    check_close(layers::MixUp(0.5)(x3, true), x3, 1e-6, 1e-4);
  }
  // Traced with a None batch: one trace, each mixed pixel between the batch's extremes.
  const layers::MixUp layer(0.4, 3);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 2, 3, 3})};
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 5}) {
    const tf::Tensor y = f(input(n));
    CHECK(y.shape() == tf::TensorShape({n, 2, 3, 3}));
    for (double e : values(y)) CHECK((e >= -1e-3 && e <= 255.001));
  }
  CHECK(f.tracing_count() == 1);
  require_error([] { layers::MixUp(0.0); }, {"[MixUp]", "alpha", "0"});
  require_error(
      [] {
        layers::MixUp().call_with_labels(input(2), tf::ones({3, 2}), true);
      },
      {"[MixUp]", "(2, 2, 3, 3)", "(3, 2)"});
}

TEST_CASE("CutMix pastes a box of a permuted image and mixes labels by its area",
          "[cpu][cuda][keras][augment]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Image b is constant b + 1; labels are one-hot.
    const int64_t n = 64, H = 10, W = 12;
    std::vector<double> xs(static_cast<size_t>(n * H * W)), ls(static_cast<size_t>(n * n), 0.0);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i / (H * W) + 1);
    for (int64_t b = 0; b < n; ++b) ls[static_cast<size_t>(b * n + b)] = 1.0;
    const tf::Tensor x = tf::detail::from_doubles(xs, {n, H, W, 1}, tf::float32);
    const tf::Tensor labels = tf::detail::from_doubles(ls, {n, n}, tf::float32);
    tf::random::set_seed(17);
    const auto [mx, ml] = layers::CutMix(1.0, 4).call_with_labels(x, labels, true);
    CHECK(mx.shape() == x.shape());
    CHECK(ml.shape() == labels.shape());
    const auto xv = values(mx), lv = values(ml);
    std::vector<int> used(static_cast<size_t>(n), 0);
    int boxes = 0;
    for (int64_t b = 0; b < n; ++b) {
      // The pasted pixels: one source image, filling an axis-aligned rectangle.
      int64_t count = 0, i0 = H, i1 = -1, j0 = W, j1 = -1, src = -1;
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
          const double v = xv[static_cast<size_t>((b * H + i) * W + j)];
          if (v == static_cast<double>(b + 1)) continue;
          CHECK((src == -1 || v == static_cast<double>(src + 1)));
          src = static_cast<int64_t>(v) - 1;
          ++count;
          i0 = std::min(i0, i), i1 = std::max(i1, i), j0 = std::min(j0, j), j1 = std::max(j1, j);
        }
      const double w = lv[static_cast<size_t>(b * n + b)];
      CHECK((w >= 0 && w <= 1 + 1e-6));
      if (count == 0) continue;  // an empty box, or the image drew itself
      ++boxes;
      used[static_cast<size_t>(src)] += 1;
      CHECK(count == (i1 - i0 + 1) * (j1 - j0 + 1));
      // The label weight is 1 - r^2 for box sides r * (W, H); the pixel box spans those
      // sides to within a pixel at each end.
      const double r = std::sqrt(1 - w);
      CHECK(static_cast<double>(j1 - j0 + 1) >= r * W - 1 - 1e-3);
      CHECK(static_cast<double>(j1 - j0 + 1) <= r * W + 1 + 1e-3);
      CHECK(static_cast<double>(i1 - i0 + 1) >= r * H - 1 - 1e-3);
      CHECK(static_cast<double>(i1 - i0 + 1) <= r * H + 1 + 1e-3);
      CHECK(lv[static_cast<size_t>(b * n + src)] == Approx(1 - w).margin(1e-5));
    }
    // Sources come from a permutation: none is used twice.
    CHECK(std::count(used.begin(), used.end(), 2) == 0);
    CHECK(boxes > n / 2);
    tf::detail::clear_random_seed();
    const tf::Tensor xi = input(4);
    check_close(layers::CutMix()(xi, false), xi, 0, 0);
    // alpha near 0 (factor 0): lambda is 0 or 1 up to rounding, never NaN.
    for (double e : values(layers::CutMix(0.0, 2)(input(16), true))) CHECK(std::isfinite(e));
    for (double e : values(layers::MixUp(1e-4, 2)(input(16), true))) CHECK(std::isfinite(e));
    // A single image is left as it is.
    const tf::Tensor x3 = tf::squeeze(image(xi, 0), {0});
    check_close(layers::CutMix()(x3, true), x3, 0, 0);
    const auto [sx, sl] = layers::CutMix().call_with_labels(x3, tf::ones({1, 2}), true);
    check_close(sx, x3, 0, 0);
    check_close(sl, tf::ones({1, 2}), 0, 0);
  }
  const layers::CutMix layer(0.5, 3);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 2, 3, 3})};
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 5}) CHECK(f(input(n)).shape() == tf::TensorShape({n, 2, 3, 3}));
  CHECK(f.tracing_count() == 1);
  require_error([] { layers::CutMix(1.5); }, {"[CutMix]", "factor", "1.5"});
  require_error(
      [] {
        layers::CutMix().call_with_labels(input(2), tf::ones({3, 2}), true);
      },
      {"[CutMix]", "(2, 2, 3, 3)", "(3, 2)"});
}

TEST_CASE("Augmentation layers return the compute dtype under mixed_float16 and float64",
          "[cpu][keras][augment]") {
  // They compute in float32 and return the policy's compute dtype (Keras returns float16 under
  // mixed_float16). AutoContrast, deterministic, agrees with its float32 result.
  namespace mp = tf::keras::mixed_precision;
  const tf::Tensor x = input(2, 6, 6, 3);
  const tf::Tensor want = layers::AutoContrast()(x, true);
  for (const char* policy : {"mixed_float16", "float64"}) {
    CAPTURE(policy);
    mp::set_global_policy(policy);
    const tf::DType dt = std::string(policy) == "float64" ? tf::float64 : tf::float16;
    std::vector<tf::keras::Layer> all = {layers::Solarization(),
                                         layers::RandomInvert(),
                                         layers::RandomPosterization(Factor{3, 5}),
                                         layers::AutoContrast(),
                                         layers::RandomSharpness(0.5),
                                         layers::RandomErasing(),
                                         layers::RandomGaussianBlur(),
                                         layers::RandomColorDegeneration(0.5),
                                         layers::MixUp(),
                                         layers::CutMix(),
                                         layers::Equalization(),
                                         layers::RandomShear(0.3)};
    mp::reset_global_policy();
    for (tf::keras::Layer& l : all) {
      CAPTURE(l.name());
      const tf::Tensor y = l(x, true);
      CHECK(y.dtype() == dt);
      CHECK(y.shape() == x.shape());
      for (double v : tf::detail::to_double_vector(y)) REQUIRE(std::isfinite(v));
    }
    check_values(all[3](x, true), tf::detail::to_double_vector(want), 1e-3, 0.2);
    mp::set_global_policy(policy);
    layers::MixUp mix;
    mp::reset_global_policy();
    const auto [images, labels] = mix.call_with_labels(x, tf::ones({2, 4}), true);
    CHECK(images.dtype() == dt);
    CHECK(labels.dtype() == dt);
  }
}

TEST_CASE("CutMix passes a single image and its label vector through", "[cpu][keras][augment]") {
  // Keras 3.15: CutMix on a (5, 6, 3) image with a (10,) label returns both unchanged.
  const auto [one, label] =
      layers::CutMix(1.0, 3).call_with_labels(tf::ones({5, 6, 3}), tf::ones({10}), true);
  CHECK(one.shape() == tf::TensorShape({5, 6, 3}));
  CHECK(label.shape() == tf::TensorShape({10}));
  check_values(one, std::vector<double>(90, 1.0));
}

TEST_CASE("Equalization and RandomPosterization scale value ranges in Keras' order",
          "[cpu][keras][augment]") {
  // x = input(2, 2, 3, 3) * (2 / 255) - 1 in float32: several values sit on a bin or floor
  // boundary after the scaling to (0, 255), where the order of the float32 operations decides.
  // keras.layers.Equalization(value_range=(-1, 1), bins=7)(x, training=True) and
  // RandomPosterization(factor=(3, 3), value_range=(-1, 1))(x, training=True) (Keras 3.15).
  const tf::Tensor x = scaled(input(2, 2, 3, 3), 2.0 / 255.0, -1.0);
  check_values(layers::Equalization({-1, 1}, 7)(x, true),
               {-1.0,
                0.20000000298023224,
                -1.0,
                0.3333333432674408,
                -0.6000000238418579,
                0.5529412031173706,
                -0.5529412031173706,
                1.0,
                -0.11372549086809158,
                1.0,
                -0.20000000298023224,
                -1.0,
                0.3333333432674408,
                -1.0,
                0.3333333432674408,
                -0.5529412031173706,
                0.6000000238418579,
                -0.5529412031173706,
                1.0,
                -0.20000000298023224,
                1.0,
                -0.11372549086809158,
                -1.0,
                0.3333333432674408,
                -1.0,
                0.6000000238418579,
                -0.5529412031173706,
                0.5529412031173706,
                -0.6000000238418579,
                1.0,
                -0.11372549086809158,
                1.0,
                -0.11372549086809158,
                -1.0,
                0.20000000298023224,
                -1.0},
               1e-6, 1e-6);
  check_values(layers::RandomPosterization(Factor{3, 3}, {-1, 1})(x, true),
               {-1.0,
                0.003921627998352051,
                -1.0,
                0.2549020051956177,
                -0.7490196228027344,
                0.2549020051956177,
                -0.498039186000824,
                0.5058823823928833,
                -0.498039186000824,
                0.7568627595901489,
                -0.24705880880355835,
                -1.0,
                0.003921627998352051,
                -1.0,
                0.2549020051956177,
                -0.7490196228027344,
                0.2549020051956177,
                -0.498039186000824,
                0.5058823823928833,
                -0.24705880880355835,
                0.7568627595901489,
                -0.24705880880355835,
                -1.0,
                0.003921627998352051,
                -1.0,
                0.2549020051956177,
                -0.7490196228027344,
                0.5058823823928833,
                -0.498039186000824,
                0.5058823823928833,
                -0.24705880880355835,
                0.7568627595901489,
                -0.24705880880355835,
                -1.0,
                0.003921627998352051,
                -1.0},
               1e-6, 1e-6);
}

TEST_CASE("The pixel-wise augmentation layers serve any image size from one trace",
          "[cpu][keras][augment]") {
  // Solarization, RandomInvert, RandomPosterization, AutoContrast and RandomColorDegeneration
  // with factors that fix their draws, traced for (None, None, None, 3): one trace serves 2 x 3
  // and 4 x 5 images, equal to the eager calls. MixUp keeps the shape and the value range.
  const std::vector<tf::keras::Layer> layers = {
      layers::Solarization(Factor{0.0, 0.0}, Factor{0.0, 0.0}),
      layers::RandomInvert(Factor{1.0, 1.0}), layers::RandomPosterization(Factor{3.0, 3.0}),
      layers::AutoContrast(), layers::RandomColorDegeneration(Factor{0.5, 0.5})};
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, tf::None, tf::None, 3})};
  for (const tf::keras::Layer& layer : layers) {
    CAPTURE(layer.name());
    auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
    for (const auto& [h, w] : {std::pair<int64_t, int64_t>{2, 3}, {4, 5}}) {
      const tf::Tensor x = input(2, h, w, 3);
      check_close(f(x), layer(x, true), 1e-6, 1e-4);
    }
    CHECK(f.tracing_count() == 1);
  }
  layers::MixUp mixup(0.2, 5);
  auto f = tf::function([&](const tf::Tensor& t) { return mixup(t, true); }, opts);
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{2, 3}, {4, 5}}) {
    const tf::Tensor y = f(input(3, h, w, 3));
    CHECK(y.shape() == tf::TensorShape({3, h, w, 3}));
    CHECK(tf::reduce_min(y).item<float>() >= 0.0f);
    CHECK(tf::reduce_max(y).item<float>() <= 255.0f);
  }
  CHECK(f.tracing_count() == 1);
  // In a functional model on images of any size: the pixel-wise layers build, the layers that
  // work on pixel positions still need the height and width.
  const tf::keras::KerasTensor in = tf::keras::Input({tf::None, tf::None, 3});
  const tf::keras::KerasTensor out = layers::AutoContrast()(layers::Solarization()(in));
  CHECK(out.shape() == tf::TensorShape({tf::None, tf::None, tf::None, 3}));
  require_error([&] { (void)layers::RandomSharpness(0.5)(in); },
                {"expected images with known height and width"});
}

namespace {
// The image the CLAHE reference values were computed for: element i of the row-major shape is
// (37 i + 11 + 13 floor(i / 7)) mod 256 (the same expression in NumPy, float32).
tf::Tensor clahe_input(const tf::TensorShape& s, double scale = 1.0) {
  std::vector<double> v(static_cast<size_t>(s.num_elements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>((37 * i + 11 + (i / 7) * 13) % 256) * scale;
  return tf::detail::from_doubles(v, s, tf::float32);
}
// Every 7th value of y (Keras' reference), its sum and its sum weighted by (i mod 13).
void check_clahe(const tf::Tensor& y, const std::vector<double>& every7, double sum,
                 double weighted, double tol) {
  const std::vector<double> v = values(y);
  std::vector<double> got7;
  double s = 0, w = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 7 == 0) got7.push_back(v[i]);
    s += v[i];
    w += v[i] * static_cast<double>(i % 13);
  }
  REQUIRE(got7.size() == every7.size());
  for (size_t i = 0; i < got7.size(); ++i) {
    INFO("value " << 7 * i);
    CHECK(got7[i] == Approx(every7[i]).margin(tol));
  }
  CHECK(s == Approx(sum).margin(tol * static_cast<double>(v.size())));
  CHECK(w == Approx(weighted).margin(12 * tol * static_cast<double>(v.size())));
}
}  // namespace

TEST_CASE("ContrastLimitedAdaptiveHistogramEqualization equals Keras' CLAHE",
          "[cpu][cuda][keras][augment]") {
  using layers::ContrastLimitedAdaptiveHistogramEqualization;
  // Keras 3.15: ContrastLimitedAdaptiveHistogramEqualization(clip_limit=2.0,
  // tile_grid_size=(4, 4)) on clahe_input((1, 10, 13, 2)) (tiles padded to 12 x 16), the same
  // with training=False; the defaults on (2, 20, 16, 3); value_range=(0, 1), clip_limit=0,
  // tile_grid_size=(2, 3) on clahe_input((3, 12, 9, 1)) / 255.
  const std::vector<double> a = {
      11.964351654052734, 30.457551956176758, 46.95148849487305,  59.446895599365234,
      73.94156646728516,  93.43440246582031,  109.9283447265625,  123.6468505859375,
      136.25198364257812, 155.32830810546875, 171.6286163330078,  187.76641845703125,
      202.34188842773438, 219.38809204101562, 234.8824005126953,  251.37632751464844,
      12.003745079040527, 28.708194732666016, 44.12215042114258,  57.78083801269531,
      74.30675506591797,  93.43440246582031,  108.49822998046875, 121.42410278320312,
      137.4554443359375,  156.4112548828125,  170.57269287109375, 186.56683349609375,
      202.67755126953125, 220.0545196533203,  233.44503784179688, 251.3554229736328,
      12.067849159240723, 27.333301544189453, 40.62828063964844,  57.62295150756836,
      75.09268951416016,  92.75439453125};
  const std::vector<double> b = {
      13.963616371154785, 26.459022521972656, 40.95369338989258,  61.44615936279297,
      75.94083404541016,  90.43550109863281,  104.93017578125,    123.42337036132812,
      137.9180450439453,  156.41123962402344, 170.90591430664062, 185.4005889892578,
      203.89378356933594, 218.38845825195312, 236.21524047851562, 251.37632751464844,
      13.297195434570312, 31.12397575378418,  44.285804748535156, 61.11294937133789,
      76.44490051269531,  92.43476867675781,  106.929443359375,   123.42337036132812,
      138.9176788330078,  155.41162109375,    170.90591430664062, 185.4005889892578,
      207.22589111328125, 221.7205810546875,  236.76141357421875, 251.37632751464844,
      11.63114070892334,  28.458288192749023, 42.95295715332031,  61.44615936279297,
      76.44490051269531,  92.1015625,         106.929443359375,   123.42337036132812,
      141.25015258789062, 159.48159790039062, 170.90591430664062, 185.4005889892578,
      201.89453125,       218.38845825195312, 236.8816680908203,  251.37632751464844,
      13.297194480895996, 26.792234420776367, 41.6201171875,      61.44615936279297,
      76.94895935058594,  94.43402862548828,  106.929443359375,   123.42337036132812,
      139.5841064453125,  159.48159790039062, 174.23802185058594, 188.7327117919922,
      203.89378356933594, 218.38845825195312, 234.8824005126953,  251.37632751464844,
      11.964351654052734, 28.458288192749023, 41.95332336425781,  58.44725799560547,
      74.22808837890625,  94.43402862548828,  108.92870330810547, 123.42337036132812,
      138.25125122070312, 154.95285034179688, 171.2391357421875,  186.0670166015625,
      207.22589111328125, 221.72056579589844, 236.42819213867188, 251.37152099609375,
      11.631139755249023, 31.123971939086914, 45.6186408996582,   59.44689178466797,
      74.22808837890625,  90.43550109863281,  105.9298095703125,  123.42337036132812,
      139.9173126220703,  156.41123962402344, 171.23912048339844, 186.0670166015625,
      203.89378356933594, 221.72056579589844, 236.88168334960938, 251.37632751464844,
      13.297194480895996, 28.125076293945312, 44.285804748535156, 61.44615936279297,
      76.94895935058594,  93.76760864257812,  106.929443359375,   123.42337036132812,
      138.9176788330078,  156.41123962402344, 170.90591430664062, 185.4005889892578,
      201.89453125,       217.38882446289062, 236.8816680908203,  251.37632751464844,
      13.297194480895996, 28.458288192749023, 41.6201171875,      59.78010177612305,
      76.44490051269531,  93.57678985595703,  108.15507507324219, 123.39985656738281,
      139.64419555664062, 157.5545654296875,  172.4661102294922,  188.377197265625,
      205.07786560058594, 219.8233642578125,  236.49346923828125, 251.31362915039062,
      11.137284278869629, 28.88180160522461,  43.62730026245117,  59.65599822998047,
      75.06190490722656,  91.48089599609375,  106.39361572265625, 123.30579376220703,
      141.55104064941406, 157.5454559326172,  170.90591430664062, 185.4005889892578,
      201.89453125,       218.38845825195312, 236.8816680908203,  251.37632751464844,
      13.963616371154785, 26.459022521972656, 40.95369338989258,  61.44615936279297,
      77.15058898925781,  94.43402862548828,  106.929443359375,   123.42337036132812,
      139.5841064453125,  159.48159790039062, 174.23802185058594, 188.73269653320312,
      203.89378356933594, 218.38845825195312, 234.8824005126953,  251.37632751464844,
      11.964351654052734, 28.458288192749023, 41.95332336425781,  58.44725799560547,
      74.22808837890625,  94.43402862548828,  108.92870330810547, 123.42337036132812,
      138.25125122070312, 154.95285034179688, 171.2391357421875,  186.0670166015625,
      207.2259063720703,  221.72056579589844, 236.42819213867188, 251.37152099609375,
      11.63114070892334,  31.12397575378418,  45.61864471435547,  59.44689178466797,
      74.22808837890625,  90.43550109863281,  105.9298095703125,  123.42337036132812,
      139.9173126220703,  156.41123962402344, 171.23912048339844, 186.0670166015625,
      203.89378356933594, 221.72056579589844, 236.8816680908203,  251.37632751464844,
      13.297194480895996, 28.125078201293945, 44.28580093383789,  61.44615936279297,
      76.94896697998047,  93.76760864257812,  106.929443359375,   123.42337036132812,
      138.9176788330078,  156.41123962402344, 170.90591430664062, 185.4005889892578,
      201.89453125,       217.38882446289062, 236.8816680908203,  251.37632751464844,
      13.297194480895996, 28.458288192749023, 41.6201171875,      59.78010177612305,
      76.44490051269531,  93.7676010131836,   108.26228332519531, 123.42337036132812,
      139.5841064453125,  157.61322021484375, 172.5719757080078,  188.7327117919922,
      203.89378356933594, 218.38845825195312, 235.80987548828125, 251.36190795898438,
      10.96471881866455,  28.458288192749023, 42.95295715332031,  61.44615936279297,
      76.44490051269531,  92.43476867675781,  106.929443359375,   123.42337036132812,
      141.25015258789062, 156.82652282714844, 172.57196044921875, 187.3998565673828,
      203.89378356933594, 221.72056579589844, 236.8816680908203,  251.37632751464844,
      11.964351654052734, 26.459022521972656, 41.95332336425781,  59.44689178466797,
      74.51460266113281,  92.43476867675781,  105.9298095703125,  123.42337036132812,
      138.25125122070312, 156.82652282714844, 171.57232666015625, 186.0670166015625,
      203.89378356933594, 218.72166442871094, 236.11065673828125, 251.35543823242188,
      13.354676246643066, 31.265066146850586, 44.17729187011719,  60.75487518310547,
      76.17047882080078,  93.86183166503906,  108.60733032226562, 123.35282897949219,
      139.09796142578125, 155.84283447265625, 171.58810424804688, 186.33358764648438,
      205.8672637939453,  220.77996826171875, 236.23464965820312, 251.27182006835938,
      11.918749809265137, 29.164146423339844, 44.076866149902344};
  const std::vector<double> c = {
      0.1111111119389534, 0.14814816415309906, 0.12962962687015533, 0.25,
      0.3333333432674408, 0.3888888657093048,  0.39814817905426025, 0.4553377032279968,
      0.5876906514167786, 0.6742919087409973,  0.6913580894470215,  0.729938268661499,
      0.8284313678741455, 0.8823529481887817,  0.944444477558136,   1.0,
      0.0555555559694767, 0.1111111044883728,  0.2222222238779068,  0.21296297013759613,
      0.2777777910232544, 0.34259259700775146, 0.4259259104728699,  0.5076252818107605,
      0.563725471496582,  0.6234568357467651,  0.6805555820465088,  0.7777777314186096,
      0.8159041404724121, 0.8877996206283569,  0.9444444179534912,  1.0,
      0.0555555559694767, 0.1388888955116272,  0.15740740299224854, 0.2222222238779068,
      0.2903050184249878, 0.3410493731498718,  0.4413580298423767,  0.49346405267715454,
      0.5588235259056091, 0.6111111044883728,  0.6898148655891418,  0.7194989323616028,
      0.8159041404724121, 0.8823529481887817,  0.9351851940155029};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    ContrastLimitedAdaptiveHistogramEqualization clahe({0, 255}, 2.0, {4, 4});
    const tf::Tensor xa = clahe_input({1, 10, 13, 2});
    check_clahe(clahe(xa, true), a, 33180.55354833603, 191987.61513853073, 2e-4);
    check_clahe(clahe(xa, false), a, 33180.55354833603, 191987.61513853073, 2e-4);
    check_clahe(ContrastLimitedAdaptiveHistogramEqualization()(clahe_input({2, 20, 16, 3}), true),
                b, 247765.02660894394, 1480257.9512462616, 2e-4);
    const tf::Tensor xc = clahe_input({3, 12, 9, 1}, 1.0 / 255.0);
    const tf::Tensor yc =
        ContrastLimitedAdaptiveHistogramEqualization({0, 1}, 0.0, {2, 3})(xc, true);
    check_clahe(yc, c, 166.82117020338774, 964.525969080627, 1e-6);
    // One image alone (rank 3) equals its batch entry.
    const tf::Tensor one = clahe(tf::squeeze(xa, {0}), true);
    check_close(one, tf::squeeze(clahe(xa, true), {0}), 0, 0);
    // The output does not depend smoothly on the input: its gradient is zero.
    tf::GradientTape tape;
    tape.watch(xa);
    const tf::Tensor loss = tf::reduce_sum(clahe(xa, true));
    const tf::Tensor g = tape.gradient(loss, xa);
    if (g.defined()) check_close(g, tf::zeros_like(xa), 0, 0);
  }
  // Traced with a None batch: equal to eager; one trace per batch size (the histograms'
  // count depends on it).
  ContrastLimitedAdaptiveHistogramEqualization traced({0, 255}, 3.0, {2, 2});
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 7, 6, 3})};
  auto f = tf::function([&](const tf::Tensor& t) { return traced(t, true); }, opts);
  for (int64_t n : {1, 3, 1}) {
    const tf::Tensor x = input(n, 7, 6, 3);
    check_close(f(x), traced(x, true), 1e-6, 1e-4);
  }
  CHECK(f.tracing_count() <= 2);
  require_error(
      [] {
        ContrastLimitedAdaptiveHistogramEqualization({0, 255}, -1.0);
      },
      {"[ContrastLimitedAdaptiveHistogramEqualization]", "clip_limit", "-1"});
  require_error(
      [] {
        ContrastLimitedAdaptiveHistogramEqualization({0, 255}, 4.0, {0, 8});
      },
      {"[ContrastLimitedAdaptiveHistogramEqualization]", "tile_grid_size", "(0, 8)"});
  require_error(
      [] {
        ContrastLimitedAdaptiveHistogramEqualization({1, 1});
      },
      {"[ContrastLimitedAdaptiveHistogramEqualization]", "value_range"});
}

TEST_CASE("RandomElasticTransform warps images by smooth random fields",
          "[cpu][cuda][keras][augment]") {
  using layers::RandomElasticTransform;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::random::uniform({3, 32, 28, 3}, 0.0, 255.0, tf::float32, 8);
    const RandomElasticTransform always(Factor{1, 1}, Factor{1, 1}, "bilinear", "reflect", 0.0,
                                        {0, 255}, 3);
    // Inference, a zero factor and a zero scale leave the images as they are.
    check_close(always(x, false), x, 0, 0);
    check_close(RandomElasticTransform(0.0)(x, true), x, 0, 0);
    check_close(RandomElasticTransform(1.0, 0.0)(x, true), x, 0, 0);
    // With probability 1 and distortion 1 every image moves (alpha = 3.2 pixels, sigma = 1.4).
    const tf::Tensor y = always(x, true);
    CHECK(y.shape() == x.shape());
    const tf::Tensor change = tf::reduce_mean(tf::abs(y - x), std::vector<int>{1, 2, 3});
    CHECK(tf::reduce_min(change).item<float>() > 1.0f);
    CHECK(tf::reduce_min(y).item<float>() >= 0.0f);
    CHECK(tf::reduce_max(y).item<float>() <= 255.0f);
    // value_range clips: images in [0, 255] clipped to [10, 100].
    const tf::Tensor clipped = RandomElasticTransform(Factor{1, 1}, 0.5, "nearest", "constant",
                                                      300.0, {100, 10}, 4)(x, true);
    CHECK(tf::reduce_min(clipped).item<float>() >= 10.0f);
    CHECK(tf::reduce_max(clipped).item<float>() <= 100.0f);
    // One image alone, and an integer dtype under the layer's float32 computation.
    CHECK(always(tf::squeeze(image(x, 0), {0}), true).shape() == tf::TensorShape{32, 28, 3});
  }
  // A traced function with a None batch serves every batch size from one trace.
  const RandomElasticTransform layer(0.5, 0.5);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 16, 12, 3})};
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 4}) CHECK(f(input(n, 16, 12, 3)).shape() == tf::TensorShape{n, 16, 12, 3});
  CHECK(f.tracing_count() == 1);
  require_error([] { RandomElasticTransform(1.5); }, {"[RandomElasticTransform]", "factor", "1.5"});
  require_error(
      [] {
        RandomElasticTransform(1.0, Factor{2, 3});
      },
      {"[RandomElasticTransform]", "scale"});
  require_error([] { RandomElasticTransform(1.0, 1.0, "bicubic"); },
                {"[RandomElasticTransform]", "bicubic"});
  require_error([] { RandomElasticTransform(1.0, 1.0, "bilinear", "grid-wrap"); },
                {"[RandomElasticTransform]", "grid-wrap"});
}

TEST_CASE("RandAugment applies num_ops layers drawn from Keras' eleven",
          "[cpu][cuda][keras][augment]") {
  using layers::RandAugment;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::random::uniform({4, 12, 10, 3}, 0.0, 255.0, tf::float32, 9);
    // Inference and num_ops 0 leave the images as they are.
    check_close(RandAugment()(x, false), x, 0, 0);
    check_close(RandAugment({0, 255}, 0)(x, true), x, 0, 0);
    // With a zero factor every geometric and colour layer is the identity, so the result is
    // one of: x, posterized (1 bit kept: 0 or 128), solarized with threshold 0 (255 - x), auto
    // contrast or equalization of x, or two of them in turn; values stay in value_range.
    const tf::Tensor y = RandAugment({0, 255}, 2, 0.0, "nearest", 3)(x, true);
    CHECK(y.shape() == x.shape());
    CHECK(tf::reduce_min(y).item<float>() >= 0.0f);
    CHECK(tf::reduce_max(y).item<float>() <= 255.0f);
    // Over many calls each step changes the images in some calls and not in others.
    const RandAugment one({0, 255}, 1, 0.6);
    int changed = 0;
    for (int call = 0; call < 30; ++call)
      changed += tf::reduce_max(tf::abs(one(x, true) - x)).item<float>() > 1e-3f;
    CHECK(changed > 10);
    // Unit value range; a float64 input comes back in the compute dtype, as Keras casts it.
    const tf::Tensor unit = tf::cast(x / 255.0f, tf::float64);
    const tf::Tensor u = RandAugment({0, 1}, 3, 0.3)(unit, true);
    CHECK(u.dtype() == tf::float32);
    CHECK(tf::reduce_max(u).item<float>() <= 1.0f + 1e-6f);
    CHECK(RandAugment()(tf::squeeze(image(x, 0), {0}), true).shape() == tf::TensorShape{12, 10, 3});
  }
  // Traced with a None batch: one trace, every batch size.
  const RandAugment layer({0, 255}, 2, 0.4);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 8, 8, 3})};
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 3}) CHECK(f(input(n, 8, 8, 3)).shape() == tf::TensorShape{n, 8, 8, 3});
  CHECK(f.tracing_count() == 1);
  require_error([] { RandAugment({0, 255}, -1); }, {"[RandAugment]", "num_ops", "-1"});
  require_error([] { RandAugment({0, 255}, 2, 1.5); }, {"[RandAugment]", "factor", "1.5"});
  require_error([] { RandAugment({0, 255}, 2, 0.5, "bicubic"); }, {"[RandAugment]", "bicubic"});
}

TEST_CASE("AugMix mixes augmentation chains with Dirichlet and Beta weights",
          "[cpu][cuda][keras][augment]") {
  using layers::AugMix;
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::random::uniform({4, 12, 10, 3}, 0.0, 255.0, tf::float32, 10);
    check_close(AugMix()(x, false), x, 0, 0);
    // Chains of depth 0 are the images themselves: the weights sum to 1, so x comes back.
    check_close(AugMix({0, 255}, 3, 0)(x, true), x, 1e-5, 1e-3);
    const AugMix mix({0, 255}, 3, 3, 0.5, 1.0, true, "bilinear", 11);
    int changed = 0;
    for (int call = 0; call < 10; ++call) {
      const tf::Tensor y = mix(x, true);
      CHECK(y.shape() == x.shape());
      CHECK(tf::reduce_min(y).item<float>() >= 0.0f);
      CHECK(tf::reduce_max(y).item<float>() <= 255.0f);
      changed += tf::reduce_max(tf::abs(y - x)).item<float>() > 1e-2f;
    }
    CHECK(changed >= 5);
    // The unit range clips there; the 7 layers without all_ops.
    const tf::Tensor u = AugMix({0, 1}, 2, 4, 0.6, 0.5, false, "nearest", 7)(x / 255.0f, true);
    CHECK(tf::reduce_max(u).item<float>() <= 1.0f);
    CHECK(AugMix()(tf::squeeze(image(x, 0), {0}), true).shape() == tf::TensorShape{12, 10, 3});
  }
  const AugMix layer({0, 255}, 2, 2);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 8, 8, 3})};
  auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
  for (int64_t n : {1, 3}) CHECK(f(input(n, 8, 8, 3)).shape() == tf::TensorShape{n, 8, 8, 3});
  CHECK(f.tracing_count() == 1);
  require_error([] { AugMix({0, 255}, 0); }, {"[AugMix]", "num_chains", "0"});
  require_error([] { AugMix({0, 255}, 3, 3, 0.3, -1.0); }, {"[AugMix]", "alpha", "-1"});
  require_error([] { AugMix({0, 255}, 3, 3, 2.0); }, {"[AugMix]", "factor", "2"});
}
