// Traced against eager on adversarial inputs: bodies of chained ops (the CPU graph passes fuse,
// fold and plan them) called eagerly and through tf::function, with empty, scalar, broadcast and
// special-valued tensors of every dtype on every device under test. Both must give the same
// values (NaN where the other has NaN) or both a tf::Error; a reduce_retracing function that
// meets the inputs one after another (its generic traces with None dimensions) must agree too.
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::make;
using adversarial::on_every_device;

namespace {

using Outputs = std::vector<tf::Tensor>;
using Body = std::function<Outputs(const tf::Tensor&, const tf::Tensor&)>;

struct NamedBody {
  const char* name;
  Body body;
};

std::vector<NamedBody> bodies() {
  return {
      {"elementwise chain",
       [](const tf::Tensor& x, const tf::Tensor& y) { return Outputs{(x * y + x) - y * y}; }},
      {"division chain",
       [](const tf::Tensor& x, const tf::Tensor& y) { return Outputs{(x + y) / (x - y) * x}; }},
      {"unary chain",
       [](const tf::Tensor& x, const tf::Tensor&) {
         return Outputs{tf::log1p(tf::exp(x)) - tf::sqrt(tf::abs(x)) + tf::tanh(x)};
       }},
      {"where",
       [](const tf::Tensor& x, const tf::Tensor& y) {
         return Outputs{tf::where(tf::greater(x, y), x - y, y)};
       }},
      {"reductions",
       [](const tf::Tensor& x, const tf::Tensor& y) {
         return Outputs{tf::reduce_sum(x * y), tf::reduce_max(x, -1), tf::reduce_mean(x, 0, true)};
       }},
      {"softmax",
       [](const tf::Tensor& x, const tf::Tensor& y) { return Outputs{tf::nn::softmax(x + y)}; }},
      {"cumsum",
       [](const tf::Tensor& x, const tf::Tensor& y) { return Outputs{tf::cumsum(x - y)}; }},
      {"concat and reshape",
       [](const tf::Tensor& x, const tf::Tensor& y) {
         return Outputs{tf::reshape(tf::concat({x, y}, 0), {-1})};
       }},
      {"transpose and matmul",
       [](const tf::Tensor& x, const tf::Tensor& y) {
         return Outputs{tf::matmul(x, tf::transpose(y)), tf::transpose(x) + 1};
       }},
      {"constants folded",
       [](const tf::Tensor& x, const tf::Tensor&) {
         const tf::Tensor c = tf::ones_like(x) * 2 + 1;  // foldable
         return Outputs{x * c - c, tf::zeros_like(x) * x};
       }},
      {"gradient",
       [](const tf::Tensor& x, const tf::Tensor& y) {
         tf::GradientTape tape;
         tape.watch(x);
         const tf::Tensor l = tf::reduce_sum(x * x * y);
         return Outputs{l, tape.gradient(l, x)};
       }},
  };
}

// The outputs of f, or the message of the tf::Error it raised.
struct Outcome {
  std::optional<Outputs> values;
  std::string error;
};
Outcome run(const std::function<Outputs()>& f) {
  Outcome o;
  try {
    o.values = f();
  } catch (const tf::Error& e) {
    o.error = e.what();
  }
  return o;
}

void require_same(const Outcome& eager, const Outcome& traced) {
  if (!eager.values) {
    INFO("eager: " << eager.error);
    CHECK_FALSE(traced.values.has_value());
    return;
  }
  INFO("traced: " << traced.error);
  REQUIRE(traced.values.has_value());
  REQUIRE(traced.values->size() == eager.values->size());
  for (size_t i = 0; i < eager.values->size(); ++i) {
    const tf::Tensor& e = (*eager.values)[i];
    const tf::Tensor& t = (*traced.values)[i];
    INFO("output " << i);
    REQUIRE(e.defined() == t.defined());
    if (!e.defined()) continue;
    REQUIRE(t.dtype() == e.dtype());
    REQUIRE(t.shape() == e.shape());
    const std::vector<double> ev = e.numpy<double>(), tv = t.numpy<double>();
    for (size_t j = 0; j < ev.size(); ++j) {
      if (std::isnan(ev[j])) {
        CHECK(std::isnan(tv[j]));
      } else if (std::isinf(ev[j])) {
        CHECK(tv[j] == ev[j]);
      } else {
        CHECK(std::abs(tv[j] - ev[j]) <= 1e-5 * (1.0 + std::abs(ev[j])));
      }
    }
  }
}

const std::vector<std::pair<tf::TensorShape, tf::TensorShape>> kPairs = {
    {{}, {}},         {{3}, {3}},       {{2, 3}, {2, 3}}, {{2, 3}, {3}},
    {{2, 3}, {}},     {{0, 3}, {0, 3}}, {{2, 0}, {2, 0}}, {{3, 3}, {3, 3}},
    {{2, 3}, {3, 2}}, {{1, 3}, {2, 3}}, {{4, 2}, {4, 2}}, {{2, 3, 4}, {2, 3, 4}}};

}  // namespace

TEST_CASE("adversarial: traced functions agree with eager execution", "[adversarial][jit]") {
  const adversarial::QuietLogs quiet;  // retracing notes
  on_every_device([&] {
    for (const NamedBody& nb : bodies()) {
      INFO(nb.name);
      // One reduce_retracing function meets every input in turn.
      auto generic =
          tf::function([&](const tf::Tensor& x, const tf::Tensor& y) { return nb.body(x, y); },
                       tf::FunctionOptions{.reduce_retracing = true});
      for (tf::DType d : {tf::float32, tf::float64, tf::int32})
        for (bool special : {false, true})
          for (const auto& [sx, sy] : kPairs) {
            const tf::Tensor x = make(sx, d, special, 1);
            const tf::Tensor y = make(sy, d, special, 2);
            INFO(describe(x) << ", " << describe(y) << (special ? " (special values)" : ""));
            const Outcome eager = run([&] { return nb.body(x, y); });
            auto exact = tf::function(
                [&](const tf::Tensor& a, const tf::Tensor& b) { return nb.body(a, b); });
            require_same(eager, run([&] { return exact(x, y); }));
            require_same(eager, run([&] { return exact(x, y); }));  // the replay
            require_same(eager, run([&] { return generic(x, y); }));
          }
    }
  });
}
