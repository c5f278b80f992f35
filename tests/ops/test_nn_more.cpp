// conv1d, conv1d_transpose, max_pool1d, avg_pool1d, max_pool_with_argmax, relu6, crelu,
// log_sigmoid, l2_loss, softmax_cross_entropy_with_logits, weighted_cross_entropy_with_logits,
// embedding_lookup, batch_normalization, sufficient_statistics, normalize_moments,
// local_response_normalization, space_to_depth and depth_to_space (ops/nn_more.h) on every
// device of devices_under_test(): values against TF 2.21 literals, float64 gradients against
// central differences, traced equals eager, and errors naming the op and the shapes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

// Looser than the default: the nn ops chain more float64 rounding.
void check_gradient(const std::function<tf::Tensor(const tf::Tensor&)>& f,
                    const tf::TensorShape& shape, std::vector<double> data = {}) {
  tf::testing::check_gradient(f, shape, std::move(data), 1e-6, 1e-7);
}

// Expected values, printed by TF 2.21's tf.nn functions of the same names on the inputs built
// by vals() below (tf.math.log_sigmoid for log_sigmoid; float32 for max_pool_with_argmax and
// local_response_normalization, float64 elsewhere).
// clang-format off
// relu6: shape (12,)
const std::vector<double> kRelu6 = {
    0, 3.2545388876846575, 6, 6, 6, 6, 6, 4.7163990751854845, 1.6253664110480963, 0, 0, 0
};
// crelu axis1: shape (2, 6)
const std::vector<double> kCreluAxis1 = {
    2.5244129544236893, 2.9397241841958426, 2.9571575365066605, 0, 0, 0, 2.5743534889044266,
    1.8431227734171354, 0.8624340370276331, 0, 0, 0
};
// crelu axis0: shape (4, 3)
const std::vector<double> kCreluAxis0 = {
    2.5244129544236893, 2.9397241841958426, 2.9571575365066605, 2.5743534889044266,
    1.8431227734171354, 0.8624340370276331, 0, 0, 0, 0, 0, 0
};
// log_sigmoid: shape (6,)
const std::vector<double> kLogSigmoid = {
    -1.4220483200629019e-12, -8.2278009665954851e-10, -8.0765366865182452e-06,
    -0.32762017688223249, -9.9596029192422773, -19.51875411529015
};
// l2_loss: shape ()
const std::vector<double> kL2Loss = {
    13.480265904480639
};
// sce: shape (2,)
const std::vector<double> kSce = {
    1.7358437774213309, 2.17402854450641
};
// sce axis0: shape (4,)
const std::vector<double> kSceAxis0 = {
    0.74519139720855521, 1.0468113683029785, 1.1014613029749019, 0.88394936581092276
};
// sce dlabels: shape (2, 4)
const std::vector<double> kSceDlabels = {
    4.2505480413557928, 3.4969349549462674, 2.2612833051600996, 0.71083274609192026,
    -1.5001091678697289, -0.98800753684852882, -0.5849159144117253, -0.34539086066785757
};
// sce dlogits: shape (2, 4)
const std::vector<double> kSceDlogits = {
    -0.22536807325031721, -0.24451810042561714, -0.081977868257768802, 0.55186404193370286,
    0.21425129483303471, 0.070192326007206762, -0.13422480322041203, -0.15021881761982947
};
// wce: shape (2, 3)
const std::vector<double> kWce = {
    2.1013940841899696, 0.16977123258337165, 0.12379795953865702, 0.1336180856846606,
    0.21071498902559757, 0.44692239141027534
};
// conv1d s2 SAME: shape (2, 4, 4)
const std::vector<double> kConv1dS2Same = {
    0.93751902510460305, 0.68945590435011372, 0.34807816132568864, -0.040410327925689826,
    -0.53597078385145602, -1.1938914125265656, -1.6902244393140018, -1.9577935174415886,
    2.835430334021948, 3.8052569870906092, 4.2600599582240619, 4.1382837988565786,
    -0.46279574840521409, -1.0252268903121784, -1.4488983821721568, -1.6764682750947038,
    -1.4241532670568569, -1.5453678372933868, -1.457424120400503, -1.1722248858970419,
    3.0967249526082603, 3.7571878034495354, 3.9091329108586943, 3.5319952173546092,
    -1.2360366598409029, -1.0651034744670242, -0.75001353045031882, -0.33341277355967314,
    -0.63449752227978762, -0.3966826677532409, -0.10517867506881373, 0.20056075787071093
};
// conv1d s1 VALID d2: shape (2, 3, 4)
const std::vector<double> kConv1dS1ValidD2 = {
    -1.5687153336153192, -1.4049141470853006, -1.05096442149749, -0.55477159175696866,
    0.43013704986506696, 1.0780058677539006, 1.5799716485963788, 1.868095678783412,
    1.9512461196149222, 2.3636095955091134, 2.4560696008450038, 2.2161121076498818,
    1.1229740451423671, 1.7764450390231972, 2.1894825305526435, 2.3061838328986695,
    1.9940809969068758, 2.1866904200109771, 2.0833415529950807, 1.6980221801783384,
    0.65040811603848603, 0.1682291185900826, -0.33671890086101608, -0.79609359670035429
};
// conv1d_transpose s2 SAME: shape (2, 8, 3)
const std::vector<double> kConv1dTransposeS2Same = {
    7.343638433443032, -4.8499679534980409, -8.2231473793300527, 3.3587556913114667,
    8.8322350487499648, -1.7570894922699232, -3.9447812993816758, -0.78338397437807206,
    3.8027199043093471, -0.092037391709595795, 5.3491675925058839, 1.0620728219982927,
    -11.556117002924893, 2.6930184775189057, 12.044477723062974, -3.3754460509470001,
    -7.8621996184612692, 1.9496892284098792, 1.8491574970720226, 1.2717446945161532,
    -1.6185351823607323, -0.52007696175240825, -6.7749244150429995, -0.70850984291731478,
    5.245008292994175, -4.3761931992758125, -6.0386013856901775, 3.2811336050098947,
    6.6336128137915438, -2.0781727052224128, 0.30727654098798762, -1.7182836148290535,
    -0.61887567428189882, 1.11508838985378, 7.9778853148304805, 0.33164725271750073,
    -11.83572670496233, 2.1507970295136998, 12.225759226080369, -3.078919853551227,
    -5.1868771712202584, 2.138314695528456, -2.4536056750970801, 2.1083161359470868,
    2.8359345729583545, -1.6734297192875855, -8.9184904728532466, 0.056121681401438805
};
// conv1d_transpose s1 VALID: shape (2, 6, 3)
const std::vector<double> kConv1dTransposeS1Valid = {
    7.343638433443032, -4.8499679534980409, -8.2231473793300527, 8.5648457578663191,
    7.9512103261287645, -7.1229474444113396, -15.642457904205092, 10.137008408660488,
    17.48073594344832, -14.898619007783152, -8.1278203677923457, 13.42469365557948,
    7.6956856357898422, -7.2347405615883407, -9.0076569943839377, 6.6464409382304659,
    1.9137970364682027, -6.2993867658473608, 5.245008292994175, -4.3761931992758125,
    -6.0386013856901775, 10.598885549989237, 4.1084588800340391, -9.8538442685942247,
    -9.8133703945754682, 12.703029214642275, 12.116978983593867, -19.024914958511943,
    -3.7186473274838394, 18.350563370526295, 3.9012163860516162, -10.045880732012222,
    -5.722969036344133, 8.9286677608939193, 1.5630319389632772, -8.6452224709031213
};
// max_pool1d k3 s2 SAME: shape (2, 4, 3)
const std::vector<double> kMaxPool1dK3S2Same = {
    1.5517366625460027, 2.3751781649108734, 2.8771504451195269, 2.9897139099041459,
    2.6976336223652151, 2.8771504451195269, 1.1070847810575077, 0.023889551357812032,
    -1.0625390170472169, -0.56526836831744365, 0.53839937865550747, 1.5691972954730893,
    2.6886264657378054, 2.8828740986182093, 2.9879529923765182, 2.6886264657378054,
    2.0254069598784028, 1.0880581236130422, 0.55849887168874712, 1.5865850550997938,
    2.399934394310058, 2.8884638718516369, 2.9860533147346775, 2.6794944496777253
};
// avg_pool1d k3 s2 SAME: shape (2, 4, 3)
const std::vector<double> kAvgPool1dK3S2Same = {
    -0.028991045727651099, 0.89492259661388074, 1.6977126637754103, 1.8828451178358856,
    1.6989004462113002, 1.2850175690942889, -1.2627970109544089, -1.6855205575640078,
    -1.8801168038417035, -1.7277931340737109, -0.9328318756556, -0.011616198979665371,
    2.5381190927617467, 2.4541405292483063, 2.0380055579947802, 0.0021700289689325913,
    -0.68118473687329273, -1.2723443441617777, -1.5062803976182115, -0.99193658634388004,
    -0.34333881149278261, 1.723481371770192, 2.2863191849172355, 2.5397144219938914
};
// max_pool1d k2 s1 VALID: shape (2, 6, 3)
const std::vector<double> kMaxPool1dK2S1Valid = {
    1.5517366625460027, 2.3751781649108734, 2.8771504451195269, 2.9897139099041459,
    2.6976336223652151, 2.8771504451195269, 2.9897139099041459, 2.6976336223652151,
    2.0404412792105564, 1.1070847810575077, 0.023889551357812032, -1.0625390170472169,
    -2.0051579140907565, -2.4040631299667075, -1.59242969343242, -0.56526836831744365,
    0.53839937865550747, 1.5691972954730893, 2.6886264657378054, 2.8828740986182093,
    2.9879529923765182, 2.6886264657378054, 2.0254069598784028, 1.0880581236130422,
    0.0034457246280376773, -1.081633037020727, -2.0203178412787031, -2.3917779610843359,
    -1.5750666806538791, -0.54517751396873371, 0.55849887168874712, 1.5865850550997938,
    2.399934394310058, 2.8884638718516369, 2.9860533147346775, 2.6794944496777253
};
// mpwa SAME False out: shape (2, 3, 3, 2)
const std::vector<double> kMpwaSameFalseOut = {
    2.7664816379547119, 2.9988930225372314, 2.82541823387146, 2.9988930225372314,
    2.1737799644470215, 2.7743251323699951, 2.9993786811828613, 2.8184802532196045,
    2.7820401191711426, 2.9997251033782959, 2.8114113807678223, 2.9997251033782959,
    1.3702379465103149, 0.31243407726287842, 2.7820401191711426, 2.9997251033782959,
    2.8114113807678223, 2.9997251033782959, 2.2017562389373779, 2.7896256446838379,
    2.9999322891235352, 2.8042120933532715, 2.2289550304412842, 2.2155914306640625,
    2.7970817089080811, 3, 2.7968823909759521, 2.8044078350067139, 2.9999284744262695,
    2.8044078350067139, 2.2013819217681885, 1.315394401550293, 2.2293236255645752,
    2.8044078350067139, 2.9999284744262695, 2.8044078350067139
};
// mpwa SAME False argmax: shape (2, 3, 3, 2)
const std::vector<double> kMpwaSameFalseArgmax = {
    2, 3, 4, 3, 18, 19, 20, 21, 36, 37, 38, 37, 40, 41, 36, 37, 38, 37, 2, 3, 4, 5, 6, 19, 20, 21,
    22, 37, 38, 37, 40, 41, 36, 37, 38, 37
};
// mpwa SAME True out: shape (2, 3, 3, 2)
const std::vector<double> kMpwaSameTrueOut = {
    2.7664816379547119, 2.9988930225372314, 2.82541823387146, 2.9988930225372314,
    2.1737799644470215, 2.7743251323699951, 2.9993786811828613, 2.8184802532196045,
    2.7820401191711426, 2.9997251033782959, 2.8114113807678223, 2.9997251033782959,
    1.3702379465103149, 0.31243407726287842, 2.7820401191711426, 2.9997251033782959,
    2.8114113807678223, 2.9997251033782959, 2.2017562389373779, 2.7896256446838379,
    2.9999322891235352, 2.8042120933532715, 2.2289550304412842, 2.2155914306640625,
    2.7970817089080811, 3, 2.7968823909759521, 2.8044078350067139, 2.9999284744262695,
    2.8044078350067139, 2.2013819217681885, 1.315394401550293, 2.2293236255645752,
    2.8044078350067139, 2.9999284744262695, 2.8044078350067139
};
// mpwa SAME True argmax: shape (2, 3, 3, 2)
const std::vector<double> kMpwaSameTrueArgmax = {
    2, 3, 4, 3, 18, 19, 20, 21, 36, 37, 38, 37, 40, 41, 36, 37, 38, 37, 52, 53, 54, 55, 56, 69,
    70, 71, 72, 87, 88, 87, 90, 91, 86, 87, 88, 87
};
// mpwa VALID False out: shape (2, 2, 2, 2)
const std::vector<double> kMpwaValidFalseOut = {
    2.9993786811828613, 2.9988930225372314, 2.82541823387146, 2.7743251323699951,
    2.9993786811828613, 2.8184802532196045, 2.8114113807678223, 2.9997251033782959,
    2.9999322891235352, 3, 2.9999322891235352, 2.8042120933532715, 2.7970817089080811, 3,
    2.9999284744262695, 2.8044078350067139
};
// mpwa VALID False argmax: shape (2, 2, 2, 2)
const std::vector<double> kMpwaValidFalseArgmax = {
    20, 3, 4, 19, 20, 21, 38, 37, 4, 21, 4, 5, 20, 21, 38, 37
};
// mpwa VALID True out: shape (2, 2, 2, 2)
const std::vector<double> kMpwaValidTrueOut = {
    2.9993786811828613, 2.9988930225372314, 2.82541823387146, 2.7743251323699951,
    2.9993786811828613, 2.8184802532196045, 2.8114113807678223, 2.9997251033782959,
    2.9999322891235352, 3, 2.9999322891235352, 2.8042120933532715, 2.7970817089080811, 3,
    2.9999284744262695, 2.8044078350067139
};
// mpwa VALID True argmax: shape (2, 2, 2, 2)
const std::vector<double> kMpwaValidTrueArgmax = {
    20, 3, 4, 19, 20, 21, 38, 37, 54, 71, 54, 55, 70, 71, 88, 87
};
// embedding: shape (2, 2, 3)
const std::vector<double> kEmbedding = {
    -1.1946060452700957, -0.11863682103696088, 0.97338934037304004, 2.9718220670846112,
    2.9190498441021733, 2.4711979186023632, -1.4698613394541538, -2.3161049566191054,
    -2.8488746332451855, -1.4698613394541538, -2.3161049566191054, -2.8488746332451855
};
// embedding max_norm 2: shape (2, 2, 3)
const std::vector<double> kEmbeddingMaxNorm2 = {
    -1.1946060452700957, -0.11863682103696088, 0.97338934037304004, 1.2271407311855029,
    1.2053497414037753, 1.0204203186743004, -0.74331893976876207, -1.1712701290494663,
    -1.4406954010398902, -0.74331893976876207, -1.1712701290494663, -1.4406954010398902
};
// bn: shape (2, 3)
const std::vector<double> kBn = {
    -1.5079175233369719, 1.0656252927756265, 3.1983817153358602, -2.3350668086695334,
    -1.5986952308389866, -0.54624108539408756
};
// bn none: shape (2, 3)
const std::vector<double> kBnNone = {
    1.6570102478189317, 1.6421684534711736, 1.5121404140106363, -0.18260518847205109,
    -0.14381287281726762, -0.093578640143406222
};
// ss count: shape ()
const std::vector<double> kSsCount = {
    3
};
// ss mean_ss: shape (4,)
const std::vector<double> kSsMeanSs = {
    0.23366612286815736, 3.4985753799727299, -0.80399520167915828, -7.9977488044957745
};
// ss var_ss: shape (4,)
const std::vector<double> kSsVarSs = {
    14.785506049619741, 21.676905403669814, 17.404062602700982, 35.077295541072075
};
// nm mean: shape (4,)
const std::vector<double> kNmMean = {
    0.57788870762271916, 0.16619179332424316, -0.26799840055971941, -0.66591626816525817
};
// nm var: shape (4,)
const std::vector<double> kNmVar = {
    4.9224353657647759, 5.8656318357397907, 5.7295310581977592, 4.5853222981558481
};
// ss2 count: shape ()
const std::vector<double> kSs2Count = {
    12
};
// ss2 mean_ss: shape (1, 1)
const std::vector<double> kSs2MeanSs = {
    -0.56950250333404639
};
// ss2 var_ss: shape (1, 1)
const std::vector<double> kSs2VarSs = {
    65.939289742002217
};
// lrn: shape (1, 2, 2, 7)
const std::vector<double> kLrn = {
    0.6586754322052002, 0.45454934239387512, 0.17309987545013428, -0.088021256029605865,
    -0.27325180172920227, -0.45112615823745728, -0.56447523832321167, -0.47561132907867432,
    -0.4175010621547699, -0.32541534304618835, -0.2556019127368927, -0.047213159501552582,
    0.32152506709098816, 0.78640884160995483, 0.3781374990940094, 0.36742088198661804,
    0.339834064245224, 0.33510339260101318, 0.30201172828674316, 0.19047382473945618,
    -0.17236578464508057, -0.28311452269554138, -0.3311118483543396, -0.33933731913566589,
    -0.34002181887626648, -0.33874371647834778, -0.32513794302940369, -0.26385992765426636
};
// lrn default: shape (1, 2, 2, 7)
const std::vector<double> kLrnDefault = {
    0.58876544237136841, 0.34133857488632202, 0.14576075971126556, -0.06954510509967804,
    -0.27543836832046509, -0.44405233860015869, -0.63417214155197144, -0.60293024778366089,
    -0.52009695768356323, -0.40581455826759338, -0.23660705983638763, -0.035375922918319702,
    0.1706431657075882, 0.42815861105918884, 0.43989172577857971, 0.50093609094619751,
    0.49506977200508118, 0.422198086977005, 0.29218390583992004, 0.1226239800453186,
    -0.070710673928260803, -0.23310022056102753, -0.36580029129981995, -0.4536278247833252,
    -0.48005896806716919, -0.44151633977890015, -0.34321656823158264, -0.20385552942752838
};
// s2d: shape (2, 2, 2, 8)
const std::vector<double> kS2d = {
    0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19, 24, 25, 26, 27, 20, 21,
    22, 23, 28, 29, 30, 31, 32, 33, 34, 35, 40, 41, 42, 43, 36, 37, 38, 39, 44, 45, 46, 47, 48,
    49, 50, 51, 56, 57, 58, 59, 52, 53, 54, 55, 60, 61, 62, 63
};
// d2s: shape (2, 4, 6, 2)
const std::vector<double> kD2s = {
    0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25,
    26, 27, 32, 33, 34, 35, 40, 41, 42, 43, 28, 29, 30, 31, 36, 37, 38, 39, 44, 45, 46, 47, 48,
    49, 50, 51, 56, 57, 58, 59, 64, 65, 66, 67, 52, 53, 54, 55, 60, 61, 62, 63, 68, 69, 70, 71,
    72, 73, 74, 75, 80, 81, 82, 83, 88, 89, 90, 91, 76, 77, 78, 79, 84, 85, 86, 87, 92, 93, 94, 95
};
// tf.nn.ctc_loss(labels, logits, label_length, logit_length, logits_time_major, blank_index)
// in float32 (TF's dense path fails for float64) and the gradient of
// sum(loss * [1, -0.5, 2]) with respect to the logits; inputs as in the ctc_loss test case.
// kCtcLoss: shape (3,)
const std::vector<double> kCtcLoss = {
    6.5366659164428711, 2.0625169277191162, 11.696592330932617
};
// kCtcGrad: shape (6, 3, 5)
const std::vector<double> kCtcGrad = {
    -0.18052856624126434, -0.75293344259262085, 0.080726601183414459, 0.2136627584695816,
    0.63907277584075928, 0.0071721393615007401, -0.066694863140583038, -0.12231015413999557,
    0.31144338846206665, -0.12961047887802124, -0.77727413177490234, 0.51567643880844116,
    0.17981337010860443, 0.059784848242998123, 0.021999411284923553, -0.38740944862365723,
    -0.29061934351921082, 0.12419963628053665, 0.18071119487285614, 0.37311780452728271,
    0.00046193785965442657, -0.020555762574076653, -0.059792689979076385, 0.080584704875946045,
    -0.00069817900657653809, -1.2242311239242554, 0.64708179235458374, 0.36858981847763062,
    0.15472675859928131, 0.053832888603210449, -0.11780828237533569, -0.10799881815910339,
    0.097861476242542267, 0.064555227756500244, 0.063390292227268219, -0.0029228883795440197,
    -0.01415745448321104, -0.037734430283308029, -0.060175027698278427, 0.11498981714248657,
    -1.7493264675140381, 0.45393729209899902, 0.56406170129776001, 0.46701768040657043,
    0.26430985331535339, 0.11806845664978027, -0.21905621886253357, 0.059713095426559448,
    0.028051368892192841, 0.01322330255061388, 0.01489628478884697, -0.033762980252504349,
    -0.049823511391878128, -0.10403788834810257, 0.17272809147834778, -1.9489182233810425,
    0.14800755679607391, 0.35882598161697388, 0.64567214250564575, 0.79641258716583252,
    0.1998639702796936, -0.22717061638832092, -0.02941671758890152, 0.042551197111606598,
    0.014172340743243694, -0, -0, -0, -0, -0, -1.9780745506286621, 0.058838736265897751,
    0.17655661702156067, 0.51053035259246826, 1.2321488857269287, 0.16214162111282349,
    0.30515110492706299, -0.66397404670715332, 0.13909107446670532, 0.057590164244174957, -0, -0,
    -0, -0, -0, 0, 0, 0, 0, 0
};
// kCtcBlank4Loss: shape (3,)
const std::vector<double> kCtcBlank4Loss = {
    8.0165252685546875, 1.6491769552230835, 7.0247287750244141
};
// kCtcBlank4Grad: shape (6, 3, 5)
const std::vector<double> kCtcBlank4Grad = {
    0.027216797694563866, -0.34043258428573608, 0.080726578831672668, 0.21366272866725922,
    0.01882624626159668, -0.027147183194756508, -0.066694863140583038, -0.12231015413999557,
    0.12836028635501862, 0.087791949510574341, 1.2227258682250977, 0.51567643880844116,
    -1.6711189746856689, 0.059784848242998123, -0.12706807255744934, 0.19453443586826324,
    -0.37531456351280212, 0.12419963628053665, 0.18071119487285614, -0.12413063645362854,
    -0.0068664001300930977, -0.020555762574076653, -0.059792689979076385, 0.086233988404273987,
    0.00098082423210144043, 0.77576887607574463, 0.64708179235458374, -0.93835073709487915,
    0.15472675859928131, -0.63922655582427979, 0.56545132398605347, -0.26537397503852844,
    0.097861476242542267, 0.064555227756500244, -0.46249416470527649, -0.0068181846290826797,
    -0.01415745448321104, -0.037734437733888626, 0.023766100406646729, 0.034943938255310059,
    0.25067347288131714, 0.45393729209899902, -0.42736101150512695, 0.46701768040657043,
    -0.74426710605621338, 0.65543752908706665, -0.52167373895645142, 0.048699565231800079,
    0.028051368892192841, -0.21051488816738129, -0.034125849604606628, -0.033762980252504349,
    -0.049823511391878128, -0.017702274024486542, 0.13541460037231445, 0.051081746816635132,
    0.14800755679607391, -0.62415134906768799, 0.64567214250564575, -0.22060990333557129,
    0.5251469612121582, -0.40360572934150696, -0.15421083569526672, 0.042551197111606598,
    -0.0098815849050879478, 0, 0, 0, 0, 0, 0.021925486624240875, 0.058838736265897751,
    -0.58723986148834229, 0.51053035259246826, -0.0040546655654907227, 0.24922862648963928,
    0.30515110492706299, -0.69843780994415283, 0.13909107446670532, 0.0049671754240989685, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0
};
// kCtcBatchMajorLoss: shape (3,)
const std::vector<double> kCtcBatchMajorLoss = {
    6.5366659164428711, 2.0625169277191162, 11.696592330932617
};
// kCtcBatchMajorGrad: shape (3, 6, 5)
const std::vector<double> kCtcBatchMajorGrad = {
    -0.18052856624126434, -0.75293344259262085, 0.080726601183414459, 0.2136627584695816,
    0.63907277584075928, -0.38740944862365723, -0.29061934351921082, 0.12419963628053665,
    0.18071119487285614, 0.37311780452728271, -0.11780828237533569, -0.10799881815910339,
    0.097861476242542267, 0.064555227756500244, 0.063390292227268219, 0.11806845664978027,
    -0.21905621886253357, 0.059713095426559448, 0.028051368892192841, 0.01322330255061388,
    0.1998639702796936, -0.22717061638832092, -0.02941671758890152, 0.042551197111606598,
    0.014172340743243694, 0.16214162111282349, 0.30515110492706299, -0.66397404670715332,
    0.13909107446670532, 0.057590164244174957, 0.0071721393615007401, -0.066694863140583038,
    -0.12231015413999557, 0.31144338846206665, -0.12961047887802124, 0.00046193785965442657,
    -0.020555762574076653, -0.059792689979076385, 0.080584704875946045, -0.00069817900657653809,
    -0.0029228883795440197, -0.01415745448321104, -0.037734430283308029, -0.060175027698278427,
    0.11498981714248657, 0.01489628478884697, -0.033762980252504349, -0.049823511391878128,
    -0.10403788834810257, 0.17272809147834778, -0, -0, -0, -0, -0, -0, -0, -0, -0, -0,
    -0.77727413177490234, 0.51567643880844116, 0.17981337010860443, 0.059784848242998123,
    0.021999411284923553, -1.2242311239242554, 0.64708179235458374, 0.36858981847763062,
    0.15472675859928131, 0.053832888603210449, -1.7493264675140381, 0.45393729209899902,
    0.56406170129776001, 0.46701768040657043, 0.26430985331535339, -1.9489182233810425,
    0.14800755679607391, 0.35882598161697388, 0.64567214250564575, 0.79641258716583252,
    -1.9780745506286621, 0.058838736265897751, 0.17655661702156067, 0.51053035259246826,
    1.2321488857269287, 0, 0, 0, 0, 0
};
// kCtcInfeasibleLoss: shape (3,)
const std::vector<double> kCtcInfeasibleLoss = {
    711.11737060546875, 1.8052370548248291, 706.89361572265625
};
// kCtcInfeasibleGrad: shape (6, 3, 5)
const std::vector<double> kCtcInfeasibleGrad = {
    -0.38182643055915833, -0.55162882804870605, 0.080726601183414459, 0.2136627584695816,
    0.63907277584075928, -0.027147183194756508, -0.066694863140583038, -0.12231015413999557,
    0.34576272964477539, -0.12961047887802124, 0, 0, 0, 0, 0, -0.409656822681427,
    -0.2683657705783844, 0.12419963628053665, 0.18071119487285614, 0.37311780452728271,
    -0.0068664001300930977, -0.020555762574076653, -0.059792689979076385, -0.14625515043735504,
    0.23346999287605286, 0, 0, 0, 0, 0, -0.16494953632354736, -0.0608864426612854,
    0.097861476242542267, 0.064555227756500244, 0.063390292227268219, -0, -0, -0, -0, -0, 0, 0, 0,
    0, 0, -0.086883902549743652, -0.030160784721374512, 0.075740180909633636,
    0.028051368892192841, 0.01322330255061388, -0, -0, -0, -0, -0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    -0, -0, -0, -0, -0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0, -0, -0, -0, -0, 0, 0, 0, 0, 0
};
// clang-format on

// sin(0.37 * i + k) * 3 for the row-major index i: the inputs the TF script used.
std::vector<double> raw(const tf::TensorShape& shape, double k, double scale = 1.0) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * double(i) + k) * 3 * scale;
  return v;
}
tf::Tensor vals(const tf::TensorShape& shape, double k, double scale = 1.0,
                tf::DType dtype = tf::float64) {
  return tf::detail::from_doubles(raw(shape, k, scale), shape, dtype);
}
tf::Tensor iota(const tf::TensorShape& shape, tf::DType dtype = tf::float64) {
  return tf::reshape(tf::range(0.0, static_cast<double>(shape.num_elements()), 1.0, dtype), shape);
}

}  // namespace

TEST_CASE("nn_more: activations and l2_loss give TF's values", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    check_values(tf::nn::relu6(vals({12}, 0, 3)), kRelu6, 1e-12, 1e-12);
    check_values(tf::nn::relu6(vals({12}, 0, 3, tf::float32)), kRelu6, 1e-6, 1e-6);
    const tf::Tensor c = tf::nn::crelu(vals({2, 3}, 1), 1);
    CHECK(c.shape() == tf::TensorShape{2, 6});
    check_values(c, kCreluAxis1, 1e-12, 1e-12);
    check_values(tf::nn::crelu(vals({2, 3}, 1), 0), kCreluAxis0, 1e-12, 1e-12);
    check_values(tf::nn::log_sigmoid(vals({6}, 2, 10)), kLogSigmoid, 1e-12, 1e-15);
    check_values(tf::math::log_sigmoid(vals({6}, 2, 10)), kLogSigmoid, 1e-12, 1e-15);
    const tf::Tensor l2 = tf::nn::l2_loss(vals({2, 3}, 3));
    CHECK(l2.shape() == tf::TensorShape{});
    check_values(l2, kL2Loss, 1e-12, 1e-12);
  }
  // relu6's gradient is 1 on (0, 6) only (TF's Relu6Grad), 0 at 0 and at 6.
  const tf::Tensor x = tf::constant<double>({-1.0, 0.0, 3.0, 6.0, 7.0});
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor y = tf::reduce_sum(tf::nn::relu6(x));
  check_values(tape.gradient(y, x), {0, 0, 1, 0, 0}, 0, 0);
  check_gradient([](const tf::Tensor& t) { return tf::nn::crelu(t); }, {2, 3});
  check_gradient([](const tf::Tensor& t) { return tf::nn::log_sigmoid(t * 20.0); }, {6});
  check_gradient([](const tf::Tensor& t) { return tf::nn::l2_loss(t); }, {2, 3});
  require_error([] { tf::nn::log_sigmoid(tf::constant<int32_t>({1})); }, {"log_sigmoid", "int32"});
  require_error([] { tf::nn::crelu(vals({2, 3}, 0), 2); }, {"crelu", "axis"});
  require_error([] { tf::nn::l2_loss(tf::constant<int32_t>({1})); }, {"l2_loss", "int32"});
}

TEST_CASE("nn_more: softmax and weighted cross entropy as TF", "[cpu][cuda][nn_more]") {
  auto labels = [] {
    auto v = raw({2, 4}, 4);
    for (auto& e : v) e = std::abs(e);
    for (int r = 0; r < 2; ++r) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += v[size_t(r * 4 + j)];
      for (int j = 0; j < 4; ++j) v[size_t(r * 4 + j)] /= s;
    }
    return tf::detail::from_doubles(v, {2, 4}, tf::float64);
  };
  auto z = [] {
    auto v = raw({2, 3}, 6);
    for (auto& e : v) e = e > 0 ? 1.0 : 0.0;
    return tf::detail::from_doubles(v, {2, 3}, tf::float64);
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor lab = labels(), lg = vals({2, 4}, 5);
    check_values(tf::nn::softmax_cross_entropy_with_logits(lab, lg), kSce, 1e-12, 1e-12);
    check_values(tf::nn::softmax_cross_entropy_with_logits(lab, lg, 0), kSceAxis0, 1e-12, 1e-12);
    // The gradient reaches both arguments, as TF 2's.
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(lab);
    tape.watch(lg);
    const tf::Tensor y = tf::reduce_sum(tf::nn::softmax_cross_entropy_with_logits(lab, lg) *
                                        tf::constant<double>({1.5, -0.5}));
    check_values(tape.gradient(y, lab), kSceDlabels, 1e-12, 1e-12);
    check_values(tape.gradient(y, lg), kSceDlogits, 1e-12, 1e-12);
    check_values(tf::nn::weighted_cross_entropy_with_logits(z(), vals({2, 3}, 7), 2.5), kWce, 1e-12,
                 1e-12);
  }
  const tf::Tensor lab = labels(), lg = vals({2, 4}, 5);
  check_gradient(
      [&](const tf::Tensor& t) { return tf::nn::softmax_cross_entropy_with_logits(t, lg); },
      {2, 4});
  check_gradient(
      [&](const tf::Tensor& t) { return tf::nn::softmax_cross_entropy_with_logits(lab, t, 0); },
      {2, 4});
  check_gradient(
      [&](const tf::Tensor& t) { return tf::nn::weighted_cross_entropy_with_logits(z(), t, 2.5); },
      {2, 3});
  check_gradient(
      [&](const tf::Tensor& t) { return tf::nn::weighted_cross_entropy_with_logits(t, lg, 0.5); },
      {2, 4});
  require_error(
      [] {
        tf::nn::softmax_cross_entropy_with_logits(vals({2, 4}, 0), vals({2, 3}, 0));
      },
      {"softmax_cross_entropy_with_logits", "(2, 4)", "(2, 3)"});
  require_error(
      [] {
        tf::nn::softmax_cross_entropy_with_logits(vals({2, 4}, 0, 1, tf::float32), vals({2, 4}, 0));
      },
      {"softmax_cross_entropy_with_logits", "float32", "float64"});
  require_error([] { tf::nn::weighted_cross_entropy_with_logits(vals({3}, 0), vals({2}, 0), 1.0); },
                {"weighted_cross_entropy_with_logits", "(3,)", "(2,)"});
}

TEST_CASE("nn_more: conv1d and conv1d_transpose as TF", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float64, tf::float32}) {
      INFO("dtype " << tf::dtype_name(d));
      const double tol = d == tf::float64 ? 1e-12 : 2e-5;
      const tf::Tensor in = vals({2, 7, 3}, 8, 1, d), fil = vals({3, 3, 4}, 9, 1.0 / 3, d);
      const tf::Tensor a = tf::nn::conv1d(in, fil, 2, "SAME");
      CHECK(a.shape() == tf::TensorShape{2, 4, 4});
      check_values(a, kConv1dS2Same, tol, tol);
      check_values(tf::nn::conv1d(in, fil, 1, "VALID", "NWC", 2), kConv1dS1ValidD2, tol, tol);
      // NCW is NWC between two transposes.
      const tf::Tensor ncw = tf::nn::conv1d(tf::transpose(in, {0, 2, 1}), fil, 2, "SAME", "NCW");
      check_values(tf::transpose(ncw, {0, 2, 1}), kConv1dS2Same, tol, tol);
      const tf::Tensor ti = vals({2, 4, 4}, 10, 1, d), tfil = vals({3, 3, 4}, 11, 1.0 / 3, d);
      const tf::Tensor t = tf::nn::conv1d_transpose(ti, tfil, {2, 8, 3}, 2, "SAME");
      CHECK(t.shape() == tf::TensorShape{2, 8, 3});
      check_values(t, kConv1dTransposeS2Same, tol, tol);
      check_values(tf::nn::conv1d_transpose(ti, tfil, {2, 6, 3}, 1, "VALID"),
                   kConv1dTransposeS1Valid, tol, tol);
    }
    auto f = tf::function(
        [](const tf::Tensor& x, const tf::Tensor& w) { return tf::nn::conv1d(x, w, 2, "SAME"); });
    check_values(f(vals({2, 7, 3}, 8, 1, tf::float32), vals({3, 3, 4}, 9, 1.0 / 3, tf::float32)),
                 kConv1dS2Same, 2e-5, 2e-5);
  }
  const tf::Tensor in = vals({2, 7, 3}, 8), fil = vals({3, 3, 4}, 9, 1.0 / 3);
  check_gradient([&](const tf::Tensor& x) { return tf::nn::conv1d(x, fil, 2, "SAME"); }, {2, 7, 3});
  check_gradient([&](const tf::Tensor& w) { return tf::nn::conv1d(in, w, 1, "VALID", "NWC", 2); },
                 {3, 3, 4});
  const tf::Tensor tfil = vals({3, 3, 4}, 11, 1.0 / 3);
  check_gradient(
      [&](const tf::Tensor& x) {
        return tf::nn::conv1d_transpose(x, tfil, {2, 8, 3}, 2, "SAME");
      },
      {2, 4, 4});
  require_error([&] { tf::nn::conv1d(vals({2, 7}, 0), fil, 1, "SAME"); }, {"conv1d", "(2, 7)"});
  require_error([&] { tf::nn::conv1d(in, vals({3, 4}, 0), 1, "SAME"); }, {"conv1d", "(3, 4)"});
  require_error([&] { tf::nn::conv1d(in, fil, 1, "SAME", "NHWC"); }, {"conv1d", "\"NHWC\""});
  require_error([&] { tf::nn::conv1d(in, fil, 0, "SAME"); }, {"conv1d", "positive"});
  require_error(
      [&] {
        tf::nn::conv1d_transpose(vals({2, 4, 4}, 0), tfil, {2, 8}, 2, "SAME");
      },
      {"conv1d_transpose", "output_shape", "2"});
}

TEST_CASE("nn_more: 1-D pooling and max_pool_with_argmax as TF", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor p = vals({2, 7, 3}, 12);
    const tf::Tensor mp = tf::nn::max_pool1d(p, 3, 2, "SAME");
    CHECK(mp.shape() == tf::TensorShape{2, 4, 3});
    check_values(mp, kMaxPool1dK3S2Same, 1e-12, 1e-12);
    check_values(tf::nn::avg_pool1d(p, 3, 2, "SAME"), kAvgPool1dK3S2Same, 1e-12, 1e-12);
    check_values(tf::nn::max_pool1d(p, 2, 1, "VALID"), kMaxPool1dK2S1Valid, 1e-12, 1e-12);
    const tf::Tensor m = vals({2, 5, 5, 2}, 13, 1, tf::float32);
    struct Case {
      const char* padding;
      bool batch;
      const std::vector<double>& out;
      const std::vector<double>& argmax;
    };
    for (const Case& c : {Case{"SAME", false, kMpwaSameFalseOut, kMpwaSameFalseArgmax},
                          Case{"SAME", true, kMpwaSameTrueOut, kMpwaSameTrueArgmax},
                          Case{"VALID", false, kMpwaValidFalseOut, kMpwaValidFalseArgmax},
                          Case{"VALID", true, kMpwaValidTrueOut, kMpwaValidTrueArgmax}}) {
      INFO("padding " << c.padding << " include_batch_in_index " << c.batch);
      const auto [out, arg] = tf::nn::max_pool_with_argmax(m, {3}, {2}, c.padding, c.batch);
      CHECK(arg.dtype() == tf::int64);
      check_values(out, c.out, 1e-6, 1e-6);
      check_values(arg, c.argmax, 0, 0);
    }
    // All-negative windows at the SAME border: the padding never wins.
    const tf::Tensor neg = tf::negative(tf::ones({1, 3, 3, 1}));
    check_values(tf::nn::max_pool_with_argmax(neg, {2}, {2}, "SAME").second, {0, 2, 6, 8}, 0, 0);
    auto f = tf::function([](const tf::Tensor& x) {
      return tf::nn::max_pool_with_argmax(x, {3}, {2}, "SAME", true).second;
    });
    check_values(f(m), kMpwaSameTrueArgmax, 0, 0);
  }
  check_gradient([](const tf::Tensor& x) { return tf::nn::avg_pool1d(x, 3, 2, "SAME"); },
                 {2, 7, 3});
  check_gradient([](const tf::Tensor& x) { return tf::nn::max_pool1d(x, 2, 1, "VALID"); },
                 {2, 7, 3});
  check_gradient(
      [](const tf::Tensor& x) { return tf::nn::max_pool_with_argmax(x, {3}, {2}, "SAME").first; },
      {1, 5, 5, 2});
  require_error(
      [] {
        tf::nn::max_pool1d(vals({7, 3}, 0), 2, 1, "VALID");
      },
      {"max_pool1d", "(7, 3)"});
  require_error(
      [] {
        tf::nn::avg_pool1d(vals({1, 7, 3}, 0), 0, 1, "VALID");
      },
      {"avg_pool1d", "positive"});
  require_error(
      [] {
        tf::nn::max_pool_with_argmax(vals({5, 5, 2}, 0), {2}, {2}, "SAME");
      },
      {"max_pool_with_argmax", "(5, 5, 2)"});
  require_error(
      [] {
        tf::nn::max_pool_with_argmax(vals({1, 5, 5, 2}, 0), {2}, {2}, "FULL");
      },
      {"max_pool_with_argmax", "\"FULL\""});
}

TEST_CASE("nn_more: embedding_lookup and batch statistics as TF", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor params = vals({5, 3}, 14);
    for (tf::DType it : {tf::int32, tf::int64}) {
      const tf::Tensor ids = tf::cast(tf::constant<int64_t>({4, 0, 2, 2}, {2, 2}), it);
      const tf::Tensor e = tf::nn::embedding_lookup(params, ids);
      CHECK(e.shape() == tf::TensorShape{2, 2, 3});
      check_values(e, kEmbedding, 1e-12, 1e-12);
      check_values(tf::nn::embedding_lookup(params, ids, 2.0), kEmbeddingMaxNorm2, 1e-12, 1e-12);
    }
    tf::Tensor v = tf::abs(vals({3}, 17));
    check_values(tf::nn::batch_normalization(vals({2, 3}, 15), vals({3}, 16), v, vals({3}, 18),
                                             vals({3}, 19), 1e-3),
                 kBn, 1e-12, 1e-12);
    check_values(tf::nn::batch_normalization(vals({2, 3}, 15), vals({3}, 16), v, tf::Tensor(),
                                             tf::Tensor(), 1e-3),
                 kBnNone, 1e-12, 1e-12);
    const tf::Tensor shift = tf::constant<double>({0.5, -1.0, 0.0, 2.0});
    const auto ss = tf::nn::sufficient_statistics(vals({3, 4}, 20), {0}, shift);
    check_values(ss.count, kSsCount, 0, 0);
    check_values(ss.mean_ss, kSsMeanSs, 1e-12, 1e-12);
    check_values(ss.variance_ss, kSsVarSs, 1e-12, 1e-12);
    const auto [mean, var] = tf::nn::normalize_moments(ss.count, ss.mean_ss, ss.variance_ss, shift);
    check_values(mean, kNmMean, 1e-12, 1e-12);
    check_values(var, kNmVar, 1e-12, 1e-12);
    const auto s2 = tf::nn::sufficient_statistics(vals({3, 4}, 20), {0, 1}, tf::Tensor(), true);
    CHECK(s2.mean_ss.shape() == tf::TensorShape{1, 1});
    check_values(s2.count, kSs2Count, 0, 0);
    check_values(s2.mean_ss, kSs2MeanSs, 1e-12, 1e-12);
    check_values(s2.variance_ss, kSs2VarSs, 1e-12, 1e-12);
    CHECK(!s2.shift.defined());
  }
  const tf::Tensor ids = tf::constant<int32_t>({4, 0, 2, 2}, {2, 2});
  check_gradient([&](const tf::Tensor& p) { return tf::nn::embedding_lookup(p, ids, 0.8); },
                 {5, 3});
  const tf::Tensor m = vals({3}, 16), v = tf::abs(vals({3}, 17));
  check_gradient(
      [&](const tf::Tensor& x) {
        return tf::nn::batch_normalization(x, m, v, vals({3}, 18), vals({3}, 19), 1e-3);
      },
      {2, 3});
  check_gradient(
      [&](const tf::Tensor& s) {
        return tf::nn::batch_normalization(vals({2, 3}, 15), m, v, s, s, 0.1);
      },
      {3});
  check_gradient(
      [](const tf::Tensor& x) {
        const auto s = tf::nn::sufficient_statistics(x, {0});
        return tf::nn::normalize_moments(s.count, s.mean_ss, s.variance_ss).second;
      },
      {3, 4});
  require_error(
      [] {
        tf::nn::embedding_lookup(vals({5, 3}, 0), vals({2}, 0));
      },
      {"embedding_lookup", "ids", "float64"});
  require_error(
      [] {
        tf::nn::sufficient_statistics(vals({3, 4}, 0), {2});
      },
      {"sufficient_statistics", "axis"});
  require_error(
      [] {
        tf::nn::batch_normalization(tf::constant<int32_t>({1}), vals({1}, 0), vals({1}, 0),
                                    tf::Tensor(), tf::Tensor(), 1e-3);
      },
      {"batch_normalization", "int32"});
}

TEST_CASE("nn_more: local_response_normalization and space_to_depth as TF",
          "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor li = vals({1, 2, 2, 7}, 21, 1, tf::float32);
    check_values(tf::nn::local_response_normalization(li, 2, 1.0, 0.5, 0.75), kLrn, 2e-6, 1e-6);
    check_values(tf::nn::local_response_normalization(li), kLrnDefault, 2e-6, 1e-6);
    const tf::Tensor s = tf::nn::space_to_depth(iota({2, 4, 4, 2}), 2);
    CHECK(s.shape() == tf::TensorShape{2, 2, 2, 8});
    check_values(s, kS2d, 0, 0);
    const tf::Tensor d = tf::nn::depth_to_space(iota({2, 2, 3, 8}), 2);
    CHECK(d.shape() == tf::TensorShape{2, 4, 6, 2});
    check_values(d, kD2s, 0, 0);
    check_values(tf::nn::depth_to_space(s, 2), tf::detail::to_double_vector(iota({2, 4, 4, 2})), 0,
                 0);
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 4, 4, 2}, tf::float64)};
    auto f = tf::function([](const tf::Tensor& x) { return tf::nn::space_to_depth(x, 2); }, opts);
    check_values(f(iota({2, 4, 4, 2})), kS2d, 0, 0);
    auto g = tf::function([](const tf::Tensor& x) {
      return tf::nn::local_response_normalization(x, 2, 1.0, 0.5, 0.75);
    });
    check_values(g(li), kLrn, 2e-6, 1e-6);
  }
  check_gradient([](const tf::Tensor& x) { return tf::nn::local_response_normalization(x, 1); },
                 {1, 2, 1, 4});
  check_gradient([](const tf::Tensor& x) { return tf::nn::space_to_depth(x, 2); }, {1, 2, 4, 1});
  check_gradient([](const tf::Tensor& x) { return tf::nn::depth_to_space(x, 2); }, {1, 1, 2, 4});
  require_error(
      [] {
        tf::nn::local_response_normalization(vals({2, 7}, 0));
      },
      {"local_response_normalization", "(2, 7)"});
  require_error(
      [] {
        tf::nn::space_to_depth(iota({1, 3, 4, 1}), 2);
      },
      {"space_to_depth", "(1, 3, 4, 1)", "2"});
  require_error(
      [] {
        tf::nn::depth_to_space(iota({1, 2, 2, 6}), 2);
      },
      {"depth_to_space", "(1, 2, 2, 6)", "4"});
  require_error([] { tf::nn::space_to_depth(iota({1, 4, 4, 1}), 1); }, {"space_to_depth", "1"});
}

namespace {
// The ctc_loss test's inputs (as the TF script): logits vals((6, 3, 5), 30), time major.
struct CtcInputs {
  tf::Tensor labels, label_length, logit_length;
};
CtcInputs ctc_case(std::vector<int64_t> labels, std::vector<int64_t> ll, std::vector<int64_t> tl,
                   tf::DType it = tf::int32) {
  return {tf::cast(tf::constant(labels, {3, 3}), it), tf::cast(tf::constant(ll, {3}), it),
          tf::cast(tf::constant(tl, {3}), it)};
}
}  // namespace

TEST_CASE("nn_more: ctc_loss and its gradient as TF", "[cpu][cuda][nn_more]") {
  const std::vector<double> weights = {1.0, -0.5, 2.0};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(d));
      const tf::Tensor logits = vals({6, 3, 5}, 30, 1, d);
      const tf::Tensor w = tf::detail::from_doubles(weights, {3}, d);
      struct Case {
        CtcInputs in;
        bool time_major;
        int blank;
        const std::vector<double>& loss;
        const std::vector<double>& grad;
      };
      const CtcInputs base = ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5});
      for (const Case& c :
           {Case{base, true, 0, kCtcLoss, kCtcGrad},
            Case{ctc_case({1, 1, 2, 3, 0, 0, 2, 2, 2}, {3, 1, 2}, {6, 4, 5}, tf::int64), true, 4,
                 kCtcBlank4Loss, kCtcBlank4Grad},
            Case{ctc_case({1, 1, 2, 3, 0, 0, 2, 2, 2}, {3, 1, 2}, {6, 4, 5}), true, -1,
                 kCtcBlank4Loss, kCtcBlank4Grad},
            Case{base, false, 0, kCtcBatchMajorLoss, kCtcBatchMajorGrad}}) {
        INFO("time_major " << c.time_major << " blank " << c.blank);
        const tf::Tensor x = c.time_major ? logits : tf::transpose(logits, {1, 0, 2});
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor loss = tf::nn::ctc_loss(c.in.labels, x, c.in.label_length,
                                                 c.in.logit_length, c.time_major, c.blank);
        CHECK(loss.dtype() == d);
        CHECK(loss.shape() == tf::TensorShape{3});
        check_values(loss, c.loss, 2e-6, 2e-6);
        check_values(tape.gradient(tf::reduce_sum(loss * w), x), c.grad, 2e-6, 2e-6);
      }
      // A label its frames cannot produce: an infinite loss and a zero gradient (TF's dense path
      // gives about 711 there); the feasible entry keeps TF's values.
      const CtcInputs bad = ctc_case({1, 1, 1, 3, 4, 0, 2, 0, 0}, {3, 2, 1}, {4, 2, 0});
      tf::GradientTape tape;
      tape.watch(logits);
      const tf::Tensor loss =
          tf::nn::ctc_loss(bad.labels, logits, bad.label_length, bad.logit_length);
      const auto lv = tf::detail::to_double_vector(loss);
      CHECK(std::isinf(lv[0]));
      CHECK(lv[1] == Approx(kCtcInfeasibleLoss[1]).epsilon(2e-6));
      CHECK(std::isinf(lv[2]));
      const auto gv = tf::detail::to_double_vector(tape.gradient(
          tf::reduce_sum(tf::where(tf::less(loss, 1e30), loss, tf::zeros_like(loss)) * w), logits));
      for (size_t i = 0; i < gv.size(); ++i) {
        const bool feasible = (i / 5) % 3 == 1;
        CHECK(gv[i] == Approx(feasible ? kCtcInfeasibleGrad[i] : 0.0).margin(2e-6));
      }
    }
    // float16 runs through float32; traced equals eager.
    const tf::Tensor logits = vals({6, 3, 5}, 30, 1, tf::float32);
    const CtcInputs in = ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5});
    const tf::Tensor h = tf::nn::ctc_loss(in.labels, tf::cast(logits, tf::float16), in.label_length,
                                          in.logit_length);
    CHECK(h.dtype() == tf::float16);
    check_values(h, kCtcLoss, 2e-2, 2e-2);
    auto f = tf::function([](const tf::Tensor& l, const tf::Tensor& x, const tf::Tensor& ll,
                             const tf::Tensor& tl) { return tf::nn::ctc_loss(l, x, ll, tl); });
    check_values(f(in.labels, logits, in.label_length, in.logit_length), kCtcLoss, 2e-6, 2e-6);
  }
}

TEST_CASE("nn_more: ctc_loss gradient matches central differences", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const CtcInputs in = ctc_case({1, 1, 2, 3, 4, 0, 2, 0, 0}, {3, 2, 1}, {6, 4, 5});
    const CtcInputs other = ctc_case({1, 1, 2, 2, 4, 0, 4, 0, 0}, {3, 2, 1}, {6, 5, 4});
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::nn::ctc_loss(in.labels, x, in.label_length, in.logit_length);
        },
        {6, 3, 5}, raw({6, 3, 5}, 30));
    check_gradient(
        [&](const tf::Tensor& x) {
          return tf::nn::ctc_loss(other.labels, x, other.label_length, other.logit_length, false,
                                  -2);  // blank 3
        },
        {3, 6, 5}, raw({3, 6, 5}, 31));
  }
  // No second derivative (TF has none either).
  const CtcInputs in = ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5});
  const tf::Tensor x = vals({6, 3, 5}, 30);
  tf::GradientTape outer;
  outer.watch(x);
  tf::Tensor g;
  {
    tf::GradientTape inner;
    inner.watch(x);
    g = inner.gradient(
        tf::reduce_sum(tf::nn::ctc_loss(in.labels, x, in.label_length, in.logit_length)), x);
  }
  require_error([&] { outer.gradient(tf::reduce_sum(g * g), x); },
                {"ctc_loss", "second derivative"});
}

namespace {

// The textbook forward-backward for one batch entry, written apart from the kernels: alpha
// includes frame t's emission, `rest` (the suffix probability) excludes it, and the gradient of
// -log p with respect to logit (t, k) is softmax(t, k) - sum over s with z(s) = k of
// alpha(t, s) rest(t, s) / p. x is (T, B, C); returns the loss and the (tb, C) gradient rows.
std::pair<double, std::vector<double>> ctc_reference(const std::vector<double>& x, int64_t B,
                                                     int64_t C, int64_t b, int64_t tb,
                                                     const std::vector<int64_t>& label,
                                                     int64_t blank) {
  const double ninf = -std::numeric_limits<double>::infinity();
  auto lse = [&](const std::vector<double>& v) {
    double m = ninf;
    for (double e : v) m = std::max(m, e);
    if (m == ninf) return ninf;
    double sum = 0;
    for (double e : v) sum += std::exp(e - m);
    return m + std::log(sum);
  };
  std::vector<int64_t> z = {blank};
  for (int64_t l : label) z.insert(z.end(), {l, blank});
  const auto S = static_cast<int64_t>(z.size());
  std::vector<double> grad(static_cast<size_t>(tb * C), 0.0);
  if (tb == 0) return {label.empty() ? 0.0 : std::numeric_limits<double>::infinity(), grad};
  std::vector<std::vector<double>> lp(size_t(tb), std::vector<double>(size_t(C), 0.0));
  for (int64_t t = 0; t < tb; ++t) {
    const auto row = x.begin() + (t * B + b) * C;
    const double norm = lse(std::vector<double>(row, row + C));
    for (int64_t k = 0; k < C; ++k) lp[size_t(t)][size_t(k)] = row[k] - norm;
  }
  auto skip_ok = [&](int64_t s) {
    return s >= 2 && z[size_t(s)] != blank && z[size_t(s)] != z[size_t(s - 2)];
  };
  std::vector<std::vector<double>> alpha(size_t(tb), std::vector<double>(size_t(S), ninf));
  std::vector<std::vector<double>> rest = alpha;
  for (int64_t s = 0; s < std::min<int64_t>(2, S); ++s)
    alpha[0][size_t(s)] = lp[0][size_t(z[size_t(s)])];
  for (int64_t t = 1; t < tb; ++t)
    for (int64_t s = 0; s < S; ++s) {
      std::vector<double> in = {alpha[size_t(t - 1)][size_t(s)]};
      if (s >= 1) in.push_back(alpha[size_t(t - 1)][size_t(s - 1)]);
      if (skip_ok(s)) in.push_back(alpha[size_t(t - 1)][size_t(s - 2)]);
      alpha[size_t(t)][size_t(s)] = lse(in) + lp[size_t(t)][size_t(z[size_t(s)])];
    }
  for (int64_t s = std::max<int64_t>(0, S - 2); s < S; ++s) rest[size_t(tb - 1)][size_t(s)] = 0.0;
  for (int64_t t = tb - 2; t >= 0; --t)
    for (int64_t s = 0; s < S; ++s) {
      std::vector<double> out;
      for (int64_t s2 = s; s2 < std::min(s + 3, S); ++s2)
        if (s2 < s + 2 || skip_ok(s2))
          out.push_back(lp[size_t(t + 1)][size_t(z[size_t(s2)])] + rest[size_t(t + 1)][size_t(s2)]);
      rest[size_t(t)][size_t(s)] = lse(out);
    }
  const auto& last = alpha[size_t(tb - 1)];
  const double log_p = lse(S > 1 ? std::vector<double>{last[size_t(S - 1)], last[size_t(S - 2)]}
                                 : std::vector<double>{last[0]});
  if (log_p == ninf) return {std::numeric_limits<double>::infinity(), grad};
  for (int64_t t = 0; t < tb; ++t) {
    for (int64_t k = 0; k < C; ++k) grad[size_t(t * C + k)] = std::exp(lp[size_t(t)][size_t(k)]);
    for (int64_t s = 0; s < S; ++s)
      grad[size_t(t * C + z[size_t(s)])] -=
          std::exp(alpha[size_t(t)][size_t(s)] + rest[size_t(t)][size_t(s)] - log_p);
  }
  return {-log_p, grad};
}

}  // namespace

// Long enough for the kernels' loops: 700 frames, a label of 300 (601 extended positions, more
// than one CUDA block of threads), labels drawn from 6 classes (many repeats, so many skips
// barred and classes at many positions), blank 2; entries with no label, no frames, and one
// that its frames cannot produce.
TEST_CASE("nn_more: ctc_loss on a long random batch matches a plain reference",
          "[cpu][cuda][nn_more]") {
  const int64_t T = 700, B = 6, C = 7, L = 300, blank = 2;
  const std::vector<int64_t> label_len = {300, 30, 0, 30, 0, 25};
  const std::vector<int64_t> frames = {700, 200, 50, 20, 0, 0};
  const std::vector<double> classes = tf::testing::random_values(size_t(B * L), 0, 6, 7);
  std::vector<int64_t> labels(size_t(B * L), 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto k = static_cast<int64_t>(classes[i]);
    labels[i] = k < blank ? k : k + 1;  // never the blank
  }
  const std::vector<double> x = tf::testing::random_values(size_t(T * B * C), -3, 3, 11);
  auto reference = [&](const std::vector<double>& logits, int64_t b) {
    const auto first = labels.begin() + b * L;
    return ctc_reference(logits, B, C, b, frames[size_t(b)],
                         std::vector<int64_t>(first, first + label_len[size_t(b)]), blank);
  };
  CHECK(std::isinf(reference(x, 3).first));  // 30 labels in 20 frames
  CHECK(std::isfinite(reference(x, 0).first));
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType d : {tf::float64, tf::float32}) {
      INFO("dtype " << tf::dtype_name(d));
      // float32: the reference sees the same rounded logits; the kernels then work in float64.
      const tf::Tensor logits = tf::detail::from_doubles(x, {T, B, C}, d);
      const std::vector<double> xr = tf::detail::to_double_vector(logits);
      std::vector<std::pair<double, std::vector<double>>> want;
      for (int64_t b = 0; b < B; ++b) want.push_back(reference(xr, b));
      const double tol = d == tf::float64 ? 1e-9 : 2e-6;
      for (tf::DType it : {tf::int32, tf::int64}) {
        INFO("labels " << tf::dtype_name(it));
        const tf::Tensor lab = tf::cast(tf::constant(labels, {B, L}), it);
        const tf::Tensor ll = tf::cast(tf::constant(label_len, {B}), it);
        const tf::Tensor tl = tf::constant(frames, {B});
        tf::GradientTape tape;
        tape.watch(logits);
        const tf::Tensor loss = tf::nn::ctc_loss(lab, logits, ll, tl, true, int(blank));
        const auto lv = tf::detail::to_double_vector(loss);
        const auto gv = tf::detail::to_double_vector(tape.gradient(
            tf::reduce_sum(tf::where(tf::less(loss, 1e30), loss, tf::zeros_like(loss))), logits));
        for (int64_t b = 0; b < B; ++b) {
          INFO("entry " << b);
          const auto& [wl, wg] = want[size_t(b)];
          if (std::isinf(wl))
            CHECK(std::isinf(lv[size_t(b)]));
          else
            CHECK(lv[size_t(b)] == Approx(wl).epsilon(tol));
          int bad = 0;
          for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < C; ++k) {
              const double g = gv[size_t((t * B + b) * C + k)];
              const double w = t < frames[size_t(b)] ? wg[size_t(t * C + k)] : 0.0;
              if (!(std::abs(g - w) <= tol) && bad++ < 5)
                FAIL_CHECK("gradient (" << t << ", " << k << "): " << g << " vs " << w);
            }
          CHECK(bad == 0);
        }
      }
    }
  }
}

// The kernels' own checks (the CUDA kernel flags an entry on the device and the host repeats the
// CPU kernel's checks for the message): the first bad entry in batch order is the one named, and
// the device still works after an error.
TEST_CASE("nn_more: ctc_loss kernels reject bad labels and lengths", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = vals({6, 3, 5}, 30, 1, tf::float32);
    auto run = [&](const CtcInputs& in, int blank = 0) {
      return tf::nn::ctc_loss(in.labels, x, in.label_length, in.logit_length, true, blank);
    };
    require_error(
        [&] {
          run(ctc_case({1, 1, 0, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5}));
        },
        {"ctc_loss", "labels[0, 2] = 0", "blank 0"});
    require_error(
        [&] {
          run(ctc_case({1, 1, 5, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5}, tf::int64));
        },
        {"ctc_loss", "labels[0, 2] = 5", "[0, 5)"});
    require_error(
        [&] {
          run(ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {4, 2, 0}, {6, 4, 5}));
        },
        {"ctc_loss", "label_length[0] = 4", "[0, 3]"});
    require_error(
        [&] {
          run(ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 7, 5}));
        },
        {"ctc_loss", "logit_length[1] = 7", "[0, 6]"});
    require_error(
        [&] {
          run(ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, -1}, {6, 4, 5}));
        },
        {"ctc_loss", "label_length[2] = -1"});
    // Two bad entries: the first in batch order is named (a label of entry 0 before a length of
    // entry 1), and the blank given as -1 is checked as class 4.
    require_error(
        [&] {
          run(ctc_case({1, 4, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 7, 5}), -1);
        },
        {"ctc_loss", "labels[0, 1] = 4", "blank 4"});
    check_values(run(ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5})), kCtcLoss, 2e-6,
                 2e-6);
  }
}

TEST_CASE("nn_more: ctc_loss rejects bad arguments", "[cpu][nn_more]") {
  const tf::Tensor x = vals({6, 3, 5}, 30, 1, tf::float32);
  const CtcInputs ok = ctc_case({1, 1, 2, 3, 4, 0, 0, 0, 0}, {3, 2, 0}, {6, 4, 5});
  auto run = [&](const CtcInputs& in, int blank = 0) {
    tf::nn::ctc_loss(in.labels, x, in.label_length, in.logit_length, true, blank);
  };
  require_error([&] { run(ok, 5); }, {"ctc_loss", "blank_index 5", "5 classes"});
  require_error(
      [&] {
        tf::nn::ctc_loss(ok.labels, vals({6, 5}, 0), ok.label_length, ok.logit_length);
      },
      {"ctc_loss", "(6, 5)"});
  require_error(
      [&] {
        tf::nn::ctc_loss(tf::constant<int32_t>({1, 2}, {1, 2}), x, ok.label_length,
                         ok.logit_length);
      },
      {"ctc_loss", "(1, 2)", "(6, 3, 5)"});
  require_error(
      [&] {
        tf::nn::ctc_loss(ok.labels, x, tf::constant<int32_t>({1, 2}), ok.logit_length);
      },
      {"ctc_loss", "(2,)"});
  require_error([&] { tf::nn::ctc_loss(ok.labels, x, x, ok.logit_length); },
                {"ctc_loss", "label_length", "float32"});
}

TEST_CASE("nn_more: traced with an unknown batch equals eager", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor fil = vals({3, 3, 4}, 9, 1.0 / 3);
    auto body = [fil](const tf::Tensor& x) {
      const tf::Tensor y = tf::nn::conv1d(x, fil, 2, "SAME");                    // (N, 4, 4)
      const tf::Tensor p = tf::nn::max_pool1d(tf::nn::crelu(y), 2, 2, "VALID");  // (N, 2, 8)
      return tf::nn::softmax_cross_entropy_with_logits(tf::nn::softmax(p), tf::nn::relu6(p));
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 7, 3}, tf::float64)};
    auto f = tf::function(body, opts);
    for (int64_t n : {2, 3}) {
      const tf::Tensor x = vals({n, 7, 3}, 8);
      tf::testing::check_close(f(x), body(x), 1e-12, 1e-12);
    }
  }
}

TEST_CASE("nn_more: float16 and bfloat16 inputs follow float32", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    using Op = std::function<tf::Tensor(const tf::Tensor&)>;
    const std::vector<std::pair<const char*, Op>> ops = {
        {"relu6", [](const tf::Tensor& x) { return tf::nn::relu6(x); }},
        {"crelu", [](const tf::Tensor& x) { return tf::nn::crelu(x); }},
        {"log_sigmoid", [](const tf::Tensor& x) { return tf::nn::log_sigmoid(x); }},
        {"l2_loss", [](const tf::Tensor& x) { return tf::nn::l2_loss(x); }},
        {"max_pool1d", [](const tf::Tensor& x) { return tf::nn::max_pool1d(x, 2, 2, "SAME"); }},
        {"avg_pool1d", [](const tf::Tensor& x) { return tf::nn::avg_pool1d(x, 2, 2, "SAME"); }},
        {"conv1d",
         [](const tf::Tensor& x) {
           return tf::nn::conv1d(x, tf::cast(vals({2, 4, 3}, 2, 0.2), x.dtype()), 1, "SAME");
         }},
        {"local_response_normalization",
         [](const tf::Tensor& x) {
           return tf::nn::local_response_normalization(tf::reshape(x, {2, 1, 2, 4}), 1);
         }},
        {"space_to_depth",
         [](const tf::Tensor& x) { return tf::nn::space_to_depth(tf::reshape(x, {1, 2, 4, 2}), 2); }},
    };
    const tf::Tensor x32 = vals({2, 2, 4}, 1, 0.5, tf::float32);
    for (const auto& [name, op] : ops) {
      const tf::Tensor want = op(x32);
      for (tf::DType d : {tf::float16, tf::bfloat16}) {
        INFO(name << " in " << tf::dtype_name(d));
        const tf::Tensor got = op(tf::cast(x32, d));
        CHECK(got.dtype() == d);
        tf::testing::check_close(tf::cast(got, tf::float32), want, 0.05, 0.05);
      }
    }
  }
}
