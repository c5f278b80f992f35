// Sequence to sequence with the functional API, as Keras' lstm_seq2seq example: an LSTM encoder
// reads "123+45", its final states (return_state=True: call_with_state) start an LSTM decoder
// (initial_state=[h, c]) that writes the sum's four digits. Training feeds the decoder the true
// previous digit (teacher forcing); inference builds an encoder model and a one-step decoder
// model from the same trained layers and decodes greedily, one digit at a time.
//   build/samples/seq2seq_addition [epochs [min_accuracy [samples]]]
// Exits 1 when the exact-match accuracy of the decoded sums of held-out questions is below
// min_accuracy.
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;

namespace {

constexpr int kQueryLen = 7;                // "999+999"
constexpr int kAnswerLen = 4;               // "1998", zero-padded on the left
constexpr int kQueryChars = 12;             // 0-9, '+', ' '
constexpr int kDigits = 10;                 // the decoder's outputs
constexpr int kDecoderChars = kDigits + 1;  // its inputs: the digits and the start token
constexpr int kStart = kDigits;

int query_char(char c) {
  return c == '+' ? 10 : c == ' ' ? 11 : c - '0';
}

struct Data {
  std::vector<std::string> queries, answers;
  tf::Tensor encoder_in, decoder_in, target;  // one-hot (n, 7, 12), (n, 4, 11), (n, 4, 10)
};

Data make_data(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int> digits(1, 3), digit(0, 9);
  auto number = [&] {
    int v = 0;
    for (int i = digits(rng); i > 0; --i) v = 10 * v + digit(rng);
    return v;
  };
  Data d;
  std::vector<float> enc(static_cast<size_t>(n) * kQueryLen * kQueryChars, 0.0f);
  std::vector<float> dec(static_cast<size_t>(n) * kAnswerLen * kDecoderChars, 0.0f);
  std::vector<float> tgt(static_cast<size_t>(n) * kAnswerLen * kDigits, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int a = number(), b = number();
    std::string q = std::to_string(a) + "+" + std::to_string(b);
    q.resize(kQueryLen, ' ');
    char buf[8];
    std::snprintf(buf, sizeof(buf), "%04d", a + b);
    const std::string ans = buf;
    for (int t = 0; t < kQueryLen; ++t)
      enc[(static_cast<size_t>(i) * kQueryLen + t) * kQueryChars + query_char(q[t])] = 1.0f;
    for (int t = 0; t < kAnswerLen; ++t) {
      const int prev = t == 0 ? kStart : ans[t - 1] - '0';
      dec[(static_cast<size_t>(i) * kAnswerLen + t) * kDecoderChars + prev] = 1.0f;
      tgt[(static_cast<size_t>(i) * kAnswerLen + t) * kDigits + (ans[t] - '0')] = 1.0f;
    }
    d.queries.push_back(q);
    d.answers.push_back(ans);
  }
  d.encoder_in = tf::convert_to_tensor(enc, tf::TensorShape({n, kQueryLen, kQueryChars}));
  d.decoder_in = tf::convert_to_tensor(dec, tf::TensorShape({n, kAnswerLen, kDecoderChars}));
  d.target = tf::convert_to_tensor(tgt, tf::TensorShape({n, kAnswerLen, kDigits}));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args(argc, argv, "An LSTM encoder-decoder that learns to add, Keras' recipe.");
  const int epochs = args.epochs(30);
  const double min_accuracy = args.min_accuracy(0.75);
  const int n = args.integer<int>("samples", 20000, 100, 1000000, "training questions");
  args.done();
  tf::random::set_seed(7);
  std::mt19937 rng(7);
  const Data train = make_data(n, rng), test = make_data(500, rng);
  constexpr int64_t units = 128;

  // Training model: encoder states -> decoder, teacher forcing.
  L::LSTM encoder(units, L::LSTMOptions{.name = "encoder"});
  L::LSTM decoder(units, L::LSTMOptions{.return_sequences = true, .name = "decoder"});
  L::Dense readout(kDigits, L::DenseOptions{.activation = "softmax", .name = "readout"});
  const K::KerasTensor query = K::Input({kQueryLen, kQueryChars}, std::nullopt, "query");
  const K::KerasTensor so_far = K::Input({kAnswerLen, kDecoderChars}, std::nullopt, "so_far");
  // Keras: _, h, c = LSTM(units, return_state=True)(query)
  const std::vector<K::KerasTensor> enc = encoder.call_with_state(query);
  // Keras: LSTM(units, return_sequences=True, return_state=True)(so_far, initial_state=[h, c])
  const std::vector<K::KerasTensor> dec = decoder.call_with_state(so_far, {enc[1], enc[2]});
  K::Model model({query, so_far}, {readout(dec[0])}, "seq2seq");
  std::cout << model.summary_string(110);
  model.compile(K::optimizers::Adam(0.003), "categorical_crossentropy", {"accuracy"});
  model.fit(std::vector<tf::Tensor>{train.encoder_in, train.decoder_in},
            std::vector<tf::Tensor>{train.target},
            {.epochs = epochs, .batch_size = 128, .validation_split = 0.1});

  // Inference: the encoder's states, then one decoder step at a time from its own guesses.
  K::Model encoder_model({query}, {enc[1], enc[2]}, "encoder_model");
  const K::KerasTensor step = K::Input({1, kDecoderChars}, std::nullopt, "step");
  const K::KerasTensor h_in = K::Input({units}, std::nullopt, "h");
  const K::KerasTensor c_in = K::Input({units}, std::nullopt, "c");
  const std::vector<K::KerasTensor> one = decoder.call_with_state(step, {h_in, c_in});
  K::Model decoder_model({step, h_in, c_in}, {readout(one[0]), one[1], one[2]}, "decoder_model");

  std::vector<tf::Tensor> states = encoder_model(std::vector<tf::Tensor>{test.encoder_in});
  const int64_t m = static_cast<int64_t>(test.queries.size());
  tf::Tensor token = tf::one_hot(tf::fill({m, 1}, tf::Tensor(int64_t{kStart})), kDecoderChars);
  std::vector<std::string> guesses(static_cast<size_t>(m));
  for (int t = 0; t < kAnswerLen; ++t) {
    const std::vector<tf::Tensor> out =
        decoder_model(std::vector<tf::Tensor>{token, states[0], states[1]});
    const tf::Tensor digit = tf::argmax(out[0], -1);  // (m, 1)
    const std::vector<int64_t> ds = tf::cast(digit, tf::int64).numpy<int64_t>();
    for (int64_t i = 0; i < m; ++i) guesses[static_cast<size_t>(i)] += char('0' + ds[i]);
    token = tf::one_hot(digit, kDecoderChars);
    states = {out[1], out[2]};
  }
  int right = 0;
  for (int64_t i = 0; i < m; ++i) {
    const bool ok = guesses[static_cast<size_t>(i)] == test.answers[static_cast<size_t>(i)];
    right += ok ? 1 : 0;
    if (i < 8)
      std::cout << test.queries[static_cast<size_t>(i)] << " = " << guesses[static_cast<size_t>(i)]
                << (ok ? "  ok" : "  (" + test.answers[static_cast<size_t>(i)] + ")") << "\n";
  }
  const double accuracy = static_cast<double>(right) / static_cast<double>(m);
  std::cout << "Exact sums on " << m << " held-out questions: " << accuracy << "\n";
  if (accuracy < min_accuracy) {
    std::cerr << "accuracy " << accuracy << " is below " << min_accuracy << "\n";
    return 1;
  }
  return 0;
}
