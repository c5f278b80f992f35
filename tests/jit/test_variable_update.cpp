// Variable updates fused into the product that computes them (jit/variable_update.h): traced
// gradient-descent updates against the same updates run eagerly, every transpose and update
// form, float32 and float64; the cases that must stay unfused; updates in place and
// copy-on-write when a snapshot is held; replay under a recording tape.
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "jit/cuda_kernels.h"
#include "jit/function.h"
#include "jit/variable_update.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;

namespace {

bool has_op(const tf::Graph& g, const std::string& op) {
  for (const auto& node : g.nodes)
    if (node.prim->name() == op) return true;
  return false;
}

double rtol(tf::DType d) {
  return d == tf::float64 ? 1e-12 : 2e-6;
}

// Sets TAPEFLOW_FUSION for the scope (read when a graph is optimised).
struct FusionEnv : tf::testing::EnvScope {
  explicit FusionEnv(const char* value) : EnvScope("TAPEFLOW_FUSION", value) {}
};

enum class Form { SubScaled, SubScaleFirst, AddScaled, SubUnscaled, Momentum, MomentumAdd };

// One update of `w` by the product of a and b in the given form; lr is a 0-d tensor.
void update(tf::Variable& w, const tf::Tensor& a, const tf::Tensor& b, bool ta, bool tb,
            const tf::Tensor& lr, Form form) {
  const tf::Tensor g = tf::matmul(a, b, ta, tb);
  switch (form) {
    case Form::SubScaled:
      w.assign_sub(g * lr);
      break;
    case Form::SubScaleFirst:
      w.assign_sub(lr * g);
      break;
    case Form::AddScaled:
      w.assign_add(g * lr);
      break;
    case Form::SubUnscaled:
      w.assign_sub(g);
      break;
    // Keras SGD's momentum slot, m = mu m - lr g (mu = 0.9); and g + mu m, the decay first.
    case Form::Momentum:
      w.assign(w.value() * (lr * 18.0) - g * lr);
      break;
    case Form::MomentumAdd:
      w.assign(g + (lr * 18.0) * w.value());
      break;
  }
}

}  // namespace

TEST_CASE("variable updates: an update by a product fuses into one GEMM and matches eager",
          "[jit][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test())
    for (tf::DType dt : {tf::float32, tf::float64})
      for (int t = 0; t < 4; ++t)
        for (Form form : {Form::SubScaled, Form::SubScaleFirst, Form::AddScaled, Form::SubUnscaled,
                          Form::Momentum, Form::MomentumAdd}) {
          const bool ta = t & 1, tb = t & 2;
          CAPTURE(device.to_string(), tf::dtype_name(dt), ta, tb, static_cast<int>(form));
          tf::DeviceScope scope(device.to_string());
          // cuBLAS may order a product's sums differently with beta = 1.
          const double tol = device.is_gpu() && dt == tf::float32 ? 1e-5 : rtol(dt);
          // w: (5, 7) = op(a) (5 x 3) op(b) (3 x 7)
          const tf::Tensor a =
              tf::random::normal(ta ? tf::TensorShape{3, 5} : tf::TensorShape{5, 3}, 0, 1, dt, 11);
          const tf::Tensor b =
              tf::random::normal(tb ? tf::TensorShape{7, 3} : tf::TensorShape{3, 7}, 0, 1, dt, 12);
          const tf::Tensor init = tf::random::normal({5, 7}, 0, 1, dt, 13);
          const tf::Tensor lr = tf::constant(tf::Tensor(0.05), dt);
          tf::Variable traced_w(init, "w"), eager_w(init, "w_eager");
          auto step = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
            update(traced_w, x, y, ta, tb, lr, form);
            return tf::reduce_sum(x);
          });
          for (int i = 0; i < 3; ++i) {
            step(a, b);
            update(eager_w, a, b, ta, tb, lr, form);
            check_close(traced_w.value(), eager_w.value(), tol, tol);
          }
          CHECK(traced_w.value().placement() == device);
          const tf::Graph& g = step.get_concrete_function(tf::TensorSpec(a.shape(), dt),
                                                          tf::TensorSpec(b.shape(), dt))
                                   .graph();
          CHECK(has_op(g, "variable_matmul_update"));
          CHECK_FALSE(has_op(g, "matmul"));
          CHECK_FALSE(has_op(g, "read_variable"));
          CHECK_FALSE(has_op(g, "assign_variable"));
          CHECK(g.to_string().find("variable=w:0, transpose_a=" +
                                   std::string(ta ? "true" : "false")) != std::string::npos);
        }
}

TEST_CASE("variable updates: the scale may be an argument or a variable read",
          "[jit][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const double tol = device.is_gpu() ? 1e-5 : 2e-6;
    const tf::Tensor x = tf::random::normal({8, 4}, 0, 1, tf::float32, 1);
    const tf::Tensor dy = tf::random::normal({8, 6}, 0, 1, tf::float32, 2);
    const tf::Tensor init = tf::random::normal({4, 6}, 0, 1, tf::float32, 3);
    tf::Variable lr_var(tf::constant(0.02f), "lr", false);
    tf::Variable w_arg(init, "w_arg"), w_var(init, "w_var"), w_eager(init, "w_eager");
    auto by_arg =
        tf::function([&](const tf::Tensor& a, const tf::Tensor& b, const tf::Tensor& lr) {
          w_arg.assign_sub(tf::matmul(a, b, true, false) * lr);
          return tf::reduce_sum(a);
        });
    auto by_var = tf::function([&](const tf::Tensor& a, const tf::Tensor& b) {
      w_var.assign_sub(tf::matmul(a, b, true, false) * lr_var.value());
      return tf::reduce_sum(a);
    });
    for (int i = 0; i < 3; ++i) {
      const float lr = 0.02f * static_cast<float>(i + 1);
      lr_var.assign(tf::constant(lr));
      by_arg(x, dy, tf::constant(lr));
      by_var(x, dy);
      w_eager.assign_sub(tf::matmul(x, dy, true, false) * tf::constant(lr));
      check_close(w_arg.value(), w_eager.value(), tol, tol);
      check_close(w_var.value(), w_eager.value(), tol, tol);
    }
    CHECK(has_op(by_arg
                     .get_concrete_function(tf::TensorSpec({8, 4}), tf::TensorSpec({8, 6}),
                                            tf::TensorSpec(tf::TensorShape{}))
                     .graph(),
                 "variable_matmul_update"));
    CHECK(has_op(
        by_var.get_concrete_function(tf::TensorSpec({8, 4}), tf::TensorSpec({8, 6})).graph(),
        "variable_matmul_update"));
  }
}

TEST_CASE("variable updates: updates that must stay separate are not fused", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");
  const tf::Tensor a = tf::random::normal({4, 3}, 0, 1, tf::float32, 21);
  const tf::Tensor b = tf::random::normal({3, 5}, 0, 1, tf::float32, 22);
  const tf::Tensor init = tf::random::normal({4, 5}, 0, 1, tf::float32, 23);
  const tf::Tensor lr = tf::constant(0.1f);
  const tf::Tensor row = tf::random::normal({5}, 0, 1, tf::float32, 24);

  struct Case {
    const char* what;
    std::function<tf::Tensor(tf::Variable&, const tf::Tensor&, const tf::Tensor&)> body;
  };
  const std::vector<Case> cases = {
      {"the product is also a result",
       [&](tf::Variable& w, const tf::Tensor& x, const tf::Tensor& y) {
         tf::Tensor g = tf::matmul(x, y);
         w.assign_sub(g * lr);
         return g;
       }},
      {"the read is also a result",
       [&](tf::Variable& w, const tf::Tensor& x, const tf::Tensor& y) {
         tf::Tensor r = w.value();
         w.assign(r - tf::matmul(x, y) * lr);
         return r * 2.0f;
       }},
      {"another assignment lies between the read and the write",
       [&](tf::Variable& w, const tf::Tensor& x, const tf::Tensor& y) {
         tf::Tensor r = w.value();
         w.assign(tf::zeros({4, 5}));
         w.assign(r - tf::matmul(x, y) * lr);
         return tf::reduce_sum(x);
       }},
      {"the scale is not a scalar",
       [&](tf::Variable& w, const tf::Tensor& x, const tf::Tensor& y) {
         w.assign_sub(tf::matmul(x, y) * row);
         return tf::reduce_sum(x);
       }},
      {"the product is subtracted from the scale, not from the variable",
       [&](tf::Variable& w, const tf::Tensor& x, const tf::Tensor& y) {
         w.assign(tf::matmul(x, y) * lr - w.value());
         return tf::reduce_sum(x);
       }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    tf::Variable traced_w(init, "w"), eager_w(init, "w_eager");
    auto f = tf::function(
        [&](const tf::Tensor& x, const tf::Tensor& y) { return c.body(traced_w, x, y); });
    for (int i = 0; i < 2; ++i) {
      const tf::Tensor got = f(a, b);
      const tf::Tensor want = c.body(eager_w, a, b);
      check_close(got, want, 2e-6, 2e-6);
      check_close(traced_w.value(), eager_w.value(), 2e-6, 2e-6);
    }
    CHECK_FALSE(
        has_op(f.get_concrete_function(tf::TensorSpec({4, 3}), tf::TensorSpec({3, 5})).graph(),
               "variable_matmul_update"));
  }

  SECTION("TAPEFLOW_FUSION=0 keeps the separate ops") {
    FusionEnv off("0");
    tf::Variable w(init, "w");
    auto f = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
      w.assign_sub(tf::matmul(x, y) * lr);
      return tf::reduce_sum(x);
    });
    f(a, b);
    const tf::Graph& g =
        f.get_concrete_function(tf::TensorSpec({4, 3}), tf::TensorSpec({3, 5})).graph();
    CHECK_FALSE(has_op(g, "variable_matmul_update"));
    CHECK(has_op(g, "matmul"));
  }
}

TEST_CASE("variable updates: in place unless a snapshot shares the buffer",
          "[jit][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const double tol = device.is_gpu() ? 1e-5 : 2e-6;
    const tf::Tensor a = tf::random::normal({6, 4}, 0, 1, tf::float32, 31);
    const tf::Tensor b = tf::random::normal({4, 8}, 0, 1, tf::float32, 32);
    const tf::Tensor init = tf::random::normal({6, 8}, 0, 1, tf::float32, 33);
    tf::Variable w(init, "w"), eager_w(init, "w_eager");
    auto step = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) {
      w.assign_sub(tf::matmul(x, y) * 0.1f);
      return tf::reduce_sum(x);
    });
    auto eager_step = [&] { eager_w.assign_sub(tf::matmul(a, b) * 0.1f); };
    step(a, b);
    eager_step();

    // Nobody holds the value: the product accumulates into the variable's own buffer.
    const void* buffer = w.value().raw_data();
    step(a, b);
    eager_step();
    CHECK(w.value().raw_data() == buffer);
    check_close(w.value(), eager_w.value(), tol, tol);

    // A snapshot keeps its values; the variable moves to a fresh buffer.
    const tf::Tensor snapshot = w.value();
    const std::vector<float> before = snapshot.numpy<float>();
    step(a, b);
    eager_step();
    CHECK(snapshot.numpy<float>() == before);
    CHECK(w.value().raw_data() != snapshot.raw_data());
    check_close(w.value(), eager_w.value(), tol, tol);
  }
}

TEST_CASE("variable updates: a train step replayed under a tape updates once and differentiates",
          "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");
  const tf::Tensor x = tf::random::normal({5, 3}, 0, 1, tf::float32, 41);
  const tf::Tensor init = tf::random::normal({3, 2}, 0, 1, tf::float32, 42);
  tf::Variable w(init, "w"), eager_w(init, "w_eager");
  auto body = [](tf::Variable& v, const tf::Tensor& in) {
    tf::GradientTape tape;
    tf::Tensor y = tf::matmul(in, v);
    tf::Tensor loss = tf::reduce_sum(y * y);
    tf::Tensor g = tape.gradient(loss, std::vector<tf::Variable>{v})[0];
    v.assign_sub(g * 0.01f);
    return loss;
  };
  auto step = tf::function([&](const tf::Tensor& in) { return body(w, in); });
  step(x);
  body(eager_w, x);
  for (int i = 0; i < 2; ++i) {
    tf::GradientTape outer;
    outer.watch(x);
    tf::Tensor traced_loss = step(x);
    tf::Tensor traced_dx = outer.gradient(traced_loss, x);
    tf::GradientTape eager_outer;
    eager_outer.watch(x);
    tf::Tensor eager_loss = body(eager_w, x);
    tf::Tensor eager_dx = eager_outer.gradient(eager_loss, x);
    check_close(traced_loss, eager_loss, 1e-5, 1e-5);
    check_close(traced_dx, eager_dx, 1e-5, 1e-5);
    check_close(w.value(), eager_w.value(), 1e-5, 1e-5);
  }
  CHECK(
      has_op(step.get_concrete_function(tf::TensorSpec({5, 3})).graph(), "variable_matmul_update"));
}

TEST_CASE("variable updates: elementwise updates run in place and equal eager bit for bit",
          "[jit][cpu][cuda]") {
  // On a GPU: float32 chains fused by jit_compile into generated kernels (which round as the
  // eager kernels do), recompiled to write over the variable.
  for (const tf::Device& device : tf::testing::devices_under_test())
    for (tf::DType dt : {tf::float32, tf::float64}) {
      if (device.is_gpu() && dt != tf::float32) continue;
      if (device.is_gpu() && !tf::jit::nvrtc_available()) {
        WARN("NVRTC is not available: no generated kernels to update in place on the GPU");
        continue;
      }
      if (device.is_gpu() && tf::testing::jit_compile_forced_off("GPU updates in place")) continue;
      CAPTURE(device.to_string(), tf::dtype_name(dt));
      tf::DeviceScope scope(device.to_string());
      const double tol = device.is_gpu() ? 1e-6 : 0.0;
      const tf::Tensor g = tf::random::normal({300, 7}, 0, 1, dt, 51);
      const tf::Tensor init = tf::random::normal({300, 7}, 0, 1, dt, 52);
      const tf::Tensor b1 = tf::constant(tf::Tensor(0.9), dt);
      const tf::Tensor lr = tf::constant(tf::Tensor(0.01), dt);
      // Momentum: m = 0.9 m + 0.1 g (a fused tree), w -= lr m and c += 0.5 g (fused chains whose
      // last op reads the variable as its first operand), r = 0.5 g - r (as its second).
      auto body = [&](std::vector<tf::Variable>& v, const tf::Tensor& grad) {
        v[1].assign(v[1].value() * b1 + grad * (1.0 - 0.9));
        v[0].assign_sub(v[1].value() * lr);
        v[2].assign_add(grad * 0.5);
        v[3].assign(grad * 0.5 - v[3].value());
        return tf::reduce_sum(grad);
      };
      auto make = [&] {
        return std::vector<tf::Variable>{tf::Variable(init, "w"),
                                         tf::Variable(tf::zeros_like(init), "m"),
                                         tf::Variable(init, "c"), tf::Variable(init, "r")};
      };
      std::vector<tf::Variable> vars = make(), eager_vars = make();
      auto step = tf::function([&](const tf::Tensor& grad) { return body(vars, grad); },
                               tf::FunctionOptions{.jit_compile = true});
      step(g);
      body(eager_vars, g);
      std::vector<const void*> buffers;
      for (const auto& v : vars) buffers.push_back(v.value().raw_data());
      for (int i = 0; i < 3; ++i) {
        step(g);
        body(eager_vars, g);
      }
      for (size_t k = 0; k < vars.size(); ++k) {
        CAPTURE(vars[k].name());
        CHECK(vars[k].value().raw_data() == buffers[k]);
        check_close(vars[k].value(), eager_vars[k].value(), tol, tol);
      }
      tf::Variable& c = vars[2];
      const tf::Variable& ec = eager_vars[2];
      const tf::Graph& graph = step.get_concrete_function(tf::TensorSpec({300, 7}, dt)).graph();
      int updates = 0;
      for (const auto& node : graph.nodes)
        updates += std::string(node.prim->name()) == "variable_elementwise_update";
      CHECK(updates == 4);
      CHECK_FALSE(has_op(graph, "assign_variable"));

      // A held snapshot keeps its values: the update goes to a fresh buffer.
      const tf::Tensor snapshot = c.value();
      const tf::Tensor before = snapshot * 1.0;  // a copy in a buffer of its own
      step(g);
      body(eager_vars, g);
      check_close(snapshot, before, 0, 0);
      CHECK(c.value().raw_data() != snapshot.raw_data());
      check_close(c.value(), ec.value(), tol, tol);
    }
}

TEST_CASE("variable updates: single-op updates run in place too", "[jit][cpu][cuda]") {
  // w.assign_add(m) (Keras SGD with momentum ends with it), an update by a row (a bias-like
  // broadcast), the variable as the second operand; and shapes that keep the separate nodes:
  // a one-element operand broadcast over the variable, the variable's value read twice.
  for (const tf::Device& device : tf::testing::devices_under_test())
    for (tf::DType dt : {tf::float32, tf::float64}) {
      if (device.is_gpu() && (dt != tf::float32 || !tf::jit::nvrtc_available())) continue;
      if (device.is_gpu() && tf::testing::jit_compile_forced_off("GPU updates in place")) continue;
      CAPTURE(device.to_string(), tf::dtype_name(dt));
      tf::DeviceScope scope(device.to_string());
      const double tol = device.is_gpu() ? 1e-6 : 0.0;
      const tf::Tensor m = tf::random::normal({40, 6}, 0, 1, dt, 61);
      const tf::Tensor row = tf::random::normal({6}, 0, 1, dt, 62);
      const tf::Tensor init = tf::random::normal({40, 6}, 0, 1, dt, 63);
      const tf::Tensor half = tf::constant(tf::Tensor(0.5), dt);
      auto body = [&](std::vector<tf::Variable>& v, const tf::Tensor& mom) {
        v[0].assign_add(mom);
        v[1].assign(v[1].value() * row);
        v[2].assign(mom - v[2].value());
        v[3].assign(v[3].value() * half);
        const tf::Tensor r = v[4].value();
        v[4].assign(r + r);
        v[5].assign(v[5].value() + v[5].value());
        return tf::reduce_sum(mom);
      };
      auto make = [&] {
        std::vector<tf::Variable> vars;
        for (const char* name : {"w", "b", "r", "s", "t", "u"}) vars.emplace_back(init, name);
        return vars;
      };
      std::vector<tf::Variable> vars = make(), eager_vars = make();
      auto step = tf::function([&](const tf::Tensor& mom) { return body(vars, mom); },
                               tf::FunctionOptions{.jit_compile = true});
      step(m);
      body(eager_vars, m);
      std::vector<const void*> buffers;
      for (const auto& v : vars) buffers.push_back(v.value().raw_data());
      for (int i = 0; i < 2; ++i) {
        step(m);
        body(eager_vars, m);
      }
      for (size_t k = 0; k < vars.size(); ++k) {
        CAPTURE(vars[k].name());
        check_close(vars[k].value(), eager_vars[k].value(), tol, tol);
        if (k < 3) CHECK(vars[k].value().raw_data() == buffers[k]);
      }
      const tf::Graph& graph = step.get_concrete_function(tf::TensorSpec({40, 6}, dt)).graph();
      INFO(graph.to_string());
      int updates = 0, assigns = 0;
      for (const auto& node : graph.nodes) {
        updates += std::string(node.prim->name()) == "variable_elementwise_update";
        assigns += std::string(node.prim->name()) == "assign_variable";
      }
      CHECK(updates == 3);
      CHECK(assigns == 3);
    }
}

TEST_CASE("variable updates: a value read before a fused update keeps the old value",
          "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");
  const tf::Tensor a = tf::random::normal({4, 3}, 0, 1, tf::float32, 61);
  const tf::Tensor b = tf::random::normal({3, 5}, 0, 1, tf::float32, 62);
  const tf::Tensor init = tf::random::normal({4, 5}, 0, 1, tf::float32, 63);
  for (bool by_product : {true, false}) {
    CAPTURE(by_product);
    // r holds the value from before the first update; the second assignment must use it.
    auto body = [&](tf::Variable& w, const tf::Tensor& x, const tf::Tensor& y) {
      tf::Tensor r = w.value();
      if (by_product)
        w.assign_sub(tf::matmul(x, y) * 0.1f);
      else
        w.assign_sub(tf::matmul(x, y) * 0.1f + 1.0f);
      w.assign(r * 2.0f + 1.0f);
      return tf::reduce_sum(x);
    };
    tf::Variable w(init, "w"), eager_w(init, "w_eager");
    auto f = tf::function([&](const tf::Tensor& x, const tf::Tensor& y) { return body(w, x, y); });
    for (int i = 0; i < 3; ++i) {
      f(a, b);
      body(eager_w, a, b);
      check_close(w.value(), eager_w.value(), 1e-6, 1e-6);
    }
    const tf::Graph& g =
        f.get_concrete_function(tf::TensorSpec({4, 3}), tf::TensorSpec({3, 5})).graph();
    CHECK(has_op(g, by_product ? "variable_matmul_update" : "variable_elementwise_update"));
    CHECK(has_op(g, "assign_variable"));  // the second assignment stays as it was
  }
}

TEST_CASE("variable updates: concurrent replays lose no update", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");
  // Small integers: every sum is exact in float32, so the result shows whether any update was
  // lost (a fused update reads and writes the variable under its lock, in one step).
  const tf::Tensor a = tf::constant(std::vector<float>{1, 2, 0, 1, 1, 1}, {3, 2});
  const tf::Tensor b = tf::constant(std::vector<float>{1, 0, 2, 1, 1, 1}, {2, 3});
  const tf::Tensor g = tf::constant(std::vector<float>{1, 2, 3}, {3});
  tf::Variable w(tf::zeros({3, 3}), "w"), c(tf::zeros({3}), "c");
  auto step = tf::function([&](const tf::Tensor& x, const tf::Tensor& y, const tf::Tensor& d) {
    w.assign_sub(tf::matmul(x, y) * 1.0f);
    c.assign_add(d * 2.0f);
    return tf::reduce_sum(d);
  });
  step(a, b, g);
  const int kCalls = 300;
  auto worker = [&] {
    tf::DeviceScope scope("/cpu:0");
    for (int i = 0; i < kCalls; ++i) step(a, b, g);
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  const int total = 2 * kCalls + 1;
  check_close(w.value(), tf::matmul(a, b) * static_cast<float>(-total), 0, 0);
  check_close(c.value(), g * static_cast<float>(2 * total), 0, 0);
  const tf::Graph& graph = step.get_concrete_function(tf::TensorSpec({3, 2}),
                                                      tf::TensorSpec({2, 3}), tf::TensorSpec({3}))
                               .graph();
  CHECK(has_op(graph, "variable_matmul_update"));
  CHECK(has_op(graph, "variable_elementwise_update"));
}

TEST_CASE("variable updates: one trace with a None batch serves every batch size", "[jit][cpu]") {
  tf::DeviceScope cpu("/cpu:0");
  const tf::Tensor init = tf::random::normal({4, 3}, 0, 1, tf::float32, 71);
  const tf::Tensor bias0 = tf::random::normal({3}, 0, 1, tf::float32, 72);
  // A dense layer's SGD step: the weight's gradient x^T dy sums over the batch.
  auto body = [](tf::Variable& w, tf::Variable& bias, const tf::Tensor& x, const tf::Tensor& dy) {
    w.assign_sub(tf::matmul(x, dy, true, false) * 0.1f);
    bias.assign_sub(tf::reduce_sum(dy, {0}) * 0.1f);
    return tf::reduce_sum(x);
  };
  tf::Variable w(init, "w"), b(bias0, "b"), ew(init, "ew"), eb(bias0, "eb");
  auto step =
      tf::function([&](const tf::Tensor& x, const tf::Tensor& dy) { return body(w, b, x, dy); },
                   tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4}),
                                                           tf::TensorSpec({tf::None, 3})}});
  for (int64_t batch : {int64_t{5}, int64_t{1}, int64_t{32}, int64_t{7}}) {
    CAPTURE(batch);
    const tf::Tensor x = tf::random::normal({batch, 4}, 0, 1, tf::float32, 80 + batch);
    const tf::Tensor dy = tf::random::normal({batch, 3}, 0, 1, tf::float32, 90 + batch);
    step(x, dy);
    body(ew, eb, x, dy);
    check_close(w.value(), ew.value(), 2e-6, 2e-6);
    check_close(b.value(), eb.value(), 0, 0);
  }
  CHECK(step.tracing_count() == 1);
  // Each batch size replays the one trace specialised to its shapes (and optimised).
  const tf::Graph& g =
      step.get_concrete_function(tf::TensorSpec({7, 4}), tf::TensorSpec({7, 3})).graph();
  INFO(g.to_string());
  CHECK(has_op(g, "variable_matmul_update"));
  CHECK(has_op(g, "variable_elementwise_update"));
}
