// A sweep over the differentiable ops in a tf::function whose input has a None batch: for each
// op, the function computes a loss of the op's result and its gradient (the tape inside), is
// called at several batch sizes, and must equal eager at each while tracing once. An op whose
// forward or gradient bakes a traced size into the graph (a reshape to the traced batch, a
// segment count) makes the probes differ and the function trace per shape: the CHECK on
// tracing_count() names the op.
#include <functional>
#include <string>
#include <vector>

#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;

namespace {

using Op = std::function<tf::Tensor(const tf::Tensor&)>;

struct Case {
  const char* name;
  Op op;
  // Traced, a while_loop's second-order gradient with the tapes inside is not implemented
  // (docs/function.md): expm squares through one.
  bool second_order = true;
};

// x: (batch, 3, 4) float64 in [0.2, 1.2) (every op below is smooth there).
std::vector<Case> cases() {
  const tf::Tensor w = tf::constant({0.5, -1.0, 0.75, 2.0});  // broadcasts over the last axis
  const tf::Tensor m = tf::reshape(tf::range(0.0, 20.0, 1.0, tf::float64) * 0.1 - 1.0, {4, 5});
  const tf::Tensor filters =
      tf::reshape(tf::range(0.0, 24.0, 1.0, tf::float64) * 0.05 - 0.5, {2, 4, 3});
  const tf::Tensor i0 = tf::constant(std::vector<int64_t>{0});
  const tf::Tensor i1 = tf::constant(std::vector<int64_t>{2, 0, 2});
  return {
      {"exp", [](const tf::Tensor& x) { return tf::exp(x); }},
      {"log", [](const tf::Tensor& x) { return tf::log(x); }},
      {"sqrt and rsqrt", [](const tf::Tensor& x) { return tf::sqrt(x) + tf::rsqrt(x); }},
      {"tanh, sigmoid, sin",
       [](const tf::Tensor& x) { return tf::tanh(x) * tf::sigmoid(x) + tf::sin(x); }},
      {"erf, atan", [](const tf::Tensor& x) { return tf::erf(x) + tf::atan(x); }},
      {"lgamma, digamma",
       [](const tf::Tensor& x) { return tf::math::lgamma(x) + tf::math::digamma(x); }},
      {"activations",
       [](const tf::Tensor& x) {
         const tf::Tensor c = x - 0.7;
         return tf::nn::softplus(c) + tf::nn::elu(c) + tf::nn::gelu(c) + tf::nn::selu(c) +
                tf::nn::relu(c) + tf::nn::leaky_relu(c);
       }},
      {"broadcast arithmetic",
       [w](const tf::Tensor& x) { return x * w + x / (w + 3.0) - tf::pow(x, w + 2.0); }},
      {"maximum, squared_difference, atan2",
       [w](const tf::Tensor& x) {
         return tf::maximum(x, w * 0.5) + tf::math::squared_difference(x, w) +
                tf::atan2(x, w + 3.0);
       }},
      {"where, clip_by_value",
       [](const tf::Tensor& x) {
         return tf::where(tf::greater(x, 0.7), x, x * x) +
                tf::clip_by_value(x, tf::constant(0.3), tf::constant(0.9));
       }},
      {"clip_by_norm", [](const tf::Tensor& x) { return tf::clip_by_norm(x, tf::constant(1.0)); }},
      {"reduce_sum, reduce_mean",
       [](const tf::Tensor& x) {
         return tf::reduce_sum(x, 1) * tf::reduce_mean(x, {0, 1}) +
                tf::reduce_sum(tf::reduce_mean(x, 0));
       }},
      {"reduce_max, reduce_min",
       [](const tf::Tensor& x) {
         return tf::reduce_max(x, -1) * tf::reduce_min(x, {0, 2});
       }},
      {"reduce_prod", [](const tf::Tensor& x) { return tf::reduce_prod(x, 1); }},
      {"reduce_logsumexp", [](const tf::Tensor& x) { return tf::reduce_logsumexp(x, 2); }},
      {"reduce_variance, reduce_std",
       [](const tf::Tensor& x) {
         return tf::math::reduce_variance(x, 0) * tf::reduce_sum(tf::math::reduce_std(x, 1));
       }},
      {"norms",
       [](const tf::Tensor& x) {
         return tf::linalg::norm(x, "euclidean", -1) + tf::math::reduce_euclidean_norm(x, 2);
       }},
      {"l2_normalize", [](const tf::Tensor& x) { return tf::linalg::l2_normalize(x, 0); }},
      {"moments and batch_normalization",
       [](const tf::Tensor& x) {
         const auto [mean, variance] = tf::nn::moments(x, {0});
         return tf::nn::batch_normalization(x, mean, variance, tf::Tensor(), tf::Tensor(), 1e-3);
       }},
      {"softmax, log_softmax",
       [](const tf::Tensor& x) { return tf::nn::softmax(x, 0) + tf::nn::log_softmax(x, -1); }},
      {"transpose, reshape",
       [](const tf::Tensor& x) {
         return tf::reshape(tf::transpose(x, {1, 0, 2}), {3, -1}) * 2.0;
       }},
      {"expand_dims, squeeze",
       [](const tf::Tensor& x) { return tf::squeeze(tf::expand_dims(x, 1) * 2.0, {1}); }},
      {"concat, stack",
       [](const tf::Tensor& x) {
         return tf::reduce_sum(tf::concat({x, x * 2.0}, 0)) +
                tf::reduce_sum(tf::stack({x, -x * 2.0}, 1), {1});
       }},
      {"concat along a known axis",
       [](const tf::Tensor& x) {
         return tf::concat({x, tf::sin(x)}, 1);
       }},
      {"split",
       [](const tf::Tensor& x) {
         const std::vector<tf::Tensor> p = tf::split(x, 2, 2);
         return p[0] * p[1];
       }},
      {"slice, pad",
       [](const tf::Tensor& x) {
         return tf::pad(tf::slice(x, {0, 1, 0}, {-1, 2, -1}), {{0, 0}, {1, 0}, {0, 2}});
       }},
      {"tile",
       [](const tf::Tensor& x) {
         return tf::tile(x, {2, 1, 2});
       }},
      {"tile by odd multiples and by zero",
       [](const tf::Tensor& x) {
         return tf::tile(x, {3, 1, 5}) + tf::reduce_sum(tf::tile(x, {0, 1, 1}));
       }},
      {"repeat", [](const tf::Tensor& x) { return tf::repeat(x, 2, 0) + 0.0; }},
      {"unstack a known axis",
       [](const tf::Tensor& x) {
         const std::vector<tf::Tensor> rows = tf::unstack(x, std::nullopt, 1);
         return rows[0] * rows[2];
       }},
      {"matrix inverse, determinant, cholesky",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) + tf::eye(3, tf::float64);
         return tf::reduce_sum(tf::linalg::inv(a), {1}) +
                tf::expand_dims(tf::linalg::det(a) + tf::linalg::logdet(a), 1) +
                tf::reduce_sum(tf::linalg::cholesky(a), {2});
       }},
      {"solve, trace",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) + tf::eye(3, tf::float64);
         return tf::linalg::solve(a, x) + tf::reshape(tf::linalg::trace(a), {-1, 1, 1});
       }},
      {"eigh",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) + tf::eye(3, tf::float64);
         return tf::linalg::eigh(a).eigenvalues;
       }},
      {"qr", [](const tf::Tensor& x) { return tf::linalg::qr(x, false).r; }},
      {"svd", [](const tf::Tensor& x) { return tf::linalg::svd(x, false, false).s; }},
      {"band_part, diag_part, set_diag, matvec, slogdet",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) + tf::eye(3, tf::float64);
         return tf::linalg::diag_part(tf::linalg::band_part(a, 1, 0)) +
                tf::linalg::matvec(tf::linalg::set_diag(a, tf::reduce_sum(x, {2})),
                                   tf::reduce_mean(x, {2})) +
                tf::expand_dims(tf::linalg::slogdet(a).second, 1);
       }},
      {"triangular_solve, cholesky_solve",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) + tf::eye(3, tf::float64);
         const tf::Tensor c = tf::linalg::cholesky(a);
         return tf::linalg::triangular_solve(c, x) + tf::linalg::cholesky_solve(c, x);
       }},
      {"triangular_solve with a broadcast matrix",
       [](const tf::Tensor& x) {
         const tf::Tensor lower =
             tf::constant({{2.0, 0.0, 0.0}, {0.5, 1.5, 0.0}, {-1.0, 0.25, 3.0}});
         return tf::linalg::triangular_solve(lower, x);
       }},
      {"lu, lu_matrix_inverse",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) + tf::eye(3, tf::float64);
         const auto [lu, perm] = tf::linalg::lu(a);
         return tf::linalg::lu_matrix_inverse(lu, perm);
       }},
      {"pinv, lstsq",
       [](const tf::Tensor& x) {
         const tf::Tensor a = tf::matmul(x, x, false, true) * 0.1;
         return tf::reduce_sum(tf::linalg::pinv(x), {1}, true) +
                tf::reduce_sum(tf::linalg::lstsq(x, a), {1}, true);
       }},
      {"expm",
       [](const tf::Tensor& x) { return tf::linalg::expm(tf::matmul(x, x, false, true) * 0.1); },
       false},
      {"relu6, crelu, log_sigmoid, l2_loss",
       [](const tf::Tensor& x) {
         return tf::nn::relu6(x * 8.0 - 2.0) + tf::nn::log_sigmoid(x) +
                tf::reduce_sum(tf::nn::crelu(x - 0.7), -1, true) + tf::nn::l2_loss(x);
       }},
      {"xlogy, polygamma, igamma",
       [](const tf::Tensor& x) {
         return tf::math::xlogy(x, x + 1.0) + tf::math::polygamma(tf::constant(1.0), x + 1.0) +
                tf::math::igamma(tf::constant(2.0), x);
       }},
      {"sparse softmax cross entropy with labels from the batch",
       [](const tf::Tensor& x) {
         const tf::Tensor labels = tf::argmax(x, 2);  // (batch, 3) int64
         return tf::nn::sparse_softmax_cross_entropy_with_logits(labels, x * 2.0);
       }},
      {"embedding_lookup of rows of the batch",
       [](const tf::Tensor& x) {
         const tf::Tensor table = tf::reshape(x, {-1, 4});  // (batch * 3, 4)
         return tf::nn::embedding_lookup(table, tf::constant(std::vector<int64_t>{0, 2, 1}));
       }},
      {"local_response_normalization, depth_to_space",
       [](const tf::Tensor& x) {
         const tf::Tensor img = tf::expand_dims(x, 1);  // (batch, 1, 3, 4)
         return tf::reduce_sum(tf::nn::local_response_normalization(img, 1)) +
                tf::reduce_sum(tf::nn::depth_to_space(img, 2), {1, 2, 3});
       }},
      {"cross entropies",
       [](const tf::Tensor& x) {
         const tf::Tensor labels = tf::nn::softmax(x * 0.5);
         return tf::nn::softmax_cross_entropy_with_logits(labels, x) +
                tf::reduce_sum(tf::nn::sigmoid_cross_entropy_with_logits(labels, x), -1);
       }},
      {"gather along the batch", [i0](const tf::Tensor& x) { return tf::gather(x, i0, 0) * x; }},
      {"gather along a known axis", [i1](const tf::Tensor& x) { return tf::gather(x, i1, 1); }},
      {"reverse along the batch and a known axis",
       [](const tf::Tensor& x) { return tf::reverse(x, {0}) * tf::reverse(x, {1}) + x; }},
      {"roll", [](const tf::Tensor& x) { return tf::roll(x, 1, 2) * x; }},
      {"cumsum, cumprod, cumulative_logsumexp",
       [](const tf::Tensor& x) {
         return tf::cumsum(x, 0) + tf::cumprod(x, 1) + tf::cumsum(x, 2, true, true) +
                tf::cumulative_logsumexp(x, 0, false, true);
       }},
      {"matmul",
       [m](const tf::Tensor& x) {
         return tf::matmul(x, m) + tf::reduce_sum(tf::matmul(x, x, false, true));
       }},
      {"einsum", [m](const tf::Tensor& x) { return tf::einsum("bij,jk->bik", x, m); }},
      {"sort, top_k",
       [](const tf::Tensor& x) {
         return tf::sort(x, -1) + tf::reduce_sum(tf::math::top_k(x, 2).first);
       }},
      {"conv1d", [filters](const tf::Tensor& x) { return tf::nn::conv1d(x, filters, 1, "SAME"); }},
      {"conv2d in both layouts",
       [filters](const tf::Tensor& x) {
         // (batch, 3, 4, 1) images; (2, 2, 1, 3) filters.
         const tf::Tensor img = tf::expand_dims(x, 3);
         const tf::Tensor f = tf::reshape(tf::slice(filters, {0, 0, 0}, {2, 2, 3}), {2, 2, 1, 3});
         return tf::nn::conv2d(img, f, 1, "SAME") +
                tf::transpose(
                    tf::nn::conv2d(tf::transpose(img, {0, 3, 1, 2}), f, 1, "SAME", {1}, "NCHW"),
                    {0, 2, 3, 1});
       }},
      {"depthwise and separable conv2d",
       [filters](const tf::Tensor& x) {
         const tf::Tensor img = tf::stack({x, x * x}, 3);  // (batch, 3, 4, 2)
         const tf::Tensor dw = tf::reshape(tf::slice(filters, {0, 0, 0}, {2, 2, 2}), {2, 2, 2, 1});
         const tf::Tensor pw = tf::reshape(tf::slice(filters, {1, 0, 0}, {1, 2, 3}), {1, 1, 2, 3});
         return tf::reduce_sum(tf::nn::depthwise_conv2d(img, dw, {1}, "SAME"), -1, true) +
                tf::reduce_sum(tf::nn::separable_conv2d(img, dw, pw, {1}, "VALID"));
       }},
      {"max_pool2d, avg_pool2d, space_to_depth",
       [](const tf::Tensor& x) {
         const tf::Tensor img = tf::expand_dims(x, 3);
         return tf::nn::max_pool2d(img, {2}, {1}, "SAME") +
                tf::reduce_sum(tf::nn::avg_pool2d(img, {2}, {2}, "SAME")) +
                tf::reduce_sum(
                    tf::nn::space_to_depth(tf::slice(img, {0, 0, 0, 0}, {-1, 2, 4, 1}), 2));
       }},
      {"max_pool1d, avg_pool1d",
       [](const tf::Tensor& x) {
         return tf::nn::max_pool1d(x, 2, 1, "SAME") + tf::nn::avg_pool1d(x, 2, 1, "SAME");
       }},
      {"map_fn over the batch",
       [](const tf::Tensor& x) {
         return tf::map_fn([](const tf::Tensor& r) { return tf::tanh(r) * tf::reduce_sum(r); }, x);
       }},
  };
}

tf::Tensor input(int64_t batch) {
  return tf::constant(tf::testing::random_values(static_cast<size_t>(batch * 12), 0.2, 1.2,
                                                 static_cast<unsigned>(batch + 11)),
                      {batch, 3, 4});
}

}  // namespace

TEST_CASE("None batch sweep: each op and its gradient trace once and equal eager", "[jit][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : cases()) {
      INFO("op: " << c.name);
      auto loss = [&](const std::vector<tf::Tensor>& xs) {
        return tf::reduce_sum(tf::sin(c.op(xs[0])));
      };
      auto f = tf::function(
          [&](const tf::Tensor& x) { return tf::testing::value_and_gradients(loss, {x}); },
          {.input_signature = {tf::TensorSpec({tf::None, 3, 4}, tf::float64)}});
      for (int64_t batch : {2, 5, 1, 3}) {
        INFO("batch " << batch);
        const tf::Tensor x = input(batch);
        const std::vector<tf::Tensor> want = tf::testing::value_and_gradients(loss, {x});
        const std::vector<tf::Tensor> got = f(x);
        REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < want.size(); ++k)
          tf::testing::check_close(got[k], want[k], 1e-10, 1e-10);
      }
      CHECK(f.tracing_count() == 1);
    }
  }
}

TEST_CASE("None batch sweep: second-order gradients trace once and equal eager", "[jit]") {
  // d/dx of the squared norm of the gradient, nested tapes inside the function.
  for (const Case& c : cases()) {
    if (!c.second_order) continue;
    INFO("op: " << c.name);
    auto second = [&](const tf::Tensor& x) { return tf::testing::first_and_second(c.op, x)[2]; };
    auto f =
        tf::function(second, {.input_signature = {tf::TensorSpec({tf::None, 3, 4}, tf::float64)}});
    for (int64_t batch : {2, 5, 1, 3}) {
      INFO("batch " << batch);
      const tf::Tensor x = input(batch);
      tf::testing::check_close(f(x), second(x), 1e-9, 1e-9);
    }
    CHECK(f.tracing_count() == 1);
  }
}

namespace {

// x: (2, steps, 4) float64 in [0.2, 1.2): sequence ops along a None time axis.
std::vector<Case> sequence_cases() {
  const tf::Tensor m = tf::reshape(tf::range(0.0, 20.0, 1.0, tf::float64) * 0.1 - 1.0, {4, 5});
  return {
      {"reductions over time",
       [](const tf::Tensor& x) {
         return tf::reduce_mean(x, 1) * tf::reduce_max(x, 1) + tf::math::reduce_std(x, 1);
       }},
      {"cumsum, reverse over time",
       [](const tf::Tensor& x) { return tf::cumsum(x, 1) * tf::reverse(x, {1}); }},
      {"softmax over time",
       [](const tf::Tensor& x) { return tf::nn::softmax(x, 1) + tf::nn::log_softmax(x, 1); }},
      {"attention scores",
       [](const tf::Tensor& x) {
         const tf::Tensor scores = tf::nn::softmax(tf::matmul(x, x, false, true), -1);  // (2, T, T)
         return tf::matmul(scores, x);
       }},
      {"einsum, matmul over features",
       [m](const tf::Tensor& x) { return tf::einsum("btf,fg->btg", x, m) + tf::matmul(x, m); }},
      // (Not yet one trace over a None time axis: conv1d's and the poolings' gradients take the
      // input's spatial shape as an attribute.)
      {"pad, slice, concat, tile over time",
       [](const tf::Tensor& x) {
         const tf::Tensor p = tf::pad(x, {{0, 0}, {1, 1}, {0, 0}});  // (2, T + 2, 4)
         const tf::Tensor s = tf::slice(p, {0, 1, 0}, {-1, -1, 2});  // (2, T + 1, 2)
         return tf::reduce_sum(tf::concat({s, s * 2.0}, 1), {1, 2}) +
                tf::reduce_sum(tf::tile(x, {1, 2, 1}), {1, 2});
       }},
      {"gather the first step, transpose, reshape",
       [](const tf::Tensor& x) {
         const tf::Tensor first = tf::gather(x, tf::constant(std::vector<int64_t>{0}), 1);
         return tf::reshape(tf::transpose(x * first, {1, 0, 2}), {-1, 4});
       }},
      {"layer-norm-like moments over features",
       [](const tf::Tensor& x) {
         const auto [mean, variance] = tf::nn::moments(x, {2}, true);
         return (x - mean) * tf::rsqrt(variance + 1e-3);
       }},
      {"scan over time",
       [](const tf::Tensor& x) {
         const tf::Tensor steps = tf::transpose(x, {1, 0, 2});  // (T, 2, 4)
         return tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return tf::tanh(a + r); },
                         steps, tf::zeros({2, 4}, tf::float64));
       }},
  };
}

}  // namespace

TEST_CASE("None time sweep: sequence ops and their gradients trace once and equal eager", "[jit]") {
  for (const Case& c : sequence_cases()) {
    INFO("op: " << c.name);
    auto both = [&](const tf::Tensor& x) { return tf::testing::first_and_second(c.op, x); };
    auto f =
        tf::function(both, {.input_signature = {tf::TensorSpec({2, tf::None, 4}, tf::float64)}});
    for (int64_t steps : {2, 5, 1, 3}) {
      INFO("steps " << steps);
      const tf::Tensor x =
          tf::constant(tf::testing::random_values(static_cast<size_t>(8 * steps), 0.2, 1.2,
                                                  static_cast<unsigned>(steps + 31)),
                       {2, steps, 4});
      const std::vector<tf::Tensor> want = both(x);
      const std::vector<tf::Tensor> got = f(x);
      for (size_t k = 0; k < want.size(); ++k)
        tf::testing::check_close(got[k], want[k], 1e-9, 1e-9);
    }
    CHECK(f.tracing_count() == 1);
  }
}
