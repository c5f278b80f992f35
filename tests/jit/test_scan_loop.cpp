// tf::map_fn, tf::foldl, tf::foldr and tf::scan inside tf::function (jit/scan_loop.cpp): one
// loop node whatever the number of elements, one trace for every length of a None first
// dimension, values equal to eager, gradients (a tape inside the function, a tape around the
// call, second and third order) equal to eager's, variables read inside, and the cases that
// still unroll (random ops in fn, no initializer with a None first dimension).
#include <string>
#include <thread>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/control_flow.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/higher_order.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

tf::Tensor rows(int64_t n, int64_t d, unsigned seed = 1) {
  return tf::constant(tf::testing::random_values(static_cast<size_t>(n * d), -1, 1, seed), {n, d});
}

// The four higher-order functions in one computation over x's rows, with a weight w captured:
// map_fn, scan (with and without an initializer, both directions), foldl and foldr.
tf::Tensor all_four(const tf::Tensor& x, const tf::Tensor& w) {
  const tf::Tensor mapped =
      tf::map_fn([&](const tf::Tensor& r) { return tf::tanh(r * w) + r * r; }, x);
  auto step = [&](const tf::Tensor& a, const tf::Tensor& r) { return tf::sin(a) * w + r; };
  const tf::Tensor s1 = tf::scan(step, mapped);
  const tf::Tensor s2 = tf::scan(step, mapped, tf::ones_like(w), true);
  const tf::Tensor f1 = tf::foldl(step, s1 + s2);
  const tf::Tensor f2 = tf::foldr(step, s1 * s2, w);
  return tf::reduce_sum(f1 * f2) + tf::reduce_sum(s1);
}

// The graph dump of f's trace for arguments of these specs.
template <class F, class... Specs>
std::string dump_of(F& f, const Specs&... specs) {
  return f.get_concrete_function(specs...).graph().to_string();
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("scan loop: a traced map_fn is one node whatever the number of elements", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    int traced_calls = 0;
    auto f = tf::function([&](const tf::Tensor& x) {
      return tf::map_fn(
          [&](const tf::Tensor& r) {
            ++traced_calls;
            return tf::exp(r) * tf::reduce_sum(r);
          },
          x);
    });
    for (int64_t n : {1, 5, 40}) {
      const tf::Tensor x = rows(n, 3);
      const tf::Tensor got = f(x);
      CHECK(got.placement() == dev);
      check_close(got,
                  tf::map_fn([](const tf::Tensor& r) { return tf::exp(r) * tf::reduce_sum(r); }, x),
                  1e-12, 1e-12);
    }
    // fn ran once per trace, not once per element.
    CHECK(traced_calls == f.tracing_count());
    const std::string small = dump_of(f, tf::TensorSpec({2, 3}, tf::float64));
    const std::string large = dump_of(f, tf::TensorSpec({500, 3}, tf::float64));
    INFO(large);
    CHECK(count(small, "exp(") == 1);
    CHECK(count(large, "exp(") == 1);
    CHECK(large.find("map_fn(") != std::string::npos);
    CHECK(large.find("  %0 body:\n") != std::string::npos);
  }
}

TEST_CASE("scan loop: one trace serves every length of a None first dimension", "[jit]") {
  auto f = tf::function(
      [](const tf::Tensor& x, const tf::Tensor& w) {
        return std::vector<tf::Tensor>{
            tf::map_fn([&](const tf::Tensor& r) { return tf::reduce_sum(r * w); }, x),
            tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return a * 0.5 + r; }, x,
                     tf::zeros({3}, tf::float64)),
            tf::foldl([](const tf::Tensor& a, const tf::Tensor& r) { return a + r * r; }, x,
                      tf::ones({3}, tf::float64))};
      },
      {.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float64),
                           tf::TensorSpec({3}, tf::float64)}});
  const tf::Tensor w = tf::constant({1.0, -2.0, 0.5});
  for (int64_t n : {4, 1, 9, 0, 2}) {
    INFO("n = " << n);
    const tf::Tensor x = rows(n, 3, static_cast<unsigned>(n + 3));
    const std::vector<tf::Tensor> got = f(x, w);
    REQUIRE(got[0].shape() == tf::TensorShape{n});
    REQUIRE(got[1].shape() == tf::TensorShape{n, 3});
    if (n > 0) {
      check_close(got[0], tf::reduce_sum(x * w, {1}), 1e-12, 1e-12);
      check_close(got[1],
                  tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return a * 0.5 + r; }, x,
                           tf::zeros({3}, tf::float64)),
                  1e-12, 1e-12);
    }
    check_close(got[2], tf::ones({3}, tf::float64) + tf::reduce_sum(x * x, {0}), 1e-12, 1e-12);
  }
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("scan loop: one trace serves every size of a None dimension inside the slices", "[jit]") {
  // Time-major (steps, None batch, 3): each slice, the carry and the gradient's body have the
  // batch dimension; the body traced at one batch size is specialised for the others.
  auto cell = [](const tf::Tensor& h, const tf::Tensor& r, const tf::Tensor& w) {
    return tf::tanh(h * w + r);
  };
  auto loss = [&](const std::vector<tf::Tensor>& xw) {
    const tf::Tensor h0 = tf::zeros_like(tf::reduce_sum(xw[0], {0}));
    const tf::Tensor hs = tf::scan(
        [&](const tf::Tensor& h, const tf::Tensor& r) { return cell(h, r, xw[1]); }, xw[0], h0);
    return tf::reduce_sum(tf::square(hs));
  };
  auto step = tf::function(
      [&](const tf::Tensor& x, const tf::Tensor& w) {
        return tf::testing::value_and_gradients(loss, {x, w});
      },
      {.input_signature = {tf::TensorSpec({4, tf::None, 3}, tf::float64),
                           tf::TensorSpec({3}, tf::float64)}});
  const tf::Tensor w = tf::constant({0.5, -1.0, 0.75});
  for (int64_t batch : {2, 5, 1, 3}) {
    INFO("batch " << batch);
    const tf::Tensor x =
        tf::reshape(rows(4 * batch, 3, static_cast<unsigned>(batch)), {4, batch, 3});
    const std::vector<tf::Tensor> got = step(x, w);
    const std::vector<tf::Tensor> want = tf::testing::value_and_gradients(loss, {x, w});
    for (size_t k = 0; k < want.size(); ++k) check_close(got[k], want[k], 1e-11, 1e-11);
  }
  CHECK(step.tracing_count() == 1);
}

TEST_CASE("scan loop: traced values equal eager for every form", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = rows(6, 4, 7), w = tf::constant({0.5, -1.0, 2.0, 0.25});
    auto f = tf::function(all_four);
    check_close(f(x, w), all_four(x, w), 1e-12, 1e-12);
    // Several elems and results; an integer result with fn_output_signature.
    auto g = tf::function([](const tf::Tensor& a, const tf::Tensor& b) {
      std::vector<tf::Tensor> r = tf::map_fn(
          [](const std::vector<tf::Tensor>& ab) {
            return std::vector<tf::Tensor>{ab[0] * ab[1], tf::argmax(ab[0] + ab[1], 0)};
          },
          std::vector<tf::Tensor>{a, b},
          {tf::TensorSpec({4}, tf::float64), tf::TensorSpec({}, tf::int64)});
      return r;
    });
    const tf::Tensor b = rows(6, 4, 9);
    const std::vector<tf::Tensor> got = g(x, b);
    check_close(got[0], x * b, 1e-12, 1e-12);
    CHECK(got[1].dtype() == tf::int64);
    check_close(tf::cast(got[1], tf::float64), tf::cast(tf::argmax(x + b, 1), tf::float64), 0, 0);
    // No initializer, both directions; one element; foldr's digits.
    auto h = tf::function([](const tf::Tensor& e) {
      auto digits = [](const tf::Tensor& a, const tf::Tensor& v) { return a * 10.0 + v; };
      return std::vector<tf::Tensor>{tf::foldl(digits, e), tf::foldr(digits, e),
                                     tf::scan(digits, e), tf::scan(digits, e, std::nullopt, true)};
    });
    std::vector<tf::Tensor> d = h(tf::constant({1.0, 2.0, 3.0}));
    check_values(d[0], {123});
    check_values(d[1], {321});
    check_values(d[2], {1, 12, 123});
    check_values(d[3], {321, 32, 3});
    d = h(tf::constant({4.0}));
    check_values(d[0], {4});
    check_values(d[2], {4});
    check_values(d[3], {4});
  }
}

TEST_CASE("scan loop: gradients with the tape inside and around the function", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = rows(5, 3, 11), w = tf::constant({0.5, -1.0, 0.75});
    auto eager = [&] {
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(w);
      return tape.gradient(all_four(x, w), std::vector<tf::Tensor>{x, w});
    };
    const std::vector<tf::Tensor> want = eager();
    // Inside.
    auto inside = tf::function([](const tf::Tensor& xv, const tf::Tensor& wv) {
      tf::GradientTape tape;
      tape.watch(xv);
      tape.watch(wv);
      return tape.gradient(all_four(xv, wv), std::vector<tf::Tensor>{xv, wv});
    });
    std::vector<tf::Tensor> got = inside(x, w);
    check_close(got[0], want[0], 1e-11, 1e-11);
    check_close(got[1], want[1], 1e-11, 1e-11);
    // Around.
    auto f = tf::function(all_four);
    {
      tf::GradientTape tape;
      tape.watch(x);
      tape.watch(w);
      got = tape.gradient(f(x, w), std::vector<tf::Tensor>{x, w});
    }
    check_close(got[0], want[0], 1e-11, 1e-11);
    check_close(got[1], want[1], 1e-11, 1e-11);
  }
  // Against central differences, through the traced function.
  auto f = tf::function(all_four);
  const tf::Tensor w = tf::constant({0.5, -1.0, 0.75});
  tf::testing::check_gradient([&](const tf::Tensor& x) { return f(x, w); }, {4, 3});
  tf::testing::check_gradient([&](const tf::Tensor& wv) { return f(rows(4, 3, 2), wv); }, {3});
}

TEST_CASE("scan loop: a variable read inside fn gets its gradient", "[jit]") {
  tf::Variable w(tf::constant({1.5, -0.5}), "w");
  auto loss = [&](const tf::Tensor& x) {
    return tf::reduce_sum(tf::map_fn(
        [&](const tf::Tensor& r) { return tf::reduce_sum(tf::square(r - w.read_value())); }, x));
  };
  auto step = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape tape;
    return tape.gradient(loss(x), w);
  });
  const tf::Tensor x = rows(7, 2, 5);
  tf::Tensor want;
  {
    tf::GradientTape tape;
    want = tape.gradient(loss(x), w);
  }
  check_close(step(x), want, 1e-12, 1e-12);
  // 2 * sum over rows of (w - r).
  check_close(want, (w.read_value() * 7.0 - tf::reduce_sum(x, {0})) * 2.0, 1e-12, 1e-12);
}

TEST_CASE("scan loop: second- and third-order gradients through the traced loops", "[jit]") {
  const tf::Tensor x = rows(4, 3, 21), w = tf::constant({0.5, -1.0, 0.75});
  auto f = tf::function(all_four);
  auto hessian_vector = [&](bool traced) {
    tf::GradientTape outer;
    outer.watch(x);
    outer.watch(w);
    tf::Tensor g;
    {
      tf::GradientTape inner;
      inner.watch(x);
      inner.watch(w);
      g = inner.gradient(traced ? f(x, w) : all_four(x, w), x);
    }
    return outer.gradient(tf::reduce_sum(g * rows(4, 3, 22)), std::vector<tf::Tensor>{x, w});
  };
  const std::vector<tf::Tensor> want = hessian_vector(false), got = hessian_vector(true);
  check_close(got[0], want[0], 1e-10, 1e-10);
  check_close(got[1], want[1], 1e-10, 1e-10);
  // Tapes inside the function, too.
  auto hv_inside = tf::function([](const tf::Tensor& xv, const tf::Tensor& wv) {
    tf::GradientTape outer;
    outer.watch(xv);
    tf::Tensor g;
    {
      tf::GradientTape inner;
      inner.watch(xv);
      g = inner.gradient(all_four(xv, wv), xv);
    }
    return outer.gradient(tf::reduce_sum(g * g), xv);
  });
  tf::Tensor want_inside;
  {
    tf::GradientTape outer;
    outer.watch(x);
    tf::Tensor g;
    {
      tf::GradientTape inner;
      inner.watch(x);
      g = inner.gradient(all_four(x, w), x);
    }
    want_inside = outer.gradient(tf::reduce_sum(g * g), x);
  }
  check_close(hv_inside(x, w), want_inside, 1e-10, 1e-10);
  // Third order of a scan.
  auto cumulative = [](const tf::Tensor& v) {
    return tf::reduce_sum(
        tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return tf::sin(a) * r + r; }, v));
  };
  auto fc = tf::function(cumulative);
  auto third = [&](bool traced) {
    tf::GradientTape t3;
    t3.watch(x);
    tf::Tensor g2;
    {
      tf::GradientTape t2;
      t2.watch(x);
      tf::Tensor g1;
      {
        tf::GradientTape t1;
        t1.watch(x);
        g1 = t1.gradient(traced ? fc(x) : cumulative(x), x);
      }
      g2 = t2.gradient(tf::reduce_sum(g1 * g1), x);
    }
    return t3.gradient(tf::reduce_sum(g2), x);
  };
  check_close(third(true), third(false), 1e-9, 1e-9);
}

TEST_CASE("scan loop: fn with random ops, or no initializer over None, unrolls as before",
          "[jit]") {
  auto noisy = tf::function([](const tf::Tensor& x) {
    return tf::map_fn(
        [](const tf::Tensor& r) { return r + tf::random::uniform({3}, 0.0, 1e-3, tf::float64); },
        x);
  });
  const std::string dump = dump_of(noisy, tf::TensorSpec({4, 3}, tf::float64));
  INFO(dump);
  CHECK(dump.find("map_fn(") == std::string::npos);
  CHECK(count(dump, "random_uniform(") == 4);
  // The gradient goes through the unrolled copies.
  auto grad = tf::function([&](const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    return tape.gradient(tf::reduce_sum(noisy(x) * x), x);
  });
  const tf::Tensor x = rows(4, 3);
  check_close(grad(x), x * 2.0, 1e-2, 3e-3);

  // foldl without an initializer needs the first element: over a None first dimension the
  // loop unrolls (one trace per length); with an initializer one trace serves every length.
  auto fold_first = tf::function(
      [](const tf::Tensor& v) {
        return tf::foldl([](const tf::Tensor& a, const tf::Tensor& r) { return a + r; }, v);
      },
      {.input_signature = {tf::TensorSpec({tf::None}, tf::float64)}});
  check_values(fold_first(tf::constant({1.0, 2.0, 3.0})), {6});
  check_values(fold_first(tf::constant({1.0, 2.0})), {3});
}

TEST_CASE("scan loop: errors name the op, the element and the types", "[jit]") {
  auto wrong_dtype = tf::function([](const tf::Tensor& x) {
    return tf::map_fn([](const tf::Tensor& r) { return tf::cast(r, tf::int32); }, x);
  });
  tf::testing::require_error(
      [&] {
        wrong_dtype(tf::constant({1.0f, 2.0f}));
      },
      {"map_fn", "int32", "float32", "traced for every element", "fn_output_signature"});
  auto growing = tf::function([](const tf::Tensor& x) {
    return tf::foldl([](const tf::Tensor& a, const tf::Tensor& r) { return tf::stack({a, r}); }, x);
  });
  tf::testing::require_error(
      [&] {
        growing(tf::constant({1.0f, 2.0f}));
      },
      {"foldl", "the accumulator of shape (2,)", "shape ()"});
  auto empty = tf::function([](const tf::Tensor& x) {
    return tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return a + r; }, x);
  });
  tf::testing::require_error([&] { empty(tf::zeros({0, 2})); }, {"scan", "(0, 2)", "initializer"});
  // Elems of different lengths, known only when the function runs.
  auto pair = tf::function(
      [](const tf::Tensor& a, const tf::Tensor& b) {
        return tf::map_fn(
            [](const std::vector<tf::Tensor>& ab) {
              return std::vector<tf::Tensor>{ab[0] + ab[1]};
            },
            std::vector<tf::Tensor>{a, b})[0];
      },
      {.input_signature = {tf::TensorSpec({tf::None}, tf::float32),
                           tf::TensorSpec({tf::None}, tf::float32)}});
  check_values(pair(tf::constant({1.0f, 2.0f}), tf::constant({3.0f, 4.0f})), {4, 6});
  tf::testing::require_error(
      [&] {
        pair(tf::constant({1.0f, 2.0f}), tf::constant({3.0f, 4.0f, 5.0f}));
      },
      {"map_fn", "different first dimensions", "2", "3"});
}

TEST_CASE("scan loop: threads replay a scan and take its gradient at once", "[jit][threads]") {
  // One traced function, four threads: the node, its body and the cached gradient node are
  // shared (ThreadSanitizer runs this case).
  auto step = [](const tf::Tensor& a, const tf::Tensor& r) { return tf::sin(a) * 0.5 + r; };
  auto f = tf::function([&](const tf::Tensor& x) { return tf::scan(step, x); });
  const tf::Tensor x0 = rows(6, 2, 3);
  f(x0);  // traced once, before the threads
  std::vector<std::vector<double>> got(4), want(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const tf::Tensor x = x0 * (1.0 + 0.5 * t);
      for (int rep = 0; rep < 5; ++rep) {
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor y = f(x);
        const tf::Tensor g = tape.gradient(tf::reduce_sum(y * y), x);
        got[t] = tf::detail::to_double_vector(tf::concat({y, g}, 0));
      }
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = tf::scan(step, x);  // eager
      want[t] =
          tf::detail::to_double_vector(tf::concat({y, tape.gradient(tf::reduce_sum(y * y), x)}, 0));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t)
    for (size_t k = 0; k < want[t].size(); ++k)
      CHECK(got[t][k] == Approx(want[t][k]).epsilon(1e-12));
  CHECK(f.tracing_count() == 1);
}

TEST_CASE("scan loop: nests with itself, cond and while_loop, with gradients", "[jit]") {
  const tf::Tensor x = rows(5, 3, 31), w = tf::constant({0.5, -1.0, 0.75});
  // Per row: a map_fn over its elements, a cond on its sign, a while_loop that halves it until
  // small; then a scan over the rows' results.
  auto program = [](const tf::Tensor& xv, const tf::Tensor& wv) {
    const tf::Tensor per_row = tf::map_fn(
        [&](const tf::Tensor& r) {
          const tf::Tensor inner =
              tf::map_fn([&](const tf::Tensor& e) { return tf::sin(e) * e; }, r * wv);
          const tf::Tensor picked = tf::cond(
              tf::greater(tf::reduce_sum(r), 0.0), [&] { return inner * 2.0; },
              [&] { return tf::exp(inner); });
          return tf::while_loop(
              [](const tf::Tensor& s) { return tf::greater(tf::reduce_sum(tf::abs(s)), 1.0); },
              [](const tf::Tensor& s) { return s * 0.5; }, picked, {.maximum_iterations = 10});
        },
        xv);
    return tf::reduce_sum(tf::scan(
        [](const tf::Tensor& a, const tf::Tensor& r) { return tf::tanh(a + r); }, per_row));
  };
  auto f = tf::function([&](const tf::Tensor& xv, const tf::Tensor& wv) {
    tf::GradientTape tape;
    tape.watch(xv);
    tape.watch(wv);
    const tf::Tensor y = program(xv, wv);
    std::vector<tf::Tensor> out{y};
    for (const tf::Tensor& g : tape.gradient(y, std::vector<tf::Tensor>{xv, wv})) out.push_back(g);
    return out;
  });
  tf::GradientTape tape;
  tape.watch(x);
  tape.watch(w);
  const tf::Tensor y = program(x, w);
  const std::vector<tf::Tensor> want = tape.gradient(y, std::vector<tf::Tensor>{x, w});
  const std::vector<tf::Tensor> got = f(x, w);
  check_close(got[0], y, 1e-12, 1e-12);
  check_close(got[1], want[0], 1e-10, 1e-10);
  check_close(got[2], want[1], 1e-10, 1e-10);
  const std::string dump =
      dump_of(f, tf::TensorSpec({5, 3}, tf::float64), tf::TensorSpec({3}, tf::float64));
  INFO(dump);
  CHECK(dump.find("map_fn(") != std::string::npos);
  CHECK(dump.find("map_fn_grad(") != std::string::npos);
}

TEST_CASE("scan loop: integer elems, results that are the slices, accumulators that are views",
          "[jit]") {
  tf::Variable w(tf::constant({0.5, 2.0, -1.0, 3.0}), "w");
  auto f = tf::function([&](const tf::Tensor& ids, const tf::Tensor& x) {
    tf::GradientTape tape;
    // Integer elems: each id picks an entry of w.
    const tf::Tensor picked =
        tf::map_fn([&](const tf::Tensor& i) { return tf::gather(w.read_value(), i); }, ids,
                   tf::TensorSpec({}, tf::float64));
    // fn returning its slice; foldl whose accumulator becomes a slice of elems.
    const tf::Tensor same = tf::map_fn([](const tf::Tensor& r) { return r; }, x);
    const tf::Tensor last = tf::foldl([](const tf::Tensor&, const tf::Tensor& r) { return r; }, x);
    const tf::Tensor loss =
        tf::reduce_sum(picked * picked) + tf::reduce_sum(same) + tf::reduce_sum(last * last);
    return std::vector<tf::Tensor>{picked, same, last, tape.gradient(loss, w)};
  });
  const tf::Tensor ids = tf::constant(std::vector<int64_t>{3, 0, 3, 1}, {4});
  const tf::Tensor x = rows(3, 2, 4);
  const std::vector<tf::Tensor> got = f(ids, x);
  check_values(got[0], {3.0, 0.5, 3.0, 2.0});
  check_close(got[1], x, 0, 0);
  check_close(got[2], tf::gather(x, tf::constant(int64_t{2})), 0, 0);
  // d/dw of sum(w[ids]^2): 2 * w[k] * count(k).
  check_values(got[3], {2 * 0.5, 2 * 2.0, 0.0, 2 * 2 * 3.0});
}
