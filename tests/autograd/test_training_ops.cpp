// Fused optimizer updates (autograd/training_ops.h): apply_adam against the same update written
// op by op (bit for bit), eagerly and traced, float32 and float64; in place, copy-on-write under a
// snapshot; where it declines; and the Keras Adam that uses it.
#include <string>
#include <vector>

#include "autograd/training_ops.h"
#include "autograd/variable.h"
#include "jit/function.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;

namespace {

constexpr double kB1 = 0.9, kB2 = 0.999, kEps = 1e-7;

// Keras' Adam update written op by op (keras/optimizers.cpp without the fused path).
void adam_ops(tf::Variable& w, tf::Variable& m, tf::Variable& v, const tf::Tensor& g,
              const tf::Tensor& alpha) {
  m.assign_add(tf::multiply(tf::subtract(g, m.value()), tf::Tensor(1.0 - kB1)));
  v.assign_add(tf::multiply(tf::subtract(tf::square(g), v.value()), tf::Tensor(1.0 - kB2)));
  w.assign_sub(
      tf::divide(tf::multiply(m.value(), alpha), tf::add(tf::sqrt(v.value()), tf::Tensor(kEps))));
}

struct Slots {
  tf::Variable w, m, v;
  Slots(const tf::Tensor& init, const char* prefix)
      : w(init, std::string(prefix) + "w"),
        m(tf::zeros_like(init), std::string(prefix) + "m"),
        v(tf::zeros_like(init), std::string(prefix) + "v") {}
};

}  // namespace

TEST_CASE("apply_adam: one loop equals Adam's separate ops bit for bit", "[cpu][cuda][autograd]") {
  // On a GPU: one kernel of correctly rounded operations against the eager kernels (written to
  // be bit-identical too; checked within 1e-6 until it has run on a GPU).
  for (const tf::Device& device : tf::testing::devices_under_test())
    for (tf::DType dt : {tf::float32, tf::float64})
      for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{100003}}) {  // tail only, odd, threaded
        CAPTURE(device.to_string(), tf::dtype_name(dt), n);
        tf::DeviceScope scope(device.to_string());
        const double tol = device.is_gpu() ? 1e-6 : 0.0;
        const tf::Tensor init = tf::random::normal({n}, 0, 1, dt, 1);
        const tf::Tensor alpha = tf::constant(tf::Tensor(0.003), dt);
        Slots fused(init, "f_"), ops(init, "o_"), traced(init, "t_");
        auto step = tf::function([&](const tf::Tensor& g) {
          REQUIRE(tf::detail::apply_adam(traced.w, traced.m, traced.v, g, alpha, kB1, kB2, kEps));
          return tf::reduce_sum(g);
        });
        for (int i = 0; i < 4; ++i) {
          // Gradients of mixed signs and sizes, zeros included (sqrt(v) + eps with v = 0).
          tf::Tensor g = tf::random::normal({n}, 0, 1.0 + i, dt, 10 + i);
          if (i == 1) g = tf::zeros_like(g);
          REQUIRE(tf::detail::apply_adam(fused.w, fused.m, fused.v, g, alpha, kB1, kB2, kEps));
          adam_ops(ops.w, ops.m, ops.v, g, alpha);
          step(g);
          for (auto [a, b] : {std::pair{&fused.w, &ops.w},
                              {&fused.m, &ops.m},
                              {&fused.v, &ops.v},
                              {&traced.w, &ops.w},
                              {&traced.m, &ops.m},
                              {&traced.v, &ops.v}})
            check_close(a->value(), b->value(), tol, tol);
        }
        const tf::Graph& graph = step.get_concrete_function(tf::TensorSpec({n}, dt)).graph();
        INFO(graph.to_string());
        CHECK(graph.to_string().find("apply_adam(") != std::string::npos);
      }
}

TEST_CASE("apply_adam: in place, copy-on-write under a snapshot, and where it declines",
          "[cpu][autograd]") {
  tf::DeviceScope cpu("/cpu:0");
  const tf::Tensor init = tf::random::normal({64, 3}, 0, 1, tf::float32, 2);
  const tf::Tensor g = tf::random::normal({64, 3}, 0, 1, tf::float32, 3);
  const tf::Tensor alpha = tf::constant(0.01f);
  Slots s(init, "");
  REQUIRE(tf::detail::apply_adam(s.w, s.m, s.v, g, alpha, kB1, kB2, kEps));
  const void* w_buf = s.w.value().raw_data();
  const void* m_buf = s.m.value().raw_data();
  REQUIRE(tf::detail::apply_adam(s.w, s.m, s.v, g, alpha, kB1, kB2, kEps));
  CHECK(s.w.value().raw_data() == w_buf);
  CHECK(s.m.value().raw_data() == m_buf);
  // A snapshot of m keeps its values; m moves to a fresh buffer.
  const tf::Tensor snapshot = s.m.value();
  const std::vector<float> before = snapshot.numpy<float>();
  REQUIRE(tf::detail::apply_adam(s.w, s.m, s.v, g, alpha, kB1, kB2, kEps));
  CHECK(snapshot.numpy<float>() == before);
  CHECK(s.m.value().raw_data() != snapshot.raw_data());
  CHECK(s.w.value().raw_data() == w_buf);

  // Declines (changing nothing) where the fused loop does not apply.
  const std::vector<float> w_now = s.w.value().numpy<float>();
  CHECK_FALSE(tf::detail::apply_adam(s.w, s.m, s.v, tf::ones({3, 64}), alpha, kB1, kB2, kEps));
  CHECK_FALSE(
      tf::detail::apply_adam(s.w, s.m, s.v, tf::cast(g, tf::float64), alpha, kB1, kB2, kEps));
  CHECK_FALSE(tf::detail::apply_adam(s.w, s.m, s.v, g, tf::constant(std::vector<float>{0.1f}), kB1,
                                     kB2, kEps));
  CHECK_FALSE(tf::detail::apply_adam(s.w, s.w, s.v, g, alpha, kB1, kB2, kEps));
  tf::Variable wide(tf::cast(init, tf::int32), "int_w");
  CHECK_FALSE(tf::detail::apply_adam(wide, s.m, s.v, g, alpha, kB1, kB2, kEps));
  CHECK(s.w.value().numpy<float>() == w_now);
}

TEST_CASE("apply_adam: Keras Adam takes it and matches its op-by-op amsgrad-free update",
          "[cpu][keras]") {
  tf::DeviceScope cpu("/cpu:0");
  const tf::Tensor init = tf::random::normal({5, 4}, 0, 1, tf::float32, 4);
  tf::Variable w(init, "w");
  Slots ops(init, "o_");
  tapeflow::keras::optimizers::Adam adam(0.01, kB1, kB2, kEps);
  for (int step = 1; step <= 3; ++step) {
    const tf::Tensor g = tf::random::normal({5, 4}, 0, 1, tf::float32, 20 + step);
    adam.apply_gradients({g}, {w});
    // Keras' bias-corrected rate for this step, as Adam's prepare() computes it.
    const tf::Tensor t = tf::constant(static_cast<float>(step));
    const tf::Tensor alpha = tf::divide(
        tf::multiply(tf::constant(0.01f),
                     tf::sqrt(tf::subtract(tf::Tensor(1.0), tf::pow(tf::constant(float(kB2)), t)))),
        tf::subtract(tf::Tensor(1.0), tf::pow(tf::constant(float(kB1)), t)));
    adam_ops(ops.w, ops.m, ops.v, g, alpha);
    check_close(w.value(), ops.w.value(), 1e-6, 1e-7);
  }
}
