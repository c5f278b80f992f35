// tf::einsum (ops/einsum.h) against a plain float64 loop evaluator of einsum, on every device of
// devices_under_test(): explicit and implicit mode, "...", diagonals, three and four operands,
// empty dimensions, integer dtypes; gradients against central differences; every error path.
// The result shapes in the case table are TF 2.21's.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/einsum.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

// ---------------------------------------------------------------- reference evaluator

struct RefResult {
  std::vector<double> values;
  std::vector<int64_t> shape;
};

// einsum by looping over every assignment of every label, in float64. "..." becomes labels
// '0'..'7' (right-aligned, size-1 dimensions broadcast); the implicit output follows TF (labels,
// "..." included, that appear once, sorted).
RefResult ref_einsum(std::string eq, const std::vector<std::vector<double>>& data,
                     const std::vector<std::vector<int64_t>>& shapes) {
  std::string compact;  // spaces dropped, "..." as '*'
  for (size_t i = 0; i < eq.size(); ++i) {
    if (eq[i] == ' ') continue;
    if (eq[i] == '.') i += 2;
    compact += eq[i] == '.' ? '*' : eq[i];
  }
  eq = compact;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> ins;
  for (size_t start = 0;;) {
    const size_t c = lhs.find(',', start);
    ins.push_back(lhs.substr(start, c == std::string::npos ? c : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {
    std::map<char, int> counts;  // '*' sorts before letters, as TF's '0'
    for (const auto& s : ins)
      for (char c : s) ++counts[c];
    for (auto [c, n] : counts)
      if (n == 1) out += c;
  }
  int ell = 0;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].find('*') != std::string::npos)
      ell = std::max(ell, static_cast<int>(shapes[i].size() + 1 - ins[i].size()));
  auto expand = [&](const std::string& s, int rank) {
    std::string r;
    for (char c : s) {
      if (c != '*') {
        r += c;
        continue;
      }
      const int k = rank - static_cast<int>(s.size()) + 1;
      for (int j = 0; j < k; ++j) r += static_cast<char>('0' + ell - k + j);
    }
    return r;
  };
  for (size_t i = 0; i < ins.size(); ++i)
    ins[i] = expand(ins[i], static_cast<int>(shapes[i].size()));
  out = expand(out, static_cast<int>(out.size()) - 1 + ell);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ins.size(); ++i)
    for (size_t a = 0; a < ins[i].size(); ++a)
      size[ins[i][a]] = std::max(size[ins[i][a]], shapes[i][a]);
  std::string all;
  for (auto [c, n] : size) all += c;
  RefResult r;
  int64_t total = 1;
  for (char c : out) {
    r.shape.push_back(size[c]);
    total *= size[c];
  }
  r.values.assign(static_cast<size_t>(total), 0.0);
  std::map<char, int64_t> idx;
  for (char c : all) idx[c] = 0;
  for (char c : all)
    if (size[c] == 0) return r;
  for (;;) {
    double p = 1;
    for (size_t i = 0; i < ins.size(); ++i) {
      int64_t flat = 0;
      for (size_t a = 0; a < ins[i].size(); ++a)
        flat = flat * shapes[i][a] + (shapes[i][a] == 1 ? 0 : idx[ins[i][a]]);
      p *= data[i][static_cast<size_t>(flat)];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + idx[c];
    r.values[static_cast<size_t>(o)] += p;
    size_t k = all.size();
    while (k > 0) {
      --k;
      if (++idx[all[k]] < size[all[k]]) break;
      idx[all[k]] = 0;
      if (k == 0) return r;
    }
    if (all.empty()) return r;
  }
}

struct Case {
  std::string equation;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> tf_shape;  // TF 2.21's result shape
};

const std::vector<Case> kCases = {
    {"ij,jk->ik", {{2, 3}, {3, 4}}, {2, 4}},
    {"ij,jk", {{2, 3}, {3, 4}}, {2, 4}},
    {"ij,jk->ik", {{17, 33}, {33, 9}}, {17, 9}},
    {"ij,kj->ik", {{3, 5}, {4, 5}}, {3, 4}},
    {"ji,jk->ik", {{5, 3}, {5, 4}}, {3, 4}},
    {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {2, 3, 5}},
    {"bij,bkj->bik", {{2, 3, 4}, {2, 5, 4}}, {2, 3, 5}},
    {"bij,jk->bik", {{2, 3, 4}, {4, 5}}, {2, 3, 5}},
    {"ijk,jil->kl", {{2, 3, 4}, {3, 2, 5}}, {4, 5}},
    {"bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}, {2, 3, 4, 6}},
    {"bhqk,bhkd->bqhd", {{2, 3, 4, 6}, {2, 3, 6, 5}}, {2, 4, 3, 5}},
    {"ij->ji", {{2, 3}}, {3, 2}},
    {"ijk->kij", {{2, 3, 4}}, {4, 2, 3}},
    {"ij->ij", {{2, 3}}, {2, 3}},
    {"ii->i", {{3, 3}}, {3}},
    {"ii", {{3, 3}}, {}},
    {"ii->", {{4, 4}}, {}},
    {"iij->j", {{3, 3, 2}}, {2}},
    {"iji->j", {{3, 2, 3}}, {2}},
    {"iii->i", {{3, 3, 3}}, {3}},
    {"...ii->...i", {{2, 3, 3}}, {2, 3}},
    {"ii,i->i", {{3, 3}, {3}}, {3}},
    {"ij->", {{2, 3}}, {}},
    {"ij->j", {{2, 3}}, {3}},
    {"i,i->", {{3}, {3}}, {}},
    {"i,i->i", {{3}, {3}}, {3}},
    {"ij,ij->", {{2, 3}, {2, 3}}, {}},
    {"bi,bi->b", {{2, 3}, {2, 3}}, {2}},
    {"i,j->ij", {{3}, {4}}, {3, 4}},
    {"i,j", {{3}, {4}}, {3, 4}},
    {"ij,kj->ikj", {{2, 3}, {4, 3}}, {2, 4, 3}},
    {"ij,kj->", {{2, 3}, {4, 3}}, {}},
    {"...ij,...jk->...ik", {{2, 1, 2, 3}, {5, 3, 4}}, {2, 5, 2, 4}},
    {"...ij,...jk->...ik", {{1, 2, 3}, {3, 3, 4}}, {3, 2, 4}},
    {"...ij,jk->...ik", {{2, 3}, {3, 4}}, {2, 4}},
    {"...ij,...jk", {{2, 3}, {3, 4}}, {2, 4}},
    {"...ij", {{5, 2, 3}}, {5, 2, 3}},
    {"...,...->...", {{2, 3}, {3}}, {2, 3}},
    {"i...,i...->...", {{2, 3}, {2, 3}}, {3}},
    {"...i,...i->...", {{2, 1, 3}, {4, 3}}, {2, 4}},
    {"a...b,b...c->...ac", {{2, 5, 3}, {3, 5, 4}}, {5, 2, 4}},
    {"ij->...ij", {{2, 3}}, {2, 3}},
    {" i j , j k -> i k ", {{2, 3}, {3, 4}}, {2, 4}},
    {"Ij,jk->Ik", {{2, 3}, {3, 4}}, {2, 4}},
    {"ba,aC", {{2, 3}, {3, 4}}, {4, 2}},
    {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, {2, 5}},
    {"ij,jk,kl", {{2, 3}, {3, 4}, {4, 5}}, {2, 5}},
    {"ij,jk,kl,lm->im", {{2, 3}, {3, 4}, {4, 5}, {5, 2}}, {2, 2}},
    {"ij,ij,ij->ij", {{2, 3}, {2, 3}, {2, 3}}, {2, 3}},
    {"i,i,i->", {{3}, {3}, {3}}, {}},
    {"", {{}}, {}},
    {"->", {{}}, {}},
    {",->", {{}, {}}, {}},
    {"i,->i", {{3}, {}}, {3}},
    {"ij,jk->ik", {{0, 3}, {3, 4}}, {0, 4}},
    {"ij,jk->ik", {{2, 0}, {0, 4}}, {2, 4}},
    {"ii->i", {{0, 0}}, {0}},
};

std::vector<tf::Tensor> make_inputs(const Case& c, tf::DType dt, bool integers,
                                    std::vector<std::vector<double>>* data) {
  std::vector<tf::Tensor> ins;
  unsigned seed = 11;
  for (const auto& s : c.shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    auto v = random_values(static_cast<size_t>(n), -2, 2, seed++);
    if (integers)
      for (double& x : v) x = std::round(x);
    data->push_back(v);
    ins.push_back(tf::detail::from_doubles(v, tf::TensorShape(s), dt));
  }
  return ins;
}

void check_case(const Case& c, tf::DType dt, double tol) {
  INFO("equation \"" << c.equation << "\" dtype " << tf::dtype_name(dt));
  const bool integers = !tf::is_floating(dt) || dt == tf::float16 || dt == tf::bfloat16;
  std::vector<std::vector<double>> data;
  const auto ins = make_inputs(c, dt, integers, &data);
  const tf::Tensor got = tf::einsum(c.equation, ins);
  const RefResult want = ref_einsum(c.equation, data, c.shapes);
  REQUIRE(want.shape == c.tf_shape);
  CHECK(got.dtype() == dt);
  REQUIRE(got.shape() == tf::TensorShape(c.tf_shape));
  check_values(got, want.values, tol, tol);
}

// d/d inputs[k] of sum(einsum(inputs) * w) by the tape and by central differences, in float64.
void check_gradients(const std::string& eq, const std::vector<std::vector<int64_t>>& shapes) {
  INFO("equation \"" << eq << "\"");
  Case c{eq, shapes, {}};
  std::vector<std::vector<double>> data;
  auto ins = make_inputs(c, tf::float64, false, &data);
  const tf::Tensor y0 = tf::einsum(eq, ins);
  const auto wv = random_values(static_cast<size_t>(y0.num_elements()), -1, 1, 9);
  const tf::Tensor w = tf::detail::from_doubles(wv, y0.shape(), tf::float64);
  tf::GradientTape tape({.persistent = true});
  for (const auto& t : ins) tape.watch(t);
  const tf::Tensor loss = tf::reduce_sum(tf::einsum(eq, ins) * w);
  auto at = [&](const std::vector<std::vector<double>>& d) {
    std::vector<tf::Tensor> x;
    for (size_t i = 0; i < d.size(); ++i)
      x.push_back(tf::detail::from_doubles(d[i], tf::TensorShape(shapes[i]), tf::float64));
    const auto y = tf::detail::to_double_vector(tf::einsum(eq, x));
    double s = 0;
    for (size_t k = 0; k < y.size(); ++k) s += y[k] * wv[k];
    return s;
  };
  for (size_t k = 0; k < ins.size(); ++k) {
    INFO("operand " << k);
    const tf::Tensor g = tape.gradient(loss, ins[k]);
    REQUIRE(g.defined());
    REQUIRE(g.shape() == ins[k].shape());
    std::vector<double> want(data[k].size());
    const double h = 1e-6;
    for (size_t i = 0; i < want.size(); ++i) {
      auto p = data, m = data;
      p[k][i] += h;
      m[k][i] -= h;
      want[i] = (at(p) - at(m)) / (2 * h);
    }
    check_values(g, want, 1e-6, 1e-7);
  }
}

}  // namespace

TEST_CASE("einsum matches a float64 loop evaluator and TF's shapes", "[cpu][cuda][einsum]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : kCases) {
      check_case(c, tf::float32, 1e-5);
      check_case(c, tf::float64, 1e-12);
    }
  }
}

TEST_CASE("einsum takes every dtype matmul takes", "[cpu][cuda][einsum]") {
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{2, 3}, {3, 4}}, {2, 4}},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, {2, 2, 3, 5}},
      {"ii->i", {{3, 3}}, {3}},
      {"ij->", {{2, 3}}, {}},
      {"i,j->ij", {{3}, {4}}, {3, 4}},
      {"...i,...i->...", {{2, 1, 3}, {4, 3}}, {2, 4}},
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : cases) {
      // Whole numbers in [-2, 2]: exact in every dtype for these sizes.
      for (tf::DType dt : {tf::float16, tf::bfloat16, tf::int32, tf::int64}) check_case(c, dt, 0);
    }
  }
}

TEST_CASE("einsum gives TF's values for small cases", "[cpu][cuda][einsum]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor a = tf::constant<float>({{0, 1, 2}, {3, 4, 5}});
    const tf::Tensor b = tf::constant<float>({{-5, -4, -3, -2}, {-1, 0, 1, 2}, {3, 4, 5, 6}});
    check_values(tf::einsum("ij,jk->ik", a, b), {5, 8, 11, 14, -4, 8, 20, 32}, 0, 0);
    const tf::Tensor m = tf::constant<float>({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}});
    check_values(tf::einsum("ii->i", m), {0, 4, 8}, 0, 0);
    check_values(tf::einsum("ii", m), {12}, 0, 0);
    check_values(tf::einsum("ij->j", m), {9, 12, 15}, 0, 0);
    check_values(tf::einsum("ij,jk,kl->il", {a, b, tf::ones({4, 1})}), {38, 56}, 0, 0);
  }
}

TEST_CASE("einsum runs inside a traced function", "[cpu][cuda][einsum]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto f = tf::function([](const tf::Tensor& q, const tf::Tensor& k) {
      return tf::einsum("bhqd,bhkd->bhqk", q, k);
    });
    Case c{"bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}, {2, 3, 4, 6}};
    std::vector<std::vector<double>> data;
    const auto ins = make_inputs(c, tf::float64, false, &data);
    const auto want = ref_einsum(c.equation, data, c.shapes);
    for (int rep = 0; rep < 2; ++rep) check_values(f(ins[0], ins[1]), want.values, 1e-12, 1e-12);
  }
}

namespace {

// How many nodes of each primitive the traced einsum of two float32 operands has.
std::map<std::string, int> traced_ops(const std::string& eq, const tf::TensorShape& a,
                                      const tf::TensorShape& b) {
  auto f =
      tf::function([eq](const tf::Tensor& x, const tf::Tensor& y) { return tf::einsum(eq, x, y); });
  std::map<std::string, int> counts;
  for (const auto& node :
       f.get_concrete_function(tf::TensorSpec(a), tf::TensorSpec(b)).graph().nodes)
    ++counts[node.prim->name()];
  return counts;
}

}  // namespace

TEST_CASE("einsum contracts two operands with one matmul", "[cpu][einsum]") {
  auto ops = traced_ops("bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5});
  CHECK(ops["matmul"] == 1);
  CHECK(ops["transpose"] == 0);  // read with transpose_b
  ops = traced_ops("bij,jk->bik", {2, 3, 4}, {4, 5});
  CHECK(ops["matmul"] == 1);
  CHECK(ops["transpose"] == 0);
  ops = traced_ops("ijk,jil->kl", {2, 3, 4}, {3, 2, 5});
  CHECK(ops["matmul"] == 1);
  CHECK(ops["transpose"] == 1);  // i and j are in different orders: one operand moves
  ops = traced_ops("ijk,ijl->kl", {2, 3, 4}, {2, 3, 5});
  CHECK(ops["matmul"] == 1);
  CHECK(ops["transpose"] == 0);  // [K, M] x [K, N] with transpose_a
  ops = traced_ops("bhqk,bhkd->bqhd", {2, 3, 4, 6}, {2, 3, 6, 5});
  CHECK(ops["matmul"] == 1);
  CHECK(ops["transpose"] == 1);  // the output's
  ops = traced_ops("i,j->ij", {3}, {4});
  CHECK(ops["matmul"] == 0);
  CHECK(ops["multiply"] == 1);
}

TEST_CASE("einsum in a function whose signature has a None dimension", "[cpu][einsum]") {
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 3}), tf::TensorSpec({3, 4})};
  auto f = tf::function(
      [](const tf::Tensor& x, const tf::Tensor& y) { return tf::einsum("bi,ij->bj", x, y); }, opts);
  for (int64_t rows : {2, 5}) {
    Case c{"bi,ij->bj", {{rows, 3}, {3, 4}}, {rows, 4}};
    std::vector<std::vector<double>> data;
    const auto ins = make_inputs(c, tf::float32, false, &data);
    check_values(f(ins[0], ins[1]), ref_einsum(c.equation, data, c.shapes).values, 1e-5, 1e-5);
  }
}

TEST_CASE("einsum serves every size of None dimensions from one trace", "[cpu][einsum]") {
  // Batch axes merged into a matmul's rows (the EinsumDense and attention equations): the
  // merged sizes are read when the graph runs, so one graph serves every batch and length.
  struct Sig {
    const char* equation;
    tf::TensorShape a_spec, b_spec;
    std::vector<std::pair<tf::TensorShape, tf::TensorShape>> calls;
    std::vector<tf::TensorShape> outs;
  };
  const std::vector<Sig> sigs = {
      {"abc,cd->abd",
       {tf::None, tf::None, 3},
       {3, 4},
       {{{2, 5, 3}, {3, 4}}, {{3, 2, 3}, {3, 4}}, {{1, 7, 3}, {3, 4}}},
       {{2, 5, 4}, {3, 2, 4}, {1, 7, 4}}},
      {"bhqd,bhkd->bhqk",
       {tf::None, 2, tf::None, 3},
       {tf::None, 2, tf::None, 3},
       {{{2, 2, 4, 3}, {2, 2, 5, 3}}, {{3, 2, 1, 3}, {3, 2, 2, 3}}, {{1, 2, 3, 3}, {1, 2, 6, 3}}},
       {{2, 2, 4, 5}, {3, 2, 1, 2}, {1, 2, 3, 6}}},
      {"abc,cde->abde",
       {tf::None, 4, 3},
       {3, 2, 5},
       {{{2, 4, 3}, {3, 2, 5}}, {{5, 4, 3}, {3, 2, 5}}, {{1, 4, 3}, {3, 2, 5}}},
       {{2, 4, 2, 5}, {5, 4, 2, 5}, {1, 4, 2, 5}}},
      {"...x,xy->...y",
       {tf::None, 5, 3},
       {3, 2},
       {{{2, 5, 3}, {3, 2}}, {{4, 5, 3}, {3, 2}}, {{1, 5, 3}, {3, 2}}},
       {{2, 5, 2}, {4, 5, 2}, {1, 5, 2}}}};
  for (const Sig& sig : sigs) {
    CAPTURE(sig.equation);
    const std::string eq = sig.equation;
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec(sig.a_spec, tf::float64),
                            tf::TensorSpec(sig.b_spec, tf::float64)};
    // The value and, through a tape inside the function, the gradient of sum(y * y) for a.
    auto f = tf::function(
        [eq](const tf::Tensor& a, const tf::Tensor& b) {
          tf::GradientTape tape;
          tape.watch(a);
          const tf::Tensor y = tf::einsum(eq, a, b);
          const tf::Tensor loss = tf::reduce_sum(tf::multiply(y, y));
          return std::vector<tf::Tensor>{y, tape.gradient(loss, a)};
        },
        opts);
    for (size_t i = 0; i < sig.calls.size(); ++i) {
      Case c{sig.equation,
             {sig.calls[i].first.dims(), sig.calls[i].second.dims()},
             sig.outs[i].dims()};
      std::vector<std::vector<double>> data;
      const auto ins = make_inputs(c, tf::float64, false, &data);
      const auto got = f(ins[0], ins[1]);
      check_values(got[0], ref_einsum(c.equation, data, c.shapes).values, 1e-12, 1e-12);
      // Eager einsum's gradient, on the same inputs.
      tf::GradientTape tape;
      tape.watch(ins[0]);
      const tf::Tensor y = tf::einsum(eq, ins[0], ins[1]);
      const tf::Tensor want = tape.gradient(tf::reduce_sum(tf::multiply(y, y)), ins[0]);
      tf::testing::check_close(got[1], want, 1e-12, 1e-12);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("einsum gradients match central differences", "[cpu][cuda][einsum][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    check_gradients("ij,jk->ik", {{2, 3}, {3, 4}});
    check_gradients("bij,bkj->bik", {{2, 3, 4}, {2, 5, 4}});
    check_gradients("bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}});
    check_gradients("...ij,...jk->...ik", {{2, 1, 2, 3}, {4, 3, 2}});
    check_gradients("ij->ji", {{2, 3}});
    check_gradients("ii->i", {{3, 3}});
    check_gradients("ii", {{3, 3}});
    check_gradients("iij->j", {{3, 3, 2}});
    check_gradients("ij->", {{2, 3}});
    check_gradients("i,i->", {{4}, {4}});
    check_gradients("i,j->ij", {{3}, {4}});
    check_gradients("ii,i->i", {{3, 3}, {3}});
    check_gradients("...i,...i->...", {{2, 1, 3}, {4, 3}});
    check_gradients("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}});
  }
}

TEST_CASE("einsum rejects malformed equations and mismatched operands", "[cpu][einsum]") {
  using tf::testing::require_error;
  const tf::Tensor a = tf::ones({2, 3}), b = tf::ones({3, 4});
  require_error([&] { tf::einsum("ij,jk->ik", a); },
                {"[einsum] equation \"ij,jk->ik\"", "has 2 operand(s), got 1 tensor(s)"});
  require_error([&] { tf::einsum("ij,jk->ik", {a, b, b}); }, {"has 2 operand(s), got 3"});
  require_error([&] { tf::einsum("ij", std::vector<tf::Tensor>{}); }, {"got 0 tensor(s)"});
  require_error([&] { tf::einsum("ij->i->j", a); }, {"\"ij->i->j\"", "at most one \"->\""});
  require_error([&] { tf::einsum("i1,jk->ik", a, b); }, {"\"i1,jk->ik\"", "invalid character '1'"});
  require_error([&] { tf::einsum("i.j,jk->ik", a, b); }, {"a '.' that is not part of \"...\""});
  require_error([&] { tf::einsum("ij..,jk->ik", a, b); }, {"not part of \"...\""});
  require_error([&] { tf::einsum("ij,jk->ik,", a, b); }, {"output subscripts \"ik,\""});
  require_error([&] { tf::einsum("...ij...,jk->ik", a, b); },
                {"operand 0 has more than one \"...\""});
  require_error([&] { tf::einsum("ij,jk->...ik...", a, b); }, {"more than one \"...\""});
  require_error([&] { tf::einsum("ij,jk->ikl", a, b); },
                {"\"ij,jk->ikl\"", "output index l does not appear in any input"});
  require_error([&] { tf::einsum("ij,jk->iki", a, b); },
                {"output index i appears more than once in \"iki\""});
  require_error([&] { tf::einsum("ii->ii", tf::ones({3, 3})); }, {"output index i appears"});
  require_error(
      [&] {
        tf::einsum("ij,jk->ik", tf::ones({2, 3, 1}), b);
      },
      {"operand 0 has subscripts \"ij\" (2 dimensions) but shape (2, 3, 1)"});
  require_error([&] { tf::einsum("...ij,...jk->...ik", a, tf::ones({3})); },
                {"operand 1 has subscripts \"...jk\" (at least 2 dimensions) but shape (3,)"});
  require_error(
      [&] {
        tf::einsum("ij,jk->ik", a, tf::ones({4, 4}));
      },
      {"\"ij,jk->ik\"",
       "index j has size 3 in operand 0 (axis 1) but size 4 in operand 1 (axis 0)"});
  require_error(
      [&] {
        tf::einsum("ii->i", tf::ones({3, 4}));
      },
      {"index i has size 3 in operand 0 (axis 0) but size 4 in operand 0 (axis 1)"});
  // Named indices do not broadcast (TF: "Expected dimension 2 ... but got dimension 1").
  require_error(
      [&] {
        tf::einsum("ij,ij->ij", a, tf::ones({1, 3}));
      },
      {"index i has size 2 in operand 0 (axis 0) but size 1 in operand 1 (axis 0)"});
  require_error(
      [&] {
        tf::einsum("...ij,...jk->...ik", tf::ones({2, 2, 3}), tf::ones({5, 3, 4}));
      },
      {"the dimensions of \"...\" do not broadcast: size 2 in operand 0 (shape (2, 2, "
       "3)) and size 5 in operand 1 (shape (5, 3, 4))"});
  require_error(
      [&] {
        tf::einsum("...ij,...jk", tf::ones({2, 1, 2, 3}), tf::ones({5, 3, 4}));
      },
      {"stands for 2 dimension(s) but the output has no \"...\""});
  require_error(
      [&] {
        tf::einsum("...ij,jk->ik", tf::ones({1, 2, 3}), b);
      },
      {"stands for 1 dimension(s)"});
  require_error(
      [&] {
        tf::einsum("ij,jk->ik", a, tf::ones({3, 4}, tf::float64));
      },
      {"operands have different dtypes: float32 (operand 0) and float64 (operand 1)"});
  require_error(
      [&] {
        tf::einsum("ij->ji", tf::ones({2, 3}, tf::bool_));
      },
      {"\"ij->ji\"", "does not support dtype bool"});
  require_error(
      [&] {
        tf::einsum("ij->ji", tf::ones({2, 3}, tf::uint8));
      },
      {"does not support dtype uint8"});
  require_error([&] { tf::einsum("ij,jk->ik", a, tf::Tensor()); },
                {"operand 1 is an undefined tensor"});
}
