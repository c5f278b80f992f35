// ScheduleFreeAdamW (keras/optimizers.h): three steps against the paper's recursion written out
// in the test's reference (with Keras' float32 roundings of its hyperparameters), in float64
// and float32, with warmup and weight decay, eagerly and traced; the momentum slot z starting
// as the variable; Keras 3.15's config; the errors. Keras 3.15 itself differs from step 2 on
// (it recovers x from the updated z; tapeflow follows the paper, docs/keras_training.md): its
// y after these steps is [0.899408757686615, -1.932604193687439], its z and v equal ours.
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/optimizers.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace opt = tapeflow::keras::optimizers;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

struct Result {
  std::vector<double> y, z, v;
};

// Three steps of gradients [0.5, -1], [0.2, 0.3], [-0.4, 0.1] from y = [1, -2].
Result run(opt::Optimizer o, tf::DType dtype, bool traced) {
  tf::Variable y(tf::cast(tf::convert_to_tensor(std::vector<double>{1.0, -2.0}, {2}), dtype), "y");
  const std::vector<std::vector<double>> grads = {{0.5, -1.0}, {0.2, 0.3}, {-0.4, 0.1}};
  auto step = tf::function([&](const tf::Tensor& g) {
    o.apply_gradients({g}, {y});
    return y.value();
  });
  for (const auto& g : grads) {
    const tf::Tensor t = tf::cast(tf::convert_to_tensor(g, {2}), dtype);
    if (traced)
      step(t);
    else
      o.apply_gradients({t}, {y});
  }
  const auto slots = o.slots();
  return {y.value().numpy<double>(), slots.at(0).second.at(0).value().numpy<double>(),
          slots.at(0).second.at(1).value().numpy<double>()};
}

}  // namespace

TEST_CASE("ScheduleFreeAdamW follows the schedule-free recursion", "[keras][cpu]") {
  // The reference (Python, float64): v += (g^2 - v)(1 - b2); z' = z - lr g / (sqrt(v / (1 -
  // b2^t)) + eps); x = (y - (1 - b1) z) / b1; x' = (1 - 1/t) x + z'/t; y' = (1 - b1) z' + b1 x',
  // with b1, b2, eps and lr rounded to float32 as Keras casts them.
  const Result plain{{0.904543493216134, -1.935060689616824},
                     {0.9507577953371721, -1.9571675112092612},
                     {0.00044945447032335406, 0.0010978968917132732}};
  // warmup_steps = 2 (lr * min(t / 2, 1)) and weight_decay = 0.1 (y -= y * 0.1 * lr first).
  const Result options{{0.9452677770105966, -1.9654766553535403},
                       {1.0007577950822302, -2.0071675114543193},
                       {0.00044945447032335406, 0.0010978968917132732}};
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    for (tf::DType dtype : {tf::float64, tf::float32}) {
      CAPTURE(tf::dtype_name(dtype));
      const double rtol = dtype == tf::float64 ? 1e-12 : 2e-6;
      const Result r = run(opt::ScheduleFreeAdamW(0.1), dtype, traced);
      check_values(tf::convert_to_tensor(r.y, {2}), plain.y, rtol, 0);
      check_values(tf::convert_to_tensor(r.z, {2}), plain.z, rtol, 0);
      check_values(tf::convert_to_tensor(r.v, {2}), plain.v, rtol, 0);
      const Result o = run(opt::ScheduleFreeAdamW(0.1, 0.9, 0.999, 1e-8, 2, {.weight_decay = 0.1}),
                           dtype, traced);
      check_values(tf::convert_to_tensor(o.y, {2}), options.y, rtol, 0);
      check_values(tf::convert_to_tensor(o.z, {2}), options.z, rtol, 0);
    }
  }
  // z starts as the variable: after one step with lr 0 nothing moves and z equals y.
  tf::Variable w(tf::convert_to_tensor(std::vector<float>{3, -4}, {2}), "w");
  opt::ScheduleFreeAdamW zero(0.0);
  zero.apply_gradients({tf::convert_to_tensor(std::vector<float>{1, 1}, {2})}, {w});
  check_values(zero.slots().at(0).second.at(0).value(), {3, -4}, 0, 0);
  check_values(w.value(), {3, -4}, 0, 0);
}

TEST_CASE("ScheduleFreeAdamW: Keras' config and the errors", "[keras][cpu]") {
  using Config = K::saving::Config;
  // keras.optimizers.ScheduleFreeAdamW(0.01, warmup_steps=3, weight_decay=0.1).get_config()
  const Config want = Config::parse(R"({"name": "schedule_free_adam_w",
"learning_rate": 0.009999999776482582, "weight_decay": 0.1, "clipnorm": null,
"global_clipnorm": null, "clipvalue": null, "use_ema": false, "ema_momentum": 0.99,
"ema_overwrite_frequency": null, "loss_scale_factor": null, "gradient_accumulation_steps": null,
"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-08, "warmup_steps": 3})");
  const opt::ScheduleFreeAdamW sf(0.01, 0.9, 0.999, 1e-8, 3,
                                  {.weight_decay = 0.1, .name = "schedule_free_adam_w"});
  CHECK(opt::get_config(sf) == want);
  CHECK(opt::get_config(opt::from_config("ScheduleFreeAdamW", want)) == want);
  // Keys left out take Keras' defaults (learning rate 0.0025, epsilon 1e-8).
  const Config defaults = opt::get_config(opt::from_config("ScheduleFreeAdamW", Config::object()));
  CHECK(defaults["learning_rate"] == Approx(0.0025).epsilon(1e-7));
  CHECK(defaults["epsilon"] == 1e-8);
  CHECK(opt::get("ScheduleFreeAdamW").name() == "ScheduleFreeAdamW");
  require_error([] { opt::ScheduleFreeAdamW(0.1, 0.0); },
                {"[ScheduleFreeAdamW] beta_1 must be in (0, 1], got 0"});
  require_error([] { opt::ScheduleFreeAdamW(0.1, 0.9, 1.0); },
                {"[ScheduleFreeAdamW] beta_2 must be in [0, 1), got 1"});
  require_error([] { opt::ScheduleFreeAdamW(0.1, 0.9, 0.999, 1e-8, -1); },
                {"[ScheduleFreeAdamW] warmup_steps must be >= 0, got -1"});
}
