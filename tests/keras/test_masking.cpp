// Keras masking end to end: Embedding(mask_zero) and Masking make masks, Sequential and
// functional models carry them, recurrent, pooling and attention layers consume them, against
// Keras 3.15 on identical weights (outputs, masks and gradients); a custom layer that opts in;
// gradients against central finite differences; traced against eager; the errors.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_masking.h"
#include "keras/layers_merge.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace layers = tf::keras::layers;
using tf::testing::check_values;

namespace {

// From TF 2.21 / Keras 3.15.1 (CPU, float32), /tmp/masking/ref.py: functional models on
// Input((5,), int32) called on kIds, every weight set (model.set_weights) to
// 0.5 sin(0.7 i + k) over its flat index i, k the weight's index in model.weights:
//   imdb: Embedding(10, 3, mask_zero=True) -> LSTM(4) -> Dense(1); imdb_grad_*: the gradients of
//     sum(y * y) (tf.GradientTape) for embeddings, kernel, recurrent_kernel, bias, then Dense's
//     kernel and bias ("2").
//   gru_seq: Embedding(10, 2, mask_zero) -> GRU(3, return_sequences=True)
//   rnn_back_seq: ... -> SimpleRNN(3, return_sequences=True, go_backwards=True)
//   lstm_zero_last / lstm_zero_seq: ... -> LSTM(2, zero_output_for_mask=True[,
//     return_sequences=True])
//   bidi_seq: ... -> Bidirectional(LSTM(2, return_sequences=True)); bidi_gru_sum: ... ->
//     Bidirectional(GRU(2), merge_mode="sum")
//   state_*: ... -> LSTM(3, return_state=True, go_backwards=True): output, h, c
//   gap / gmp: Embedding(10, 3, mask_zero) -> GlobalAveragePooling1D / GlobalMaxPooling1D
//   dense_pass: Embedding(10, 3, mask_zero) -> Dense(2)
//   mha: Embedding(10, 4, mask_zero) -> MultiHeadAttention(2, 3)(e, e)
//   att / add_att: Embedding(10, 3, mask_zero) -> Attention()([e, e]) / AdditiveAttention()
//   masking_*: Input((3, 2)) -> Masking(-1.0) -> SimpleRNN(2, return_sequences=True) on kSeq.
// *_mask: the output's _keras_mask (as 0/1).
// (Bidirectional layers get explicit names here: other tests' summaries depend on the automatic
// numbering of "bidirectional_N".)
const std::map<std::string, std::vector<double>> kKeras = {
    {"imdb_y", {-0.4860914, -0.4865133, -0.486949}},
    {"imdb_grad_embeddings",
     {0,          0,           0,           0.03179774, -0.01994577, -0.03989593,
      0.04138951, -0.02204866, -0.05034149, 0.09543483, -0.01159428, -0.1001422,
      0.03177341, -0.0199074,  -0.03985601, 0.041104,   -0.02218062, -0.05010955,
      0.09598683, -0.01151691, -0.1006628,  0.03174708, -0.01986823, -0.03981378,
      0.04081896, -0.02231193, -0.04987782, 0.09654166, -0.01143685, -0.1011851}},
    {"imdb_grad_kernel",
     {-0.0103607,    -0.0007896791, 0.009322653,  -0.002671503, -0.005959513, -0.007520789,
      -0.0007973618, -0.0009695393, -0.007610392, -0.02195144,  -0.006318236, -0.01264404,
      -0.003983805,  -0.002213311,  -0.002572099, -0.006629802, -0.01058048,  -0.01131473,
      -0.002568293,  -0.009087091,  0.007642209,  0.0003498613, -0.005524612, -0.003962075,
      0.03240351,    0.03023805,    0.04731898,   0.0186776,    0.0165439,    0.003001936,
      -0.01764587,   -0.01430814,   -0.00582409,  -0.01651829,  -0.01325133,  -0.01122888,
      0.01764968,    0.008055965,   -0.00765355,  -0.005091184, 0.05717754,   0.06820612,
      0.07870132,    0.04121488,    0.02929074,   0.006805326,  -0.02442052,  -0.01525714}},
    {"imdb_grad_recurrent_kernel",
     {0.005904545,  0.0004985379,  -0.006731384,  -0.0002884625, 0.006861156,   0.004992429,
      -0.001664559, -0.0009369935, 0.03445403,    0.0540429,     0.03471892,    0.004993328,
      0.01078598,   0.003247522,   -0.005415637,  -0.0007333892, 0.003585996,   0.0005900664,
      -0.003711571, 5.620166e-05,  0.00368129,    0.002789235,   -0.0008152025, -0.0004408013,
      0.0188792,    0.03007622,    0.01863496,    0.002233219,   0.005717851,   0.001765566,
      -0.002661134, -9.718127e-05, -0.0006438975, 0.0008325842,  0.001896764,   0.0007458862,
      -0.00224766,  -0.001294053,  0.0007858027,  0.0004981713,  -0.01007295,   -0.01436985,
      -0.01135268,  -0.003012481,  -0.003747299,  -0.0009924335, 0.002529266,   0.001155102,
      -0.005116991, 0.0009571728,  0.007654685,   0.00136899,    -0.008294499,  -0.005500639,
      0.002388982,  0.001432238,   -0.03975039,   -0.0601107,    -0.04193911,   -0.008192746,
      -0.0133743,   -0.003814073,  0.007729796,   0.002319504}},
    {"imdb_grad_bias",
     {0.0745998, 0.03043847, -0.05949042, 0.008200221, 0.06044358, 0.04574317, -0.01342287,
      -0.007267798, 0.3885186, 0.6245731, 0.3622185, -0.01260869, 0.1018514, 0.03195887,
      -0.04435922, 0.001221939}},
    {"imdb_grad_kernel2", {-0.3466026, -0.07905255, 0.2703637, 0.5008395}},
    {"imdb_grad_bias2", {-2.919107}},
    {"gru_seq_y",
     {0.0392307, 0.2364739, 0.3856613, 0.2027327, 0.4642754, 0.5505894, 0.4172007, 0.6483707,
      0.6221073, 0.4172007, 0.6483707, 0.6221073, 0.4172007, 0.6483707, 0.6221073, 0,
      0,         0,         0,         0,         0,         0.2841008, 0.4274816, 0.3622719,
      0.2361538, 0.4559094, 0.5806506, 0.2274176, 0.4903253, 0.6520603, 0.3489331, 0.4758015,
      0.3483962, 0.3489331, 0.4758015, 0.3483962, 0.4855265, 0.6391638, 0.5795819, 0.4351717,
      0.5993006, 0.6675509, 0.4351717, 0.5993006, 0.6675509}},
    {"gru_seq_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"rnn_back_seq_y",
     {0,          0,          0,          0,          0,          0,          -0.1223876,
      -0.3191635, -0.3652113, 0.2236506,  -0.1006791, -0.364466,  0.4176613,  -0.1587674,
      -0.5978483, 0.2483533,  -0.101509,  -0.3880231, 0.3710206,  -0.2559677, -0.658443,
      0.2342691,  -0.3864752, -0.6974291, 0.2342691,  -0.3864752, -0.6974291, 0.2342691,
      -0.3864752, -0.6974291, 0,          0,          0,          0.08439228, -0.3443353,
      -0.5606321, 0.06061357, -0.367668,  -0.572157,  0.06061357, -0.367668,  -0.572157,
      0.1839569,  -0.1883343, -0.4443579}},
    {"rnn_back_seq_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"lstm_zero_last_y", {0, 0, -0.1319364, -0.04437963, 0, 0}},
    {"lstm_zero_seq_y",
     {-0.1023502,  -0.07798108, -0.1086894,  0.006559883, -0.05404601, 0.1071758,
      0,           0,           0,           0,           0,           0,
      0,           0,           -0.04111208, 0.0637337,   -0.1053611,  -0.04090999,
      -0.1319364,  -0.04437963, -0.0575227,  0.07954906,  0,           0,
      -0.04642636, 0.1215439,   -0.09073184, 0.03031105,  0,           0}},
    {"lstm_zero_seq_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"bidi_seq_y", {-0.1023502,  -0.07798108, 0.1361265,   0.02008827,  -0.1086894,  0.006559883,
                    0.08856913,  -0.05679268, -0.05404601, 0.1071758,   0.03570909,  -0.06760757,
                    0,           0,           0,           0,           0,           0,
                    0,           0,           0,           0,           0,           0,
                    0,           0,           0,           0,           -0.04111208, 0.0637337,
                    0.1080195,   0.02221642,  -0.1053611,  -0.04090999, 0.1168307,   0.08199261,
                    -0.1319364,  -0.04437963, 0.07394081,  0.0406409,   -0.0575227,  0.07954906,
                    0.09152659,  -0.08068253, 0,           0,           0,           0,
                    -0.04642636, 0.1215439,   0.06391302,  -0.05490718, -0.09073184, 0.03031105,
                    0.05415341,  0.01191225,  0,           0,           0,           0}},
    {"bidi_seq_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"bidi_gru_sum_y", {0.07810926, 0.2966097, 0.07524419, 0.0720574, 0.300529, 0.3111584}},
    {"state_o",
     {0.1533336, 0.1536123, 0.1001032, 0.1664614, 0.1380234, 0.0934752, 0.1382708, 0.1229796,
      0.07474971}},
    {"state_h",
     {0.1533336, 0.1536123, 0.1001032, 0.1664614, 0.1380234, 0.0934752, 0.1382708, 0.1229796,
      0.07474971}},
    {"state_c",
     {0.2765845, 0.3505183, 0.2798536, 0.3582016, 0.3682454, 0.2723238, 0.2839554, 0.2850121,
      0.1827763}},
    {"gap_y",
     {0.001407916, 0.001587013, 0.001019726, 0.001421026, 0.001581738, 0.0009985169, 0.001433743,
      0.001575997, 0.0009770194}},
    {"gmp_y",
     {0.4316047, 0.3284933, 0.4940841, 0.4272994, 0.3347849, 0.4953037, 0.4228734, 0.3409818,
      0.4963832}},
    {"dense_pass_y", {0.7464656, 0.5169011,   0.201956,  0.14167,      0.4179737, -0.01680319,
                      0.4126962, -0.02044001, 0.4126962, -0.02044001,  0.4126962, -0.02044001,
                      0.4126962, -0.02044001, 0.7443718, 0.518437,     0.1987925, 0.1364823,
                      0.4232616, -0.01310122, 0.7421962, 0.5198869,    0.4126962, -0.02044001,
                      0.1957013, 0.1313165,   0.4285583, -0.009335101, 0.4126962, -0.02044001}},
    {"dense_pass_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"mha_y",
     {0.3990234, 0.2391146, -0.03325348, -0.2899819, 0.3996035, 0.2397768, -0.03282056, -0.2899819,
      0.3989694, 0.2390305, -0.03332814, -0.2900121, 0.3872557, 0.2319933, -0.03237906, -0.2815231,
      0.3872557, 0.2319933, -0.03237906, -0.2815231, 0.3775209, 0.227022,  -0.03024891, -0.2732933,
      0.3775209, 0.227022,  -0.03024891, -0.2732933, 0.3829978, 0.2311278, -0.02944523, -0.2761697,
      0.3825088, 0.230572,  -0.02980638, -0.2761663, 0.3828606, 0.2309887, -0.02952087, -0.2761463,
      0.3874832, 0.2321441, -0.03237601, -0.2816692, 0.38113,   0.2283802, -0.03178044, -0.2769942,
      0.3874778, 0.2321451, -0.03236911, -0.2816596, 0.3875059, 0.2321723, -0.03235547, -0.281666,
      0.38113,   0.2283802, -0.03178043, -0.2769942}},
    {"mha_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"att_y", {0.06810626, 0.04489976, 0.000576213,
               -0.1196633, -0.1428901, -0.09891344,
               0.03702112, 0.08771078, 0.09714869,
               0,          0,          0,
               0,          0,          0,
               0,          0,          0,
               0,          0,          0,
               0.0666713,  0.0428569,  -0.001113772,
               -0.1199657, -0.142149,  -0.09747749,
               0.03862829, 0.08952092, 0.09831046,
               0.06522407, 0.04080275, -0.00280875,
               0,          0,          0,
               -0.120209,  -0.1413503, -0.09601238,
               0.0402373,  0.09132234, 0.09945704,
               0,          0,          0}},
    {"att_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"add_att_y",
     {0.07925125, 0.1106225,  0.08996628, 0.06984625, 0.09384124, 0.07370122, 0.08773123,
      0.1043576,  0.07190296, 0,          0,          0,          0,          0,
      0,          0,          0,          0,          0,          0,          0,
      0.07950383, 0.1111542,  0.09052707, 0.0696133,  0.09425782, 0.07457139, 0.08736609,
      0.1042835,  0.07215473, 0.07978263, 0.1117026,  0.09108712, 0,          0,
      0,          0.06942544, 0.09471531, 0.07545909, 0.08702278, 0.1042325,  0.07242012,
      0,          0,          0}},
    {"add_att_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    // /tmp/mk/ref2.py, same weights: bn: Embedding(10, 3, mask_zero) -> BatchNormalization(
    //   momentum=0.9) called with training=True (output, moving statistics after the call);
    // gn_lstm: Embedding(10, 4, mask_zero) -> GroupNormalization(2) -> LSTM(2);
    // softmax_*: Softmax()(x, mask=...) on x = 2 sin(1.3 i) (2, 3, 4) with a (2, 1, 4) mask
    //   (softmax_b) or the full mask cos(0.9 i) > 0 (softmax_full; softmax_axis1: axis=1);
    // td: Input((2, 3), int32) -> Embedding(10, 4, mask_zero) -> TimeDistributed(LSTM(3)) on
    //   kIds3; td_dense_lstm: Embedding(10, 3, mask_zero) -> TimeDistributed(Dense(4)) ->
    //   LSTM(2).
    {"bn_y", {0.9636476, 0.4447654, -0.2957253, -0.06266227, -0.4726707, -0.4292603, 0.4629147, 0.6689979, 0.3417347, 0.4529675, 0.6601059, 0.3404405, 0.4529675, 0.6601059, 0.3404405, 0.4529675, 0.6601059, 0.3404405, 0.4529675, 0.6601059, 0.3404405, 0.9585537, 0.4337001, -0.3031979, -0.06746611, -0.4703901, -0.4230095, 0.4728591, 0.6777605, 0.342896, 0.9533167, 0.422572, -0.3106212, 0.4529675, 0.6601059, 0.3404405, -0.07212284, -0.4679168, -0.4166754, 0.4827979, 0.6863913, 0.3439239, 0.4529675, 0.6601059, 0.3404405}},
    {"bn_moving_mean", {0.06364609, -0.2382681, -0.4281211}},
    {"bn_moving_variance", {-0.3280169, -0.4373913, -0.3352633}},
    {"bn_mask", {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"gn_lstm_y", {0.1541344, 0.2118577, 0.1477073, 0.1657238, 0.09865314, 0.1887337}},
    {"softmax_b", {0.1231167, 0.8457711, 0, 0.03111221, 0.04744074, 0.4269346, 0, 0.5256247, 0.02511094, 0.0286453, 0, 0.9462438, 0, 0.3433091, 0.656691, 0, 0, 0.8527781, 0.147222, 0, 0, 0.9084235, 0.09157653, 0}},
    {"softmax_full_mask", {1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0}},
    {"softmax_full", {0.1270701, 0.8729299, 0, 0, 0, 0, 0.7955792, 0.2044208, 1, 0, 0, 0, 0, 0.0409161, 0.07826544, 0.8808184, 0, 0, 0, 0, 0.4438421, 0.5052269, 0.05093101, 0}},
    {"softmax_axis1", {0.8396536, 0.9999999, 0, 0, 0, 0, 0.9999999, 0.9999999, 0.1603464, 0, 0, 0, 0, 0.0289473, 0.3612863, 0.9999999, 0, 0, 0, 0, 0.9999999, 0.9710528, 0.6387137, 0}},
    {"td_y", {0.128132, 0.1171236, 0.07568732, 0.1212322, 0.09966091, 0.05832956, 0.1485646, 0.1348131, 0.08937848, 0, 0, 0}},
    {"td_dense_lstm_y", {0.1449466, 0.1910314, 0.1447833, 0.1910755, 0.1446223, 0.1911201}},
    {"masking_out", {1, 2, 0, 0, 3, -1, 0, 0, 0, 0, 0.5, 0.25}},
    {"masking_mask", {1, 0, 1, 0, 0, 1}},
    {"masking_rnn",
     {0.8937175, 0.885137, 0.8937175, 0.885137, 0.5627723, 0.836664, 0, 0, 0, 0, 0.5210864,
      0.4483598}},
};

const std::vector<double>& keras(const std::string& name) {
  auto it = kKeras.find(name);
  REQUIRE(it != kKeras.end());
  return it->second;
}

tf::Tensor ids() {
  return tf::convert_to_tensor(std::vector<int32_t>{1, 2, 3, 0, 0, 0, 0, 4, 5, 6, 7, 0, 8, 9, 0},
                               {3, 5});
}
const std::vector<double> kIdsMask = {1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0};

// Sets every weight of `layer` to 0.5 sin(0.7 i + k) (the reference's weights).
void set_pattern_weights(const K::Layer& layer) {
  std::vector<tf::Tensor> ws;
  for (const tf::Variable& v : layer.variables()) {
    std::vector<double> x(static_cast<size_t>(v.shape().num_elements()));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = 0.5 * std::sin(0.7 * double(i) + double(ws.size()));
    ws.push_back(tf::cast(tf::convert_to_tensor(x, v.shape()), v.dtype()));
  }
  layer.set_weights(ws);
}

// A functional model Input((5,), int32) -> `body`, with the reference's weights.
K::Model id_model(const std::function<K::KerasTensor(const K::KerasTensor&)>& body) {
  K::KerasTensor in = K::Input({5}, tf::int32);
  K::Model m(in, body(in));
  set_pattern_weights(m);
  return m;
}

void check_mask(const tf::Tensor& mask, const std::vector<double>& want) {
  REQUIRE(mask.defined());
  REQUIRE(mask.dtype() == tf::bool_);
  check_values(tf::cast(mask, tf::float32), want, 0, 0);
}

struct Float64Layers {
  Float64Layers() { K::backend::set_floatx(tf::float64); }
  ~Float64Layers() { K::backend::set_floatx(tf::float32); }
};

std::vector<double> vals(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

}  // namespace

TEST_CASE("masking: Embedding mask_zero into LSTM matches Keras with gradients",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    layers::Embedding emb(10, 3, {.mask_zero = true});
    REQUIRE(emb.mask_zero());
    REQUIRE(emb.supports_masking());
    layers::LSTM lstm(4);
    layers::Dense dense(1);
    K::Model functional = id_model([&](const K::KerasTensor& x) { return dense(lstm(emb(x))); });
    const tf::Tensor x = ids();
    tf::GradientTape tape;
    const tf::Tensor y = functional(x);
    check_values(y, keras("imdb_y"), 1e-5, 1e-6);
    const tf::Tensor loss = tf::reduce_sum(y * y);
    const std::vector<tf::Tensor> g = tape.gradient(loss, functional.trainable_variables());
    REQUIRE(g.size() == 6);
    const char* names[] = {"imdb_grad_embeddings",       "imdb_grad_kernel",
                           "imdb_grad_recurrent_kernel", "imdb_grad_bias",
                           "imdb_grad_kernel2",          "imdb_grad_bias2"};
    for (size_t i = 0; i < g.size(); ++i) {
      CAPTURE(names[i]);
      check_values(g[i], keras(names[i]), 1e-4, 1e-6);
    }
    // The same layers in a Sequential: the mask travels from Embedding to LSTM there too; the
    // mask ends at the LSTM (no return_sequences).
    K::Sequential seq({emb, lstm, dense});
    check_values(seq(x), keras("imdb_y"), 1e-5, 1e-6);
    const K::MaskedTensor r = seq.call_with_mask(x, tf::Tensor());
    REQUIRE_FALSE(r.mask.defined());
    // Without mask_zero the padding is read as id 0 and the output differs.
    layers::Embedding plain(10, 3);
    K::Sequential unmasked({plain, layers::LSTM(4), layers::Dense(1)});
    unmasked.build({tf::None, 5});
    set_pattern_weights(unmasked);
    const std::vector<double> u = vals(unmasked(x));
    REQUIRE(std::abs(u[0] - keras("imdb_y")[0]) > 1e-4);
  }
}

TEST_CASE("masking: recurrent layers with masks match Keras", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    auto emb = [] { return layers::Embedding(10, 2, {.mask_zero = true}); };
    struct Case {
      std::string name;
      K::Layer layer;
      bool sequences;
    };
    const std::vector<Case> cases = {
        {"gru_seq", layers::GRU(3, {.return_sequences = true}), true},
        {"rnn_back_seq", layers::SimpleRNN(3, {.return_sequences = true, .go_backwards = true}),
         true},
        {"lstm_zero_last", layers::LSTM(2, {.zero_output_for_mask = true}), false},
        {"lstm_zero_seq", layers::LSTM(2, {.return_sequences = true, .zero_output_for_mask = true}),
         true},
        {"bidi_seq",
         layers::Bidirectional(layers::LSTM(2, {.return_sequences = true}), "concat", "bidi_seq"),
         true},
        {"bidi_gru_sum", layers::Bidirectional(layers::GRU(2), "sum", "bidi_gru_sum"), false},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      K::Model m = id_model([&](const K::KerasTensor& x) { return c.layer(emb()(x)); });
      const K::MaskedTensor r = K::Layer(m).call_with_mask(ids(), tf::Tensor());
      check_values(r.output, keras(c.name + "_y"), 1e-5, 1e-6);
      // Keras: return_sequences passes the mask on, the last output ends it.
      if (c.sequences)
        check_mask(r.mask, kIdsMask);
      else
        REQUIRE_FALSE(r.mask.defined());
    }
  }
}

TEST_CASE("masking: an explicit mask argument with return_state and go_backwards",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // A subclassed model's call: the user passes Embedding's mask to the LSTM explicitly.
    layers::Embedding emb(10, 2, {.mask_zero = true});
    layers::LSTM lstm(3, {.go_backwards = true});
    const K::MaskedTensor e = emb.call_with_mask(ids(), tf::Tensor());
    check_mask(e.mask, kIdsMask);
    check_mask(emb.compute_mask(ids()), kIdsMask);
    lstm.build({tf::None, 5, 2});
    set_pattern_weights(emb);
    // The reference numbers the LSTM's weights after the embedding's (k = 1, 2, 3).
    std::vector<tf::Tensor> ws;
    for (const tf::Variable& v : lstm.variables()) {
      std::vector<double> x(static_cast<size_t>(v.shape().num_elements()));
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = 0.5 * std::sin(0.7 * double(i) + double(ws.size() + 1));
      ws.push_back(tf::convert_to_tensor(x, v.shape()));
    }
    ws[0] = tf::cast(ws[0], tf::float32);
    ws[1] = tf::cast(ws[1], tf::float32);
    ws[2] = tf::cast(ws[2], tf::float32);
    lstm.set_weights(ws);
    const tf::Tensor seqs = emb(ids());
    const std::vector<tf::Tensor> out = lstm.call_with_state(seqs, {}, false, e.mask);
    REQUIRE(out.size() == 3);
    check_values(out[0], keras("state_o"), 1e-5, 1e-6);
    check_values(out[1], keras("state_h"), 1e-5, 1e-6);
    check_values(out[2], keras("state_c"), 1e-5, 1e-6);
    // call_with_mask gives the same output; without the mask it differs.
    check_values(lstm.call_with_mask(seqs, e.mask).output, keras("state_o"), 1e-5, 1e-6);
    REQUIRE(std::abs(vals(lstm(seqs))[0] - keras("state_o")[0]) > 1e-4);
  }
}

TEST_CASE("masking: pooling and Dense match Keras", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    auto emb = [] { return layers::Embedding(10, 3, {.mask_zero = true}); };
    // GlobalAveragePooling1D: the mean of the kept steps; no mask after it.
    layers::GlobalAveragePooling1D gap;
    K::Model a = id_model([&](const K::KerasTensor& x) { return gap(emb()(x)); });
    K::MaskedTensor r = K::Layer(a).call_with_mask(ids(), tf::Tensor());
    check_values(r.output, keras("gap_y"), 1e-5, 1e-7);
    REQUIRE_FALSE(r.mask.defined());
    // GlobalMaxPooling1D does not support masking in Keras 3.15: the max over every step.
    layers::GlobalMaxPooling1D gmp;
    REQUIRE_FALSE(gmp.supports_masking());
    K::Model b = id_model([&](const K::KerasTensor& x) { return gmp(emb()(x)); });
    r = K::Layer(b).call_with_mask(ids(), tf::Tensor());
    check_values(r.output, keras("gmp_y"), 1e-5, 1e-7);
    REQUIRE_FALSE(r.mask.defined());
    // Dense passes the mask on unchanged.
    K::Model c = id_model([&](const K::KerasTensor& x) { return layers::Dense(2)(emb()(x)); });
    r = K::Layer(c).call_with_mask(ids(), tf::Tensor());
    check_values(r.output, keras("dense_pass_y"), 1e-5, 1e-6);
    check_mask(r.mask, kIdsMask);
    // A mask given directly to the pooling layer (Keras' mask argument).
    const tf::Tensor seq = tf::reshape(tf::cast(tf::range(0, 12, 1), tf::float32), {2, 3, 2});
    const tf::Tensor m =
        tf::convert_to_tensor(std::vector<bool>{true, false, true, false, true, true}, {2, 3});
    check_values(layers::GlobalAveragePooling1D().call_with_mask(seq, m).output, {2, 3, 9, 10},
                 1e-6, 1e-6);
  }
}

TEST_CASE("masking: attention layers take the padded inputs' masks as Keras",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    struct Case {
      std::string name;
      K::Layer layer;
      int64_t dim;
    };
    const std::vector<Case> cases = {{"mha", layers::MultiHeadAttention(2, 3), 4},
                                     {"att", layers::Attention(), 3},
                                     {"add_att", layers::AdditiveAttention(), 3}};
    for (const Case& c : cases) {
      CAPTURE(c.name);
      // Keras' layer(e, e) (MultiHeadAttention) or layer([e, e]): here the one-input call.
      K::Model m = id_model([&](const K::KerasTensor& x) {
        return c.layer(layers::Embedding(10, c.dim, {.mask_zero = true})(x));
      });
      const K::MaskedTensor r = K::Layer(m).call_with_mask(ids(), tf::Tensor());
      check_values(r.output, keras(c.name + "_y"), 1e-5, 1e-6);
      check_mask(r.mask, kIdsMask);  // the query's mask
    }
  }
}

TEST_CASE("masking: a functional model carries masks through branches and merges",
          "[cpu][cuda][keras]") {
  // TF 2.21 / Keras 3.15.1 (/tmp/masking/ref_merge.py), pattern weights in model.weights order
  // (embeddings, Dense, LayerNormalization, SimpleRNN): e = Embedding(10, 3, mask_zero=True)(ids);
  // s = Add()([Dense(3)(e), LayerNormalization()(Dropout(0.5)(e))]);
  // SimpleRNN(2, return_sequences=True)(s) on kIds (inference).
  const std::vector<double> want = {0.1797791,  0.3666315,   -0.06367726, 0.2648916,   -0.01725275,
                                    0.03436713, -0.01725275, 0.03436713,  -0.01725275, 0.03436713,
                                    0,          0,           0,           0,           0.1792181,
                                    0.3672777,  -0.06610038, 0.2583675,   -0.01989342, 0.030938,
                                    0.1786842,  0.3679163,   0.1786842,   0.3679163,   -0.0678193,
                                    0.2524312,  -0.02233345, 0.02796782,  -0.02233345, 0.02796782};
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::Model m = id_model([](const K::KerasTensor& x) {
      const K::KerasTensor e = layers::Embedding(10, 3, {.mask_zero = true})(x);
      const K::KerasTensor a = layers::Dense(3)(e);
      const K::KerasTensor b = layers::LayerNormalization()(layers::Dropout(0.5)(e));
      return layers::SimpleRNN(2, {.return_sequences = true})(layers::Add()({a, b}));
    });
    const K::MaskedTensor r = K::Layer(m).call_with_mask(ids(), tf::Tensor());
    check_values(r.output, want, 1e-5, 1e-6);
    check_mask(r.mask, kIdsMask);
    check_mask(m.compute_mask(ids()), kIdsMask);
    // The plain call computes the same output.
    check_values(m(ids()), want, 1e-5, 1e-6);
  }
}

TEST_CASE("masking: the Masking layer matches Keras", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = tf::convert_to_tensor(
        std::vector<float>{1, 2, -1, -1, 3, -1, -1, -1, -1, -1, 0.5, 0.25}, {2, 3, 2});
    layers::Masking masking(-1.0);
    REQUIRE(masking.mask_value() == -1.0);
    const K::MaskedTensor mk = masking.call_with_mask(x, tf::Tensor());
    check_values(mk.output, keras("masking_out"), 0, 0);
    check_mask(mk.mask, keras("masking_mask"));
    layers::SimpleRNN rnn(2, {.return_sequences = true});
    K::Sequential seq({masking, rnn});
    seq.build({tf::None, 3, 2});
    set_pattern_weights(seq);
    const K::MaskedTensor r = seq.call_with_mask(x, tf::Tensor());
    check_values(r.output, keras("masking_rnn"), 1e-5, 1e-6);
    check_mask(r.mask, keras("masking_mask"));
  }
}

namespace {

// A custom layer that opts into masking: it scales its input by 2 and zeroes the masked steps
// (Keras: self.supports_masking = True, call(inputs, mask=None)); its output mask keeps only
// the steps whose first feature is positive, and-ed with the mask it got (compute_mask).
class ScaleMasked : public K::Model {
 public:
  ScaleMasked() { set_supports_masking(true); }
  tf::Tensor call(const tf::Tensor& x, bool) override {
    const tf::Tensor m = call_mask();
    seen_mask = m.defined();
    if (!m.defined()) return x * 2.0;
    return tf::where(tf::expand_dims(m, -1), x * 2.0, tf::zeros_like(x));
  }
  tf::Tensor compute_output_mask(const tf::Tensor& x, const tf::Tensor& mask) const override {
    const tf::Tensor pos = tf::reshape(tf::greater(tf::slice(x, {0, 0, 0}, {-1, -1, 1}), 0.0),
                                       {x.shape()[0], x.shape()[1]});
    return mask.defined() ? tf::logical_and(mask, pos) : pos;
  }
  bool seen_mask = false;
};

// A custom layer that does not: it drops the mask (Keras 3 warns and drops it).
class Plain : public K::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool) override { return x + 0.0; }
};

}  // namespace

TEST_CASE("masking: a custom layer opts in and reads the mask", "[cpu][keras]") {
  layers::Embedding emb(10, 2, {.mask_zero = true});
  ScaleMasked scale;
  REQUIRE(K::Layer(scale).supports_masking());
  K::Sequential seq({emb, scale});
  const K::MaskedTensor r = seq.call_with_mask(ids(), tf::Tensor());
  REQUIRE(scale.seen_mask);
  const std::vector<double> e = vals(emb(ids()));
  const std::vector<double> y = vals(r.output);
  std::vector<double> want_mask;
  for (size_t i = 0; i < kIdsMask.size(); ++i) {
    CAPTURE(i);
    for (size_t f = 0; f < 2; ++f)
      REQUIRE(y[2 * i + f] == (kIdsMask[i] != 0 ? 2.0 * e[2 * i + f] : 0.0));
    want_mask.push_back(kIdsMask[i] != 0 && 2.0 * e[2 * i] > 0 ? 1 : 0);
  }
  check_mask(r.mask, want_mask);
  // A plain call of the layer: no mask reaches it.
  (void)scale(emb(ids()));
  REQUIRE_FALSE(scale.seen_mask);

  // A layer that does not opt in drops the mask: the LSTM after it sees none.
  layers::Embedding emb2(10, 2, {.mask_zero = true});
  Plain plain;
  layers::LSTM lstm(2);
  K::Sequential dropped({emb2, plain, lstm});
  dropped.build({tf::None, 5});
  const K::MaskedTensor d = dropped.call_with_mask(ids(), tf::Tensor());
  REQUIRE_FALSE(d.mask.defined());
  check_values(d.output, vals(lstm(emb2(ids()))), 1e-6, 1e-7);
}

TEST_CASE("masking: errors name the layer and the shapes", "[cpu][keras]") {
  layers::LSTM lstm(2, {.name = "masked_lstm"});
  const tf::Tensor x = tf::ones({2, 4, 3});
  tf::testing::require_error(
      [&] {
        (void)lstm.call_with_mask(x, tf::ones({2, 5}, tf::bool_));
      },
      {"masked_lstm", "mask of shape (2, 5)", "input of shape (2, 4, 3)"});
  tf::testing::require_error(
      [&] {
        (void)lstm.call_with_mask(x, tf::ones({3, 4}, tf::bool_));
      },
      {"masked_lstm", "(3, 4)"});
  // A recurrent layer wants (batch, timesteps).
  tf::testing::require_error(
      [&] {
        (void)lstm.call_with_mask(x, tf::ones({2, 4, 3}, tf::bool_));
      },
      {"masked_lstm", "mask of shape (batch, timesteps)", "(2, 4, 3)"});
  tf::testing::require_error([&] { (void)lstm.call_with_mask(tf::Tensor(), tf::Tensor()); },
                             {"masked_lstm", "undefined"});
  // A numeric mask is read as nonzero = kept.
  const tf::Tensor m = tf::convert_to_tensor(std::vector<float>{1, 1, 0, 0, 1, 1, 1, 0}, {2, 4});
  const tf::Tensor b = tf::not_equal(m, tf::zeros_like(m));
  tf::testing::check_close(lstm.call_with_mask(x, m).output, lstm.call_with_mask(x, b).output, 0,
                           0);
}

TEST_CASE("masking: masked LSTM gradients match central finite differences", "[cpu][keras]") {
  Float64Layers f64;
  // Float input through Masking (so the input gets a gradient too), pre- and post-padded rows.
  std::vector<double> xv(2 * 4 * 3);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::cos(0.37 * double(i) + 0.2);
  for (size_t f = 0; f < 3; ++f) {
    xv[3 * 3 + f] = 0.0;       // row 0, step 3
    xv[12 + 0 * 3 + f] = 0.0;  // row 1, step 0
  }
  const tf::Tensor x = tf::convert_to_tensor(xv, {2, 4, 3});
  for (bool bidirectional : {false, true}) {
    CAPTURE(bidirectional);
    K::Layer rnn = bidirectional
                       ? K::Layer(layers::Bidirectional(layers::LSTM(2, {.return_sequences = true}),
                                                        "concat", "bidi_fd"))
                       : K::Layer(layers::LSTM(3, {.return_sequences = true}));
    K::Sequential model({layers::Masking(), rnn});
    model.build({tf::None, 4, 3});
    set_pattern_weights(model);
    auto loss_of = [&](const tf::Tensor& in) {
      const tf::Tensor y = model(in);
      return tf::reduce_sum(
          y * tf::cos(tf::reshape(tf::cast(tf::range(0, y.shape().num_elements(), 1), tf::float64),
                                  y.shape())));
    };
    std::vector<tf::Variable> vars = model.trainable_variables();
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    tape.watch(x);
    const tf::Tensor loss = loss_of(x);
    const tf::Tensor gx = tape.gradient(loss, x);
    const std::vector<tf::Tensor> gw = tape.gradient(loss, vars);
    const double eps = 1e-6;
    std::vector<double> num(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      if (xv[i] == 0.0) continue;  // moving a padded step off 0 unmasks it: not differentiable
      auto at = [&](double d) {
        std::vector<double> v = xv;
        v[i] += d;
        return loss_of(tf::convert_to_tensor(v, x.shape())).item<double>();
      };
      num[i] = (at(eps) - at(-eps)) / (2 * eps);
    }
    check_values(gx, num, 1e-6, 1e-8);
    for (size_t w = 0; w < vars.size(); ++w) {
      CAPTURE(vars[w].name());
      const tf::Tensor orig = vars[w].value();
      std::vector<double> wv = vals(orig), wn(wv.size());
      for (size_t i = 0; i < wv.size(); ++i) {
        auto at = [&](double d) {
          std::vector<double> v = wv;
          v[i] += d;
          vars[w].assign(tf::convert_to_tensor(v, orig.shape()));
          return loss_of(x).item<double>();
        };
        wn[i] = (at(eps) - at(-eps)) / (2 * eps);
      }
      vars[w].assign(orig);
      check_values(gw[w], wn, 1e-6, 1e-8);
    }
  }
}

TEST_CASE("masking: a traced masked model equals the eager one with one trace",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    K::KerasTensor in = K::Input({5}, tf::int32);
    K::KerasTensor h = layers::Embedding(10, 3, {.mask_zero = true})(in);
    h = layers::Bidirectional(layers::GRU(2, {.return_sequences = true}), "concat",
                              "bidi_traced")(h);
    h = layers::GlobalAveragePooling1D()(h);
    K::Model model(in, layers::Dense(1)(h));
    set_pattern_weights(model);
    auto step = [&](const tf::Tensor& x) {
      tf::GradientTape tape;
      const tf::Tensor y = model(x);
      const tf::Tensor loss = tf::reduce_sum(y * y);
      std::vector<tf::Tensor> out{y};
      for (const tf::Tensor& g : tape.gradient(loss, model.trainable_variables())) out.push_back(g);
      return out;
    };
    auto traced =
        tf::function(step, {.input_signature = {tf::TensorSpec({tf::None, 5}, tf::int32)}});
    for (int64_t batch : {3, 2, 3}) {
      std::vector<int32_t> v;
      for (int64_t i = 0; i < batch * 5; ++i)
        v.push_back(static_cast<int32_t>((i * 7 + 3) % 10) * (i % 4 == 3 ? 0 : 1));
      const tf::Tensor x = tf::convert_to_tensor(v, {batch, 5});
      const std::vector<tf::Tensor> eager = step(x), graph = traced(x);
      REQUIRE(eager.size() == graph.size());
      for (size_t i = 0; i < eager.size(); ++i)
        tf::testing::check_close(graph[i], eager[i], 1e-5, 1e-6);
    }
    REQUIRE(traced.tracing_count() == 1);
  }
}

TEST_CASE("masking: fit and evaluate weigh the loss with the output mask as Keras",
          "[cpu][keras]") {
  // TF 2.21 / Keras 3.15.1 (/tmp/masking/ref_fit.py): Sequential([Input((5,), int32),
  // Embedding(10, 2, mask_zero=True), GRU(3, return_sequences=True), Dense(3)]) with the
  // pattern weights, SGD(0.1), SparseCategoricalCrossentropy(from_logits=True), on kIds and the
  // labels below: evaluate (batch_size 3), with sample_weight rows 1, 0.5, 2 tiled over the
  // steps, with reduction "sum", then train_on_batch's loss and evaluate after that step.
  const tf::Tensor y = tf::convert_to_tensor(
      std::vector<int32_t>{0, 1, 2, 0, 1, 2, 2, 1, 0, 1, 1, 0, 2, 2, 0}, {3, 5});
  std::vector<float> swv;
  for (float w : {1.0f, 0.5f, 2.0f})
    for (int t = 0; t < 5; ++t) swv.push_back(w);
  const tf::Tensor sw = tf::convert_to_tensor(swv, {3, 5});
  K::Sequential model({layers::Embedding(10, 2, {.mask_zero = true}),
                       layers::GRU(3, {.return_sequences = true}), layers::Dense(3)});
  model.build({tf::None, 5});
  set_pattern_weights(model);
  model.compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true));
  const K::EvaluateOptions quiet{.batch_size = 3, .verbose = 0};
  CHECK(model.evaluate(ids(), y, quiet)[0] == Approx(1.0877519).epsilon(1e-5));
  K::EvaluateOptions weighted = quiet;
  weighted.sample_weight = sw;
  CHECK(model.evaluate(ids(), y, weighted)[0] == Approx(1.2025969).epsilon(1e-5));
  // Without the mask (a model on the same weights that reads id 0 as a token) the loss differs.
  K::Sequential unmasked(
      {layers::Embedding(10, 2), layers::GRU(3, {.return_sequences = true}), layers::Dense(3)});
  unmasked.build({tf::None, 5});
  set_pattern_weights(unmasked);
  unmasked.compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true));
  CHECK(std::abs(unmasked.evaluate(ids(), y, quiet)[0] - 1.0877519) > 1e-3);
  // One SGD step on the masked loss: its loss, then the loss after it.
  CHECK(model.train_on_batch(ids(), y)[0] == Approx(1.0877519).epsilon(1e-5));
  CHECK(model.evaluate(ids(), y, quiet)[0] == Approx(1.0838743).epsilon(1e-5));

  K::Sequential summed({layers::Embedding(10, 2, {.mask_zero = true}),
                        layers::GRU(3, {.return_sequences = true}), layers::Dense(3)});
  summed.build({tf::None, 5});
  set_pattern_weights(summed);
  summed.compile(K::optimizers::SGD(0.1),
                 K::losses::SparseCategoricalCrossentropy(true, K::losses::Reduction::SUM));
  CHECK(summed.evaluate(ids(), y, quiet)[0] == Approx(9.7897663).epsilon(1e-5));
}

TEST_CASE("masking: merge layers OR their masks and mask values as Keras", "[cpu][cuda][keras]") {
  // TF 2.21 / Keras 3.15.1 (/tmp/mm/ref.py): x = [[[2,3],[0,0],[1,1],[0,0]]], a = Masking(0)(in)
  // (steps 1 and 3 masked), b = Masking(1)(in) (step 2 masked); model(x) and its _keras_mask.
  struct Case {
    std::string name;
    std::function<K::KerasTensor(const K::KerasTensor&, const K::KerasTensor&,
                                 const K::KerasTensor&)>
        merge;
    std::vector<double> y;
    std::vector<double> mask;  // empty: no mask
  };
  using KT = const K::KerasTensor&;
  const std::vector<Case> cases = {
      {"add_ab",
       [](KT a, KT b, KT) {
         return layers::Add()({a, b});
       },
       {4, 6, 0, 0, 1, 1, 0, 0},
       {1, 1, 1, 1}},
      {"add_a_in",
       [](KT a, KT, KT in) {
         return layers::Add()({a, in});
       },
       {4, 6, 0, 0, 2, 2, 0, 0},
       {}},
      {"mul_ab",
       [](KT a, KT b, KT) {
         return layers::Multiply()({a, b});
       },
       {4, 9, 0, 0, 1, 1, 0, 0},
       {1, 1, 1, 1}},
      {"max_ab",
       [](KT a, KT b, KT) {
         return layers::Maximum()({a, b});
       },
       {2, 3, 0, 0, 1, 1, 0, 0},
       {1, 1, 1, 1}},
      {"min_ab",
       [](KT a, KT b, KT) {
         return layers::Minimum()({a, b});
       },
       {2, 3, 0, 0, 1, 1, 0, 0},
       {1, 1, 1, 1}},
      {"cat_a_in",
       [](KT a, KT, KT in) {
         return layers::Concatenate()({a, in});
       },
       {2, 3, 2, 3, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0},
       {1, 1, 1, 1}},
      {"cat_t_ab",
       [](KT a, KT b, KT) {
         return layers::Concatenate(1)({a, b});
       },
       {2, 3, 0, 0, 1, 1, 0, 0, 2, 3, 0, 0, 0, 0, 0, 0},
       {1, 0, 1, 0, 1, 1, 0, 1}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x =
        tf::convert_to_tensor(std::vector<float>{2, 3, 0, 0, 1, 1, 0, 0}, {1, 4, 2});
    for (const Case& c : cases) {
      CAPTURE(c.name);
      K::KerasTensor in = K::Input({4, 2});
      K::KerasTensor a = layers::Masking(0.0)(in), b = layers::Masking(1.0)(in);
      K::Model m(in, c.merge(a, b, in));
      const K::MaskedTensor r = K::Layer(m).call_with_mask(x, tf::Tensor());
      check_values(r.output, c.y, 0, 0);
      if (c.mask.empty()) {
        CHECK_FALSE(r.mask.defined());
      } else {
        check_mask(r.mask, c.mask);
      }
    }
  }
}

TEST_CASE("masking: BatchNormalization GroupNormalization Softmax and TimeDistributed as Keras",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // BatchNormalization: the batch moments leave the masked steps out; the mask passes on.
    layers::BatchNormalization bn({.momentum = 0.9});
    K::Model a = id_model([&](const K::KerasTensor& x) {
      return bn(layers::Embedding(10, 3, {.mask_zero = true})(x));
    });
    K::MaskedTensor r = K::Layer(a).call_with_mask(ids(), tf::Tensor(), /*training=*/true);
    check_values(r.output, keras("bn_y"), 1e-5, 1e-5);
    check_values(bn.moving_mean().value(), keras("bn_moving_mean"), 1e-5, 1e-6);
    check_values(bn.moving_variance().value(), keras("bn_moving_variance"), 1e-5, 1e-6);
    check_mask(r.mask, kIdsMask);
    // GroupNormalization passes the mask on to the LSTM.
    K::Model b = id_model([](const K::KerasTensor& x) {
      K::KerasTensor e = layers::Embedding(10, 4, {.mask_zero = true})(x);
      return layers::LSTM(2)(layers::GroupNormalization(2)(e));
    });
    check_values(b(ids()), keras("gn_lstm_y"), 1e-5, 1e-6);
    // Softmax: masked logits count for nothing and give zeros; the mask broadcasts from the
    // last axis.
    std::vector<double> xv(24);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = 2 * std::sin(1.3 * double(i));
    const tf::Tensor x = tf::cast(tf::convert_to_tensor(xv, {2, 3, 4}), tf::float32);
    const tf::Tensor mb = tf::convert_to_tensor(
        std::vector<bool>{true, true, false, true, false, true, true, false}, {2, 1, 4});
    std::vector<bool> full;
    for (double v : keras("softmax_full_mask")) full.push_back(v != 0);
    const tf::Tensor mf = tf::convert_to_tensor(full, {2, 3, 4});
    r = layers::Softmax().call_with_mask(x, mb);
    check_values(r.output, keras("softmax_b"), 1e-6, 1e-6);
    REQUIRE(r.mask.shape() == tf::TensorShape({2, 1, 4}));
    check_values(layers::Softmax().call_with_mask(x, mf).output, keras("softmax_full"), 1e-6,
                 1e-6);
    check_values(layers::Softmax(1).call_with_mask(x, mf).output, keras("softmax_axis1"), 1e-6,
                 1e-6);
    // TimeDistributed gives a wrapped LSTM each step's mask; the mask passes on unchanged.
    const tf::Tensor ids3 = tf::convert_to_tensor(
        std::vector<int32_t>{1, 2, 0, 3, 0, 0, 4, 5, 6, 0, 0, 0}, {2, 2, 3});
    K::KerasTensor in3 = K::Input({2, 3}, tf::int32);
    K::Model c(in3, layers::TimeDistributed(layers::LSTM(3))(
                        layers::Embedding(10, 4, {.mask_zero = true})(in3)));
    set_pattern_weights(c);
    r = K::Layer(c).call_with_mask(ids3, tf::Tensor());
    check_values(r.output, keras("td_y"), 1e-5, 1e-6);
    REQUIRE(r.mask.shape() == tf::TensorShape({2, 2, 3}));
    K::Model d = id_model([](const K::KerasTensor& x) {
      K::KerasTensor e = layers::Embedding(10, 3, {.mask_zero = true})(x);
      return layers::LSTM(2)(layers::TimeDistributed(layers::Dense(4))(e));
    });
    check_values(d(ids()), keras("td_dense_lstm_y"), 1e-5, 1e-6);
  }
  // Keras' errors: a Softmax mask that does not broadcast from the last axis (Keras raises for
  // the (batch, steps) mask of a (batch, steps, features) Sequential too); a BatchNormalization
  // mask of the wrong rank; a 1-D TimeDistributed mask.
  const tf::Tensor x = tf::zeros({2, 4, 5});
  tf::testing::require_error([&] { (void)layers::Softmax().call_with_mask(x, tf::ones({2, 4}, tf::bool_)); },
                {"(Softmax) was given a mask of shape (2, 4) for an input of shape (2, 4, 5)",
                 "broadcast against the input from its last axis"});
  tf::testing::require_error(
      [&] {
        layers::BatchNormalization bn;
        (void)bn.call_with_mask(x, tf::ones({2}, tf::bool_), true);
      },
      {"(BatchNormalization): the mask must have one dimension less than the inputs",
       "mask shape (2,) for inputs of shape (2, 4, 5)"});
  tf::testing::require_error(
      [&] {
        layers::TimeDistributed td(layers::Dense(2));
        (void)td.call_with_mask(x, tf::ones({2}, tf::bool_));
      },
      {"(TimeDistributed): the mask must be at least 2-D"});
}

TEST_CASE("masking: compiled metrics skip masked steps as Keras", "[cpu][keras]") {
  // TF 2.21 / Keras 3.15.1: Model(Input((5,)), Dense(3)(Embedding(7, 3, mask_zero=True)(in)))
  // with embeddings cos(i) (7, 3), kernel sin(0.7 i) (3, 3), bias (0.1, -0.2, 0.05);
  // compile(loss=SparseCategoricalCrossentropy(from_logits=True),
  // metrics=["sparse_categorical_accuracy"], weighted_metrics=["sparse_categorical_accuracy"]),
  // evaluate(ids, y) and evaluate(ids, y, sample_weight=1 + 0.5 cos(i) over (4, 5)). Keras'
  // MeanMetricWrapper weighs the values with the mask: 3 of the 11 unmasked steps are right.
  // Then Dense(1) with kernel 0.3 on the embeddings, loss "mse", metrics ["mae"].
  const tf::Tensor ids = tf::convert_to_tensor(
      std::vector<int32_t>{3, 1, 4, 0, 0, 2, 5, 0, 0, 0, 1, 1, 2, 3, 6, 4, 0, 0, 0, 0}, {4, 5});
  const tf::Tensor y = tf::convert_to_tensor(
      std::vector<int32_t>{1, 0, 2, 1, 2, 0, 2, 1, 1, 0, 2, 2, 1, 0, 1, 1, 0, 0, 2, 2}, {4, 5});
  std::vector<float> emb(21), kern(9), swv(20), yr(20);
  for (int i = 0; i < 21; ++i) emb[i] = static_cast<float>(std::cos(double(i)));
  for (int i = 0; i < 9; ++i) kern[i] = static_cast<float>(std::sin(0.7 * i));
  for (int i = 0; i < 20; ++i) {
    swv[i] = static_cast<float>(1.0 + 0.5 * std::cos(double(i)));
    yr[i] = static_cast<float>(std::sin(double(i)));
  }
  K::KerasTensor in = K::Input({5}, tf::int32);
  layers::Embedding embedding(7, 3, {.mask_zero = true});
  K::KerasTensor h = embedding(in);
  K::Model model(in, layers::Dense(3)(h));
  model.set_weights({tf::constant(emb, {7, 3}), tf::constant(kern, {3, 3}),
                     tf::constant<float>({0.1f, -0.2f, 0.05f}, {3})});
  model.compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true),
                {"sparse_categorical_accuracy"},
                {.weighted_metrics = {K::metrics::SparseCategoricalAccuracy(
                     "weighted_sparse_categorical_accuracy")}});
  const K::EvaluateOptions quiet{.verbose = 0};
  auto plain = model.evaluate(ids, y, quiet);
  REQUIRE(plain.size() == 3);
  CHECK(plain[0] == Approx(1.0952017307281494).epsilon(1e-5));
  CHECK(plain[1] == Approx(0.27272728085517883).epsilon(1e-6));
  CHECK(plain[2] == Approx(0.27272728085517883).epsilon(1e-6));
  K::EvaluateOptions weighted = quiet;
  weighted.sample_weight = tf::constant(swv, {4, 5});
  auto w = model.evaluate(ids, y, weighted);
  CHECK(w[0] == Approx(1.2217426300048828).epsilon(1e-5));
  CHECK(w[1] == Approx(0.27272728085517883).epsilon(1e-6));
  CHECK(w[2] == Approx(0.31563669443130493).epsilon(1e-5));
  // The same numbers from fit's traced step: one epoch of SGD(0) leaves the weights alone.
  model.compile(K::optimizers::SGD(0.0), K::losses::SparseCategoricalCrossentropy(true),
                {"sparse_categorical_accuracy"});
  const auto hist = model.fit(ids, y, {.epochs = 1, .batch_size = 4, .verbose = 0});
  CHECK(hist.history.at("sparse_categorical_accuracy")[0] ==
        Approx(0.27272728085517883).epsilon(1e-6));

  K::Model reg(in, layers::Dense(1, {.kernel_initializer = K::initializers::Constant(0.3)})(h));
  reg.compile(K::optimizers::SGD(0.1), "mse", {"mae"});
  auto r = reg.evaluate(ids, tf::constant(yr, {4, 5, 1}), quiet);
  CHECK(r[0] == Approx(0.592599630355835).epsilon(1e-5));
  CHECK(r[1] == Approx(0.6363945007324219).epsilon(1e-5));
}
