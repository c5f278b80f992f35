// tf::image::combined_non_max_suppression against TF 2.21's values (q = 1 and q = num_classes,
// pad_per_class, clip_boxes off), eagerly (host selection) and traced (tensor rounds), on every
// device; the threshold edges; a None batch; gradients to the selected scores; errors.
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

// rng = np.random.default_rng(5); B, N, C = 2, 12, 3; corner = uniform(-0.1, 0.8, (B, N, 1, 2));
// size = uniform(0.1, 0.4, (B, N, 1, 2)); boxes1 = concat([corner, corner + size], -1);
// boxesC = boxes1 + uniform(-0.05, 0.05, (B, N, C, 4)); scores = uniform(0, 1, (B, N, C)); all
// float32. The results of tf.image.combined_non_max_suppression for the four cases below.
const std::vector<double> kBoxes1 = {
    0.624502659, 0.627146721,   0.728863537,   1.00711393,    0.363793015,   0.157221243,
    0.489540756, 0.510699272,   -0.0514623672, 0.245031998,   0.158901855,   0.630338907,
    0.267625898, -0.0592523254, 0.487453461,   0.321680307,   -0.0561180599, 0.79925853,
    0.210729882, 0.971299112,   0.487132192,   0.111059181,   0.80955869,    0.413376093,
    0.291452795, 0.776767552,   0.596714377,   1.01591492,    0.707909822,   0.65980792,
    0.874476373, 0.952089965,   0.253164202,   0.343720704,   0.38529104,    0.651387393,
    0.509020388, -0.0452775583, 0.799636424,   0.16767621,    0.400036514,   0.144306451,
    0.739593506, 0.302514076,   0.691686034,   -0.0422070064, 0.908823729,   0.297173172,
    0.511263371, 0.68307966,    0.725405991,   0.997057021,   0.104586676,   0.705903411,
    0.388342023, 1.08820367,    0.684975922,   -0.0833345056, 1.082479,      0.233768374,
    0.536746025, -0.0989202857, 0.87939918,    0.046939224,   0.353027582,   0.29300034,
    0.666894674, 0.647287667,   0.0829275548,  0.192448378,   0.303295285,   0.458423376,
    0.625593781, 0.184806883,   0.869440079,   0.572363794,   0.034134727,   0.528660774,
    0.229318082, 0.749286115,   0.303689688,   0.619045556,   0.403965622,   0.84510088,
    0.111964814, 0.187806189,   0.401395649,   0.568294525,   0.619891584,   0.35636133,
    0.996994555, 0.554566264,   0.355746508,   0.112574719,   0.752404809,   0.268877208};
const std::vector<double> kBoxesC = {
    0.656827867,   0.592872679,   0.719373405,   0.964461267,    0.660306573,   0.66002655,
    0.692842484,   1.00982463,    0.600316823,   0.626324296,    0.734184146,   0.967740119,
    0.400230587,   0.135090873,   0.484253079,   0.466425121,    0.314067543,   0.126737192,
    0.473708272,   0.553510606,   0.40276584,    0.155271351,    0.485016733,   0.527398586,
    -0.0155868754, 0.228761747,   0.188267305,   0.620237648,    -0.0420569777, 0.268778682,
    0.159037575,   0.649416506,   -0.0317310169, 0.195603266,    0.112808406,   0.595242739,
    0.238989413,   -0.0889308602, 0.44235003,    0.29340145,     0.27772063,    -0.0206448101,
    0.472403854,   0.308320791,   0.259300083,   -0.0412181467,  0.51598084,    0.365776122,
    -0.0685480535, 0.819935977,   0.194893286,   1.0036993,      -0.0830531716, 0.836359918,
    0.211240411,   0.993833542,   -0.0526187569, 0.780870676,    0.210160077,   0.926344156,
    0.441431463,   0.114055514,   0.80727613,    0.446689814,    0.439144462,   0.116747566,
    0.80862242,    0.423175812,   0.510090053,   0.113533244,    0.815862536,   0.412554473,
    0.302973509,   0.751580298,   0.601975739,   1.03315365,     0.260564089,   0.825804234,
    0.621360302,   1.0614481,     0.27084744,    0.771116853,    0.572858214,   0.970584095,
    0.659577489,   0.634482682,   0.910602629,   0.918459356,    0.726872087,   0.634746134,
    0.83103466,    0.921338618,   0.725702465,   0.659973562,    0.879379451,   0.947406411,
    0.230599001,   0.342555493,   0.427535653,   0.621536911,    0.27643761,    0.318833679,
    0.354632646,   0.633771956,   0.212442115,   0.387258142,    0.371804446,   0.618971169,
    0.459020525,   -0.0892348066, 0.771101594,   0.159441575,    0.519177437,   0.00282550231,
    0.838684142,   0.141901612,   0.520174921,   -0.00312337652, 0.759796679,   0.203080103,
    0.38964358,    0.172475189,   0.721853197,   0.315086365,    0.40073809,    0.104748577,
    0.76557374,    0.334808499,   0.39833501,    0.133107483,    0.784342647,   0.289945036,
    0.729647934,   -0.0503496006, 0.896175325,   0.283315927,    0.647685766,   -0.0644751489,
    0.881771743,   0.253407598,   0.695842922,   -0.0479868948,  0.861334562,   0.26276508,
    0.553134084,   0.646440148,   0.712738812,   1.04213464,     0.47259897,    0.67406249,
    0.755517364,   0.948965371,   0.468045771,   0.72607249,     0.743829131,   0.973160803,
    0.102610596,   0.680798173,   0.42758587,    1.13318443,     0.0616893657,  0.708311856,
    0.356745839,   1.07864189,    0.128706127,   0.727236211,    0.357323498,   1.0714314,
    0.677502692,   -0.094705984,  1.10069323,    0.26260373,     0.66851896,    -0.0892128497,
    1.03920937,    0.22044909,    0.729671717,   -0.0831167027,  1.08819807,    0.244380027,
    0.543463945,   -0.0684746206, 0.855356812,   0.0285973661,   0.575428367,   -0.0989271775,
    0.925382912,   0.0108334534,  0.565061867,   -0.101618685,   0.876784205,   0.0850467607,
    0.316092074,   0.294445068,   0.641852319,   0.631570578,    0.384759873,   0.28281641,
    0.695335925,   0.598636627,   0.402961373,   0.338526964,    0.684744716,   0.616969168,
    0.0986106172,  0.16147095,    0.290636659,   0.411921144,    0.0399506539,  0.158222064,
    0.271480799,   0.492268234,   0.0573327467,  0.224990889,    0.253914475,   0.414210916,
    0.58168298,    0.227971077,   0.901166856,   0.523921728,    0.66874814,    0.157461375,
    0.845893383,   0.580802441,   0.59606874,    0.232299775,    0.85606581,    0.5794698,
    0.0413842835,  0.506826639,   0.252776831,   0.79851383,     0.0437015817,  0.48703596,
    0.26012367,    0.765965343,   0.0331163518,  0.544091165,    0.205453321,   0.729668081,
    0.305221587,   0.575887322,   0.412764162,   0.813339651,    0.279076934,   0.659039319,
    0.412754804,   0.819489241,   0.323592097,   0.668707609,    0.443724543,   0.874982476,
    0.0952210873,  0.196117133,   0.409894407,   0.527141929,    0.131233767,   0.18991746,
    0.403589875,   0.592021644,   0.069705911,   0.159064993,    0.450173408,   0.548269331,
    0.595418036,   0.313543081,   0.978239119,   0.560616434,    0.57380271,    0.335264057,
    0.972631097,   0.519964933,   0.649081111,   0.402586818,    1.03854823,    0.548647165,
    0.312379926,   0.0974732637,  0.754859865,   0.256902337,    0.378862053,   0.136887684,
    0.792071462,   0.265792787,   0.329591155,   0.153689817,    0.790835381,   0.231556594};
const std::vector<double> kScores = {
    0.211416006, 0.660070181, 0.820780396,   0.960179865,  0.0211358778, 0.189184755, 0.423007578,
    0.550851166, 0.778428912, 0.556714356,   0.518633425,  0.239263654,  0.650133073, 0.582367063,
    0.945658326, 0.18975468,  0.124763519,   0.353514194,  0.325620979,  0.453039497, 0.171529427,
    0.706820548, 0.82265079,  0.00628812611, 0.910265923,  0.0905709043, 0.306273252, 0.486351848,
    0.423961759, 0.215341464, 0.729354382,   0.839140236,  0.227541968,  0.164770424, 0.519015908,
    0.14859283,  0.93959409,  0.851246536,   0.83482343,   0.411624193,  0.786825478, 0.391738027,
    0.457858205, 0.106161617, 0.0374191925,  0.67040962,   0.193252653,  0.956423223, 0.565002918,
    0.576473355, 0.89450115,  0.2975353,     0.0107788816, 0.219725937,  0.457815498, 0.151904911,
    0.280727357, 0.737656415, 0.376931429,   0.341541082,  0.233585894,  0.5315575,   0.995409489,
    0.169073224, 0.843551099, 0.774858475,   0.60101229,   0.542947412,  0.520017028, 0.102800958,
    0.568943143, 0.989031315};
const std::vector<double> kQ1_boxes = {
    0.363793015, 0.157221243, 0.489540756, 0.510699272, 0,           0.79925853,  0.210729882,
    0.971299112, 0.253164202, 0.343720704, 0.38529104,  0.651387393, 0.400036514, 0.144306451,
    0.739593506, 0.302514076, 0.707909822, 0.65980792,  0.874476373, 0.952089965, 0.624502659,
    0.627146721, 0.728863537, 1,           0,           0.245031998, 0.158901855, 0.630338907,
    0.303689688, 0.619045556, 0.403965622, 0.84510088,  0.355746508, 0.112574719, 0.752404809,
    0.268877208, 0.536746025, 0,           0.87939918,  0.046939224, 0.511263371, 0.68307966,
    0.725405991, 0.997057021, 0.353027582, 0.29300034,  0.666894674, 0.647287667, 0.511263371,
    0.68307966,  0.725405991, 0.997057021, 0.111964814, 0.187806189, 0.401395649, 0.568294525};
const std::vector<double> kQ1_scores = {
    0.960179865, 0.945658326, 0.910265923, 0.839140236, 0.82265079, 0.820780396, 0.778428912,
    0.995409489, 0.989031315, 0.956423223, 0.93959409,  0.89450115, 0.851246536, 0.843551099};
const std::vector<double> kQ1_classes = {0, 2, 0, 1, 1, 2, 2, 2, 2, 2, 0, 2, 1, 1};
const std::vector<double> kQ1_valid = {7, 7};
const std::vector<double> kQc_boxes = {0.400230587,
                                       0.135090873,
                                       0.484253079,
                                       0.466425121,
                                       0,
                                       0.780870676,
                                       0.210160077,
                                       0.926344156,
                                       0.230599001,
                                       0.342555493,
                                       0.427535653,
                                       0.621536911,
                                       0.40073809,
                                       0.104748577,
                                       0.76557374,
                                       0.334808499,
                                       0.726872087,
                                       0.634746134,
                                       0.83103466,
                                       0.921338618,
                                       0.600316823,
                                       0.626324296,
                                       0.734184146,
                                       0.967740119,
                                       0,
                                       0.195603266,
                                       0.112808406,
                                       0.595242739,
                                       0.38964358,
                                       0.172475189,
                                       0.721853197,
                                       0.315086365,
                                       0.660306573,
                                       0.66002655,
                                       0.692842484,
                                       1,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0.323592097,
                                       0.668707609,
                                       0.443724543,
                                       0.874982476,
                                       0.329591155,
                                       0.153689817,
                                       0.790835381,
                                       0.231556594,
                                       0.565061867,
                                       0,
                                       0.876784205,
                                       0.0850467607,
                                       0.553134084,
                                       0.646440148,
                                       0.712738812,
                                       1,
                                       0.47259897,
                                       0.67406249,
                                       0.755517364,
                                       0.948965371,
                                       0.131233767,
                                       0.18991746,
                                       0.403589875,
                                       0.592021644,
                                       0.0616893657,
                                       0.708311856,
                                       0.356745839,
                                       1,
                                       0.0413842835,
                                       0.506826639,
                                       0.252776831,
                                       0.79851383,
                                       0.543463945,
                                       0,
                                       0.855356812,
                                       0.0285973661,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0,
                                       0};
const std::vector<double> kQc_scores = {
    0.960179865, 0.945658326, 0.910265923, 0.839140236, 0.82265079,
    0.820780396, 0.778428912, 0.729354382, 0.660070181, 0,
    0,           0,           0,           0,           0,
    0,           0,           0,           0,           0,
    0.995409489, 0.989031315, 0.956423223, 0.93959409,  0.851246536,
    0.843551099, 0.786825478, 0.737656415, 0.67040962,  0,
    0,           0,           0,           0,           0,
    0,           0,           0,           0,           0};
const std::vector<double> kQc_classes = {0, 2, 0, 1, 1, 2, 2, 0, 1, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, 0, 2, 2, 2, 0, 1, 1, 1, 0,
                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
const std::vector<double> kQc_valid = {9, 9};
const std::vector<double> kPad_boxes = {
    0.400230587, 0.135090873, 0.484253079,  0.466425121, 0,           0.780870676, 0.210160077,
    0.926344156, 0.230599001, 0.342555493,  0.427535653, 0.621536911, 0.40073809,  0.104748577,
    0.76557374,  0.334808499, 0.726872087,  0.634746134, 0.83103466,  0.921338618, 0.600316823,
    0.626324296, 0.734184146, 0.967740119,  0.323592097, 0.668707609, 0.443724543, 0.874982476,
    0.329591155, 0.153689817, 0.790835381,  0.231556594, 0.553134084, 0.646440148, 0.712738812,
    1,           0.47259897,  0.67406249,   0.755517364, 0.948965371, 0.131233767, 0.18991746,
    0.403589875, 0.592021644, 0.0413842835, 0.506826639, 0.252776831, 0.79851383};
const std::vector<double> kPad_scores = {0.960179865, 0.945658326, 0.910265923, 0.839140236,
                                         0.82265079,  0.820780396, 0.995409489, 0.989031315,
                                         0.93959409,  0.851246536, 0.843551099, 0.737656415};
const std::vector<double> kPad_classes = {0, 2, 0, 1, 1, 2, 2, 2, 0, 1, 1, 0};
const std::vector<double> kPad_valid = {6, 6};
const std::vector<double> kNoclip_boxes = {
    0.363793015, 0.157221243, 0.489540756, 0.510699272, -0.0561180599, 0.79925853,    0.210729882,
    0.971299112, 0.253164202, 0.343720704, 0.38529104,  0.651387393,   0.400036514,   0.144306451,
    0.739593506, 0.302514076, 0.707909822, 0.65980792,  0.874476373,   0.952089965,   0.624502659,
    0.627146721, 0.728863537, 1.00711393,  0.303689688, 0.619045556,   0.403965622,   0.84510088,
    0.355746508, 0.112574719, 0.752404809, 0.268877208, 0.536746025,   -0.0989202857, 0.87939918,
    0.046939224, 0.511263371, 0.68307966,  0.725405991, 0.997057021,   0.353027582,   0.29300034,
    0.666894674, 0.647287667, 0.511263371, 0.68307966,  0.725405991,   0.997057021};
const std::vector<double> kNoclip_scores = {0.960179865, 0.945658326, 0.910265923, 0.839140236,
                                            0.82265079,  0.820780396, 0.995409489, 0.989031315,
                                            0.956423223, 0.93959409,  0.89450115,  0.851246536};
const std::vector<double> kNoclip_classes = {0, 2, 0, 1, 1, 2, 2, 2, 2, 0, 2, 1};
const std::vector<double> kNoclip_valid = {6, 6};

struct Case {
  const char* name;
  bool per_class_boxes;
  int64_t per_class, total;
  double iou, score;
  bool pad, clip;
  const std::vector<double>*boxes, *scores, *classes, *valid;
};

const std::vector<Case> kCases = {
    {"q = 1", false, 4, 7, 0.3, 0.2, false, true, &kQ1_boxes, &kQ1_scores, &kQ1_classes,
     &kQ1_valid},
    {"q = num_classes", true, 3, 20, 0.4, 0.1, false, true, &kQc_boxes, &kQc_scores, &kQc_classes,
     &kQc_valid},
    {"pad_per_class", true, 2, 20, 0.4, 0.1, true, true, &kPad_boxes, &kPad_scores, &kPad_classes,
     &kPad_valid},
    {"clip_boxes off", false, 5, 6, 0.5, -1e30, false, false, &kNoclip_boxes, &kNoclip_scores,
     &kNoclip_classes, &kNoclip_valid},
};

void check_result(const tf::image::CombinedNms& r, const Case& c) {
  const auto slots = static_cast<int64_t>(c.scores->size() / 2);
  CHECK(r.nmsed_boxes.shape() == tf::TensorShape{2, slots, 4});
  CHECK(r.nmsed_classes.dtype() == tf::float32);
  CHECK(r.valid_detections.dtype() == tf::int32);
  check_values(r.nmsed_boxes, *c.boxes, 0, 1e-7);
  check_values(r.nmsed_scores, *c.scores, 0, 1e-7);
  check_values(r.nmsed_classes, *c.classes, 0, 0);
  check_values(r.valid_detections, *c.valid, 0, 0);
}

}  // namespace

TEST_CASE("image: combined_non_max_suppression as TF, eager and traced", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor boxes1 = tf::detail::from_doubles(kBoxes1, {2, 12, 1, 4}, tf::float32);
    const tf::Tensor boxes_c = tf::detail::from_doubles(kBoxesC, {2, 12, 3, 4}, tf::float32);
    const tf::Tensor scores = tf::detail::from_doubles(kScores, {2, 12, 3}, tf::float32);
    for (const Case& c : kCases) {
      INFO(c.name);
      const tf::Tensor& boxes = c.per_class_boxes ? boxes_c : boxes1;
      const auto nms = [&c](const tf::Tensor& b, const tf::Tensor& s) {
        const auto r = tf::image::combined_non_max_suppression(b, s, c.per_class, c.total, c.iou,
                                                               c.score, c.pad, c.clip);
        return std::vector<tf::Tensor>{r.nmsed_boxes, r.nmsed_scores, r.nmsed_classes,
                                       r.valid_detections};
      };
      check_result(tf::image::combined_non_max_suppression(boxes, scores, c.per_class, c.total,
                                                           c.iou, c.score, c.pad, c.clip),
                   c);
      // Traced for any batch size: the tensor rounds select what the host selects.
      tf::FunctionOptions opts;
      opts.input_signature = {tf::TensorSpec({tf::None, 12, boxes.shape()[2], 4}),
                              tf::TensorSpec({tf::None, 12, 3})};
      auto f = tf::function(nms, opts);
      const std::vector<tf::Tensor> t = f(boxes, scores);
      check_result({t[0], t[1], t[2], t[3]}, c);
      const std::vector<tf::Tensor> one = f(tf::slice(boxes, {1, 0, 0, 0}, {1, -1, -1, -1}),
                                            tf::slice(scores, {1, 0, 0}, {1, -1, -1}));
      const std::vector<tf::Tensor> eager_one = nms(tf::slice(boxes, {1, 0, 0, 0}, {1, -1, -1, -1}),
                                                    tf::slice(scores, {1, 0, 0}, {1, -1, -1}));
      for (size_t i = 0; i < 4; ++i) check_close(one[i], eager_one[i], 0, 0);
      CHECK(f.tracing_count() == 1);
    }
    // A box overlapping a kept one by exactly iou_threshold stays (only a larger overlap
    // drops it); a score equal to score_threshold does not count (TF 2.21).
    const tf::Tensor bx =
        tf::detail::from_doubles({0, 0, 1, 1, 0, 0, 1, 0.5}, {1, 2, 1, 4}, tf::float32);
    const tf::Tensor sc = tf::detail::from_doubles({0.9, 0.8}, {1, 2, 1}, tf::float32);
    for (bool traced : {false, true}) {
      INFO("traced " << traced);
      const auto run = [&](double iou, double score) {
        auto f = tf::function([&](const tf::Tensor& b, const tf::Tensor& s) {
          const auto r = tf::image::combined_non_max_suppression(b, s, 2, 2, iou, score);
          return std::vector<tf::Tensor>{r.nmsed_boxes, r.nmsed_scores, r.valid_detections};
        });
        if (traced) return f(bx, sc);
        const auto r = tf::image::combined_non_max_suppression(bx, sc, 2, 2, iou, score);
        return std::vector<tf::Tensor>{r.nmsed_boxes, r.nmsed_scores, r.valid_detections};
      };
      const std::vector<tf::Tensor> eq = run(0.5, -1e30);
      check_values(eq[0], {0, 0, 1, 1, 0, 0, 1, 0.5}, 0, 0);
      check_values(eq[2], {2}, 0, 0);
      const std::vector<tf::Tensor> seq = run(0.1, 0.8);
      check_values(seq[1], {0.9, 0}, 0, 1e-7);
      check_values(seq[2], {1}, 0, 0);
    }
    // The scores come out through a gather: the gradient of their sum is 1 at each selected
    // (box, class) and 0 elsewhere.
    tf::Tensor s = scores;
    tf::GradientTape tape;
    tape.watch(s);
    const auto r = tf::image::combined_non_max_suppression(boxes1, s, 4, 7, 0.3, 0.2);
    const tf::Tensor g = tape.gradient(tf::reduce_sum(r.nmsed_scores), s);
    CHECK(tf::reduce_sum(g).item<float>() == 14.0f);
    const std::vector<double> gv = tf::detail::to_double_vector(g);
    const std::vector<double> sv = tf::detail::to_double_vector(scores);
    std::vector<double> picked;
    for (size_t i = 0; i < gv.size(); ++i)
      if (gv[i] == 1.0) picked.push_back(sv[i]);
    CHECK(picked.size() == 14);
  }
  using tf::testing::require_error;
  const tf::Tensor b = tf::zeros({2, 5, 2, 4}), s = tf::zeros({2, 5, 3});
  require_error([&] { tf::image::combined_non_max_suppression(b, s, 2, 4); },
                {"combined_non_max_suppression", "q", "1 or num_classes (3)", "(2, 5, 2, 4)"});
  require_error(
      [&] {
        tf::image::combined_non_max_suppression(tf::zeros({2, 5, 1, 4}), s, 2, 4, 1.5);
      },
      {"combined_non_max_suppression", "iou_threshold", "[0, 1]"});
  require_error(
      [&] {
        tf::image::combined_non_max_suppression(tf::zeros({2, 5, 1, 4}), s, 2, 0);
      },
      {"combined_non_max_suppression", "positive"});
  require_error(
      [&] {
        tf::image::combined_non_max_suppression(tf::zeros({2, 4, 1, 4}), s, 2, 4);
      },
      {"combined_non_max_suppression", "num_boxes", "(2, 4, 1, 4)", "(2, 5, 3)"});
}

TEST_CASE("image: combined_non_max_suppression with no boxes pads every slot",
          "[cpu][cuda][image]") {
  // (A gather of box 0 from an empty table raised "[gather] indices[0,0] = 0 is not in [0, 0)".)
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const auto& [boxes, scores] :
         {std::pair{tf::TensorShape{2, 0, 1, 4}, tf::TensorShape{2, 0, 3}},
          std::pair{tf::TensorShape{2, 0, 3, 4}, tf::TensorShape{2, 0, 3}}}) {
      INFO("boxes " << boxes.to_string() << ", scores " << scores.to_string());
      const auto r =
          tf::image::combined_non_max_suppression(tf::zeros(boxes), tf::zeros(scores), 3, 4);
      CHECK(r.nmsed_boxes.shape() == tf::TensorShape{2, 4, 4});
      CHECK(r.nmsed_scores.shape() == tf::TensorShape{2, 4});
      CHECK(r.nmsed_classes.shape() == tf::TensorShape{2, 4});
      check_values(r.nmsed_boxes, std::vector<double>(32, 0.0), 0, 0);
      check_values(r.nmsed_scores, std::vector<double>(8, 0.0), 0, 0);
      check_values(r.valid_detections, {0, 0}, 0, 0);
    }
  }
}
