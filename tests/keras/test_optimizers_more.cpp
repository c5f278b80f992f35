// Adagrad, Adadelta, Adamax, Nadam, Ftrl, Lion, Lamb, Adafactor (and SGD, Adam, AdamW, RMSprop)
// against Keras 3.15's values; slots, traced steps, MirroredStrategy, checkpoints and
// hyperparameter errors; PolynomialDecay and CosineDecayRestarts against Keras 3.15's values.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/checkpoint.h"
#include "keras/optimizers.h"
#include "keras/schedules.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
namespace ds = tapeflow::distribute;
namespace opt = tapeflow::keras::optimizers;
namespace sched = tapeflow::keras::optimizers::schedules;
using tf::testing::check_close;
using tf::testing::check_values;

using tf::testing::TempDir;

namespace {

using Rows = std::vector<std::vector<double>>;

// The problem every case runs: x starts at kInit and takes the gradients of kGrads, one row per
// step. The last element's gradient is always 0 (the sparse case: Adagrad's and Ftrl's
// accumulators start above 0, Adamax's norm stays 0, Lion's sign is 0, Ftrl still moves x).
const std::vector<double> kInit = {1.0, -2.0, 0.5, 0.25};
const Rows kGrads = {
    {0.1, -0.2, 0.3, 0.0}, {0.5, 0.4, -0.1, 0.0}, {-0.3, 0.0, 0.05, 0.0}, {0.2, -0.6, 0.7, 0.0}};

tf::Tensor grad_at(size_t step, tf::DType dtype) {
  return tf::constant(tf::convert_to_tensor(kGrads[step], {4}), dtype);
}

struct Case {
  std::string label;
  std::function<opt::Optimizer()> make;
  Rows f32, f64;  // x after each step
};

// x after each of 4 steps, from Keras 3.15.1 (TensorFlow 2.21 backend, CPU):
//   opt = keras.optimizers.<Class>(<arguments as below>)
//   x = keras.Variable(np.array(kInit, dtype), dtype=dtype)
//   for g in kGrads: opt.apply([np.array(g, dtype)], [x]); print(x.numpy())
std::vector<Case> cases() {
  return {
      {"Adagrad",
       [] { return opt::Adagrad(0.1); },
       {{0.969848871, -1.94654775, 0.431175292, 0.25},
        {0.886515558, -2.0195775, 0.453535974, 0.25},
        {0.931236923, -2.0195775, 0.442424864, 0.25},
        {0.902665496, -1.94572258, 0.358307004, 0.25}},
       {{0.96984887900220973, -1.9465477701955576, 0.43117529719491099, 0.25},
        {0.88651555617365185, -2.0195774332648262, 0.4535359716296411, 0.25},
        {0.93123691134696418, -2.0195774332648262, 0.44242486313732587, 0.25},
        {0.90266548530868329, -1.945722543255143, 0.35830702051020918, 0.25}}},
      {"Adagrad options",
       [] { return opt::Adagrad(0.1, 0.0, 1e-3, {.weight_decay = 0.1, .clipnorm = 0.5}); },
       {{0.894653738, -1.88122702, 0.395550966, 0.247500002},
        {0.789210141, -1.9460243, 0.416373432, 0.245025009},
        {0.841340959, -1.9265641, 0.396354824, 0.242574751},
        {0.812180936, -1.84202731, 0.316198468, 0.240149006}},
       {{0.8946537393566476, -1.881227038267163, 0.395550966749313, 0.24749999992549421},
        {0.78921015070721678, -1.9460243537875699, 0.41637344997683012, 0.24502499985247853},
        {0.84134092007173211, -1.9265641096697337, 0.39635485510262181, 0.2425747497809306},
        {0.81218091150512639, -1.8420273661016473, 0.31619852342126625, 0.24014900221082838}}},
      {"Adadelta",
       [] { return opt::Adadelta(1.0); },
       {{0.998585939, -1.99858582, 0.49858579, 0.25},
        {0.99662298, -2.00038362, 0.499232978, 0.25},
        {0.998062909, -2.00038362, 0.498892665, 0.25},
        {0.997033, -1.99824011, 0.49698019, 0.25}},
       {{0.99858592783777345, -1.9985858217916401, 0.49858580215084902, 0.25},
        {0.99662298372978508, -2.0003836565392459, 0.49923297658047827, 0.25},
        {0.99806290828503885, -2.0003836565392459, 0.49889266218519551, 0.25},
        {0.99703299731933015, -1.9982401174839093, 0.49698018383363024, 0.25}}},
      {"Adadelta options",
       [] { return opt::Adadelta(0.5, 0.8, 1e-6, {.clipvalue = 0.25}); },
       {{0.998882234, -1.99888206, 0.498882025, 0.25},
        {0.997393727, -2.00016785, 0.499527484, 0.25},
        {0.998925745, -2.00016785, 0.499164164, 0.25},
        {0.997574389, -1.99885869, 0.497928202, 0.25}},
       {{0.99888224541497528, -1.998882035881824, 0.49888201072992655, 0.25},
        {0.99739375587158152, -2.0001678229376578, 0.49952746815175464, 0.25},
        {0.99892574474670981, -2.0001678229376578, 0.49916415887739141, 0.25},
        {0.99757438173751356, -1.9988586716685521, 0.49792818321350546, 0.25}}},
      {"Adamax",
       [] { return opt::Adamax(0.01); },
       {{0.99000001, -1.99000001, 0.49000001, 0.25},
        {0.983789504, -1.99289477, 0.487014562, 0.25},
        {0.982083023, -1.9947232, 0.484512627, 0.25},
        {0.979706049, -1.992679, 0.480845869, 0.25}},
       {{0.99000001260768999, -1.9900000076076987, 0.49000000594103393, 0.25},
        {0.98378948907559394, -1.992894743007583, 0.4870145660962959, 0.25},
        {0.98208298626868207, -1.9947231387806201, 0.48451264120277443, 0.25},
        {0.97970603452884641, -1.992678940685239, 0.4808458789557612, 0.25}}},
      {"Adamax options",
       [] { return opt::Adamax(0.01, 0.8, 0.9, 1e-3, {.global_clipnorm = 0.3}); },
       {{0.990123212, -1.990062, 0.490041405, 0.25},
        {0.983058572, -1.99175942, 0.486308336, 0.25},
        {0.98387903, -1.99287176, 0.482829511, 0.25},
        {0.983675659, -1.99014485, 0.477442414, 0.25}},
       {{0.99012318515158881, -1.9900619741074557, 0.49004140147605874, 0.25},
        {0.98305855136732512, -1.9917593609838435, 0.48630833752778707, 0.25},
        {0.98387900150131447, -1.992871737635036, 0.48282952462503376, 0.25},
        {0.98367564438651522, -1.9901447974283009, 0.47744244034670441, 0.25}}},
      {"Nadam",
       [] { return opt::Nadam(0.01); },
       {{0.989372134, -1.98937213, 0.489372134, 0.25},
        {0.979212284, -1.99818873, 0.491920292, 0.25},
        {0.983777583, -1.99861073, 0.489794254, 0.25},
        {0.979776084, -1.98977602, 0.479216874, 0.25}},
       {{0.98937213262158052, -1.9893721273076495, 0.48937212553633797, 0.25},
        {0.97921226677564643, -1.9981887817548261, 0.49192030131601472, 0.25},
        {0.98377756221235835, -1.9986107988740551, 0.48979428074567749, 0.25},
        {0.97977607784682186, -1.9897760120842405, 0.47921685649521673, 0.25}}},
      {"Nadam options",
       [] { return opt::Nadam(0.01, 0.8, 0.95, 1e-4, {.weight_decay = 0.05}); },
       {{0.988459647, -1.98795414, 0.488702297, 0.249874994},
        {0.976928055, -1.99638677, 0.490974724, 0.249750063},
        {0.98124069, -1.99610293, 0.48820895, 0.249625191},
        {0.976126254, -1.98515391, 0.476008415, 0.249500379}},
       {{0.98845965391857959, -1.9879541365079694, 0.48870229613858623, 0.24987500000093132},
        {0.97692810016685483, -1.9963867767889412, 0.49097471220495975, 0.24975006250186171},
        {0.98124072866223422, -1.9961028968027175, 0.48820892032422908, 0.24962518747154117},
        {0.9761262774051731, -1.9851539066648316, 0.47600838909096926, 0.24950037487873533}}},
      {"Ftrl",
       [] { return opt::Ftrl(0.1); },
       {{0.0163862742, -0.256239265, 0.0684371516, 0},
        {-0.0669470578, -0.329268962, 0.0907978341, 0},
        {-0.0222256929, -0.329268962, 0.0796867236, 0},
        {-0.0507971235, -0.255414039, -0.00443112338, 0}},
       {{0.016386275405761076, -0.25623923805022336, 0.068437152747960278, 0},
        {-0.066947058996868536, -0.32926891329110131, 0.090797832772858245, 0},
        {-0.022225698854517025, -0.32926891329110131, 0.079686721537059788, 0},
        {-0.050797127808249444, -0.25541401768635102, -0.0044311271635471081, 0}}},
      {"Ftrl options",
       [] { return opt::Ftrl(0.1, -0.7, 0.2, 0.01, 0.02, 0.03, 0.1, {.clipnorm = 0.4}); },
       {{-0.0085088294, -0.11698366, 0.0269672275, -0.00116786594},
        {-0.0655890703, -0.161779314, 0.0383445323, -0.00115149899},
        {-0.0170492753, -0.159966558, 0.028491307, -0.00113536138},
        {-0.0302885734, -0.115856484, -0.0167144295, -0.00111944997}},
       {{-0.0085087827051309722, -0.11698364204006249, 0.026967231591872472,
         -0.0011678659814118532},
        {-0.065589025369872322, -0.16177929879741731, 0.03834453600055307, -0.0011514990500053844},
        {-0.017049232113855634, -0.15996653676588801, 0.028491311979047969, -0.001135361491187832},
        {-0.03028853495815443, -0.11585646867278272, -0.016714426241301105,
         -0.0011194500904418727}}},
      {"Lion",
       [] { return opt::Lion(0.01); },
       {{0.99000001, -1.99000001, 0.49000001, 0.25},
        {0.980000019, -2, 0.5, 0.25},
        {0.99000001, -2.00999999, 0.49000001, 0.25},
        {0.980000019, -2, 0.480000019, 0.25}},
       {{0.99000000022351742, -1.9900000002235174, 0.49000000022351742, 0.25},
        {0.98000000044703484, -2, 0.5, 0.25},
        {0.99000000022351742, -2.0099999997764826, 0.49000000022351742, 0.25},
        {0.98000000044703484, -2, 0.48000000044703484, 0.25}}},
      {"Lion options",
       [] { return opt::Lion(0.01, 0.8, 0.95, {.weight_decay = 0.1, .clipvalue = 0.2}); },
       {{0.989000022, -1.98800004, 0.489500016, 0.249750003},
        {0.978011012, -1.99601197, 0.499010503, 0.24950026},
        {0.98703301, -2.00401592, 0.488511503, 0.249250755},
        {0.976045966, -1.99201202, 0.478022993, 0.249001503}},
       {{0.98900000023096801, -1.9880000002384186, 0.48950000022724272, 0.24975000000186265},
        {0.97801100046162304, -1.9960120000294745, 0.49901050000714514, 0.24950025000372156},
        {0.98703298924493077, -2.0040159878207993, 0.48851148973437331, 0.24925074975557676},
        {0.97604595648655723, -1.9920119720714271, 0.47802297847179603, 0.24900149900767823}}},
      {"Adam amsgrad",
       [] { return opt::Adam(0.01, 0.9, 0.999, 1e-7, true); },
       {{0.990000367, -1.99000025, 0.490000159, 0.25},
        {0.981390059, -1.99366117, 0.485998064, 0.25},
        {0.97889477, -1.99648976, 0.481943876, 0.25},
        {0.975096107, -1.99321294, 0.475278229, 0.25}},
       {{0.99000038319655759, -1.9900002250912334, 0.49000017238834759, 0.25},
        {0.98139003151392878, -1.993661210007712, 0.48599805345190977, 0.25},
        {0.9788947792112237, -1.9964897466722185, 0.48194386652824628, 0.25},
        {0.97509609045975265, -1.9932129425378367, 0.47527820172341406, 0.25}}},
      // The four optimizers that came before, against the same values.
      {"Adam",
       [] { return opt::Adam(0.01); },
       {{0.990000367, -1.99000025, 0.490000159, 0.25},
        {0.981390059, -1.99366117, 0.485998064, 0.25},
        {0.97889477, -1.99649107, 0.481943876, 0.25},
        {0.975096107, -1.99321425, 0.475278229, 0.25}},
       {{0.99000038319655759, -1.9900002250912334, 0.49000017238834759, 0.25},
        {0.98139003151392878, -1.993661210007712, 0.48599805345190977, 0.25},
        {0.9788947792112237, -1.9964911619921228, 0.48194386652824628, 0.25},
        {0.97509609045975265, -1.993214357857741, 0.47527820172341406, 0.25}}},
      {"AdamW",
       [] { return opt::AdamW(0.01); },
       {{0.989960372, -1.98992026, 0.489980161, 0.249990001},
        {0.981310487, -1.99350154, 0.485958457, 0.249980003},
        {0.978775918, -1.9962517, 0.481884837, 0.249970004},
        {0.974938095, -1.99289501, 0.475199908, 0.249960005}},
       {{0.9899603831955518, -1.9899202250892218, 0.48998017238784469, 0.24998999999974855},
        {0.98131043309659949, -1.9935016131946954, 0.48595845424401851, 0.24998000039949711},
        {0.97877592837558347, -1.9962518251125734, 0.48188482898169649, 0.24997000119922969},
        {0.97493808858599296, -1.9928951709031792, 0.47519988878322034, 0.24996000239893029}}},
      {"SGD nesterov",
       [] { return opt::SGD(0.1, 0.9, true); },
       {{0.981000006, -1.96200001, 0.442999989, 0.25},
        {0.877900004, -2.02180004, 0.437700003, 0.25},
        {0.887109995, -2.03961992, 0.414429992, 0.25},
        {0.830398977, -1.9416579, 0.264986992, 0.25}},
       {{0.98099999995529652, -1.961999999910593, 0.44299999986588956, 0.25},
        {0.87790000004023316, -2.0218000007063148, 0.43770000083595517, 0.25},
        {0.88711000218734148, -2.039620000413954, 0.41443000191733242, 0.25},
        {0.83039900412367285, -1.9416579994577465, 0.26498700308029355, 0.25}}},
      {"RMSprop centered momentum",
       [] { return opt::RMSprop(0.01, 0.8, 0.5, 1e-7, true); },
       {{0.975000799, -1.97500014, 0.475000083, 0.25},
        {0.936900258, -1.98355401, 0.470502406, 0.25},
        {0.930284917, -1.987831, 0.463793963, 0.25},
        {0.918124259, -1.96981263, 0.435899734, 0.25}},
       {{0.97500078177215688, -1.9750001958690004, 0.47500008736389504, 0.25},
        {0.93690020927253004, -1.9835540621960193, 0.47050241024077238, 0.25},
        {0.93028486774409858, -1.9878309953595288, 0.46379396576896259, 0.25},
        {0.91812420380007009, -1.969812657578617, 0.43589972972092489, 0.25}}},
      {"Lamb",
       [] { return opt::Lamb(0.1); },
       {{0.866927385, -1.86692739, 0.366927296, 0.25},
        {0.688758254, -1.94268215, 0.284113407, 0.25},
        {0.594339252, -2.04976606, 0.130704507, 0.25},
        {0.496316046, -1.96520984, -0.0412994027, 0.25}},
       {{0.86692738791158008, -1.8669273213757356, 0.36692729919710598, 0.25},
        {0.68875824782208406, -1.9426820757162002, 0.28411341354307074, 0.25},
        {0.59433925550791522, -2.0497660971703744, 0.13070452338850783, 0.25},
        {0.49631604348585368, -1.9652099161858354, -0.041299378617073917, 0.25}}},
      {"Lamb options",
       [] { return opt::Lamb(0.05, 0.8, 0.9, 1e-3, {.weight_decay = 0.1, .clipnorm = 0.5}); },
       {{0.929052055, -1.92372394, 0.431113839, 0.248750001},
        {0.830263078, -1.94703293, 0.38466695, 0.247506246},
        {0.804066181, -1.98782194, 0.290179521, 0.246268719},
        {0.770304918, -1.93627584, 0.193213791, 0.245037377}},
       {{0.92905204183634404, -1.9237239423548094, 0.43111384944672937, 0.2487499999627471},
        {0.83026311337007086, -1.9470329528807506, 0.38466696792177929, 0.24750624992586673},
        {0.80406621622769092, -1.9878219535593507, 0.29017953447800771, 0.24626871863935609},
        {0.77030494323847598, -1.9362757915263145, 0.19321380172726457, 0.2450373750094624}}},
      {"Adafactor",
       [] { return opt::Adafactor(0.1); },
       {{0.884755671, -1.88475573, 0.384755701, 0.25},
        {0.746132553, -2.01395774, 0.435546398, 0.25},
        {0.840153933, -2.01395774, 0.401861995, 0.25},
        {0.778035879, -1.87012339, 0.242765129, 0.25}},
       {{0.88475569256656494, -1.8847556925665649, 0.38475569256656494, 0.25},
        {0.74613257353996598, -2.0139578032777319, 0.43554637924440065, 0.25},
        {0.84015396756004435, -2.0139578032777319, 0.40186197028025822, 0.25},
        {0.77803592177050263, -1.8701234704049829, 0.24276510601912996, 0.25}}},
      {"Adafactor absolute",
       [] { return opt::Adafactor(0.3, -0.5, 1e-20, 1e-2, 0.5, false); },
       {{0.800391018, -1.80039096, 0.300391018, 0.25},
        {0.594242334, -1.99824834, 0.395981282, 0.25},
        {0.86308229, -1.99824834, 0.267567039, 0.25},
        {0.751023889, -1.78383315, 0.0415381789, 0.25}},
       {{0.80039099928485991, -1.8003909992848599, 0.30039099928485985, 0.25},
        {0.59424234565674539, -1.9982483370594304, 0.39598126781103948, 0.25},
        {0.86308231204307884, -1.9982483370594304, 0.26756702953824069, 0.25},
        {0.75102393688416769, -1.7838331391856184, 0.041538174307973019, 0.25}}},
  };
}

// The largest distance in units in the last place between `got` and `want` (each element
// rounded to got's dtype, float32 or float64).
int64_t max_ulps(const tf::Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = tf::detail::to_double_vector(got);
  REQUIRE(g.size() == want.size());
  int64_t worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] == 0 && want[i] == 0) continue;  // 0 and -0
    int64_t a, b;
    if (got.dtype() == tf::float32) {
      a = std::bit_cast<int32_t>(static_cast<float>(g[i]));
      b = std::bit_cast<int32_t>(static_cast<float>(want[i]));
    } else {
      a = std::bit_cast<int64_t>(g[i]);
      b = std::bit_cast<int64_t>(want[i]);
    }
    // Same-sign values here (the literals never straddle 0): the bit patterns are ordered.
    worst = std::max(worst, a > b ? a - b : b - a);
  }
  return worst;
}

}  // namespace

TEST_CASE("optimizers more: 4 steps match Keras 3.15 in float32 and float64", "[keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases()) {
      for (tf::DType dtype : {tf::float32, tf::float64}) {
        CAPTURE(c.label, tf::dtype_name(dtype));
        opt::Optimizer o = c.make();
        tf::Variable x(tf::constant(tf::convert_to_tensor(kInit, {4}), dtype), "x");
        for (size_t s = 0; s < kGrads.size(); ++s) {
          CAPTURE(s);
          o.apply_gradients({grad_at(s, dtype)}, {x});
          const std::vector<double>& want = dtype == tf::float32 ? c.f32[s] : c.f64[s];
          if (dtype == tf::float32)
            check_values(x.value(), want, 1e-6, 1e-8);
          else
            check_values(x.value(), want, 1e-13, 1e-15);
          // On the CPU the same roundings as Keras': bit-identical where this was written (an
          // AVX2 and an AVX-512 machine), but for Ftrl in float64, whose pow(n, 0.5) differs
          // from TF's in the last bit and whose (clip(linear) - linear) cancels (up to 73 ulps
          // seen). 4 ulps leave room for a C library whose pow or exp picks another code path
          // on another CPU, while a different order of operations still shows. A GPU's pow,
          // sqrt and divide may differ by an ulp, which the tolerances above allow. Lamb's
          // norms sum the squares in another order than Eigen's reduction (8 ulps seen in
          // float64 after 4 steps).
          if (!device.is_gpu()) {
            const bool ftrl64 = dtype == tf::float64 && c.label.rfind("Ftrl", 0) == 0;
            const bool lamb = c.label.rfind("Lamb", 0) == 0;
            CHECK(max_ulps(x.value(), want) <= (ftrl64 ? 256 : lamb ? 32 : 4));
          }
        }
        CHECK(o.iterations().value().item<int64_t>() == 4);
      }
    }
  }
}

TEST_CASE("optimizers more: slot names and initial values follow Keras", "[keras][cpu]") {
  struct Slots {
    opt::Optimizer o;
    std::vector<std::string> names;
    std::vector<double> initial;
  };
  std::vector<Slots> all = {
      {opt::Adagrad(), {"accumulator"}, {0.1}},
      {opt::Adagrad(0.01, 0.5), {"accumulator"}, {0.5}},
      {opt::Adadelta(), {"accumulated_grad", "accumulated_delta_var"}, {0, 0}},
      {opt::Adamax(), {"momentum", "norm"}, {0, 0}},
      {opt::Nadam(), {"momentum", "velocity"}, {0, 0}},
      {opt::Ftrl(), {"accumulator", "linear"}, {0.1, 0}},
      {opt::Ftrl(0.01, -0.5, 0.25), {"accumulator", "linear"}, {0.25, 0}},
      {opt::Lion(), {"momentum"}, {0}},
      {opt::Lamb(), {"momentum", "velocity"}, {0, 0}},
  };
  for (auto& s : all) {
    CAPTURE(s.o.name());
    CHECK(s.o.slot_names() == s.names);
    tf::Variable k(tf::ones({2, 3}), "dense/kernel");
    s.o.build({k});
    std::vector<std::string> tracked;
    for (auto& [name, v] : s.o.tracked_variables()) tracked.push_back(name);
    std::vector<std::string> want = {"iterations", "learning_rate"};
    if (s.o.name() == "Nadam") want.push_back("u_product");
    for (const auto& n : s.names) want.push_back("dense/kernel/" + n);
    CHECK(tracked == want);
    REQUIRE(s.o.slots().size() == 1);
    const auto owners = s.o.slots();
    const auto& slots = owners[0].second;
    REQUIRE(slots.size() == s.initial.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      CHECK(slots[i].shape() == tf::TensorShape({2, 3}));
      CHECK(slots[i].dtype() == tf::float32);
      check_values(slots[i].value(),
                   std::vector<double>(6, static_cast<double>(static_cast<float>(s.initial[i]))), 0,
                   0);
    }
  }
  // Keras' defaults and compile() strings.
  for (const char* id :
       {"adagrad", "Adadelta", "ADAMAX", "nadam", "ftrl", "lion", "Lamb", "adafactor"}) {
    CAPTURE(id);
    opt::Optimizer o = opt::get(id);
    std::string lower = id;
    std::string got = o.name();
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (auto& ch : got) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    CHECK(got == lower);
    CHECK(o.current_learning_rate() == Approx(0.001));
  }
  CHECK(opt::get("nadam").name() == "Nadam");
  CHECK(opt::Lion(0.1, 0.9, 0.99, {.name = "my_lion"}).name() == "my_lion");
  TF_REQUIRE_THROWS_CONTAINING(opt::get("sophia"), tf::InvalidArgumentError, "schedulefreeadamw");
  // Nadam's u_product: beta_1 (1 - 0.5 * 0.96^t) multiplied in at each step, in the first
  // variable's dtype (float64 here: the exact product).
  opt::Nadam nadam(0.01);
  tf::Variable x(tf::constant({1.0, 2.0}), "x");
  for (int t = 1; t <= 3; ++t) nadam.apply_gradients({tf::constant({0.5, -0.5})}, {x});
  double product = 1;
  for (int t = 1; t <= 3; ++t) product = product * 0.9 * (1.0 - 0.5 * std::pow(0.96, t));
  check_values(nadam.tracked_variables()[2].second.value(), {product}, 1e-15, 0);
}

TEST_CASE("optimizers more: a traced step gives the eager values", "[keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases()) {
      CAPTURE(c.label);
      opt::Optimizer eager = c.make(), traced = c.make();
      tf::Variable xe(tf::constant(tf::convert_to_tensor(kInit, {4}), tf::float32), "x");
      tf::Variable xt(xe.value(), "x");
      auto step = tf::function([&](const tf::Tensor& g) {
        traced.apply_gradients({g}, {xt});
        return xt.value();
      });
      for (size_t s = 0; s < kGrads.size(); ++s) {
        eager.apply_gradients({grad_at(s, tf::float32)}, {xe});
        step(grad_at(s, tf::float32));
        check_close(xt.value(), xe.value(), 0, 0);
      }
      CHECK(step.tracing_count() == 1);
      const auto te = eager.tracked_variables(), tt = traced.tracked_variables();
      REQUIRE(te.size() == tt.size());
      for (size_t i = 0; i < te.size(); ++i) {
        CHECK(te[i].first == tt[i].first);
        check_close(tt[i].second.value(), te[i].second.value(), 0, 0);
      }
    }
  }
}

namespace {

// Splits CPU:0 into two logical devices; false (with a warning) when ops already ran in this
// process (the whole binary run at once rather than one CTest test per process).
bool split_cpu() {
  try {
    tf::config::set_logical_device_configuration(tf::config::list_physical_devices("CPU")[0],
                                                 {{}, {}});
  } catch (const tf::FailedPreconditionError&) {
  }
  if (tf::config::list_logical_devices("CPU").size() >= 2) return true;
  WARN("ops already ran in this process; run this case alone to split the CPU");
  return false;
}

}  // namespace

TEST_CASE(
    "optimizers more: MirroredStrategy on 2 replicas equals one replica on the summed "
    "gradient",
    "[keras][cpu][multi_device]") {
  if (!split_cpu()) return;
  ds::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  for (const Case& c : cases()) {
    CAPTURE(c.label);
    opt::Optimizer mirrored_opt;
    tf::Variable w;
    {
      auto scope = strategy.scope();
      mirrored_opt = c.make();
      w = tf::Variable(tf::constant(tf::convert_to_tensor(kInit, {4}), tf::float64), "w");
    }
    REQUIRE(w.is_mirrored());
    // Replica r's gradient is g * (r + 1): the all-reduced sum is g + 2 g.
    for (size_t s = 0; s < kGrads.size(); ++s)
      strategy.run([&] {
        const int r = ds::get_replica_context()->replica_id_in_sync_group();
        mirrored_opt.apply_gradients({grad_at(s, tf::float64) * static_cast<double>(r + 1)}, {w});
        return 0;
      });
    opt::Optimizer single = c.make();
    tf::Variable x(tf::constant(tf::convert_to_tensor(kInit, {4}), tf::float64), "w");
    for (size_t s = 0; s < kGrads.size(); ++s)
      single.apply_gradients({grad_at(s, tf::float64) + grad_at(s, tf::float64) * 2.0}, {x});
    const auto copies = strategy.experimental_local_results(w);
    REQUIRE(copies.size() == 2);
    for (const auto& copy : copies) check_close(copy.value(), x.value(), 1e-15, 1e-15);
    // Every optimizer variable (slots, iterations, u_product) is mirrored and equal to the
    // single replica's.
    const auto tm = mirrored_opt.tracked_variables(), ts = single.tracked_variables();
    REQUIRE(tm.size() == ts.size());
    for (size_t i = 0; i < tm.size(); ++i) {
      CAPTURE(tm[i].first);
      if (tm[i].first == "learning_rate") continue;
      CHECK(tm[i].second.is_mirrored());
      for (const auto& copy : strategy.experimental_local_results(tm[i].second))
        check_close(copy.value(), ts[i].second.value(), 1e-15, 1e-15);
    }
  }
}

namespace {

}  // namespace

TEST_CASE("optimizers more: slots survive a checkpoint round trip", "[keras][cpu]") {
  TempDir dir;
  for (const Case& c : cases()) {
    CAPTURE(c.label);
    opt::Optimizer o = c.make();
    tf::Variable x(tf::constant(tf::convert_to_tensor(kInit, {4}), tf::float32), "x");
    tf::train::Checkpoint ckpt({{"x", x}, {"optimizer", o}});
    for (size_t s = 0; s < 2; ++s) o.apply_gradients({grad_at(s, tf::float32)}, {x});
    const std::string path = ckpt.save(dir / "ckpt");
    std::vector<std::string> names;
    for (auto& [n, v] : ckpt.variables()) names.push_back(n);
    for (const auto& slot : o.slot_names())
      CHECK(std::find(names.begin(), names.end(), "optimizer/x/" + slot) != names.end());
    for (size_t s = 2; s < 4; ++s) o.apply_gradients({grad_at(s, tf::float32)}, {x});
    const auto want = x.value().numpy<float>();
    // A fresh optimizer and variable: the slots wait in the optimizer until the first step.
    opt::Optimizer fresh = c.make();
    tf::Variable y(tf::zeros({4}), "y");
    tf::train::Checkpoint restored({{"x", y}, {"optimizer", fresh}});
    auto status = restored.restore(path);
    status.assert_existing_objects_matched();
    CHECK(status.unused.empty());
    CHECK(fresh.iterations().value().item<int64_t>() == 2);
    for (size_t s = 2; s < 4; ++s) fresh.apply_gradients({grad_at(s, tf::float32)}, {y});
    CHECK(y.value().numpy<float>() == want);
    // The restored slots are the saved run's.
    const auto so = o.slots(), sf = fresh.slots();
    REQUIRE(so.size() == 1);
    REQUIRE(sf.size() == 1);
    for (size_t i = 0; i < so[0].second.size(); ++i)
      check_close(sf[0].second[i].value(), so[0].second[i].value(), 0, 0);
  }
}

TEST_CASE("optimizers more: hyperparameters that would diverge are errors naming the optimizer",
          "[keras][cpu]") {
  using tf::testing::require_error;
  require_error([] { opt::Adagrad(-0.1); }, {"[Adagrad]", "learning_rate", "-0.1"});
  require_error([] { opt::Adagrad(0.1, -1.0); },
                {"[Adagrad]", "initial_accumulator_value must be finite and >= 0, got -1"});
  require_error([] { opt::Adagrad(0.1, 0.1, -1e-7); }, {"[Adagrad]", "epsilon", "-1e-07"});
  require_error([] { opt::Adadelta(0.1, 1.5); }, {"[Adadelta]", "rho must be in [0, 1], got 1.5"});
  require_error([] { opt::Adadelta(0.1, -0.5); }, {"[Adadelta]", "rho", "-0.5"});
  require_error([] { opt::Adamax(0.1, 1.0); }, {"[Adamax]", "beta_1 must be in [0, 1), got 1"});
  require_error([] { opt::Adamax(0.1, 0.9, 1.5); }, {"[Adamax]", "beta_2", "1.5"});
  require_error([] { opt::Nadam(0.1, 0.9, 1.0); }, {"[Nadam]", "beta_2 must be in [0, 1), got 1"});
  require_error([] { opt::Nadam(0.1, -0.1); }, {"[Nadam]", "beta_1", "-0.1"});
  require_error([] { opt::Nadam(0.1, 0.9, 0.999, -1.0); }, {"[Nadam]", "epsilon", "-1"});
  require_error([] { opt::Ftrl(0.1, 0.5); },
                {"[Ftrl]", "learning_rate_power must be finite and <= 0, got 0.5"});
  require_error([] { opt::Ftrl(0.1, -0.5, -0.1); }, {"[Ftrl]", "initial_accumulator_value"});
  require_error([] { opt::Ftrl(0.1, -0.5, 0.1, -1.0); }, {"[Ftrl]", "l1_regularization_strength"});
  require_error([] { opt::Ftrl(0.1, -0.5, 0.1, 0.0, -1.0); },
                {"[Ftrl]", "l2_regularization_strength", "-1"});
  require_error([] { opt::Ftrl(0.1, -0.5, 0.1, 0.0, 0.0, -1.0); },
                {"[Ftrl]", "l2_shrinkage_regularization_strength"});
  require_error([] { opt::Ftrl(0.1, -0.5, 0.1, 0.0, 0.0, 0.0, -2.0); }, {"[Ftrl]", "beta", "-2"});
  require_error([] { opt::Ftrl(0.0); }, {"[Ftrl]", "learning_rate must be > 0", "got 0"});
  require_error([] { opt::Lion(0.1, 0.0); }, {"[Lion]", "beta_1 must be in (0, 1], got 0"});
  require_error([] { opt::Lion(0.1, 0.9, 1.01); }, {"[Lion]", "beta_2", "1.01"});
  require_error([] { opt::Lion(0.1, 0.9, 0.99, {.clipnorm = 1.0, .global_clipnorm = 1.0}); },
                {"[Lion]", "only one of clipnorm"});
  // A gradient of the wrong shape names the optimizer and the variable.
  opt::Adagrad adagrad(0.1);
  tf::Variable v(tf::zeros({3}), "dense/bias");
  require_error([&] { adagrad.apply_gradients({tf::zeros({2})}, {v}); },
                {"[Adagrad]", "dense/bias", "(2,)", "(3,)"});
  require_error([] { sched::PolynomialDecay(0.1, 0); },
                {"[PolynomialDecay]", "decay_steps must be positive, got 0"});
  require_error([] { sched::PolynomialDecay(0.1, 10, -0.01); },
                {"[PolynomialDecay]", "end_learning_rate", "-0.01"});
  require_error([] { sched::PolynomialDecay(0.1, 10, 0.0, -1.0); }, {"[PolynomialDecay]", "power"});
  require_error([] { sched::CosineDecayRestarts(0.1, -5); },
                {"[CosineDecayRestarts]", "first_decay_steps must be positive, got -5"});
  require_error([] { sched::CosineDecayRestarts(0.1, 10, 0.0); },
                {"[CosineDecayRestarts]", "t_mul must be finite and > 0, got 0"});
  require_error([] { sched::CosineDecayRestarts(0.1, 10, 2.0, -1.0); },
                {"[CosineDecayRestarts]", "m_mul"});
  require_error([] { sched::CosineDecayRestarts(-0.1, 10); },
                {"[CosineDecayRestarts]", "initial_learning_rate"});
}

TEST_CASE("schedules more: PolynomialDecay and CosineDecayRestarts match Keras 3.15", "[keras]") {
  const std::vector<int64_t> steps = {0,  1,  5,  9,  10, 11, 15, 20,  21,
                                      29, 30, 31, 50, 69, 70, 71, 100, 150};
  struct Row {
    sched::LearningRateSchedule s;
    std::vector<double> want;
  };
  // float(keras.optimizers.schedules.<Class>(<arguments>)(np.int64(step))), Keras 3.15.1.
  const std::vector<Row> rows = {
      // PolynomialDecay(0.1, 20)
      {sched::PolynomialDecay(0.1, 20),
       {0.100000001, 0.0950049981, 0.0750249997, 0.0550450012, 0.0500500016, 0.045055002,
        0.0250749998, 9.99999975e-05, 9.99999975e-05, 9.99999975e-05, 9.99999975e-05,
        9.99999975e-05, 9.99999975e-05, 9.99999975e-05, 9.99999975e-05, 9.99999975e-05,
        9.99999975e-05, 9.99999975e-05}},
      // PolynomialDecay(0.1, 20, 0.01, 2.0)
      {sched::PolynomialDecay(0.1, 20, 0.01, 2.0),
       {0.100000001, 0.0912249982, 0.0606250018, 0.0372250006, 0.0324999988, 0.0282249991, 0.015625,
        0.00999999978, 0.00999999978, 0.00999999978, 0.00999999978, 0.00999999978, 0.00999999978,
        0.00999999978, 0.00999999978, 0.00999999978, 0.00999999978, 0.00999999978}},
      // PolynomialDecay(0.1, 20, 0.01, 0.5, cycle=True)
      {sched::PolynomialDecay(0.1, 20, 0.01, 0.5, true),
       {0.100000001, 0.097721152, 0.0879422873, 0.0767457932, 0.0736396089, 0.0703738332,
        0.0549999997, 0.00999999978, 0.0720282197, 0.0571964011, 0.0549999997, 0.0526907519,
        0.0467423499, 0.0433728918, 0.0418198034, 0.0401869193, 0.00999999978, 0.0324999988}},
      // CosineDecayRestarts(0.1, 10)
      {sched::CosineDecayRestarts(0.1, 10),
       {0.100000001, 0.0975528285, 0.049999997, 0.00244717603, 0.100000001, 0.0993844196,
        0.0853553414, 0.049999997, 0.0421782844, 0.00061558187, 0.100000001, 0.0998458713,
        0.049999997, 0.00015413166, 0.100000001, 0.0999614522, 0.0691341683, 0.100000001}},
      // CosineDecayRestarts(0.1, 10, 1.0, 0.5, 0.1)
      {sched::CosineDecayRestarts(0.1, 10, 1.0, 0.5, 0.1),
       {0.100000001, 0.0977975428, 0.054999996, 0.0122024585, 0.0550000034, 0.0538987704,
        0.0324999988, 0.0324999988, 0.031949386, 0.0105506135, 0.0212500002, 0.0209746938,
        0.0128124999, 0.010034414, 0.010703125, 0.0106859189, 0.0100878915, 0.0100027462}},
      // CosineDecayRestarts(0.1, 10, 1.5, 0.8, 0.05)
      {sched::CosineDecayRestarts(0.1, 10, 1.5, 0.8, 0.05),
       {0.100000001, 0.0976751819, 0.0524999984, 0.00732481712, 0.0810000002, 0.0801696107,
        0.0620000027, 0.0239999965, 0.0175730418, 0.0611806624, 0.058687754, 0.0557415783,
        0.0529844537, 0.0191703308, 0.0171599984, 0.0152549585, 0.0321621299, 0.0319550373}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Row& row : rows) {
      for (size_t i = 0; i < steps.size(); ++i) {
        CAPTURE(row.s.name(), steps[i]);
        // Host form in double against Keras' float32 values; the op form is float32 as Keras.
        CHECK(row.s(steps[i]) == Approx(row.want[i]).epsilon(1e-6).margin(1e-8));
        tf::Tensor t = row.s(tf::constant(tf::Tensor(steps[i]), tf::int64));
        CHECK(t.dtype() == tf::float32);
        CHECK(t.item<double>() == Approx(row.want[i]).epsilon(1e-6).margin(1e-9));
      }
    }
  }
  // As an optimizer's learning rate, in a traced step: the rate follows `iterations`.
  opt::SGD sgd(sched::CosineDecayRestarts(0.1, 2, 1.0, 0.5));
  tf::Variable x(tf::constant({0.0f}), "x");
  auto step = tf::function([&] {
    sgd.apply_gradients({tf::constant({-1.0f})}, {x});
    return x.value();
  });
  double want = 0;
  for (int64_t k = 0; k < 5; ++k) {
    step();
    want += static_cast<float>(sched::CosineDecayRestarts(0.1, 2, 1.0, 0.5)(k));
    check_values(x.value(), {want}, 1e-6, 1e-9);
  }
  CHECK(sgd.has_schedule());
  // Step 5 is half way through the third period (i = 2): 0.1 * 0.5^2 * 0.5 * (1 + cos(pi / 2)).
  CHECK(sgd.learning_rate().item<double>() == Approx(0.1 * 0.25 * 0.5).epsilon(1e-6));
}

TEST_CASE("optimizers more: Adafactor's factored moments match Keras 3.15", "[keras]") {
  // m0 = np.linspace(-1, 1, 6); x = keras.Variable(m0.reshape(shape), dtype=dtype);
  // opt = keras.optimizers.Adafactor(0.1); three opt.apply([g.reshape(shape)], [x]) with
  // the rows of `grads`; then x and opt.variables (r, c, velocity).
  const std::vector<double> init = {-1.0, -0.6, -0.2, 0.2, 0.6, 1.0};
  const Rows grads = {{0.1, -0.2, 0.3, 0.05, 0.4, -0.6},
                      {0.5, 0.4, -0.1, 0.0, -0.2, 0.3},
                      {-0.3, 0.2, 0.05, 0.1, 0.1, -0.1}};
  struct Want {
    std::vector<int64_t> shape;
    std::vector<double> x, r, c, v;
  };
  const std::vector<Want> wants = {
      {{2, 3},
       {-1.1598387542641264, -0.6854867646625951, -0.25075751074280356, 0.13883895476332178,
        0.5547437001425933, 1.0285160207727575},
       {0.07697496174410028, 0.0620565597668622},
       {0.06429961130046706, 0.06885672650961208, 0.07539094445636459},
       {0.07119910745742232, 0.07624521160812366, 0.08348056616675487, 0.0574001151435118,
        0.0614682414111005, 0.0673013227459743}},
      {{3, 2},
       {-1.0799675150708077, -0.6447690863776482, -0.286157486989971, 0.12831908900196545,
        0.5541605036268675, 1.0421615701594045},
       {0.10206352537811572, 0.015786262999244557, 0.09069749388908345},
       {0.06934443296536368, 0.06968708854559881},
       {0.10181198072026254, 0.10231507003596889, 0.015747356346645463, 0.015825169651843652,
        0.09047396182918302, 0.0909210259489839}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Want& w : wants) {
      for (tf::DType dtype : {tf::float32, tf::float64}) {
        CAPTURE(tf::TensorShape(w.shape).to_string(), tf::dtype_name(dtype));
        opt::Adafactor o(0.1);
        tf::Variable x(tf::constant(tf::convert_to_tensor(init, w.shape), dtype), "x");
        for (const auto& g : grads)
          o.apply_gradients({tf::constant(tf::convert_to_tensor(g, w.shape), dtype)}, {x});
        const double rtol = dtype == tf::float32 ? 2e-6 : 1e-13;
        check_values(x.value(), w.x, rtol, rtol * 1e-2);
        const auto slots = o.slots();
        REQUIRE(slots.size() == 1);
        const auto& s = slots[0].second;
        REQUIRE(s.size() == 3);
        CHECK(s[0].shape() == tf::TensorShape({w.shape[0]}));
        CHECK(s[1].shape() == tf::TensorShape({w.shape[1]}));
        CHECK(s[2].shape() == tf::TensorShape(w.shape));
        check_values(s[0].value(), w.r, rtol, 0);
        check_values(s[1].value(), w.c, rtol, 0);
        check_values(s[2].value(), w.v, rtol, 0);
      }
    }
    // A stack of matrices, (2, 2, 3): r is (2, 2), c is (2, 3). Two steps of
    // np.sin(np.arange(12) * (k + 1)) from np.linspace(-1, 1, 12), float64.
    std::vector<double> init12(12);
    for (int i = 0; i < 12; ++i) init12[static_cast<size_t>(i)] = -1.0 + 2.0 * i / 11.0;
    opt::Adafactor o(0.1);
    tf::Variable x(tf::constant(tf::convert_to_tensor(init12, {2, 2, 3}), tf::float64), "x");
    for (int k = 0; k < 2; ++k) {
      std::vector<double> g(12);
      for (int i = 0; i < 12; ++i) g[static_cast<size_t>(i)] = std::sin(i * (k + 1.0));
      o.apply_gradients({tf::convert_to_tensor(g, {2, 2, 3})}, {x});
    }
    check_values(
        x.value(),
        {-1.0, -0.94869470098259, -0.6362929441805143, -0.4337020727860544, -0.2846077183835866,
         0.018011387860111798, 0.20344417144670046, 0.1275872375025068, 0.42001639247818895,
         0.6502635393899058, 0.8043374156778464, 1.0641406838440468},
        1e-13, 1e-15);
    const auto s = o.slots()[0].second;
    CHECK(s[0].shape() == tf::TensorShape({2, 2}));
    CHECK(s[1].shape() == tf::TensorShape({2, 3}));
    check_values(
        s[0].value(),
        {0.48572411481087946, 0.47356148907758067, 0.47005810451883073, 0.47552688634666895}, 1e-13,
        0);
    check_values(s[1].value(),
                 {0.026658975154728176, 0.7911290157974682, 0.6211404148804938, 0.29740437358246297,
                  0.6760061100172942, 0.4449670026984924},
                 1e-13, 0);
  }
  // A vector's r and c are unused scalars; slot_shape says so.
  opt::Adafactor o;
  const tf::Variable v4(tf::zeros({4})), v543(tf::zeros({5, 4, 3}));
  CHECK(o.slot_shape("r", v4) == tf::TensorShape({}));
  CHECK(o.slot_shape("c", v543) == tf::TensorShape({5, 3}));
  CHECK(o.slot_shape("r", v543) == tf::TensorShape({5, 4}));
  CHECK(o.slot_shape("velocity", v543) == tf::TensorShape({5, 4, 3}));
  tf::testing::require_error([&] { o.slot_shape("momentum", v4); },
                             {"[Adafactor]", "no slot \"momentum\""});
  // A factored slot restored from a checkpoint must have the factored shape.
  opt::Adafactor fresh;
  tf::Variable k(tf::ones({2, 3}), "k");
  fresh.restore_deferred_slot(k, "r", tf::zeros({2, 3}));
  tf::testing::require_error(
      [&] {
        fresh.apply_gradients({tf::ones({2, 3})}, {k});
      },
      {"[Adafactor]", "slot", "(2, 3)", "(2,)"});
}

TEST_CASE("optimizers more: Lamb steps a zero variable by lr and checks its arguments",
          "[keras][cpu]") {
  // keras.optimizers.Lamb(0.1) on x = [0, 0] with g = [0.5, -1]: ||x|| = 0 makes the trust
  // ratio 1 (Keras: x = [-0.0999993086, 0.0999993235]).
  opt::Lamb lamb(0.1);
  tf::Variable x(tf::zeros({2}), "x");
  lamb.apply_gradients({tf::constant({0.5f, -1.0f})}, {x});
  check_values(x.value(), {-0.0999993085861206, 0.0999993234872818}, 1e-7, 0);
  using tf::testing::require_error;
  require_error([] { opt::Lamb(0.1, 1.0); }, {"[Lamb]", "beta_1 must be in [0, 1), got 1"});
  require_error([] { opt::Lamb(0.1, 0.9, -0.1); }, {"[Lamb]", "beta_2", "-0.1"});
  require_error([] { opt::Lamb(0.1, 0.9, 0.999, -1.0); }, {"[Lamb]", "epsilon"});
  require_error([] { opt::Adafactor(0.1, 0.5); },
                {"[Adafactor]", "beta_2_decay must be finite and <= 0, got 0.5"});
  require_error([] { opt::Adafactor(0.1, -0.8, -1.0); }, {"[Adafactor]", "epsilon", "-1"});
  require_error([] { opt::Adafactor(0.1, -0.8, 1e-30, 1e-3, 0.0); },
                {"[Adafactor]", "clip_threshold must be finite and > 0, got 0"});
}
