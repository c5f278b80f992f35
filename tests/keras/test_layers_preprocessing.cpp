// Keras preprocessing layers (keras/layers_preprocessing.h): values against Keras 3.15 literals
// (the random layers with an empty factor range, which fixes the transform, e.g. a rotation by a
// known angle), statistics of the random draws, identity at inference, traced == eager, errors,
// and the layers in front of a Conv2D model trained with fit, on every device.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/dataset.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_more.h"
#include "keras/layers_preprocessing.h"
#include "keras/model.h"
#include "keras/training.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace layers = tf::keras::layers;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

tf::Tensor f32(const std::vector<double>& v, const tf::TensorShape& s) {
  return tf::detail::from_doubles(v, s, tf::float32);
}
std::vector<double> vals(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

// (1, 5, 7, 2) input of the Resizing and CenterCrop literals: (arange(70) * 0.83) % 4, float32.
const std::vector<double> kX = {0,
                                0.8299999833106995,
                                1.659999966621399,
                                2.490000009536743,
                                3.319999933242798,
                                0.15000009536743164,
                                0.9800000190734863,
                                1.809999942779541,
                                2.6399998664855957,
                                3.4699997901916504,
                                0.3000001907348633,
                                1.130000114440918,
                                1.9600000381469727,
                                2.7899999618530273,
                                3.619999885559082,
                                0.4499998092651367,
                                1.2799997329711914,
                                2.109999656677246,
                                2.939999580383301,
                                3.7699995040893555,
                                0.6000003814697266,
                                1.4300003051757812,
                                2.260000228881836,
                                3.0900001525878906,
                                3.9200000762939453,
                                0.75,
                                1.5799999237060547,
                                2.4099998474121094,
                                3.239999771118164,
                                0.06999969482421875,
                                0.8999996185302734,
                                1.7299995422363281,
                                2.559999465942383,
                                3.3899993896484375,
                                0.2199993133544922,
                                1.0499992370605469,
                                1.8799991607666016,
                                2.7099990844726562,
                                3.539999008178711,
                                0.3699989318847656,
                                1.2000007629394531,
                                2.029998779296875,
                                2.8600006103515625,
                                3.6899986267089844,
                                0.5200004577636719,
                                1.3499984741210938,
                                2.1800003051757812,
                                3.009998321533203,
                                3.8400001525878906,
                                0.6699981689453125,
                                1.5,
                                2.329998016357422,
                                3.1599998474121094,
                                3.9899978637695312,
                                0.8199996948242188,
                                1.6499977111816406,
                                2.479999542236328,
                                3.30999755859375,
                                0.1399993896484375,
                                0.9699974060058594,
                                1.7999992370605469,
                                2.6299972534179688,
                                3.4599990844726562,
                                0.2899971008300781,
                                1.1199989318847656,
                                1.9500007629394531,
                                2.779998779296875,
                                3.6100006103515625,
                                0.4399986267089844,
                                1.2700004577636719};
// (2, 5, 6, 1) input of the transform layers' literals: (arange(60) * 1.7) % 9, float32.
const std::vector<double> kImg = {
    0,   1.7000000476837158,  3.4000000953674316,  5.100000381469727,  6.800000190734863,
    8.5, 1.2000007629394531,  2.90000057220459,    4.600000381469727,  6.300000190734863,
    8,   0.7000007629394531,  2.4000015258789062,  4.100000381469727,  5.80000114440918,
    7.5, 0.20000076293945312, 1.9000015258789062,  3.6000003814697266, 5.299999237060547,
    7,   8.700000762939453,   1.4000015258789062,  3.1000022888183594, 4.8000030517578125,
    6.5, 8.200000762939453,   0.9000015258789062,  2.6000022888183594, 4.3000030517578125,
    6,   7.700000762939453,   0.40000152587890625, 2.1000022888183594, 3.8000030517578125,
    5.5, 7.200000762939453,   8.900001525878906,   1.5999984741210938, 3.3000030517578125,
    5,   6.700004577636719,   8.400001525878906,   1.0999984741210938, 2.8000030517578125,
    4.5, 6.200004577636719,   7.900001525878906,   0.600006103515625,  2.3000030517578125,
    4,   5.700004577636719,   7.400001525878906,   0.100006103515625,  1.8000030517578125,
    3.5, 5.200004577636719,   6.900001525878906,   8.600006103515625,  1.3000030517578125};
// (6, 3) input of the Normalization literals: (arange(18) * 1.37) % 5, float32.
const std::vector<double> kD = {0,
                                1.3700000047683716,
                                2.740000009536743,
                                4.110000133514404,
                                0.48000001907348633,
                                1.8499999046325684,
                                3.2200002670288086,
                                4.590000152587891,
                                0.9600000381469727,
                                2.3299999237060547,
                                3.6999998092651367,
                                0.06999969482421875,
                                1.4400005340576172,
                                2.809999465942383,
                                4.180000305175781,
                                0.5499992370605469,
                                1.9200000762939453,
                                3.2900009155273438};

}  // namespace

TEST_CASE("Resizing and CenterCrop give Keras values", "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = f32(kX, {1, 5, 7, 2});
    // keras.layers.Resizing(3, 4)(x)
    check_values(layers::Resizing(3, 4)(x),
                 {1.3291666507720947, 1.3258333206176758, 2.9008331298828125, 1.3974997997283936,
                  2.305833339691162,  3.135833263397217,  1.7108333110809326, 2.0408332347869873,
                  2.362499713897705,  0.6924996376037598, 2.2674994468688965, 3.097499370574951,
                  1.672499179840088,  2.5024991035461426, 2.077500104904175,  1.407498836517334,
                  1.7291665077209473, 2.559164524078369,  2.1341662406921387, 2.4641642570495605,
                  1.53916597366333,   1.8691662549972534, 1.4441657066345215, 2.2741663455963135},
                 1e-5, 1e-5);
    // Resizing(3, 4, crop_to_aspect_ratio=True)
    check_values(layers::Resizing(3, 4, {.crop_to_aspect_ratio = true})(x),
                 {1.2883331775665283, 1.1183332204818726, 2.7783331871032715, 1.6083332300186157,
                  1.2683334350585938, 2.0983333587646484, 1.7583333253860474, 1.5883333683013916,
                  2.6549997329711914, 0.4849996566772461, 2.1449995040893555, 2.97499942779541,
                  0.6349992752075195, 1.4649991989135742, 3.1249990463256836, 0.9549989700317383,
                  2.0216665267944336, 2.8516645431518555, 1.5116662979125977, 2.3416643142700195,
                  3.0016660690307617, 0.8316648006439209, 2.491665840148926,  3.3216664791107178},
                 1e-5, 1e-5);
    // Resizing(3, 4, pad_to_aspect_ratio=True, fill_value=0.5)
    check_values(layers::Resizing(3, 4, {.pad_to_aspect_ratio = true, .fill_value = 0.5})(x),
                 {1.3291666507720947, 1.3258333206176758, 2.9008331298828125, 1.3974997997283936,
                  2.305833339691162,  3.135833263397217,  1.7108333110809326, 2.0408332347869873,
                  2.362499713897705,  0.6924996376037598, 2.2674994468688965, 3.097499370574951,
                  1.672499179840088,  2.5024991035461426, 2.077500104904175,  1.407498836517334,
                  1.7291665077209473, 2.559164524078369,  2.1341662406921387, 2.4641642570495605,
                  1.53916597366333,   1.8691662549972534, 1.4441657066345215, 2.2741663455963135},
                 1e-5, 1e-5);
    // Resizing(6, 3, interpolation="nearest")
    const tf::Tensor n = layers::Resizing(6, 3, {.interpolation = "nearest"})(x);
    CHECK(n.shape() == tf::TensorShape({1, 6, 3, 2}));
    check_values(n,
                 {1.659999966621399,  2.490000009536743,  0.9800000190734863, 1.809999942779541,
                  0.3000001907348633, 1.130000114440918,  1.2799997329711914, 2.109999656677246,
                  0.6000003814697266, 1.4300003051757812, 3.9200000762939453, 0.75,
                  0.8999996185302734, 1.7299995422363281, 0.2199993133544922, 1.0499992370605469,
                  3.539999008178711,  0.3699989318847656, 0.8999996185302734, 1.7299995422363281,
                  0.2199993133544922, 1.0499992370605469, 3.539999008178711,  0.3699989318847656,
                  0.5200004577636719, 1.3499984741210938, 3.8400001525878906, 0.6699981689453125,
                  3.1599998474121094, 3.9899978637695312, 0.1399993896484375, 0.9699974060058594,
                  3.4599990844726562, 0.2899971008300781, 2.779998779296875,  3.6100006103515625},
                 0, 0);
    // uint8 images stay uint8 (rounded): Resizing(3, 3)(arange(4) * 70 as uint8 (1, 2, 2, 1))
    const tf::Tensor u =
        tf::cast(tf::constant(std::vector<int32_t>{0, 70, 140, 210}, {1, 2, 2, 1}), tf::uint8);
    const tf::Tensor ru = layers::Resizing(3, 3)(u);
    CHECK(ru.dtype() == tf::uint8);
    check_values(ru, {0, 35, 70, 70, 105, 140, 140, 175, 210}, 0, 0);
    // keras.layers.CenterCrop(3, 4)(x), and (6, 4), taller than x: cropped to 2:3 and resized.
    check_values(layers::CenterCrop(3, 4)(x),
                 {1.2799997329711914,
                  2.109999656677246,
                  2.939999580383301,
                  3.7699995040893555,
                  0.6000003814697266,
                  1.4300003051757812,
                  2.260000228881836,
                  3.0900001525878906,
                  0.8999996185302734,
                  1.7299995422363281,
                  2.559999465942383,
                  3.3899993896484375,
                  0.2199993133544922,
                  1.0499992370605469,
                  1.8799991607666016,
                  2.7099990844726562,
                  0.5200004577636719,
                  1.3499984741210938,
                  2.1800003051757812,
                  3.009998321533203,
                  3.8400001525878906,
                  0.6699981689453125,
                  1.5,
                  2.329998016357422},
                 0, 0);
    const tf::Tensor c64 = layers::CenterCrop(6, 4)(x);
    CHECK(c64.shape() == tf::TensorShape({1, 6, 4, 2}));
    check_values(c64,
                 {3.319999933242798,  0.15000009536743164, 1.8574999570846558, 1.1875,
                  1.6024999618530273, 2.432499885559082,   2.6399998664855957, 3.4699997901916504,
                  3.0349996089935303, 2.864999771118164,   1.5724999904632568, 2.0274999141693115,
                  1.3175002336502075, 2.1475000381469727,  2.3550000190734863, 3.184999942779541,
                  2.7183327674865723, 3.548332691192627,   1.2558330297470093, 2.0858328342437744,
                  1.0008330345153809, 1.8308329582214355,  2.038332939147949,  2.868332862854004,
                  2.4016666412353516, 3.23166561126709,    1.9808326959609985, 1.7691655158996582,
                  1.7258325815200806, 1.5141654014587402,  1.7216662168502808, 2.5516653060913086,
                  2.0850000381469727, 2.9149980545043945,  3.122499942779541,  1.452497959136963,
                  2.867499828338623,  1.1974982023239136,  1.4049997329711914, 2.2349987030029297,
                  1.7999992370605469, 2.6299972534179688,  2.8374991416931152, 1.167497158050537,
                  2.5824990272521973, 0.9124984741210938,  1.1199989318847656, 1.9500007629394531},
                 1e-5, 1e-5);
    // A single image (rank 3) works the same.
    check_values(layers::CenterCrop(3, 4)(f32(kX, {5, 7, 2})), vals(layers::CenterCrop(3, 4)(x)), 0,
                 0);
  }
}

TEST_CASE("random transform layers with a fixed factor give Keras values",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor img = f32(kImg, {2, 5, 6, 1});
    // keras.layers.RandomRotation((0.125, 0.125))(img, training=True): 45 degrees.
    check_values(layers::RandomRotation({0.125, 0.125})(img, true),
                 {3.8673362731933594, 4.851041316986084,  6.3318023681640625, 6.11869478225708,
                  1.5129740238189697, 2.324265718460083,  2.446877956390381,  3.9276394844055176,
                  5.978248596191406,  4.7669267654418945, 1.0794689655303955, 3.1300792694091797,
                  1.5234761238098145, 3.5740859508514404, 5.624696254730225,  7.675304889678955,
                  4.440120220184326,  2.77652645111084,   1.1699235439300537, 3.2205333709716797,
                  5.271142482757568,  7.241800308227539,  3.474393844604492,  1.8531246185302734,
                  1.9757370948791504, 2.8669800758361816, 4.917588233947754,  6.968197822570801,
                  7.130939960479736,  3.148655414581299,  0.867337167263031,  1.8510432243347168,
                  3.3318047523498535, 5.382412910461426,  7.433023452758789,  5.142287254333496,
                  4.492819786071777,  0.9276401400566101, 2.9782512187957764, 5.028860092163086,
                  6.227442264556885,  0.3562208414077759, 7.523476600646973,  5.620026588439941,
                  2.624696731567383,  4.67530632019043,   6.725917816162109,  6.366626739501953,
                  7.169923305511475,  4.960385322570801,  2.2711429595947266, 4.321752071380615,
                  6.372363090515137,  7.853126525878906,  7.975737571716309,  5.538816452026367,
                  1.91759192943573,   3.9681992530822754, 5.448963165283203,  6.432666301727295},
                 1e-4, 1e-4);
    // RandomRotation((-0.2, -0.2), fill_mode="constant", interpolation="nearest", fill_value=-1)
    check_values(layers::RandomRotation({-0.2, -0.2}, {.fill_mode = "constant",
                                                       .interpolation = "nearest",
                                                       .fill_value = -1.0})(img, true),
                 {4.8000030517578125,
                  3.6000003814697266,
                  2.4000015258789062,
                  2.90000057220459,
                  1.7000000476837158,
                  -1,
                  6.5,
                  5.299999237060547,
                  4.100000381469727,
                  4.600000381469727,
                  3.4000000953674316,
                  -1,
                  8.200000762939453,
                  7,
                  5.80000114440918,
                  7.5,
                  6.300000190734863,
                  5.100000381469727,
                  -1,
                  0.9000015258789062,
                  8.700000762939453,
                  0.20000076293945312,
                  8,
                  6.800000190734863,
                  -1,
                  2.6000022888183594,
                  1.4000015258789062,
                  1.9000015258789062,
                  0.7000007629394531,
                  8.5,
                  1.8000030517578125,
                  0.600006103515625,
                  8.400001525878906,
                  8.900001525878906,
                  7.700000762939453,
                  -1,
                  3.5,
                  2.3000030517578125,
                  1.0999984741210938,
                  1.5999984741210938,
                  0.40000152587890625,
                  -1,
                  5.200004577636719,
                  4,
                  2.8000030517578125,
                  4.5,
                  3.3000030517578125,
                  2.1000022888183594,
                  -1,
                  6.900001525878906,
                  5.700004577636719,
                  6.200004577636719,
                  5,
                  3.8000030517578125,
                  -1,
                  8.600006103515625,
                  7.400001525878906,
                  7.900001525878906,
                  6.700004577636719,
                  5.5},
                 1e-4, 1e-4);
    // RandomZoom((0.2, 0.2), (-0.3, -0.3))
    check_values(layers::RandomZoom({0.2, 0.2}, layers::Factor{-0.3, -0.3})(img, true),
                 {1.2750000953674316, 2.4650001525878906,
                  3.6550004482269287, 4.845000267028809,
                  6.034999847412109,  7.225000381469727,
                  2.2350003719329834, 3.4250001907348633,
                  4.615000247955322,  5.805000305175781,
                  6.994999408721924,  6.385000228881836,
                  3.6750006675720215, 4.8650007247924805,
                  6.055001258850098,  7.244999885559082,
                  3.4850008487701416, 0.6250009536743164,
                  5.114999771118164,  6.304999828338623,
                  7.225000381469727,  7.155000686645508,
                  4.115001201629639,  2.065001964569092,
                  6.075000762939453,  7.265000343322754,
                  7.105000019073486,  1.995002031326294,
                  1.835001826286316,  3.0250024795532227,
                  7.27500057220459,   4.415000915527344,
                  0.6550017595291138, 1.8450020551681519,
                  3.0350027084350586, 4.225002288818359,
                  8.235001564025879,  5.375,
                  1.614999771118164,  2.805001974105835,
                  3.995001792907715,  5.185001373291016,
                  2.924999237060547,  1.8650007247924805,
                  3.0550026893615723, 4.24500036239624,
                  5.435002326965332,  6.625003814697266,
                  2.1150033473968506, 3.305001974105835,
                  4.495001792907715,  5.685003280639648,
                  6.875002861022949,  5.815003395080566,
                  3.075000762939453,  4.265002250671387,
                  5.4550042152404785, 6.6450018882751465,
                  7.835003852844238,  6.775005340576172},
                 1e-4, 1e-4);
    // RandomZoom((-0.25, -0.25), fill_mode="wrap"): the width zooms with the height.
    check_values(layers::RandomZoom({-0.25, -0.25}, std::nullopt, {.fill_mode = "wrap"})(img, true),
                 {1.6625003814697266, 2.937500238418579,  4.21250057220459,   5.4875006675720215,
                  6.762500286102295,  6.350000381469727,  2.5625007152557373, 3.83750057220459,
                  5.1125006675720215, 6.387500286102295,  6.256250381469727,  4.156250476837158,
                  3.462500810623169,  4.7375006675720215, 6.012500762939453,  7.287500381469727,
                  2.937500476837158,  0.837501049041748,  4.362499713897705,  5.637499809265137,
                  6.912500381469727,  8.187500953674316,  3.837501049041748,  1.737501621246338,
                  5.262500286102295,  6.537499904632568,  7.250000476837158,  5.150001525878906,
                  3.050001621246338,  2.6375021934509277, 7.662500381469727,  5.562500953674316,
                  1.2125003337860107, 2.487502336502075,  3.7625019550323486, 5.037501811981201,
                  7.156250476837158,  5.05625057220459,   2.112499952316284,  3.3875019550323486,
                  4.662501335144043,  5.937502384185791,  3.8374996185302734, 1.7375001907348633,
                  3.012502670288086,  4.287500381469727,  5.562502861022949,  6.837503433227539,
                  2.2062530517578125, 2.6375014781951904, 3.912501096725464,  5.187503337860107,
                  6.462502479553223,  5.2062530517578125, 2.262502670288086,  3.537501811981201,
                  4.812502384185791,  6.087502956390381,  7.362503528594971,  5.2625041007995605},
                 1e-4, 1e-4);
    // RandomTranslation((0.2, 0.2), (-0.1, -0.1))
    check_values(layers::RandomTranslation({0.2, 0.2}, {-0.1, -0.1})(img, true),
                 {1.0200001001358032, 2.7200002670288086, 4.420000076293945,
                  6.119999885559082,  7.820000171661377,  8.5,
                  1.0200001001358032, 2.7200002670288086, 4.420000076293945,
                  6.119999885559082,  7.820000171661377,  8.5,
                  2.220000743865967,  3.9200005531311035, 5.619999885559082,
                  7.319999694824219,  3.6200010776519775, 0.7000007629394531,
                  3.4200007915496826, 5.120000839233398,  6.820000171661377,
                  3.1200010776519775, 1.220000982284546,  1.9000015258789062,
                  4.619999885559082,  6.319999694824219,  8.020000457763672,
                  4.32000207901001,   2.420001745223999,  3.1000022888183594,
                  7.020000457763672,  3.3200011253356934, 1.4200018644332886,
                  3.120002508163452,  4.820001125335693,  5.5,
                  7.020000457763672,  3.3200011253356934, 1.4200018644332886,
                  3.120002508163452,  4.820001125335693,  5.5,
                  8.220001220703125,  4.5199995040893555, 2.6200010776519775,
                  4.320001125335693,  6.020002365112305,  6.700004577636719,
                  4.0199995040893555, 2.1200013160705566, 3.8200011253356934,
                  5.520002365112305,  7.2200026512146,    7.900001525878906,
                  1.6200042963027954, 3.3200011253356934, 5.020002365112305,
                  6.720002174377441,  3.020004987716675,  0.100006103515625},
                 1e-4, 1e-4);
    // RandomTranslation((-0.3, -0.3), (0.4, 0.4), fill_mode="nearest", interpolation="nearest")
    check_values(
        layers::RandomTranslation({-0.3, -0.3}, {0.4, 0.4},
                                  {.fill_mode = "nearest", .interpolation = "nearest"})(img, true),
        {2.4000015258789062,
         2.4000015258789062,
         2.4000015258789062,
         4.100000381469727,
         5.80000114440918,
         7.5,
         3.6000003814697266,
         3.6000003814697266,
         3.6000003814697266,
         5.299999237060547,
         7,
         8.700000762939453,
         4.8000030517578125,
         4.8000030517578125,
         4.8000030517578125,
         6.5,
         8.200000762939453,
         0.9000015258789062,
         4.8000030517578125,
         4.8000030517578125,
         4.8000030517578125,
         6.5,
         8.200000762939453,
         0.9000015258789062,
         4.8000030517578125,
         4.8000030517578125,
         4.8000030517578125,
         6.5,
         8.200000762939453,
         0.9000015258789062,
         8.400001525878906,
         8.400001525878906,
         8.400001525878906,
         1.0999984741210938,
         2.8000030517578125,
         4.5,
         0.600006103515625,
         0.600006103515625,
         0.600006103515625,
         2.3000030517578125,
         4,
         5.700004577636719,
         1.8000030517578125,
         1.8000030517578125,
         1.8000030517578125,
         3.5,
         5.200004577636719,
         6.900001525878906,
         1.8000030517578125,
         1.8000030517578125,
         1.8000030517578125,
         3.5,
         5.200004577636719,
         6.900001525878906,
         1.8000030517578125,
         1.8000030517578125,
         1.8000030517578125,
         3.5,
         5.200004577636719,
         6.900001525878906},
        1e-4, 1e-4);
    // RandomBrightness((0.1, 0.1), value_range=(0, 10)): +1, clipped at 10.
    check_values(
        layers::RandomBrightness({0.1, 0.1}, {0.0, 10.0})(img, true),
        {1,   2.700000047683716,  4.400000095367432,  6.100000381469727,  7.800000190734863,
         9.5, 2.200000762939453,  3.90000057220459,   5.600000381469727,  7.300000190734863,
         9,   1.7000007629394531, 3.4000015258789062, 5.100000381469727,  6.80000114440918,
         8.5, 1.2000007629394531, 2.9000015258789062, 4.600000381469727,  6.299999237060547,
         8,   9.700000762939453,  2.4000015258789062, 4.100002288818359,  5.8000030517578125,
         7.5, 9.200000762939453,  1.9000015258789062, 3.6000022888183594, 5.3000030517578125,
         7,   8.700000762939453,  1.4000015258789062, 3.1000022888183594, 4.8000030517578125,
         6.5, 8.200000762939453,  9.900001525878906,  2.5999984741210938, 4.3000030517578125,
         6,   7.700004577636719,  9.400001525878906,  2.0999984741210938, 3.8000030517578125,
         5.5, 7.200004577636719,  8.900001525878906,  1.600006103515625,  3.3000030517578125,
         5,   6.700004577636719,  8.400001525878906,  1.100006103515625,  2.8000030517578125,
         4.5, 6.200004577636719,  7.900001525878906,  9.600006103515625,  2.3000030517578125},
        1e-5, 1e-5);
  }
}

TEST_CASE("random layers are the identity at inference", "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor img = f32(kImg, {2, 5, 6, 1});
    for (const K::Layer& l : std::vector<K::Layer>{
             layers::RandomFlip(), layers::RandomRotation(0.3), layers::RandomZoom(0.5),
             layers::RandomTranslation(0.2, 0.2), layers::RandomContrast(0.5),
             layers::RandomBrightness(0.5), layers::RandomCrop(3, 4)}) {
      INFO(l.impl().class_name());
      check_values(l(img, false), kImg, 0, 0);
    }
  }
}

TEST_CASE("random layers draw per image within their ranges", "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(7);
    const int64_t n = 400;
    // Distinct images (4, 5, 1): each output is the image or its flip, about half flipped.
    const tf::Tensor x = f32(random_values(static_cast<size_t>(n * 20), 0, 1, 11), {n, 4, 5, 1});
    for (const char* mode : {"horizontal", "vertical", "horizontal_and_vertical"}) {
      INFO(mode);
      layers::RandomFlip flip(mode, 3);
      const tf::Tensor y = flip(x, true);
      tf::Tensor f = x;
      if (std::string(mode) != "vertical") f = tf::image::flip_left_right(f);
      if (std::string(mode) != "horizontal") f = tf::image::flip_up_down(f);
      const auto same = vals(tf::reduce_all(tf::equal(y, x), {1, 2, 3}));
      const auto flipped = vals(tf::reduce_all(tf::equal(y, f), {1, 2, 3}));
      int count = 0;
      for (int64_t i = 0; i < n; ++i) {
        CHECK(same[static_cast<size_t>(i)] + flipped[static_cast<size_t>(i)] == 1);
        count += static_cast<int>(flipped[static_cast<size_t>(i)]);
      }
      CHECK(count > 0.4 * n);
      CHECK(count < 0.6 * n);
      // A second call draws new flips.
      CHECK(vals(flip(x, true)) != vals(y));
    }
    // RandomContrast(0.5): Keras 3.15's single factor gives c in [1, 1.5): recover c per image.
    const tf::Tensor xc = x * 100.0f + 50.0f;  // inside the default value_range (0, 255)
    const tf::Tensor yc = layers::RandomContrast(0.5, {0.0, 255.0}, 5)(xc, true);
    const tf::Tensor mean = tf::reduce_mean(xc, {1, 2}, true);
    const auto ratio = vals((yc - mean) / (xc - mean));
    double lo = 10, hi = -10;
    for (int64_t i = 0; i < n; ++i) {
      const double c = ratio[static_cast<size_t>(i * 20)];
      for (int k = 1; k < 20; ++k)
        CHECK(ratio[static_cast<size_t>(i * 20 + k)] == Approx(c).epsilon(1e-3));
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    CHECK(lo >= 1.0 - 1e-4);
    CHECK(hi < 1.5 + 1e-4);
    CHECK(hi - lo > 0.4);
    // The pair form {f, f} gives [1 - f, 1 + f); the result is clipped to value_range.
    const tf::Tensor yc2 = layers::RandomContrast({0.9, 0.9}, {60.0, 140.0}, 5)(xc, true);
    CHECK(vals(tf::reduce_min(yc2))[0] >= 60.0);
    CHECK(vals(tf::reduce_max(yc2))[0] <= 140.0);
    // RandomBrightness(0.2): one delta per image in [-0.2, 0.2) * 255 (before clipping).
    const auto db = vals(layers::RandomBrightness(0.2, {0.0, 255.0}, 9)(xc, true) - xc);
    lo = 1e9;
    hi = -1e9;
    for (int64_t i = 0; i < n; ++i) {
      const double d = db[static_cast<size_t>(i * 20)];
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    CHECK(lo >= -51.0 - 1e-3);
    CHECK(hi < 51.0 + 1e-3);
    CHECK(hi - lo > 80.0);
    // RandomRotation(0.25) by angles in [-90, 90) degrees: a pixel's mean over many images of
    // constant rows stays inside the data range, and reflect fill keeps every value a blend of
    // input values.
    const tf::Tensor yr = layers::RandomRotation(0.25, {.seed = 4})(xc, true);
    CHECK(yr.shape() == xc.shape());
    CHECK(vals(tf::reduce_min(yr))[0] >= vals(tf::reduce_min(xc))[0] - 1e-3);
    CHECK(vals(tf::reduce_max(yr))[0] <= vals(tf::reduce_max(xc))[0] + 1e-3);
    CHECK(vals(yr) != vals(xc));
    // RandomCrop: one window for the batch, at offsets that vary between calls.
    const tf::Tensor big = f32(random_values(2 * 8 * 9, 0, 1, 13), {2, 8, 9, 1});
    layers::RandomCrop crop(3, 4, 21);
    std::vector<std::pair<int, int>> seen;
    for (int call = 0; call < 30; ++call) {
      const tf::Tensor c = crop(big, true);
      REQUIRE(c.shape() == tf::TensorShape({2, 3, 4, 1}));
      bool found = false;
      for (int r = 0; r <= 5 && !found; ++r)
        for (int q = 0; q <= 5 && !found; ++q)
          if (vals(tf::image::crop_to_bounding_box(big, r, q, 3, 4)) == vals(c)) {
            found = true;
            if (std::find(seen.begin(), seen.end(), std::make_pair(r, q)) == seen.end())
              seen.push_back({r, q});
          }
      CHECK(found);
    }
    CHECK(seen.size() > 5);
    // Not larger than the target in both dimensions: centre-cropped to the aspect ratio and
    // resized (as Keras).
    check_values(layers::RandomCrop(8, 4)(big, true),
                 vals(tf::image::resize(tf::image::crop_to_bounding_box(big, 0, 2, 8, 4), {8, 4})),
                 1e-6, 1e-6);
    // Keras 3.15.1: RandomCrop(5, 5)(arange(24).reshape(1, 4, 6, 1), training=True) slices the
    // 4x5 window at (0, 1), not the 4x4 aspect-ratio box, and resizes it to 5x5.
    std::vector<float> ramp(24);
    for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i);
    check_values(layers::RandomCrop(5, 5)(tf::convert_to_tensor(ramp, {1, 4, 6, 1}), true),
                 {1,  2,  3,    4,    5,    5.2,  6.2,  7.2, 8.2, 9.2, 10, 11, 12,
                  13, 14, 14.8, 15.8, 16.8, 17.8, 18.8, 19,  20,  21,  22, 23},
                 1e-5, 1e-5);
    tf::detail::clear_random_seed();
  }
}

TEST_CASE("random layers repeat their draws after set_seed", "[cpu][keras][preprocessing]") {
  const tf::Tensor img = f32(kImg, {2, 5, 6, 1});
  auto run = [&] {
    tf::random::set_seed(42);
    layers::RandomRotation rot(0.2, {.seed = 1});
    layers::RandomZoom zoom(0.3, std::nullopt, {.seed = 2});
    return std::make_pair(vals(rot(img, true)), vals(zoom(rot(img, true), true)));
  };
  const auto a = run();
  const auto b = run();
  CHECK(a == b);
  CHECK(a.first != kImg);
  tf::detail::clear_random_seed();
}

TEST_CASE("Normalization adapts and normalizes as Keras", "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor d = f32(kD, {6, 3});
    // n = keras.layers.Normalization(); n.adapt(d)
    layers::Normalization n;
    n.adapt(d);
    check_values(n.mean(), {1.941666603088379, 2.4783332347869873, 2.181666851043701}, 1e-6, 1e-6);
    check_values(n.variance(), {2.074180841445923, 1.9325138330459595, 1.9325146675109863}, 1e-5,
                 1e-6);
    check_values(n(d),
                 {-1.3481907844543457, -0.7972766160964966, 0.40163543820381165, 1.5055763721466064,
                  -1.4374958276748657, -0.23858371376991272, 0.8876073956489563, 1.5190221071243286,
                  -0.8788027167320251, 0.26963815093040466, 0.8788027167320251, -1.519021987915039,
                  -0.34833043813705444, 0.2385832518339157, 1.4374957084655762, -0.966300368309021,
                  -0.4016355276107788, 0.7972770929336548},
                 1e-5, 1e-5);
    CHECK(n.trainable_variables().empty());
    CHECK(n.non_trainable_variables().size() == 2);
    // adapt(tf.data.Dataset.from_tensor_slices(d).batch(4)) combines the batches as Keras.
    layers::Normalization nd;
    nd.adapt(tf::data::Dataset::from_tensor_slices({d}).batch(4));
    check_values(nd.mean(), {1.941666603088379, 2.4783332347869873, 2.181666851043701}, 1e-6, 1e-6);
    check_values(nd.variance(), {2.074181079864502, 1.93251371383667, 1.9325146675109863}, 1e-5,
                 1e-6);
    // Normalization(mean=[1, 2, 3], variance=[4, 0, 0.25], invert=True)(d)
    check_values(
        layers::Normalization({.mean = {1, 2, 3}, .variance = {4, 0, 0.25}, .invert = true})(d),
        {1, 2.000000238418579, 4.369999885559082, 9.220000267028809, 2, 3.924999952316284,
         7.440000534057617, 2.000000476837158, 3.4800000190734863, 5.659999847412109,
         2.000000476837158, 3.0349998474121094, 3.8800010681152344, 2.000000238418579,
         5.090000152587891, 2.0999984741210938, 2.000000238418579, 4.645000457763672},
        1e-5, 1e-5);
    // Normalization(mean=2.0, variance=9.0)(d)
    check_values(
        layers::Normalization({.mean = {2.0}, .variance = {9.0}})(d),
        {-0.6666666865348816, -0.20999999344348907, 0.24666666984558105, 0.7033333778381348,
         -0.5066666603088379, -0.05000003054738045, 0.40666675567626953, 0.8633334040641785,
         -0.3466666638851166, 0.10999997705221176, 0.5666666030883789, -0.6433334350585938,
         -0.18666648864746094, 0.26999983191490173, 0.7266667485237122, -0.4833335876464844,
         -0.026666641235351562, 0.43000030517578125},
        1e-5, 1e-5);
    // Normalization(axis=None).adapt(d): one mean and variance.
    layers::Normalization na({.axis = std::nullopt});
    na.adapt(d);
    check_values(na.mean(), {2.2005555629730225}, 1e-6, 1e-6);
    check_values(na.variance(), {2.02791690826416}, 1e-5, 1e-6);
  }
}

TEST_CASE("preprocessing layers traced with an unknown batch match eager",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    layers::Normalization norm({.mean = {0.5}, .variance = {0.04}});
    K::Sequential model({layers::Resizing(6, 8), layers::CenterCrop(5, 6),
                         layers::RandomRotation({0.1, 0.1}),
                         layers::RandomZoom(layers::Factor{0.2, 0.2}),
                         layers::RandomTranslation({0.1, 0.1}, {-0.2, -0.2}), norm});
    auto f =
        tf::function([&](const tf::Tensor& x) { return model(x, true); },
                     tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4, 5, 2})}});
    for (int64_t n : {1, 3}) {
      const tf::Tensor x = f32(random_values(static_cast<size_t>(n * 40), 0, 1, 17), {n, 4, 5, 2});
      tf::testing::check_close(f(x), model(x, true), 1e-5, 1e-5);
    }
    CHECK(f.tracing_count() == 1);
    // Random draws inside a traced function differ from run to run.
    layers::RandomFlip flip("horizontal", 8);
    auto g =
        tf::function([&](const tf::Tensor& x) { return flip(x, true); },
                     tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3, 4, 1})}});
    const tf::Tensor x = f32(random_values(64 * 12, 0, 1, 19), {64, 3, 4, 1});
    CHECK(vals(g(x)) != vals(g(x)));
  }
}

TEST_CASE("preprocessing layers in front of a Conv2D model train with fit",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(3);
    // Bright-centre images (class 1) against dark-centre ones (class 0), 10 x 12, uint8-like.
    const int64_t n = 64;
    const auto r = random_values(static_cast<size_t>(n * 120), 0, 60, 23);
    std::vector<double> px(r.begin(), r.end());
    std::vector<float> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      labels[static_cast<size_t>(i)] = static_cast<float>(i % 2);
      if (i % 2)
        for (int y = 3; y < 7; ++y)
          for (int x = 4; x < 8; ++x) px[static_cast<size_t>(i * 120 + y * 12 + x)] += 150;
    }
    const tf::Tensor images = f32(px, {n, 10, 12, 1});
    const tf::Tensor y = tf::constant(labels, {n, 1});
    layers::Normalization norm;
    norm.adapt(images);
    K::Sequential model({layers::Resizing(8, 8), layers::RandomFlip("horizontal", 1),
                         layers::RandomRotation(0.02, {.seed = 2}),
                         layers::RandomZoom(0.05, std::nullopt, {.seed = 3}),
                         layers::RandomContrast(0.1, {0.0, 255.0}, 4),
                         layers::RandomBrightness(0.02, {0.0, 255.0}, 5), norm,
                         layers::Conv2D(4, 3, {.activation = "relu"}),
                         layers::GlobalAveragePooling2D(), layers::Dense(1)});
    model.compile(K::optimizers::Adam(0.05), K::losses::BinaryCrossentropy(true), {"accuracy"});
    K::History h = model.fit(images, y, {.epochs = 10, .batch_size = 16, .verbose = 0});
    const auto& loss = h.history.at("loss");
    REQUIRE(loss.size() == 10);
    CHECK(loss.back() < 0.6 * loss.front());
    // Inference skips the augmentation: predict equals calling the model with training=false.
    check_values(model.predict(images, {.verbose = 0}), vals(model(images, false)), 1e-5, 1e-5);
    CHECK(h.history.at("accuracy").back() > 0.8);
    tf::detail::clear_random_seed();
  }
}

TEST_CASE("preprocessing layers reject bad arguments and shapes", "[cpu][keras][preprocessing]") {
  using tf::testing::require_error;
  require_error([] { layers::Resizing(0, 3); }, {"[Resizing]", "positive"});
  require_error([] { layers::Resizing(3, 3, {.interpolation = "cubic"}); },
                {"[Resizing]", "cubic"});
  require_error(
      [] { layers::Resizing(3, 3, {.crop_to_aspect_ratio = true, .pad_to_aspect_ratio = true}); },
      {"[Resizing]", "only one"});
  require_error([] { layers::CenterCrop(3, -1); }, {"[CenterCrop]", "positive"});
  require_error([] { layers::RandomFlip("diagonal"); }, {"[RandomFlip]", "diagonal"});
  require_error([] { layers::RandomRotation(1.5); }, {"[RandomRotation]", "1.5"});
  require_error([] { layers::RandomRotation(0.1, {.fill_mode = "mirror"}); },
                {"[RandomRotation]", "mirror"});
  require_error(
      [] {
        layers::RandomZoom(layers::Factor{-1.0, 0.2});
      },
      {"[RandomZoom]", "height_factor"});
  require_error([] { layers::RandomTranslation(0.1, 2.0); },
                {"[RandomTranslation]", "width_factor"});
  require_error([] { layers::RandomContrast(-0.2); }, {"[RandomContrast]", "[0, 1]"});
  require_error([] { layers::Normalization({.mean = {1.0}}); }, {"[Normalization]", "together"});
  // Shapes: images must be rank 3 or 4 with known height and width.
  require_error([] { layers::RandomFlip()(tf::zeros({4, 5}), true); }, {"(4, 5)", "rank 3"});
  require_error([] { layers::Resizing(2, 2)(tf::zeros({1, 2, 3, 4, 5})); }, {"(1, 2, 3, 4, 5)"});
  layers::Normalization n({.mean = {1, 2}, .variance = {1, 1}});
  require_error([&] { n(tf::zeros({2, 3})); }, {"Normalization", "(None, 3)", "2"});
  layers::Normalization m;
  m.adapt(tf::zeros({4, 3}));
  require_error([&] { m.adapt(tf::zeros({4, 2})); }, {"Normalization", "(4, 2)"});
  require_error(
      [&] {
        layers::Normalization({.mean = {1}, .variance = {1}}).adapt(tf::zeros({2, 2}));
      },
      {"Normalization", "adapt() cannot change"});
}

TEST_CASE("the docs rotation matrix equals RandomRotation with that angle",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // docs/ops.md's example: 30 degrees about the centre of 64 x 64 images.
    const tf::Tensor small = f32(random_values(2 * 64 * 64, 0, 1, 29), {2, 64, 64, 1});
    const float c = std::cos(0.5236f), s = std::sin(0.5236f), cx = 31.5f, cy = 31.5f;
    const tf::Tensor t =
        tf::constant({{c, -s, cx - c * cx + s * cy, s, c, cy - s * cx - c * cy, 0.f, 0.f}});
    const tf::Tensor rotated = tf::image::transform(small, t, "bilinear", "reflect");
    const double f = 0.5236 / (2 * std::numbers::pi);
    check_values(layers::RandomRotation({f, f})(small, true), vals(rotated), 1e-4, 1e-4);
  }
}
