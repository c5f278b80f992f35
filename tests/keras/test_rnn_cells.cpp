// Keras 3's cell API: RNN over SimpleRNNCell, LSTMCell, GRUCell, StackedRNNCells and a custom
// C++ cell, and ConvLSTM1D/2D/3D, against Keras 3.15 on identical weights (outputs and states,
// masks, initial states, go_backwards), central finite differences, traced against eager, in
// fit, through save_weights/load_weights, and their shape errors.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_more.h"
#include "keras/layers_rnn_cells.h"
#include "keras/losses.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace layers = tf::keras::layers;
using tf::testing::check_values;

namespace {

struct Float64Layers {
  Float64Layers() { K::backend::set_floatx(tf::float64); }
  ~Float64Layers() { K::backend::set_floatx(tf::float32); }
};

// The values both sides use: 0.5 sin(0.7 i + 1 + k) over the flat index i (weights, states).
tf::Tensor pattern(const tf::TensorShape& shape, int k) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * std::sin(0.7 * double(i) + 1.0 + k);
  return tf::convert_to_tensor(v, shape);
}
// The inputs: cos(0.37 i + 0.2).
tf::Tensor sequence(const tf::TensorShape& shape) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.37 * double(i) + 0.2);
  return tf::convert_to_tensor(v, shape);
}

// The Keras RNN guide's MinimalRNNCell: output = x W + h U, states {output}.
class MinimalRNNCell : public layers::RNNCell {
 public:
  explicit MinimalRNNCell(int64_t units) : units_(units) {}
  std::vector<int64_t> state_size() const override { return {units_}; }
  int64_t output_size() const override { return units_; }
  void build(const tf::TensorShape& s) override {
    kernel = add_weight("kernel", {s[-1], units_}, "uniform");
    recurrent_kernel = add_weight("recurrent_kernel", {units_, units_}, "uniform");
    Model::build(s);
  }
  std::pair<tf::Tensor, std::vector<tf::Tensor>> call(const tf::Tensor& x,
                                                      const std::vector<tf::Tensor>& states,
                                                      bool) override {
    const tf::Tensor out = tf::matmul(x, kernel) + tf::matmul(states[0], recurrent_kernel);
    return {out, {out}};
  }
  using RNNCell::call;
  tf::Variable kernel, recurrent_kernel;

 private:
  int64_t units_;
};

// MinimalRNNCell that adds the mean square of its output as a loss (Keras' add_loss).
class LossyCell : public MinimalRNNCell {
 public:
  using MinimalRNNCell::MinimalRNNCell;
  std::pair<tf::Tensor, std::vector<tf::Tensor>> call(const tf::Tensor& x,
                                                      const std::vector<tf::Tensor>& states,
                                                      bool training) override {
    auto r = MinimalRNNCell::call(x, states, training);
    add_loss(tf::reduce_mean(tf::square(r.first)));
    return r;
  }
  using RNNCell::call;
};

struct KerasCase {
  std::string name;
  std::vector<std::vector<double>> outputs;  // output, then the final states (return_state)
};

// From TF 2.21 / Keras 3.15 (floatx float64): each layer called once to build, set_weights
// with pattern(shape, k) for its k-th weight, then called on sequence(input shape) (with
// initial_state / mask where make_case gives them); outputs flattened with tf.nest.flatten.
//   simple: RNN(SimpleRNNCell(3), return_sequences=True, return_state=True), x (2, 3, 4)
//   lstm: RNN(LSTMCell(3), return_state=True), initial_state [pattern((2,3),10), (.., 11)]
//   gru: RNN(GRUCell(3), return_sequences=True, go_backwards=True, return_state=True)
//   gru_before: RNN(GRUCell(3, reset_after=False), return_state=True), initial pattern(.., 10)
//   lstm_mask: RNN(LSTMCell(3), return_sequences=True, return_state=True),
//              mask [[1, 1, 0], [1, 0, 1]]
//   stacked: RNN(StackedRNNCells([SimpleRNNCell(3), LSTMCell(2)]), return_sequences=True,
//            return_state=True)
//   minimal: RNN(MinimalRNNCell(3), return_state=True) (the Keras RNN guide's custom cell)
//   conv2d_same: ConvLSTM2D(2, 3, padding="same", return_sequences=True, return_state=True),
//                x (2, 3, 4, 4, 2)
//   conv2d_strided: ConvLSTM2D(2, (2, 3), strides=2), x (2, 3, 5, 6, 1)
//   conv1d: ConvLSTM1D(2, 3, padding="same", return_state=True), x (2, 3, 5, 2)
//   conv3d: ConvLSTM3D(2, 2, return_sequences=True), x (2, 2, 3, 3, 3, 1)
const std::vector<KerasCase> kKeras = {
    {"simple",
     {{0.3359580064092918, -0.019229770429017082, -0.3617938394199973, 0.12256444692907259,
       -0.4817367211193077, -0.7290236728159544, 0.05234239741506124, -0.4607833647399074,
       -0.6721420703823976, 0.13805546571237814, -0.08003946204068675, -0.25582911174969264,
       0.45451853132013276, 0.05257967563267296, -0.3883675081105678, 0.254603469031765,
       -0.40748215616917316, -0.7268671344116036},
      {0.05234239741506124, -0.4607833647399074, -0.6721420703823976, 0.254603469031765,
       -0.40748215616917316, -0.7268671344116036}}},
    {"lstm",
     {{0.14569067827203214, 0.11482067179469974, 0.08533602083643037, 0.16508793579949826,
       0.1441033578465255, 0.09793586684353417},
      {0.14569067827203214, 0.11482067179469974, 0.08533602083643037, 0.16508793579949826,
       0.1441033578465255, 0.09793586684353417},
      {0.3438847831841611, 0.3272936703670423, 0.2487079964528454, 0.33946458272627245,
       0.3823389499310643, 0.2980461959089191}}},
    {"gru",
     {{0.7281348036314679, 0.7768532932550236, 0.14408719508677215, 0.8139647483296015,
       0.8314893435594077, 0.5812822725649954, 0.6801098911881428, 0.6718500207754456,
       0.6878904569337693, 0.4392646518532804, 0.5383297604353879, 0.3105221871229772,
       0.31447411752339, 0.4304801647106819, 0.5494432677053875, 0.20465494277942708,
       0.39846838450363964, 0.6625163438436165},
      {0.6801098911881428, 0.6718500207754456, 0.6878904569337693, 0.20465494277942708,
       0.39846838450363964, 0.6625163438436165}}},
    {"gru_before",
     {{0.8214522835731217, 0.7620265328935952, 0.010679166699473185, 0.3486244407126203,
       0.560027006247781, 0.4670565224263967},
      {0.8214522835731217, 0.7620265328935952, 0.010679166699473185, 0.3486244407126203,
       0.560027006247781, 0.4670565224263967}}},
    {"lstm_mask",
     {{0.07177926337729362, 0.11106385209142612, 0.0815838370038326, 0.14844712766942547,
       0.11692976428483666, 0.07706996094035541, 0.14844712766942547, 0.11692976428483666,
       0.07706996094035541, 0.05294074966115064, 0.0713584713995135, 0.05546735331997085,
       0.05294074966115064, 0.0713584713995135, 0.05546735331997085, 0.14594594949107825,
       0.11570966602599748, 0.07274938016602771},
      {0.14844712766942547, 0.11692976428483666, 0.07706996094035541, 0.14594594949107825,
       0.11570966602599748, 0.07274938016602771},
      {0.32222592880588924, 0.32675277861490865, 0.23938298873596336, 0.296156390893563,
       0.2988077992700935, 0.2164068057996942}}},
    {"stacked",
     {{0.08208891941777002, 0.026003811879549893, 0.12184113017636354, 0.013634288874113325,
       0.15697508214318667, 0.006331793575743454, 0.07091737509984115, 0.00494293044394615,
       0.13549469376865558, 0.04676760864371601, 0.15487649230560052, 0.041914067556629214},
      {0.05234239741506124, -0.4607833647399074, -0.6721420703823976, 0.254603469031765,
       -0.40748215616917316, -0.7268671344116036},
      {0.15697508214318667, 0.006331793575743454, 0.15487649230560052, 0.041914067556629214},
      {0.5138619867320438, 0.024348285012489174, 0.46139463285314, 0.1566076380003475}}},
    {"minimal",
     {{-0.2227796162845215, -0.2659359912101777, -0.18401851410520031, -0.027324309027633324,
       -0.16301857213692078, -0.22204265353476008},
      {-0.2227796162845215, -0.2659359912101777, -0.18401851410520031, -0.027324309027633324,
       -0.16301857213692078, -0.22204265353476008}}},
    {"conv2d_same",
     {{-0.07338588325810223,  -0.18130351964732538,  -0.40231366745751745,   -0.4422815374462682,
       -0.49342988300222373,  0.019351442921094676,  0.12371744868844028,    0.1009100533536826,
       0.10140250932410091,   0.05482654888056394,   0.06911933718903317,    0.052490614909666174,
       0.03858684688835047,   -0.06379295378900166,  -0.30055982252891966,   -0.3564398737605328,
       -0.08127015056347996,  -0.23570174374618305,  -0.4781906094001015,    -0.3763602599315273,
       -0.4476058784593205,   0.0899206209162864,    0.12230091578975032,    0.11674604471472179,
       0.08351273095659649,   0.057934717370103556,  0.07610638398845386,    0.03724697976067899,
       0.0019000989714990626, -0.10399733976246124,  -0.264071969864127,     -0.24025583351455893,
       -0.03380870806905931,  -0.13914120495104146,  -0.18927302022513517,   -0.3413575321213978,
       -0.2832238643310796,   -0.4703595928574794,   -0.3441249701564889,    -0.13730448736823336,
       0.0682259584686566,    0.08048693459220008,   0.13978654901007034,    0.17735215300803253,
       0.1511703237676571,    -0.0663339834957764,   -0.10328359617538167,   -0.06535232264305053,
       -0.10689338166489862,  -0.1992079886278639,   -0.19434724595661634,   -0.395778291661785,
       -0.36870121135225786,  -0.5366171988012503,   -0.45525256498760136,   -0.08906488526566357,
       0.11938893131770222,   0.09369751020049263,   0.13510357012508947,    0.13239215398338455,
       0.061584585958090333,  -0.04512138580572065,  -0.05449415700087395,   -0.09739828049093703,
       0.031831816670648834,  -0.17578150223822922,  -0.14622293347654483,   -0.19039430133788612,
       -0.17286736892970203,  -0.33939145281170713,  -0.3183561778653423,    -0.46004014442964725,
       -0.13842318927418285,  0.1316652204297464,    0.09981472397181622,    0.13373216383779293,
       0.14194803489560734,   -0.008445270098301826, 0.002369075500187733,   0.02025442812117078,
       -0.18409499689286937,  -0.24945673481461686,  -0.11469377344623326,   -0.18743383770253938,
       -0.18769113059406406,  -0.42024434364909813,  -0.4531620067831585,    -0.4807906486951905,
       -0.11140127343138363,  0.14047775032469342,   0.11874441000192255,    0.12157683275407763,
       0.10497597206571686,   -0.040962401037600106, 0.006881964380382454,   -0.019593240499316565,
       0.10499176335090017,   0.10114315896172561,   0.0592692618235987,     -0.035253720811781256,
       -0.06753886752145156,  -0.1719476917499187,   -0.2620276850327852,    -0.49499611876158556,
       -0.2690176502650028,   -0.087716603010372,    -0.15977022316953332,   0.08401437977864096,
       0.09995093692403068,   0.054036352355532065,  0.05280124798661441,    0.04689940034920322,
       0.11577996237553358,   0.11688414805900758,   0.033209170842482684,   -0.0699156011438478,
       -0.08179806976047375,  -0.21220120423611408,  -0.42963827873370697,   -0.4893887482264491,
       -0.328587620595051,    -0.20029681403592475,  -0.0010364984240502065, 0.07937844240400478,
       0.09817118373796141,   0.061680997584080834,  0.07648082210596908,    0.051944364628748595,
       0.03348627876386578,   0.15071223993543278,   0.17662923804713193,    0.017895533910289453,
       -0.036294346672564114, -0.08640686999852512,  -0.22805734104445247,   -0.3882220625313761,
       -0.14754897324241942,  -0.26359703146719066,  -0.5178434598676132,    -0.24440049147254028,
       -0.35417049768927966,  0.10793161825845232,   0.141436622098794,      0.16656414054200588,
       0.11611104830641295,   0.10545249328022918,   0.14118370851606585,    -0.0432775256014543,
       -0.056856324293548095, -0.09090072165233005,  -0.31407495140816577,   -0.4018222314035588,
       -0.21301217245785048,  -0.40893866154801223,  -0.5209384848655052,    -0.06874628819308366,
       -0.16697446412328565,  0.08971330473662308,   0.17203070006860555,    0.186778567483643,
       -0.16199472706109824,  0.129119232324249,     0.17281555262053963,    0.10316258498870336,
       0.048608064306685975,  -0.07777793149046698,  -0.25545415873554644,   -0.23662518716046763,
       -0.10419751738794657,  -0.19785648484159357,  -0.30724704214733267,   -0.47999452889647237,
       -0.49937191378187146,  -0.3899962121164345,   -0.20796484083688307,   0.135712476391162,
       0.03305297476747669,   0.08186498145593742,   0.1297095179458261,     -0.017947721453914378,
       -0.06302254572869449,  -0.12083467003917389,  -0.1881790335474708,    -0.13172736521082506,
       -0.18007111054099342,  -0.35294960182353824,  -0.392599215488857,     -0.4719810284650399,
       -0.5448324733331151,   -0.1135578379473136,   -0.10848251733704237,   0.1731673933057938},
      {0.031831816670648834, -0.17578150223822922,  -0.14622293347654483, -0.19039430133788612,
       -0.17286736892970203, -0.33939145281170713,  -0.3183561778653423,  -0.46004014442964725,
       -0.13842318927418285, 0.1316652204297464,    0.09981472397181622,  0.13373216383779293,
       0.14194803489560734,  -0.008445270098301826, 0.002369075500187733, 0.02025442812117078,
       -0.18409499689286937, -0.24945673481461686,  -0.11469377344623326, -0.18743383770253938,
       -0.18769113059406406, -0.42024434364909813,  -0.4531620067831585,  -0.4807906486951905,
       -0.11140127343138363, 0.14047775032469342,   0.11874441000192255,  0.12157683275407763,
       0.10497597206571686,  -0.040962401037600106, 0.006881964380382454, -0.019593240499316565,
       -0.16199472706109824, 0.129119232324249,     0.17281555262053963,  0.10316258498870336,
       0.048608064306685975, -0.07777793149046698,  -0.25545415873554644, -0.23662518716046763,
       -0.10419751738794657, -0.19785648484159357,  -0.30724704214733267, -0.47999452889647237,
       -0.49937191378187146, -0.3899962121164345,   -0.20796484083688307, 0.135712476391162,
       0.03305297476747669,  0.08186498145593742,   0.1297095179458261,   -0.017947721453914378,
       -0.06302254572869449, -0.12083467003917389,  -0.1881790335474708,  -0.13172736521082506,
       -0.18007111054099342, -0.35294960182353824,  -0.392599215488857,   -0.4719810284650399,
       -0.5448324733331151,  -0.1135578379473136,   -0.10848251733704237, 0.1731673933057938},
      {0.09960642542126111,  -0.8490684883470118,   -1.1523221550815406,  -1.3510761763125043,
       -1.6396041990464867,  -1.1500317089153897,   -1.107622209889432,   -0.7328843011168615,
       -0.16173810456165158, 0.1528347476057558,    0.1091571207470535,   0.15629740277596893,
       0.17021190536395245,  -0.013847712763748882, 0.003898932530564503, 0.0660703109445723,
       -0.6526284482794296,  -1.1363771422288322,   -1.599809710486129,   -1.4689489715019652,
       -1.5977336737406185,  -1.065088186097394,    -1.0493405267811866,  -0.6098631963220255,
       -0.13396620133964204, 0.16858066617879824,   0.12843982260662898,  0.14612307039091332,
       0.12721016269032495,  -0.0787307400337861,   0.018879303816256326, -0.1248691837058119,
       -0.18194617333083923, 0.14389593762782635,   0.212952756215068,    0.16522295147284327,
       0.07264224550628476,  -0.21390905266956367,  -0.711211520017459,   -0.6659282488293421,
       -1.4083729509484457,  -1.3947339571523294,   -1.256215444099663,   -0.7936078206872558,
       -0.9386897861132463,  -0.45744410620363446,  -0.2776226509297691,  0.16813627766968336,
       0.03501074343125801,  0.08944638963783896,   0.14908723532324614,  -0.028088882464851403,
       -0.10505145145348967, -0.6154954343889434,   -0.5538660938148524,  -0.4942075867591955,
       -1.6463411954079339,  -1.1797098850535241,   -1.111520543017831,   -0.6580027162431078,
       -0.7905000150581977,  -0.12126449074451467,  -0.12740491970618828, 0.20426125088928418}}},
    {"conv2d_strided",
     {{0.06423181577109557, -0.01743672090704802, -0.02364946313023795, -0.16697950113074037,
       -0.26864227325877005, -0.03294722230115686, -0.06508816325503067, 0.1128381027048444,
       -0.16949252514339702, -0.2087810291689141, -0.1347114520952253, -0.23346756615937714,
       0.06517185160643503, -0.05082622610432823, -0.06051731296413608, -0.176092953481818}}},
    {"conv1d",
     {{-0.20007416464193634,  -0.11325130616105136,  -0.2519041138612929,  -0.32263999364919055,
       -0.3951902414380911,   -0.2072209549686425,   -0.29189381442927015, 0.09472394114866971,
       -0.035307681469813584, 0.12653840328077937,   -0.03186481866063454, -0.03268056548354968,
       -0.07010179692347568,  -0.014503414965480367, -0.1408247515191621,  -0.16977405987236968,
       -0.2466053560537293,   -0.3285056135442623,   -0.3156068392266792,  0.07124185661191136},
      {-0.20007416464193634,  -0.11325130616105136,  -0.2519041138612929,  -0.32263999364919055,
       -0.3951902414380911,   -0.2072209549686425,   -0.29189381442927015, 0.09472394114866971,
       -0.035307681469813584, 0.12653840328077937,   -0.03186481866063454, -0.03268056548354968,
       -0.07010179692347568,  -0.014503414965480367, -0.1408247515191621,  -0.16977405987236968,
       -0.2466053560537293,   -0.3285056135442623,   -0.3156068392266792,  0.07124185661191136},
      {-0.4495009001029311,   -0.20497624050042274, -0.6848126271397327,   -0.5417808656142653,
       -0.6855798342164234,   -0.25522397100588745, -0.3723174923066798,   0.11032477654765112,
       -0.044823558034043004, 0.16616704097039997,  -0.044582713086448844, -0.058051228960472906,
       -0.1782382209890149,   -0.04137777994598404, -0.48653402806990365,  -0.43040878204647315,
       -0.6733858943348046,   -0.554551293059637,   -0.42811545418526525,  0.08428796208202835}}},
    {"conv3d",
     {{-0.13852216348175372,  -0.27106154905864766,  -0.24644040000490738, -0.34042922677218174,
       -0.44832260424614445,  -0.05141347743115072,  -0.42996081272973014, 0.08547715913238857,
       0.12284377743011674,   0.0991742491109419,    0.12281362429437405,  0.10478429095180772,
       0.07791628786892506,   0.007297627475257206,  0.04984221619065727,  -0.05201745730217466,
       -0.032911012818266076, -0.09613909933172736,  -0.10159162810382663, -0.05778412318953947,
       -0.05308007470817271,  -0.02776426176763025,  -0.0318011294468858,  -0.06157584050173105,
       -0.3448766673232827,   -0.2852006720254295,   -0.44788375645807765, -0.06306052617292876,
       -0.32386479660186895,  0.09981267383603032,   -0.13603938949488859, 0.046798161500875735,
       -0.449854314026644,    -0.039840479013838144, -0.42618937513319094, 0.08843474990706937,
       -0.14531980622807703,  0.08163273790377978,   0.01259722474956839,  0.07668313695246814,
       0.07633763558092564,   0.0032140097222887187, 0.04829796446346416,  -0.05415555608530361,
       -0.023520601128110337, -0.1166269668654523,   -0.07376913477129136, -0.18156163428367214,
       -0.05392071777812936,  -0.04245229735923905,  -0.03611500411917936, -0.06682284174241952,
       -0.0790059908032266,   -0.15725426764995834,  -0.13487115426341215, -0.2555344988436034,
       -0.3459882915480997,   0.10128052555598559,   -0.17028417642486035, 0.04951836024912183,
       0.08192835351702693,   -0.0907703253073073,   0.031378962709610256, -0.1442547404279635}}},
};

struct Case {
  layers::RNN layer;
  tf::TensorShape x_shape;
  std::vector<tf::Tensor> initial;
  tf::Tensor mask;
  bool return_state = true;
};

Case make_case(const std::string& name) {
  const tf::TensorShape seq{2, 3, 4};
  if (name == "simple")
    return {layers::RNN(layers::SimpleRNNCell(3), {.return_sequences = true}), seq, {}, {}};
  if (name == "lstm")
    return {layers::RNN(layers::LSTMCell(3)), seq, {pattern({2, 3}, 10), pattern({2, 3}, 11)}, {}};
  if (name == "gru")
    return {layers::RNN(layers::GRUCell(3), {.return_sequences = true, .go_backwards = true}),
            seq,
            {},
            {}};
  if (name == "gru_before")
    return {
        layers::RNN(layers::GRUCell(3, {.reset_after = false})), seq, {pattern({2, 3}, 10)}, {}};
  if (name == "lstm_mask")
    return {layers::RNN(layers::LSTMCell(3), {.return_sequences = true}),
            seq,
            {},
            tf::constant(std::vector<int32_t>{1, 1, 0, 1, 0, 1}, {2, 3})};
  if (name == "stacked")
    return {layers::RNN(layers::StackedRNNCells(layers::SimpleRNNCell(3), layers::LSTMCell(2)),
                        {.return_sequences = true}),
            seq,
            {},
            {}};
  if (name == "minimal") return {layers::RNN(MinimalRNNCell(3)), seq, {}, {}};
  if (name == "conv2d_same")
    return {layers::ConvLSTM2D(2, {3}, {.padding = "same", .return_sequences = true}),
            {2, 3, 4, 4, 2},
            {},
            {}};
  if (name == "conv2d_strided")
    return {layers::ConvLSTM2D(2, {2, 3}, {.strides = {2}}), {2, 3, 5, 6, 1}, {}, {}, false};
  if (name == "conv1d")
    return {layers::ConvLSTM1D(2, {3}, {.padding = "same"}), {2, 3, 5, 2}, {}, {}};
  if (name == "conv3d")
    return {
        layers::ConvLSTM3D(2, {2}, {.return_sequences = true}), {2, 2, 3, 3, 3, 1}, {}, {}, false};
  throw std::runtime_error("no case " + name);
}

// Builds the case's layer and sets its weights to pattern(shape, k), as the Keras side.
void set_pattern_weights(Case& c) {
  std::vector<int64_t> dims = c.x_shape.dims();
  dims[0] = tf::None;
  c.layer.build(tf::TensorShape(dims));
  std::vector<tf::Tensor> weights;
  for (const tf::Variable& w : c.layer.variables())
    weights.push_back(pattern(w.shape(), static_cast<int>(weights.size())));
  c.layer.set_weights(weights);
}

std::vector<tf::Tensor> run_case(const Case& c, const tf::Tensor& x) {
  if (c.return_state) return c.layer.call_with_state(x, c.initial, false, c.mask);
  return {c.mask.defined() ? c.layer.call_with_mask(x, c.mask).output : c.layer(x)};
}

std::vector<double> vals(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tapeflow_rnn_cells_" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace

TEST_CASE("RNN cells and ConvLSTM match Keras 3.15 on identical weights", "[cpu][cuda][keras]") {
  Float64Layers f64;
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const KerasCase& k : kKeras) {
      CAPTURE(device.to_string(), k.name);
      Case c = make_case(k.name);
      set_pattern_weights(c);
      const tf::Tensor x = sequence(c.x_shape);
      const std::vector<tf::Tensor> outs = run_case(c, x);
      REQUIRE(outs.size() == k.outputs.size());
      for (size_t j = 0; j < outs.size(); ++j) {
        CAPTURE(j);
        CHECK(outs[j].placement() == device);
        check_values(outs[j], k.outputs[j], 1e-9, 1e-12);
      }
      CHECK(K::detail::with_unknown_batch(outs[0].shape()) == c.layer.output_shape());
    }
  }
}

TEST_CASE("RNN cells and ConvLSTM2D: gradients match central finite differences", "[cpu][keras]") {
  Float64Layers f64;
  for (const std::string name : {"lstm", "gru_before", "lstm_mask", "stacked", "conv2d_same"}) {
    CAPTURE(name);
    Case c = make_case(name);
    set_pattern_weights(c);
    auto loss_of = [&](const tf::Tensor& x) {
      const std::vector<tf::Tensor> outs = run_case(c, x);
      tf::Tensor loss = tf::zeros({}, tf::float64);
      for (size_t j = 0; j < outs.size(); ++j)
        loss = loss + tf::reduce_sum(outs[j] * pattern(outs[j].shape(), 20 + static_cast<int>(j)));
      return loss;
    };
    const tf::Tensor x = sequence(c.x_shape);
    std::vector<tf::Variable> wanted = c.layer.trainable_variables();
    REQUIRE(!wanted.empty());
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    const tf::Tensor loss = loss_of(x);
    const tf::Tensor gx = tape.gradient(loss, x);
    const std::vector<tf::Tensor> wgrads = tape.gradient(loss, wanted);
    const double eps = 1e-6;
    // The input (every element for the small cases, a stride of them for ConvLSTM2D).
    const std::vector<double> xv = vals(x), gxv = vals(gx);
    const size_t stride = xv.size() > 64 ? 7 : 1;
    for (size_t i = 0; i < xv.size(); i += stride) {
      auto at = [&](double d) {
        std::vector<double> v = xv;
        v[i] += d;
        return loss_of(tf::convert_to_tensor(v, x.shape())).item<double>();
      };
      const double num = (at(eps) - at(-eps)) / (2 * eps);
      CAPTURE(i);
      CHECK(std::abs(gxv[i] - num) <= 1e-6 * std::abs(num) + 1e-8);
    }
    for (size_t w = 0; w < wanted.size(); ++w) {
      CAPTURE(wanted[w].name());
      const tf::Tensor orig = wanted[w].value();
      const std::vector<double> wv = vals(orig), gw = vals(wgrads[w]);
      const size_t ws = wv.size() > 64 ? 5 : 1;
      for (size_t i = 0; i < wv.size(); i += ws) {
        auto at = [&](double d) {
          std::vector<double> v = wv;
          v[i] += d;
          wanted[w].assign(tf::convert_to_tensor(v, orig.shape()));
          return loss_of(x).item<double>();
        };
        const double num = (at(eps) - at(-eps)) / (2 * eps);
        CAPTURE(i);
        CHECK(std::abs(gw[i] - num) <= 1e-6 * std::abs(num) + 1e-8);
      }
      wanted[w].assign(orig);
    }
  }
}

TEST_CASE("RNN cells and ConvLSTM2D: a traced call equals the eager one", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    tf::random::set_seed(5);
    layers::RNN lstm(layers::LSTMCell(4), {.return_sequences = true});
    layers::RNN stacked(layers::StackedRNNCells(layers::GRUCell(3), layers::SimpleRNNCell(2)));
    layers::ConvLSTM2D conv(2, {3}, {.padding = "same"});
    auto forward = [&](const tf::Tensor& x, const tf::Tensor& img) {
      const std::vector<tf::Tensor> s = lstm.call_with_state(x);
      return std::vector<tf::Tensor>{stacked(s[0]), s[1], s[2], conv(img)};
    };
    // An open batch: the zero states broadcast against the input's batch.
    auto traced =
        tf::function(forward, {.input_signature = {tf::TensorSpec({tf::None, 5, 3}),
                                                   tf::TensorSpec({tf::None, 3, 4, 4, 1})}});
    auto grad_step = tf::function(
        [&](const tf::Tensor& x, const tf::Tensor& img) {
          tf::GradientTape tape;
          const auto outs = forward(x, img);
          const tf::Tensor loss = tf::reduce_sum(tf::square(outs[0])) + tf::reduce_sum(outs[3]);
          auto vars = lstm.trainable_variables();
          for (const auto& v : stacked.trainable_variables()) vars.push_back(v);
          for (const auto& v : conv.trainable_variables()) vars.push_back(v);
          return tape.gradient(loss, vars);
        },
        {.input_signature = {tf::TensorSpec({tf::None, 5, 3}),
                             tf::TensorSpec({tf::None, 3, 4, 4, 1})}});
    for (int64_t batch : {2, 3}) {
      const tf::Tensor x = tf::random::normal({batch, 5, 3});
      const tf::Tensor img = tf::random::normal({batch, 3, 4, 4, 1});
      const auto eager = forward(x, img);
      const auto graph = traced(x, img);
      REQUIRE(eager.size() == graph.size());
      for (size_t i = 0; i < eager.size(); ++i)
        tf::testing::check_close(graph[i], eager[i], 1e-5, 1e-6);
      tf::GradientTape tape;
      const auto outs = forward(x, img);
      const tf::Tensor loss = tf::reduce_sum(tf::square(outs[0])) + tf::reduce_sum(outs[3]);
      auto vars = lstm.trainable_variables();
      for (const auto& v : stacked.trainable_variables()) vars.push_back(v);
      for (const auto& v : conv.trainable_variables()) vars.push_back(v);
      const auto g_eager = tape.gradient(loss, vars);
      const auto g_graph = grad_step(x, img);
      REQUIRE(g_graph.size() == 12);
      REQUIRE(g_graph.size() == g_eager.size());
      for (size_t i = 0; i < g_eager.size(); ++i)
        tf::testing::check_close(g_graph[i], g_eager[i], 1e-4, 1e-5);
    }
    CHECK(traced.tracing_count() == 1);
    CHECK(grad_step.tracing_count() == 1);
  }
}

TEST_CASE("RNN cells: traced timesteps are one loop node, the first step peeled",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    tf::random::set_seed(12);
    const tf::Tensor x = tf::random::normal({3, 6, 2});
    const tf::Tensor mask = tf::sequence_mask(tf::constant({6, 2, 4}), 6);
    // An RNN of an LSTMCell, looped and unrolled, against the LSTM layer with its weights.
    layers::RNN looped(layers::LSTMCell(4), {.return_sequences = true, .go_backwards = true});
    layers::RNN unrolled(layers::LSTMCell(4),
                         {.return_sequences = true, .go_backwards = true, .unroll = true});
    layers::LSTM reference(4, {.return_sequences = true, .go_backwards = true});
    (void)looped(x);
    (void)unrolled(x);
    (void)reference(x);
    unrolled.set_weights(looped.get_weights());
    reference.set_weights(looped.get_weights());
    auto run = [&](layers::RNN& l) {
      return tf::function(
          [&l, &mask](const tf::Tensor& xv) { return l.call_with_state(xv, {}, false, mask); });
    };
    auto fl = run(looped), fu = run(unrolled);
    const std::vector<tf::Tensor> want = reference.call_with_state(x, {}, false, mask);
    for (auto* f : {&fl, &fu}) {
      const std::vector<tf::Tensor> got = (*f)(x);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i)
        tf::testing::check_close(got[i], want[i], 1e-5, 1e-6);
    }
    const std::string dump =
        fl.get_concrete_function(tf::TensorSpec({3, 6, 2})).graph().to_string();
    INFO(dump);
    CHECK(dump.find("= rnn(") != std::string::npos);
    // Training with dropout: the peeled first step draws the masks, the loop reuses them; the
    // first call of the trace equals eager under the same seed.
    layers::RNN drop(layers::GRUCell(3, {.dropout = 0.4, .recurrent_dropout = 0.3}),
                     {.return_sequences = true});
    (void)drop(x);
    auto fd = tf::function([&](const tf::Tensor& xv) { return drop(xv, true); });
    tf::random::set_seed(31);
    const tf::Tensor eager = drop(x, true);
    tf::random::set_seed(31);
    tf::testing::check_close(fd(x), eager, 1e-5, 1e-6);
    const std::string drop_dump =
        fd.get_concrete_function(tf::TensorSpec({3, 6, 2})).graph().to_string();
    CHECK(drop_dump.find("= rnn(") != std::string::npos);
    // One trace for every batch size and number of timesteps, gradients included.
    auto step = tf::function(
        [&](const tf::Tensor& xv) {
          tf::GradientTape tape;
          const tf::Tensor loss = tf::reduce_sum(tf::square(looped(xv)));
          return tape.gradient(loss, looped.trainable_variables());
        },
        {.input_signature = {tf::TensorSpec({tf::None, tf::None, 2})}});
    for (const auto& [batch, steps] : {std::pair<int64_t, int64_t>{2, 5}, {4, 1}, {1, 9}, {3, 3}}) {
      CAPTURE(batch, steps);
      const tf::Tensor xv = tf::random::normal({batch, steps, 2});
      tf::GradientTape tape;
      const tf::Tensor loss = tf::reduce_sum(tf::square(looped(xv)));
      const std::vector<tf::Tensor> g_eager = tape.gradient(loss, looped.trainable_variables());
      const std::vector<tf::Tensor> g_graph = step(xv);
      REQUIRE(g_graph.size() == g_eager.size());
      for (size_t i = 0; i < g_eager.size(); ++i)
        tf::testing::check_close(g_graph[i], g_eager[i], 1e-4, 1e-5);
    }
    CHECK(step.tracing_count() == 1);
    // A cell's add_loss cannot leave the loop's body: a clear error, and unroll works.
    layers::RNN lossy(LossyCell(2));
    auto fl_loss = tf::function([&](const tf::Tensor& xv) { return lossy(xv); });
    TF_REQUIRE_THROWS_CONTAINING(fl_loss(x), tf::FailedPreconditionError,
                                 "inside a traced loop or branch (an RNN's timesteps");
    layers::RNN lossy_unrolled(LossyCell(2), {.unroll = true});
    auto fu_loss = tf::function([&](const tf::Tensor& xv) {
      const tf::Tensor y = lossy_unrolled(xv);
      return std::vector<tf::Tensor>{y, lossy_unrolled.losses()[0]};
    });
    CHECK(fu_loss(x)[0].shape() == tf::TensorShape({3, 2}));
  }
}

TEST_CASE("RNN cells: weight names summary and save_weights round trip", "[cpu][keras]") {
  // Keras 3.15 (keras.Input((5, 4)) first): rnn (RNN) (None, 5, 8) 416; rnn_1 (RNN) (None, 3)
  // 85 (StackedRNNCells of SimpleRNNCell(2) and GRUCell(3)); dense 4; Total params: 505;
  // weights rnn/lstm_cell/kernel, ..., rnn_1/stacked_rnn_cells/gru_cell/bias.
  auto make = [] {
    return K::Sequential(
        {layers::RNN(layers::LSTMCell(8), {.return_sequences = true, .input_shape = {5, 4}}),
         layers::RNN(layers::StackedRNNCells(layers::SimpleRNNCell(2), layers::GRUCell(3))),
         layers::Dense(1)});
  };
  K::Sequential a = make();
  const std::string s = a.summary_string();
  CAPTURE(s);
  CHECK(s.find("(RNN)") != std::string::npos);
  CHECK(s.find("(None, 5, 8)              416") != std::string::npos);
  CHECK(s.find("(None, 3)                 85") != std::string::npos);
  CHECK(s.find("Total params: 505\n") != std::string::npos);
  std::vector<std::string> names;
  for (const auto& [n, v] : a.tracked_variables()) names.push_back(n);
  CHECK(names == std::vector<std::string>{
                     "rnn/lstm_cell/kernel", "rnn/lstm_cell/recurrent_kernel", "rnn/lstm_cell/bias",
                     "rnn_1/stacked_rnn_cells/simple_rnn_cell/kernel",
                     "rnn_1/stacked_rnn_cells/simple_rnn_cell/recurrent_kernel",
                     "rnn_1/stacked_rnn_cells/simple_rnn_cell/bias",
                     "rnn_1/stacked_rnn_cells/gru_cell/kernel",
                     "rnn_1/stacked_rnn_cells/gru_cell/recurrent_kernel",
                     "rnn_1/stacked_rnn_cells/gru_cell/bias", "dense/kernel", "dense/bias"});
  TempFile f;
  a.save_weights(f.path);
  K::Sequential b = make();
  b.load_weights(f.path);
  const auto wa = a.get_weights(), wb = b.get_weights();
  REQUIRE(wa.size() == wb.size());
  for (size_t i = 0; i < wa.size(); ++i) tf::testing::check_close(wb[i], wa[i], 0, 0);
  const tf::Tensor x = tf::random::normal({3, 5, 4});
  tf::testing::check_close(b(x), a(x), 0, 0);
  CHECK(a(x).shape() == tf::TensorShape({3, 1}));

  // ConvLSTM2D's names and count: Keras 3.15 conv_lstm2d (ConvLSTM2D) (None, 3, 3, 2) 224.
  K::Sequential c({layers::ConvLSTM2D(2, {3}, {.input_shape = {2, 5, 5, 1}})});
  std::vector<std::string> cnames;
  for (const auto& [n, v] : c.tracked_variables()) cnames.push_back(n);
  CHECK(cnames == std::vector<std::string>{"conv_lstm2d/conv_lstm_cell/kernel",
                                           "conv_lstm2d/conv_lstm_cell/recurrent_kernel",
                                           "conv_lstm2d/conv_lstm_cell/bias"});
  CHECK(c.output_shape() == tf::TensorShape({tf::None, 3, 3, 2}));
  CHECK(c.count_params() == 224);
  CHECK(c.summary_string().find("(ConvLSTM2D)") != std::string::npos);
}

TEST_CASE("RNN cells: defaults and a cell called on its own", "[cpu][keras]") {
  tf::random::set_seed(3);
  layers::LSTMCell cell(4);
  layers::RNN rnn(cell);
  CHECK(rnn.name().rfind("rnn", 0) == 0);
  const tf::Tensor x = tf::random::normal({2, 6, 3});
  (void)rnn(x);
  // The RNN's cell is the same layer (shared weights): unit_forget_bias, Keras' default.
  const std::vector<tf::Variable> w = cell.variables();
  REQUIRE(w.size() == 3);
  CHECK(w[0].shape() == tf::TensorShape({3, 16}));
  CHECK(w[1].shape() == tf::TensorShape({4, 16}));
  check_values(w[2].value(), {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(rnn.cell().state_size() == std::vector<int64_t>{4, 4});
  // One step by hand equals the first step of a one-step sequence.
  const tf::Tensor x0 = tf::random::normal({2, 3});
  auto [y, states] = cell(x0, std::vector<tf::Tensor>{});
  REQUIRE(states.size() == 2);
  const auto seq = rnn.call_with_state(tf::expand_dims(x0, 1));
  tf::testing::check_close(y, seq[0], 1e-6, 1e-6);
  tf::testing::check_close(states[1], seq[2], 1e-6, 1e-6);
  // A stateless call uses the zero initial states.
  tf::testing::check_close(cell(x0), y, 0, 0);
  // GRUCell's bias is (2, 3 units) with reset_after (Keras 3's default), (3 units) without.
  layers::RNN g1(layers::GRUCell(2)), g2(layers::GRUCell(2, {.reset_after = false}));
  (void)g1(x);
  (void)g2(x);
  CHECK(g1.variables()[2].shape() == tf::TensorShape({2, 6}));
  CHECK(g2.variables()[2].shape() == tf::TensorShape({6}));
  // The custom cell's weights are listed under its snake_case class name.
  layers::RNN m(MinimalRNNCell(2));
  (void)m(x);
  std::vector<std::string> names;
  for (const auto& [n, v] : m.tracked_variables()) names.push_back(n);
  CHECK(names ==
        std::vector<std::string>{"minimal_rnn_cell/kernel", "minimal_rnn_cell/recurrent_kernel"});
}

TEST_CASE("RNN of an LSTMCell fits a sequence regression", "[cpu][keras]") {
  tf::random::set_seed(4);
  const int64_t n = 96, steps = 5;
  const tf::Tensor x = tf::random::uniform({n, steps, 2}, -1.0, 1.0);
  const std::vector<float> xv = x.numpy<float>();
  std::vector<float> yv(n);
  for (int64_t i = 0; i < n; ++i) {
    float s = 0;
    for (int64_t t = 0; t < steps; ++t) s += xv[(i * steps + t) * 2];
    yv[i] = s / steps + xv[(i * steps + steps - 1) * 2 + 1];
  }
  const tf::Tensor y = tf::convert_to_tensor(yv, {n, 1});
  K::Sequential model({layers::RNN(layers::LSTMCell(12)), layers::Dense(1)});
  model.compile(K::optimizers::Adam(0.02), K::losses::MeanSquaredError());
  const K::History h = model.fit(x, y, {.epochs = 25, .batch_size = 32, .verbose = 0});
  const auto& loss = h.history.at("loss");
  CHECK(loss.back() < 0.25 * loss.front());

  // A ConvLSTM2D model learns too (the mean of the last frame).
  const tf::Tensor img = tf::random::uniform({32, 2, 4, 4, 1}, -1.0, 1.0);
  const tf::Tensor target = tf::reduce_mean(tf::slice(img, {0, 1, 0, 0, 0}, {-1, 1, -1, -1, -1}),
                                            std::vector<int>{1, 2, 3, 4}, true);
  K::Sequential cm({layers::ConvLSTM2D(3, {3}, {.padding = "same"}),
                    layers::GlobalAveragePooling2D(), layers::Dense(1)});
  cm.compile(K::optimizers::Adam(0.02), K::losses::MeanSquaredError());
  const K::History ch =
      cm.fit(img, tf::reshape(target, {32, 1}), {.epochs = 15, .batch_size = 16, .verbose = 0});
  const auto& closs = ch.history.at("loss");
  CHECK(closs.back() < 0.5 * closs.front());
}

TEST_CASE("RNN cells and ConvLSTM: shape errors and bad arguments", "[cpu][keras]") {
  using tf::testing::require_error;
  layers::RNN rnn(layers::SimpleRNNCell(3), {.name = "seq"});
  require_error(
      [&] {
        (void)rnn(tf::zeros({2, 4}));
      },
      {"seq", "RNN", "(batch, timesteps, features...)", "(None, 4)"});
  require_error(
      [&] {
        (void)rnn.call_with_state(tf::zeros({2, 3, 4}), {tf::zeros({2, 5})});
      },
      {"seq", "initial state 0", "last dimension 3", "(2, 5)"});
  require_error(
      [&] {
        (void)rnn.call_with_state(tf::zeros({2, 3, 4}), {tf::zeros({2, 3}), tf::zeros({2, 3})});
      },
      {"seq", "1 state(s)", "got 2"});
  // Built for 4 features, called with 5.
  (void)rnn(tf::zeros({2, 3, 4}));
  require_error(
      [&] {
        (void)rnn(tf::zeros({2, 3, 5}));
      },
      {"seq", "RNN", "incompatible", "(None, 4)", "(2, 3, 5)"});
  layers::ConvLSTM2D conv(2, {3}, {.name = "clstm"});
  require_error(
      [&] {
        (void)conv(tf::zeros({2, 3, 5, 5}));
      },
      {"clstm", "ConvLSTM2D", "rows, cols, channels", "(None, 3, 5, 5)"});
  require_error(
      [&] {
        (void)layers::ConvLSTM2D(2, {3, 3, 3});
      },
      {"ConvLSTM2D", "kernel_size", "1 or 2 values", "[3, 3, 3]"});
  require_error([&] { (void)layers::ConvLSTM2D(2, {3}, {.strides = {2}, .dilation_rate = {2}}); },
                {"ConvLSTM2D", "strides", "dilation_rate"});
  require_error([&] { (void)layers::ConvLSTM1D(2, {3}, {.padding = "causal"}); },
                {"ConvLSTM1D", "padding", "causal"});
  require_error([&] { (void)layers::LSTMCell(0); }, {"LSTMCell", "units", "0"});
  require_error([&] { (void)layers::GRUCell(2, {.activation = "nope"}); }, {"nope"});
  // A kernel larger than the (valid-padded) frames.
  layers::ConvLSTM2D big(2, {5});
  require_error([&] { (void)big(tf::zeros({1, 2, 3, 3, 1})); }, {"ConvLSTM2D", "fit the kernel"});
  // A cell called on a step of the wrong rank.
  layers::LSTMCell cell(2, {.name = "lc"});
  require_error([&] { (void)cell(tf::zeros({2, 3, 4}), {}); }, {"lc", "(batch, features)"});
}

namespace {

// The Keras cases' layers again, with dropout and recurrent_dropout `rate` in every cell.
Case make_dropout_case(const std::string& name, double rate) {
  const tf::TensorShape seq{2, 3, 4};
  const std::optional<int64_t> seed = 7;
  if (name == "simple")
    return {layers::RNN(layers::SimpleRNNCell(
                            3, {.dropout = rate, .recurrent_dropout = rate, .seed = seed}),
                        {.return_sequences = true}),
            seq,
            {},
            {}};
  if (name == "lstm")
    return {layers::RNN(
                layers::LSTMCell(3, {.dropout = rate, .recurrent_dropout = rate, .seed = seed})),
            seq,
            {pattern({2, 3}, 10), pattern({2, 3}, 11)},
            {}};
  if (name == "gru")
    return {
        layers::RNN(layers::GRUCell(3, {.dropout = rate, .recurrent_dropout = rate, .seed = seed}),
                    {.return_sequences = true, .go_backwards = true}),
        seq,
        {},
        {}};
  if (name == "gru_before")
    return {
        layers::RNN(layers::GRUCell(
            3, {.reset_after = false, .dropout = rate, .recurrent_dropout = rate, .seed = seed})),
        seq,
        {pattern({2, 3}, 10)},
        {}};
  if (name == "conv2d_same")
    return {layers::ConvLSTM2D(2, {3},
                               {.padding = "same",
                                .return_sequences = true,
                                .dropout = rate,
                                .recurrent_dropout = rate,
                                .seed = seed}),
            {2, 3, 4, 4, 2},
            {},
            {}};
  throw std::runtime_error("no dropout case " + name);
}

}  // namespace

TEST_CASE("RNN cells and ConvLSTM2D: dropout is off in inference and per gate in training",
          "[cpu][keras]") {
  Float64Layers f64;
  for (const KerasCase& k : kKeras) {
    if (k.name != "simple" && k.name != "lstm" && k.name != "gru" && k.name != "gru_before" &&
        k.name != "conv2d_same")
      continue;
    CAPTURE(k.name);
    // Inference ignores the rates: Keras' values without dropout.
    Case c = make_dropout_case(k.name, 0.5);
    set_pattern_weights(c);
    const tf::Tensor x = sequence(c.x_shape);
    std::vector<tf::Tensor> outs = c.layer.call_with_state(x, c.initial, false);
    REQUIRE(outs.size() == k.outputs.size());
    for (size_t j = 0; j < outs.size(); ++j) check_values(outs[j], k.outputs[j], 1e-9, 1e-12);
    // Training with a vanishing rate: masks of 1 / (1 - 1e-12), so the per-gate projections
    // (recurrent_dropout's implementation 1) must give Keras' values too.
    Case t = make_dropout_case(k.name, 1e-12);
    set_pattern_weights(t);
    outs = t.layer.call_with_state(x, t.initial, true);
    for (size_t j = 0; j < outs.size(); ++j) check_values(outs[j], k.outputs[j], 1e-9, 1e-11);
  }
}

TEST_CASE("RNN cells and recurrent layers: a rate of 1 as Keras 3", "[cpu][keras]") {
  // Keras accepts rates up to 1. SimpleRNN then zeroes the inputs and the recurrent state in every
  // projection, so its training call equals the layer without dropout on zero inputs with a zero
  // recurrent kernel. The gated cells (LSTM, GRU, ConvLSTM) mask only when 0 < rate < 1, so at 1
  // they apply no dropout at all (checked against Keras 3.15: LSTM(dropout=1.0) trains as LSTM()).
  Float64Layers f64;
  for (const std::string name : {"simple", "lstm", "gru", "gru_before", "conv2d_same"}) {
    CAPTURE(name);
    const bool simple = name == "simple";
    Case dropped = make_dropout_case(name, 1.0);
    set_pattern_weights(dropped);
    Case plain = make_dropout_case(name, 0.0);
    set_pattern_weights(plain);
    if (simple)
      for (tf::Variable w : plain.layer.variables())
        if (w.name().find("recurrent_kernel") != std::string::npos) w.assign(tf::zeros_like(w));
    const tf::Tensor x = sequence(dropped.x_shape);
    const std::vector<tf::Tensor> got = dropped.layer.call_with_state(x, dropped.initial, true);
    const std::vector<tf::Tensor> want =
        plain.layer.call_with_state(simple ? tf::zeros_like(x) : x, plain.initial, false);
    REQUIRE(got.size() == want.size());
    for (size_t j = 0; j < got.size(); ++j) tf::testing::check_close(got[j], want[j], 1e-12, 1e-12);
  }
  // The fused layers too: SimpleRNN's dropout 1 equals zero inputs, LSTM's and GRU's equal none.
  const tf::Tensor x = sequence({2, 3, 4});
  layers::SimpleRNN srnn(3, {.return_sequences = true, .dropout = 1.0});
  tf::testing::check_close(srnn(x, true), srnn(tf::zeros_like(x), false), 1e-12, 1e-12);
  layers::LSTM lstm(3, {.return_sequences = true, .dropout = 1.0, .recurrent_dropout = 1.0});
  tf::testing::check_close(lstm(x, true), lstm(x, false), 1e-12, 1e-12);
  layers::GRU gru(3, {.return_sequences = true, .dropout = 1.0, .recurrent_dropout = 1.0});
  tf::testing::check_close(gru(x, true), gru(x, false), 1e-12, 1e-12);
  tf::testing::require_error([] { layers::LSTMCell(2, {.dropout = 1.5}); },
                             {"LSTMCell", "dropout and recurrent_dropout", "[0, 1]", "1.5"});
}

TEST_CASE("RNN cells: dropout masks are drawn once per call and shared by the timesteps",
          "[cpu][keras]") {
  tf::random::set_seed(9);
  // output_t = (x_t * mask) @ I: with x all ones, each step shows the input mask itself.
  layers::RNN rnn(layers::SimpleRNNCell(4, {.activation = "linear",
                                            .use_bias = false,
                                            .recurrent_initializer = "zeros",
                                            .dropout = 0.5}),
                  {.return_sequences = true});
  const tf::Tensor x = tf::ones({8, 5, 4});
  (void)rnn(x);
  rnn.cell().variables()[0].assign(tf::eye(4));
  const std::vector<double> y = vals(rnn(x, true));
  size_t zeros = 0, twos = 0;
  for (size_t b = 0; b < 8; ++b)
    for (size_t t = 0; t < 5; ++t)
      for (size_t f = 0; f < 4; ++f) {
        const double v = y[(b * 5 + t) * 4 + f];
        CHECK(v == y[(b * 5) * 4 + f]);  // the same mask at every step
        zeros += v == 0.0;
        twos += v == 2.0;
      }
  CHECK(zeros + twos == 8 * 5 * 4);
  CHECK(zeros > 0);
  CHECK(twos > 0);
  // Inference: no dropout.
  tf::testing::check_close(rnn(x, false), tf::ones({8, 5, 4}), 0, 0);
  tf::testing::require_error([] { (void)layers::LSTMCell(2, {.dropout = 1.01}); },
                             {"LSTMCell", "dropout", "[0, 1]"});
  tf::testing::require_error([] { (void)layers::ConvLSTM2D(2, {3}, {.recurrent_dropout = -0.1}); },
                             {"ConvLSTM2D", "recurrent_dropout"});
}

TEST_CASE("RNN cells in functional and masked models and under mixed_float16", "[cpu][keras]") {
  tf::random::set_seed(12);
  // Functional API: the cells build from the symbolic shapes.
  const K::KerasTensor in = K::Input({5, 3});
  const K::KerasTensor h = layers::RNN(layers::GRUCell(4), {.return_sequences = true})(in);
  K::Model m(in, layers::Dense(1)(layers::RNN(layers::SimpleRNNCell(2))(h)));
  CHECK(m.output_shape() == tf::TensorShape({tf::None, 1}));
  CHECK(m.count_params() == (3 * 12 + 4 * 12 + 2 * 12) + (4 * 2 + 2 * 2 + 2) + 3);
  CHECK(m(tf::random::normal({2, 5, 3})).shape() == tf::TensorShape({2, 1}));

  // Embedding(mask_zero) masks the padding: a padded sequence gives the unpadded one's output.
  K::Sequential s({layers::Embedding(10, 3, {.mask_zero = true}), layers::RNN(layers::LSTMCell(4)),
                   layers::Dense(2)});
  const tf::Tensor padded = tf::constant(std::vector<int32_t>{4, 2, 7, 0, 0}, {1, 5});
  const tf::Tensor unpadded = tf::constant(std::vector<int32_t>{4, 2, 7}, {1, 3});
  tf::testing::check_close(s(padded), s(unpadded), 1e-6, 1e-6);

  // mixed_float16: float32 weights, float16 computation and output.
  K::mixed_precision::set_global_policy("mixed_float16");
  try {
    layers::RNN mixed(layers::LSTMCell(4), {.return_sequences = true});
    layers::ConvLSTM2D conv(2, {3});
    const tf::Tensor y = mixed(tf::random::normal({2, 3, 5}));
    const tf::Tensor yc = conv(tf::random::normal({2, 2, 5, 5, 1}));
    CHECK(y.dtype() == tf::float16);
    CHECK(yc.dtype() == tf::float16);
    CHECK(mixed.variables()[0].dtype() == tf::float32);
    CHECK(conv.variables()[0].dtype() == tf::float32);
  } catch (...) {
    K::mixed_precision::set_global_policy("float32");
    throw;
  }
  K::mixed_precision::set_global_policy("float32");
}

TEST_CASE("RNN cells under a MirroredStrategy: mirrored weights and fit match one device",
          "[cpu][keras][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  std::vector<float> xv(8 * 4 * 3), yv(8);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(std::cos(0.37 * double(i)));
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>(std::sin(0.5 * double(i)));
  const tf::Tensor x = tf::constant(xv, {8, 4, 3}), y = tf::constant(yv, {8, 1});
  auto train = [&](std::optional<K::Sequential>& model) {
    model.emplace(K::Sequential(
        {layers::RNN(layers::StackedRNNCells(layers::LSTMCell(3), layers::GRUCell(2))),
         layers::Dense(1)}));
    model->build({tf::None, 4, 3});
    std::vector<tf::Tensor> weights;
    for (const tf::Variable& w : model->variables())
      weights.push_back(
          tf::cast(pattern(w.shape(), static_cast<int>(weights.size())), tf::float32));
    model->set_weights(weights);
    model->compile(K::optimizers::SGD(0.1), "mse");
    return model->fit(x, y, {.epochs = 2, .batch_size = 8, .verbose = 0, .shuffle = false});
  };
  std::optional<K::Sequential> m1, m2;
  const K::History h1 = train(m1);
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  K::History h2;
  {
    auto scope = strategy.scope();
    h2 = train(m2);
  }
  const std::vector<tf::Variable> v1 = m1->variables(), v2 = m2->variables();
  REQUIRE(v1.size() == v2.size());
  REQUIRE(v1.size() == 8);
  for (size_t i = 0; i < v1.size(); ++i) {
    CAPTURE(i);
    REQUIRE(v2[i].is_mirrored());
    const auto c = v2[i].components();
    tf::testing::check_close(c[0].value(), c[1].value(), 0, 0);
    tf::testing::check_close(v2[i].value(), v1[i].value(), 1e-5, 1e-6);
  }
  for (size_t e = 0; e < 2; ++e)
    CHECK(h2.history.at("loss")[e] == Approx(h1.history.at("loss")[e]).epsilon(1e-5));
}
