// Functional models with calls of several inputs or outputs: recurrent layers' returned and
// initial states (Keras' return_state=True, initial_state=[...]), a Bidirectional's states,
// attention on a query, a value and a key with scores, causal masks and an attention_mask
// input, and Keras masks through them. Values equal Keras 3.15's on the same weights
// (tests/keras/functional_multi_reference.py prints them); traced equals eager; gradients equal the
// eager layer calls'; configs are read from Keras' JSON and written in Keras' spelling; errors name
// the layer.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/functional_multi_keras_json.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/sine_weights.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::require_error;
using tf::testing::keras::fill;
using tf::testing::keras::ramp;

namespace {

// Keras 3.15's outputs (functional_multi_reference.py prints them).
// clang-format off
const std::vector<double> kA0 = {
    0.06654709577560425, 0.09974517673254013, 0.06786811351776123, 0.09917851537466049,
    0.06848207861185074, 0.09899840503931046, 0.06874263286590576, 0.09899017959833145,
    0.06770747900009155, 0.10174492001533508, 0.06823740154504776, 0.1004234179854393,
    0.06846629083156586, 0.09986985474824905, 0.06853674352169037, 0.09967685490846634};
const std::vector<double> kA1 = {
    -0.005566123872995377, -0.0504729226231575, -0.04569350555539131, -0.0014275778084993362,
    0.026215778663754463, -0.047996412962675095, -0.07676819711923599, -0.03256431967020035};
const std::vector<double> kA2 = {
    -0.03305017948150635, -0.05245150625705719, -0.02465127967298031, -0.03274732828140259,
    -0.052436597645282745, -0.024928998202085495};
const std::vector<double> kB0 = {
    0.051197610795497894, 0.08118211477994919, 0.036528151482343674, -0.04170961678028107,
    -0.08159975707530975, -0.046467460691928864, 0.0512022040784359, 0.0811908021569252,
    0.036532945930957794, -0.04171312227845192, -0.08160834014415741, -0.04647323116660118,
    0.0512068048119545, 0.08119948953390121, 0.03653773292899132, -0.04171663522720337,
    -0.08161693066358566, -0.0464789941906929, 0.0512114018201828, 0.08120817691087723,
    0.03654252737760544, -0.04172015190124512, -0.08162551373243332, -0.04648475721478462,
    0.03788972273468971, 0.05592182278633118, 0.0225396528840065, -0.031565360724925995,
    -0.05664932727813721, -0.029650170356035233, 0.037894319742918015, 0.05593051388859749,
    0.02254444733262062, -0.031568873673677444, -0.05665791779756546, -0.0296559389680624,
    0.037898916751146317, 0.0559391975402832, 0.022549230605363846, -0.031572386622428894,
    -0.056666500866413116, -0.029661700129508972, 0.03790351748466492, 0.05594789236783981,
    0.022554025053977966, -0.031575899571180344, -0.05667509138584137, -0.02966746874153614};
const std::vector<double> kB1 = {
    0.19973477721214294, 0.19986730813980103, 0.19999991357326508, 0.2001326084136963,
    0.20026539266109467, 0.20007774233818054, 0.2000388652086258, 0.20000000298023224,
    0.19996114075183868, 0.19992227852344513, 0.20042100548744202, 0.20021028816699982,
    0.19999979436397552, 0.19978952407836914, 0.19957947731018066, 0.2007645219564438,
    0.20038153231143951, 0.19999925792217255, 0.19961774349212646, 0.1992369443178177,
    0.19972531497478485, 0.1998625546693802, 0.1999998837709427, 0.20013730227947235,
    0.20027482509613037, 0.20006921887397766, 0.20003461837768555, 0.20000000298023224,
    0.19996541738510132, 0.1999308317899704, 0.20041336119174957, 0.2002064734697342,
    0.19999979436397552, 0.19979332387447357, 0.19958707690238953, 0.20075778663158417,
    0.2003781646490097, 0.19999927282333374, 0.1996210813522339, 0.19924362003803253,
    0.20110836625099182, 0.20055264234542847, 0.19999848306179047, 0.19944582879543304,
    0.19889472424983978, 0.20145246386528015, 0.20072360336780548, 0.19999736547470093,
    0.1992737501859665, 0.19855277240276337, 0.20179691910743713, 0.20089444518089294,
    0.1999960094690323, 0.19910159707069397, 0.1982111632823944, 0.20214159786701202,
    0.2010650783777237, 0.1999942809343338, 0.19892920553684235, 0.19786979258060455,
    0.20110253989696503, 0.20054973661899567, 0.19999846816062927, 0.19944871962070465,
    0.1989004760980606, 0.20144759118556976, 0.20072117447853088, 0.19999739527702332,
    0.19927622377872467, 0.19855763018131256, 0.20179292559623718, 0.20089246332645416,
    0.1999960094690323, 0.19910356402397156, 0.19821509718894958, 0.2021385282278061,
    0.20106355845928192, 0.199994295835495, 0.19893072545528412, 0.1978728175163269};
const std::vector<double> kB2 = {
    0.07726746052503586, -0.0282061118632555, -0.10774711519479752, -0.08822591602802277,
    0.01240978017449379, 0.10163598507642746, 0.07715921103954315, -0.02598673850297928,
    -0.105240598320961, -0.08773674070835114, 0.010431872680783272, 0.09900946915149689,
    0.07705114781856537, -0.023770416155457497, -0.10273756831884384, -0.08724827319383621,
    0.008456684648990631, 0.09638660401105881, 0.07694348692893982, -0.021560775116086006,
    -0.10024216026067734, -0.08676135540008545, 0.006487429141998291, 0.09377171099185944,
    0.07640291005373001, -0.010472286492586136, -0.08771930634975433, -0.08431760221719742,
    -0.00339468102902174, 0.08064929395914078, 0.07629510760307312, -0.008260145783424377,
    -0.0852210596203804, -0.08383012562990189, -0.005366162396967411, 0.07803142070770264,
    0.07618780434131622, -0.006055878475308418, -0.08273180574178696, -0.0833444893360138,
    -0.007330636493861675, 0.0754229724407196, 0.07608118653297424, -0.0038631167262792587,
    -0.08025568723678589, -0.08286154270172119, -0.009284884668886662, 0.0728282555937767};
const std::vector<double> kB3 = {
    0.19982726871967316, 0.21649391949176788, 0.233160600066185, 0.24982725083827972,
    0.26649391651153564, 0.28316056728363037, 0.19941268861293793, 0.21607935428619385,
    0.23274600505828857, 0.24941270053386688, 0.2660793662071228, 0.28274601697921753,
    0.1989981085062027, 0.21566477417945862, 0.23233142495155334, 0.24899810552597046,
    0.2656647861003876, 0.2823314368724823, 0.19858357310295105, 0.21525022387504578,
    0.2319168895483017, 0.24858355522155762, 0.26525023579597473, 0.28191688656806946,
    0.6981689929962158, 0.7148356437683105, 0.73150235414505, 0.7481690645217896,
    0.7648357152938843, 0.7815023064613342, 0.697754442691803, 0.7144210934638977,
    0.7310878038406372, 0.7477544546127319, 0.7644211053848267, 0.7810877561569214,
    0.6973400115966797, 0.7140066623687744, 0.7306733131408691, 0.7473400235176086,
    0.7640066742897034, 0.7806733846664429, 0.6969255208969116, 0.7135921716690063,
    0.7302588224411011, 0.7469255328178406, 0.7635921835899353, 0.78025883436203};
const std::vector<double> kB4 = {
    0.20034563541412354, 0.20017266273498535, 0.1999998539686203, 0.199827179312706,
    0.19965466856956482, 0.20117637515068054, 0.2005864679813385, 0.19999828934669495,
    0.19941182434558868, 0.1988270878791809, 0.20200879871845245, 0.20099936425685883,
    0.19999496638774872, 0.19899560511112213, 0.1980012208223343, 0.20284296572208405,
    0.2014114260673523, 0.19998997449874878, 0.19857856631278992, 0.19717712700366974,
    0.20367880165576935, 0.20182256400585175, 0.19998323917388916, 0.19816069304943085,
    0.19635474681854248, 0.20451630651950836, 0.20223280787467957, 0.19997477531433105,
    0.19774197041988373, 0.1955340951681137, 0.20535552501678467, 0.20264215767383575,
    0.19996462762355804, 0.19732247292995453, 0.1947152465581894, 0.2061963975429535,
    0.20305056869983673, 0.19995273649692535, 0.19690215587615967, 0.19389812648296356};
const std::vector<double> kB5 = {
    0.0, 0.01666666567325592, 0.03333333134651184, 0.04999999701976776, 0.06666666269302368,
    0.0833333283662796, 0.05002068355679512, 0.06668734550476074, 0.08335401862859726,
    0.10002069175243378, 0.1166873574256897, 0.13335402309894562, 0.10001704841852188,
    0.1166837140917778, 0.13335037231445312, 0.15001705288887024, 0.16668371856212616,
    0.1833503693342209, 0.1499823033809662, 0.1666489541530609, 0.18331563472747803,
    0.19998230040073395, 0.21664896607398987, 0.23331564664840698, 0.4999999701976776,
    0.51666659116745, 0.5333333015441895, 0.5499999523162842, 0.5666666030883789,
    0.5833332538604736, 0.5499893426895142, 0.5666559934616089, 0.5833227038383484,
    0.5999892950057983, 0.6166560649871826, 0.6333226561546326, 0.5999764204025269,
    0.6166430711746216, 0.6333097815513611, 0.6499764323234558, 0.6666430830955505,
    0.68330979347229, 0.6499647498130798, 0.6666314005851746, 0.6832981109619141,
    0.6999648213386536, 0.7166314125061035, 0.7332980632781982};
const std::vector<double> kC0 = {
    -0.036153774708509445, -0.017588941380381584, 0.013612437061965466, 0.03220365568995476,
    -0.0402514711022377, -0.019649138674139977, 0.015003180131316185, 0.035475581884384155};
const std::vector<double> kC1 = {
    -0.04415168613195419, -0.021373901516199112, 0.01690363883972168, 0.03902369737625122,
    -0.0499705970287323, -0.024326102808117867, 0.018727747723460197, 0.043353673070669174};
const std::vector<double> kC2 = {
    -0.10772176831960678, -0.061620842665433884, 0.04113400727510452, 0.10607043653726578,
    -0.10733150690793991, -0.06070141866803169, 0.04173727706074715, 0.10580291599035263};
const std::vector<double> kD0 = {
    0.021770931780338287, 0.03793542459607124, 0.020104562863707542, -0.03487449511885643,
    -0.027597889304161072, 0.005562037695199251, -0.019489815458655357, 0.06697272509336472,
    0.08401443064212799, 0.010250086896121502, -0.04829807206988335, -0.06379103660583496};
const std::vector<double> kD1 = {
    0.021770931780338287, 0.03793542459607124, 0.020104562863707542, -0.019489815458655357,
    0.06697272509336472, 0.08401443064212799};
const std::vector<double> kD2 = {
    -0.0668470710515976, -0.05366998165845871, 0.011273330077528954, 0.020701970905065536,
    -0.09303249418735504, -0.12161795049905777};
const std::vector<double> kD3 = {
    0.009664729237556458, 0.034866612404584885, 0.028392037376761436, -0.04612107202410698,
    0.04427993297576904, 0.08312807232141495};
const std::vector<double> kE0 = {
    0.05519839748740196, 0.08877581357955933, 0.040733154863119125, -0.04475937783718109,
    -0.08910034596920013, -0.051522865891456604, 0.053866300731897354, 0.08624739199876785,
    0.039333026856184006, -0.04374393820762634, -0.08660292625427246, -0.04983958974480629,
    0.05253715440630913, 0.08372455835342407, 0.03793598338961601, -0.042730752378702164,
    -0.0841110348701477, -0.048160020262002945, 0.05121248960494995, 0.0812101662158966,
    0.0365435890853405, -0.04172099009156227, -0.0816274881362915, -0.04648604989051819,
    0.037898026406764984, 0.05593746528029442, 0.022548263892531395, -0.03157171234488487,
    -0.05666479468345642, -0.029660532251000404, 0.03790615126490593, 0.055952731519937515,
    0.022556627169251442, -0.031577929854393005, -0.05667988583445549, -0.02967061661183834,
    0.03791427984833717, 0.055967994034290314, 0.022564994171261787, -0.031584154814481735,
    -0.05669497698545456, -0.029680702835321426, 0.03792239725589752, 0.05598326399922371,
    0.02257336862385273, -0.03159037232398987, -0.05671006813645363, -0.02969079278409481};
const std::vector<double> kE1 = {
    0.4996798634529114, 0.5003200769424438, 0.0, 0.0, 0.0, 0.33328256011009216,
    0.3333333432674408, 0.33338412642478943, 0.0, 0.0, 0.2503660321235657, 0.2501218616962433,
    0.2498779147863388, 0.24963420629501343, 0.0, 0.20084242522716522, 0.2004203200340271,
    0.1999991089105606, 0.19957877695560455, 0.19915932416915894, 0.4996716380119324,
    0.5003284215927124, 0.0, 0.0, 0.0, 0.3332737982273102, 0.3333333134651184,
    0.33339282870292664, 0.0, 0.0, 0.25035881996154785, 0.25011947751045227, 0.2498803585767746,
    0.24964146316051483, 0.0, 0.20083746314048767, 0.20041786134243011, 0.199999138712883,
    0.19958126544952393, 0.1991642713546753, 0.33549025654792786, 0.0, 0.3333286643028259, 0.0,
    0.33118098974227905, 0.33624422550201416, 0.0, 0.3333248794078827, 0.0, 0.33043086528778076,
    0.33699876070022583, 0.0, 0.3333199620246887, 0.0, 0.32968130707740784, 0.3377537727355957,
    0.0, 0.33331385254859924, 0.0, 0.3289323151111603, 0.33548662066459656, 0.0,
    0.3333287239074707, 0.0, 0.33118465542793274, 0.33624520897865295, 0.0, 0.3333248794078827,
    0.0, 0.33042994141578674, 0.33700433373451233, 0.0, 0.33331993222236633, 0.0,
    0.3296757936477661, 0.3377639949321747, 0.0, 0.33331379294395447, 0.0, 0.32892224192619324};
const std::vector<double> kF0 = {
    -0.01414213515818119, -0.026598060503602028, -0.0140102319419384, 0.008694387041032314,
    -0.01751427911221981, -0.039824578911066055, -0.023953266441822052, 0.010175002738833427,
    -0.015624124556779861, -0.0462532602250576, -0.03193989023566246, 0.00794394314289093,
    -0.015624124556779861, -0.0462532602250576, -0.03193989023566246, 0.00794394314289093,
    -0.015624124556779861, -0.0462532602250576, -0.03193989023566246, 0.00794394314289093,
    0.002940809354186058, -0.02559315785765648, -0.027974799275398254, -0.006197143346071243,
    0.002940809354186058, -0.02559315785765648, -0.027974799275398254, -0.006197143346071243,
    0.011331439018249512, -0.037952721118927, -0.04900537058711052, -0.01569380983710289,
    0.018765468150377274, -0.04381607845425606, -0.06327126175165176, -0.02392619103193283,
    0.02564483880996704, -0.0464458242058754, -0.07405750453472137, -0.03149523213505745};
const std::vector<double> kF1 = {
    -0.015624124556779861, -0.0462532602250576, -0.03193989023566246, 0.00794394314289093,
    0.02564483880996704, -0.0464458242058754, -0.07405750453472137, -0.03149523213505745};
const std::vector<double> kG0 = {
    0.04666352644562721, 0.06371968984603882, 0.02219225838780403, -0.039738625288009644,
    -0.06513400375843048, -0.03064548224210739, 0.046497441828250885, 0.06202174723148346,
    0.020523540675640106, -0.039843909442424774, -0.06357905268669128, -0.028859907761216164,
    0.04633162543177605, 0.06032409518957138, 0.018854865804314613, -0.039949432015419006,
    -0.06202440708875656, -0.027074430137872696, 0.04616615176200867, 0.05862680822610855,
    0.01718624122440815, -0.04005526751279831, -0.06047015264630318, -0.025289060547947884,
    0.04500015452504158, 0.046737466007471085, 0.0055045634508132935, -0.040789201855659485,
    -0.04958156496286392, -0.012788865715265274, 0.04483422636985779, 0.04503967612981796,
    0.003835853189229965, -0.040894631296396255, -0.048026785254478455, -0.01100333034992218,
    0.04466865956783295, 0.04334227740764618, 0.002167198807001114, -0.04100038483738899,
    -0.04647240415215492, -0.009217914193868637, 0.04450354725122452, 0.041645344346761703,
    0.0004986077547073364, -0.04110654443502426, -0.04491852968931198, -0.00743262842297554};
const std::vector<double> kG1 = {
    0.9999999403953552, 0.0, 0.0, 0.0, 0.0, 0.49996328353881836, 0.5000367164611816, 0.0, 0.0,
    0.0, 0.33327609300613403, 0.3333333432674408, 0.33339059352874756, 0.0, 0.0,
    0.24992626905441284, 0.24997541308403015, 0.25002458691596985, 0.25007373094558716, 0.0,
    0.9999999403953552, 0.0, 0.0, 0.0, 0.0, 0.4998587965965271, 0.5001412630081177, 0.0, 0.0, 0.0,
    0.3331240117549896, 0.333333283662796, 0.33354267477989197, 0.0, 0.0, 0.24974089860916138,
    0.2499135434627533, 0.25008630752563477, 0.2502591907978058, 0.0, 0.9999999403953552, 0.0,
    0.0, 0.0, 0.0, 0.4995978772640228, 0.50040203332901, 0.0, 0.0, 0.0, 0.3327384889125824,
    0.33333298563957214, 0.33392849564552307, 0.0, 0.0, 0.24926483631134033, 0.24975430965423584,
    0.25024473667144775, 0.2507361173629761, 0.0, 0.9999999403953552, 0.0, 0.0, 0.0, 0.0,
    0.50049889087677, 0.49950110912323, 0.0, 0.0, 0.0, 0.3340813219547272, 0.33333277702331543,
    0.3325859010219574, 0.0, 0.0, 0.25093480944633484, 0.2503105700016022, 0.24968791007995605,
    0.2490667849779129, 0.0, 0.9999999403953552, 0.0, 0.0, 0.0, 0.0, 0.49993839859962463,
    0.500061571598053, 0.0, 0.0, 0.0, 0.33324292302131653, 0.3333333432674408, 0.3334237337112427,
    0.0, 0.0, 0.24988900125026703, 0.24996300041675568, 0.2500370144844055, 0.25011104345321655,
    0.0, 0.9999999403953552, 0.0, 0.0, 0.0, 0.0, 0.49979573488235474, 0.50020432472229, 0.0, 0.0,
    0.0, 0.3330399692058563, 0.33333325386047363, 0.33362680673599243, 0.0, 0.0,
    0.2496463805437088, 0.24988198280334473, 0.25011777877807617, 0.2503538429737091, 0.0,
    0.9999999403953552, 0.0, 0.0, 0.0, 0.0, 0.4994211792945862, 0.500578761100769, 0.0, 0.0, 0.0,
    0.3325030505657196, 0.3333326578140259, 0.3341642916202545, 0.0, 0.0, 0.2490001767873764,
    0.2496655434370041, 0.25033268332481384, 0.25100159645080566, 0.0, 0.9999999403953552, 0.0,
    0.0, 0.0, 0.0, 0.5007464289665222, 0.499253511428833, 0.0, 0.0, 0.0, 0.33441171050071716,
    0.3333321809768677, 0.33225613832473755, 0.0, 0.0, 0.2513068616390228, 0.2504335939884186,
    0.24956338107585907, 0.24869616329669952, 0.0};
// clang-format on

std::vector<tf::Tensor> seq2seq_inputs() {
  return {ramp({2, 5, 3}, 20), ramp({2, 4, 2}, 10)};
}
std::vector<tf::Tensor> cross_inputs() {
  return {ramp({2, 4, 6}, 50), ramp({2, 5, 3}, 30), ramp({2, 5, 2}, 20), ramp({2, 5, 6}, 60)};
}
tf::Tensor tokens() {
  return tf::cast(tf::convert_to_tensor(std::vector<double>{1, 2, 3, 0, 0, 4, 5, 6, 6, 0},
                                        tf::TensorShape({2, 5})),
                  tf::int32);
}

void check_seq2seq(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 3);
  CHECK(out[0].shape() == tf::TensorShape({2, 4, 2}));
  check_values(out[0], kA0, 1e-5, 1e-6);
  check_values(out[1], kA1, 1e-5, 1e-6);
  check_values(out[2], kA2, 1e-5, 1e-6);
}
void check_cross(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 6);
  CHECK(out[1].shape() == tf::TensorShape({2, 2, 4, 5}));
  CHECK(out[4].shape() == tf::TensorShape({2, 4, 5}));
  const std::vector<double>* want[] = {&kB0, &kB1, &kB2, &kB3, &kB4, &kB5};
  for (size_t i = 0; i < 6; ++i) {
    INFO("output " << i);
    check_values(out[i], *want[i], 1e-5, 1e-6);
  }
}
void check_masked_mha(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 2);
  check_values(out[0], kE0, 1e-5, 1e-6);
  check_values(out[1], kE1, 1e-5, 1e-6);
}
std::vector<tf::Tensor> masked_mha_inputs() {
  std::vector<double> m = {1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1};
  for (int i = 0; i < 4; ++i) m.insert(m.end(), {1, 0, 1, 0, 1});
  return {ramp({2, 4, 6}, 50), ramp({2, 5, 3}, 30),
          tf::cast(tf::convert_to_tensor(m, tf::TensorShape({2, 4, 5})), tf::int32)};
}
void check_masking_lstm(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 2);
  check_values(out[0], kF0, 1e-5, 1e-6);
  check_values(out[1], kF1, 1e-5, 1e-6);
}
// ramp((2, 5, 3), 20) with timesteps 3 and 4 of the first sequence and 1 of the second zero.
tf::Tensor masking_input() {
  std::vector<double> v(30);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) / 20;
  for (size_t i : {9, 10, 11, 12, 13, 14, 18, 19, 20}) v[i] = 0;
  return tf::cast(tf::convert_to_tensor(v, tf::TensorShape({2, 5, 3})), tf::float32);
}
void check_gqa(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 2);
  CHECK(out[1].shape() == tf::TensorShape({2, 4, 4, 5}));
  check_values(out[0], kG0, 1e-5, 1e-6);
  check_values(out[1], kG1, 1e-5, 1e-6);
}
std::vector<tf::Tensor> gqa_inputs() {
  return {ramp({2, 4, 6}, 50), ramp({2, 5, 6}, 30), ramp({2, 5, 6}, 20)};
}
void check_masked(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 3);
  check_values(out[0], kC0, 1e-5, 1e-6);
  check_values(out[1], kC1, 1e-5, 1e-6);
  check_values(out[2], kC2, 1e-5, 1e-6);
}
void check_bid(const std::vector<tf::Tensor>& out) {
  REQUIRE(out.size() == 4);
  check_values(out[0], kD0, 1e-5, 1e-6);
  check_values(out[1], kD1, 1e-5, 1e-6);
  check_values(out[2], kD2, 1e-5, 1e-6);
  check_values(out[3], kD3, 1e-5, 1e-6);
}

// The script's models, built here.
struct Seq2Seq {
  L::LSTM enc_lstm{4, L::LSTMOptions{.name = "enc_lstm"}};
  L::LSTM dec_lstm{4, L::LSTMOptions{.return_sequences = true, .name = "dec_lstm"}};
  L::GRU gru{3, L::GRUOptions{.name = "gru"}};
  L::Dense proj{2, L::DenseOptions{.name = "proj"}};
  K::Model model = build();

  K::Model build() const {
    auto enc = K::Input({5, 3}, std::nullopt, "enc");
    auto dec = K::Input({4, 2}, std::nullopt, "dec");
    const std::vector<K::KerasTensor> s = enc_lstm.call_with_state(enc);  // output, h, c
    auto seq = dec_lstm(dec, {s[1], s[2]});
    auto g = gru.call_with_state(seq);
    return K::Model({enc, dec}, {proj(seq), s[1], g[1]}, "seq2seq");
  }
};
K::Model cross() {
  auto q = K::Input({4, 6}, std::nullopt, "q"), v = K::Input({5, 3}, std::nullopt, "v");
  auto k = K::Input({5, 2}, std::nullopt, "k"), v2 = K::Input({5, 6}, std::nullopt, "v2");
  L::MultiHeadAttention mha(2, 3, {.name = "mha"}), causal(2, 3, {.name = "mha_causal"});
  L::Attention att({.use_scale = true, .name = "att"});
  L::AdditiveAttention add(L::AdditiveAttentionOptions{.name = "add"});
  auto o1 = mha.call_with_scores(q, v, {.key = k});
  auto o2 = causal(q, q, {.use_causal_mask = true});
  auto o3 = att.call_with_scores(q, v2);
  auto o4 = add(q, v2, {.key = v2, .use_causal_mask = true});
  return K::Model({q, v, k, v2}, {o1[0], o1[1], o2, o3[0], o3[1], o4}, "cross");
}
K::Model masked() {
  auto t = K::Input({5}, tf::int32, "tokens");
  auto e = L::Embedding(7, 3, L::EmbeddingOptions{.mask_zero = true, .name = "emb"})(t);
  L::LSTM lstm(4, L::LSTMOptions{.return_sequences = true, .name = "lstm"});
  auto s = lstm.call_with_state(e);
  auto pool = L::GlobalAveragePooling1D(L::GlobalPoolingOptions{.name = "pool"})(s[0]);
  auto att = L::MultiHeadAttention(1, 2, {.name = "self"})(s[0], e);
  auto pool2 = L::GlobalAveragePooling1D(L::GlobalPoolingOptions{.name = "pool2"})(att);
  return K::Model({t}, {pool, s[1], pool2}, "masked");
}
K::Model masked_mha() {
  auto q = K::Input({4, 6}, std::nullopt, "q"), v = K::Input({5, 3}, std::nullopt, "v");
  auto am = K::Input({4, 5}, tf::int32, "am");
  auto o =
      L::MultiHeadAttention(2, 3, {.name = "mha"}).call_with_scores(q, v, {.attention_mask = am});
  return K::Model({q, v, am}, {o[0], o[1]}, "masked_mha");
}
K::Model gqa_cross() {
  auto q = K::Input({4, 6}, std::nullopt, "q"), v = K::Input({5, 6}, std::nullopt, "v");
  auto k = K::Input({5, 6}, std::nullopt, "k");
  L::GroupQueryAttention gqa(2, 4, 2, {.name = "gqa"});
  auto o = gqa.call_with_scores(q, v, {.key = k, .use_causal_mask = true});
  return K::Model({q, v, k}, {o[0], o[1]}, "gqa_cross");
}
K::Model bid() {
  auto x = K::Input({4, 2}, std::nullopt, "x");
  L::Bidirectional bi(L::LSTM(3), "concat", "bi");
  auto s = bi.call_with_state(x);  // output, forward h, c, backward h, c
  auto d2 = L::LSTM(3, L::LSTMOptions{.name = "dec2"})(x, {s[3], s[4]});
  return K::Model({x}, {s[0], s[1], s[4], d2}, "bid");
}

std::vector<tf::TensorShape> weight_shapes(const K::Layer& m) {
  std::vector<tf::TensorShape> out;
  for (const tf::Variable& w : m.variables()) out.push_back(w.shape());
  return out;
}

}  // namespace

TEST_CASE("functional multi: an LSTM encoder's states start the decoder as in Keras 3",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    Seq2Seq t;
    K::Model& m = t.model;
    // Keras' weight order (by depth): enc_lstm, dec_lstm, proj, gru.
    CHECK(weight_shapes(m) ==
          std::vector<tf::TensorShape>{
              {3, 16}, {4, 16}, {16}, {2, 16}, {4, 16}, {16}, {4, 2}, {2}, {4, 9}, {3, 9}, {2, 9}});
    fill(m);
    const std::vector<tf::Tensor> x = seq2seq_inputs();
    check_seq2seq(m(x));
    // Traced: one graph with the state edges.
    auto f = tf::function([&](const tf::Tensor& a, const tf::Tensor& b) {
      return m(std::vector<tf::Tensor>{a, b});
    });
    check_seq2seq(f(x[0], x[1]));
    // The gradient through the states equals that of the same calls made eagerly by hand.
    std::vector<tf::Tensor> g_model, g_eager;
    {
      tf::GradientTape tape;
      const tf::Tensor y = m(x)[0];
      g_model = tape.gradient(tf::reduce_sum(y * y), m.trainable_variables());
    }
    {
      tf::GradientTape tape;
      const std::vector<tf::Tensor> s = t.enc_lstm.call_with_state(x[0]);
      const tf::Tensor seq = t.dec_lstm.call_with_state(x[1], {s[1], s[2]})[0];
      const tf::Tensor y = t.proj(seq);
      check_values(y, kA0, 1e-5, 1e-6);
      g_eager = tape.gradient(tf::reduce_sum(y * y), m.trainable_variables());
    }
    REQUIRE(g_model.size() == 11);
    for (size_t i = 0; i < 8; ++i) {
      INFO("gradient " << i);
      check_close(g_model[i], g_eager[i], 1e-5, 1e-7);
      CHECK(tf::reduce_sum(tf::abs(g_model[i])).item<float>() > 0.0f);
    }
    // The GRU's weights do not reach output 0.
    for (size_t i = 8; i < 11; ++i) CHECK(!g_model[i].defined());
  }
}

TEST_CASE("functional multi: state tensors carry Keras' history, shapes and summary",
          "[cpu][keras][functional]") {
  Seq2Seq t;
  const K::Model& m = t.model;
  auto* f = dynamic_cast<K::detail::FunctionalImpl*>(&m.impl());
  REQUIRE(f != nullptr);
  const K::KerasTensor h = f->outputs()[1];
  CHECK(h.layer().name() == "enc_lstm");
  CHECK(h.node_index() == 0);
  CHECK(h.tensor_index() == 1);
  CHECK(h.shape() == tf::TensorShape({tf::None, 4}));
  CHECK(f->outputs()[2].tensor_index() == 1);
  CHECK(f->outputs()[0].tensor_index() == 0);
  auto* fm = dynamic_cast<K::detail::FunctionalImpl*>(&m.impl());
  // Keras 3.15 lists the shapes of a call of several outputs, and the connections name the
  // state tensors (summary() wraps both as Keras does).
  CHECK(fm->summary_shapes() == std::vector<std::string>{"", "",
                                                         "[(None, 4), (None, 4), (None, 4)]", "",
                                                         "", "[(None, 3), (None, 3)]"});
  CHECK(fm->summary_connections()[3] == "dec[0][0], enc_lstm[0][1], enc_lstm[0][2]");
  const std::string s = m.summary_string(108);
  INFO(s);
  CHECK(s.find("[(None, 4),") != std::string::npos);
  CHECK(s.find("enc_lstm[0][2]") != std::string::npos);
  // compute_output_shape runs the shapes through the state edges.
  auto x = K::Input({tf::None, 3});
  L::SimpleRNN a(5), b(5, L::SimpleRNNOptions{.return_sequences = true});
  auto st = a.call_with_state(x);
  K::Model chain(x, b(x, {st[1]}));
  CHECK(chain.impl().compute_output_shape(tf::TensorShape({7, 9, 3})) ==
        tf::TensorShape({7, 9, 5}));
  CHECK(chain(ramp({2, 6, 3}, 10)).shape() == tf::TensorShape({2, 6, 5}));
}

TEST_CASE("functional multi: cross-attention, scores and causal masks match Keras 3",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::Model m = cross();
    fill(m);
    const std::vector<tf::Tensor> x = cross_inputs();
    check_cross(m(x));
    auto f = tf::function(
        [&](const tf::Tensor& a, const tf::Tensor& b, const tf::Tensor& c, const tf::Tensor& d) {
          return m(std::vector<tf::Tensor>{a, b, c, d});
        });
    check_cross(f(x[0], x[1], x[2], x[3]));
    auto* fi = dynamic_cast<K::detail::FunctionalImpl*>(&m.impl());
    REQUIRE(fi != nullptr);
    CHECK(fi->outputs()[1].shape() == tf::TensorShape({tf::None, 2, 4, 5}));
    CHECK(fi->outputs()[4].shape() == tf::TensorShape({tf::None, 4, 5}));
    CHECK(fi->outputs()[0].shape() == tf::TensorShape({tf::None, 4, 6}));
  }
}

TEST_CASE("functional multi: an attention_mask input of the graph masks the scores as in Keras 3",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::Model m = masked_mha();
    fill(m);
    check_masked_mha(m(masked_mha_inputs()));
    const std::string json = K::models::to_json(m);
    CHECK(json.find("\"attention_mask\":{\"class_name\":\"__keras_tensor__\"") !=
          std::string::npos);
  }
}

TEST_CASE("functional multi: GroupQueryAttention on a query, a value and a key matches Keras 3",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::Model m = gqa_cross();
    fill(m);
    check_gqa(m(gqa_inputs()));
  }
}

TEST_CASE("functional multi: Keras masks reach the recurrent and attention calls as in Keras 3",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::Model m = masked();
    fill(m);
    check_masked(m(std::vector<tf::Tensor>{tokens()}));
  }
}

TEST_CASE("functional multi: a Bidirectional's states feed another layer as in Keras 3",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::Model m = bid();
    fill(m);
    check_bid(m(std::vector<tf::Tensor>{ramp({2, 4, 2}, 10)}));
  }
}

TEST_CASE(
    "functional multi: Keras 3's configs with states and attention calls load and round "
    "trip",
    "[cpu][keras][functional][serialization]") {
  struct Case {
    const char* json;
    std::vector<tf::Tensor> inputs;
    void (*check)(const std::vector<tf::Tensor>&);
  };
  const std::vector<Case> cases = {
      {functional_multi::kJsonA, seq2seq_inputs(), check_seq2seq},
      {functional_multi::kJsonB, cross_inputs(), check_cross},
      // Keras writes the Embedding's mask as a NotEqual operation and mask arguments.
      {functional_multi::kJsonC, {tokens()}, check_masked},
      {functional_multi::kJsonD, {ramp({2, 4, 2}, 10)}, check_bid},
      // Keras writes Masking's mask as NotEqual and Any operations and mask arguments.
      {functional_multi::kJsonF, {masking_input()}, check_masking_lstm},
      {functional_multi::kJsonE, masked_mha_inputs(), check_masked_mha},
      {functional_multi::kJsonG, gqa_inputs(), check_gqa}};
  for (const Case& c : cases) {
    K::Model m = K::models::model_from_json(c.json);
    INFO(m.name());
    fill(m);
    c.check(m(c.inputs));
    // tapeflow writes Keras' spelling back, and reads its own.
    const std::string written = K::models::to_json(m);
    K::Model again = K::models::model_from_json(written);
    fill(again);
    c.check(again(c.inputs));
    CHECK(K::models::to_json(again) == written);
    // save_model keeps the weights by layer name; load_model gives the same outputs.
    tf::testing::TempDir dir;
    K::models::save_model(m, dir / "multi.tfmodel");
    c.check(K::models::load_model(dir / "multi.tfmodel")(c.inputs));
  }
  // The spelling: return_state in the layer, initial_state as a keyword, the tensor index.
  const std::string a = K::models::to_json(Seq2Seq().model);
  CHECK(a.find("\"return_state\":true") != std::string::npos);
  CHECK(a.find("\"initial_state\":[{\"class_name\":\"__keras_tensor__\"") != std::string::npos);
  CHECK(a.find("\"keras_history\":[\"enc_lstm\",0,2]") != std::string::npos);
  CHECK(a.find("\"output_layers\":[[\"proj\",0,0],[\"enc_lstm\",0,1],[\"gru\",0,1]]") !=
        std::string::npos);
  const std::string b = K::models::to_json(cross());
  CHECK(b.find("\"return_attention_scores\":true") != std::string::npos);
  CHECK(b.find("\"use_causal_mask\":true") != std::string::npos);
  CHECK(b.find("\"key_shape\":[null,5,2]") != std::string::npos);
  CHECK(b.find("\"input_shape\":[[null,4,6],[null,5,6]]") != std::string::npos);
}

TEST_CASE("functional multi: a sequence-to-sequence model trains with fit",
          "[cpu][cuda][keras][functional]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    Seq2Seq t;
    // One output (the decoder's projection) to train on.
    auto* fi = dynamic_cast<K::detail::FunctionalImpl*>(&t.model.impl());
    REQUIRE(fi != nullptr);
    K::Model m(fi->inputs(), {fi->outputs()[0]}, "trainable");
    fill(m);
    m.compile(K::optimizers::Adam(0.05), "mse");
    const std::vector<tf::Tensor> x = seq2seq_inputs();
    const tf::Tensor y = ramp({2, 4, 2}, 40);
    const tf::Tensor kernel_before = tf::cast(t.enc_lstm.kernel(), tf::float64);
    const K::History h =
        m.fit(x, std::vector<tf::Tensor>{y}, {.epochs = 8, .batch_size = 2, .verbose = 0});
    const std::vector<double>& loss = h.history.at("loss");
    REQUIRE(loss.size() == 8);
    CHECK(loss.back() < 0.5 * loss.front());
    // The encoder's weights moved: the gradient flows through the states.
    const tf::Tensor moved = tf::cast(t.enc_lstm.kernel(), tf::float64) - kernel_before;
    CHECK(tf::reduce_max(tf::abs(moved)).item<double>() > 1e-3);
  }
}

TEST_CASE("functional multi: bad calls name the layer and what is wrong",
          "[cpu][keras][functional]") {
  auto x = K::Input({5, 3});
  L::LSTM lstm(4);
  L::GRU gru(4);
  auto s = lstm.call_with_state(x);
  require_error([&] { (void)gru(x, {s[1], s[2]}); }, {"gru", "has 1 states", "given 2"});
  auto wide = K::Input({7});
  require_error(
      [&] {
        (void)lstm(x, {wide, wide});
      },
      {"initial state 0", "(batch, 4)", "(None, 7)"});
  require_error(
      [&] {
        (void)lstm.call_with_state(x, {s[1], K::KerasTensor()});
      },
      {"input 2", "empty KerasTensor"});
  L::MultiHeadAttention mha(2, 3);
  auto q4 = K::Input({2, 4, 6});
  require_error([&] { (void)mha.call_with_scores(q4, q4); },
                {"scores of a symbolic call", "(None, 2, 4, 6)"});
  L::Attention att;
  auto v = K::Input({5, 6}), k = K::Input({4, 6});
  require_error(
      [&] {
        (void)att(K::Input({4, 6}), v, {.attention_mask = K::Input({4, 5})});
      },
      {"takes no attention_mask"});
  require_error(
      [&] {
        (void)att(K::Input({4, 6}), v, {.key = k});
      },
      {"value and the key need one length", "(None, 5, 6)", "(None, 4, 6)"});
  // A config taking an output that the layer's call does not make.
  std::string json = functional_multi::kJsonA;
  const std::string from = "\"return_state\": true";
  const size_t at = json.find(from);
  REQUIRE(at != std::string::npos);
  json.replace(at, from.size(), "\"return_state\": false");
  require_error([&] { (void)K::models::model_from_json(json); },
                {"takes output 1 of layer \"enc_lstm\" node 0, which has 1 output"});
  // Keras' mask operation read as a layer input rather than a mask argument.
  std::string masked = functional_multi::kJsonC;
  const std::string pool_in = "\"keras_history\": [\"lstm\", 0, 0]}}], \"kwargs\": {\"mask\"";
  const size_t p = masked.find(pool_in);
  REQUIRE(p != std::string::npos);
  masked.replace(p, pool_in.size(),
                 "\"keras_history\": [\"not_equal\", 0, 0]}}], \"kwargs\": {\"mask\"");
  require_error([&] { (void)K::models::model_from_json(masked); },
                {"mask operation \"not_equal\"", "only as a mask argument"});
}
