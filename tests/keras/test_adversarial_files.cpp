// Mutated saved files: a whole-model file (model.save), a weights file (save_weights) and a
// tf::train::Checkpoint, each truncated at many lengths and with single bytes of its header
// replaced by bytes that break JSON, numbers, names and lengths. Loading must give a model (or
// weights) that works, or a tf::Error — never another exception, a crash or a hang.
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/temp_dir.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The variants of `bytes`: every truncation at `stride`-spaced lengths, and every byte of the
// first `header` bytes replaced by one of a few bytes chosen by position.
std::vector<std::string> mutations(const std::string& bytes, size_t header, size_t stride) {
  std::vector<std::string> out;
  for (size_t n = 0; n < bytes.size(); n += stride) out.push_back(bytes.substr(0, n));
  const char replacements[] = {'\0', '\xff', '"', '}', '9', '-', '[', 'x', ',', '\x7f'};
  for (size_t i = 0; i < std::min(header, bytes.size()); ++i) {
    for (size_t k = 0; k < 2; ++k) {
      std::string m = bytes;
      const char r = replacements[(i * 3 + k * 7) % std::size(replacements)];
      if (m[i] == r) continue;
      m[i] = r;
      out.push_back(std::move(m));
    }
  }
  return out;
}

// Runs f on each mutation written to `path`: fine, or a tf::Error. Counts the loads that worked.
int64_t probe_mutations(const std::string& path, const std::vector<std::string>& variants,
                        const std::function<void()>& f) {
  int64_t worked = 0;
  for (size_t i = 0; i < variants.size(); ++i) {
    write_all(path, variants[i]);
    INFO("variant " << i << " of " << variants.size() << " (" << variants[i].size() << " bytes)");
    adversarial::attempt([&] {
      f();
      ++worked;
    });
  }
  return worked;
}

K::Sequential small_model() {
  K::Sequential m({L::Dense(3, "relu"), L::BatchNormalization(), L::Dense(2)});
  m.compile(K::optimizers::get("adam"), "mse");
  m.fit(tf::ones({4, 5}), tf::zeros({4, 2}), {.epochs = 1, .verbose = 0});
  return m;
}

}  // namespace

TEST_CASE("adversarial: mutated model, weights and checkpoint files", "[adversarial]") {
  const adversarial::QuietLogs quiet;  // "has no value for variable(s)" by the hundred
  tf::testing::TempDir dir;
  const tf::Tensor x = tf::ones({2, 5});
  K::Sequential model = small_model();

  SECTION("model.save / load_model") {
    const std::string good = dir / "good.safetensors";
    model.save(good);
    const std::string bytes = read_all(good);
    const std::string bad = dir / "bad.safetensors";
    const int64_t worked = probe_mutations(bad, mutations(bytes, 2048, 97), [&] {
      K::Model loaded = K::models::load_model(bad);
      const tf::Tensor y = loaded(x);
      CHECK(y.numpy<double>().size() == static_cast<size_t>(y.num_elements()));
    });
    // The untouched file still loads; some byte replacements leave a loadable file (inside a
    // name or a float's digits).
    write_all(bad, bytes);
    CHECK(K::models::load_model(bad)(x).shape() == tf::TensorShape({2, 2}));
    CHECK(worked > 0);
  }

  SECTION("save_weights / load_weights") {
    const std::string good = dir / "good.weights.safetensors";
    model.save_weights(good);
    const std::string bytes = read_all(good);
    const std::string bad = dir / "bad.weights.safetensors";
    K::Sequential target = small_model();
    probe_mutations(bad, mutations(bytes, 1024, 53), [&] {
      target.load_weights(bad);
      CHECK(target(x).shape() == tf::TensorShape({2, 2}));
    });
  }

  SECTION("tf::train::Checkpoint") {
    tf::Variable v(tf::constant({1.0f, 2.0f, 3.0f}), "v");
    tf::train::Checkpoint ckpt({{"model", model}, {"v", v}});
    const std::string prefix = ckpt.save(dir / "ckpt");
    const std::string file = prefix + ".safetensors";
    const std::string bytes = read_all(file);
    K::Sequential target = small_model();
    tf::Variable w(tf::zeros({3}), "w");
    tf::train::Checkpoint restore({{"model", target}, {"v", w}});
    probe_mutations(file, mutations(bytes, 1024, 61), [&] {
      restore.restore(prefix);
      CHECK(w.value().num_elements() == 3);
    });
  }
}
