// Shape and movement ops against plain reference loops on every device under test, in every
// dtype (element sizes 1, 2, 4 and 8 bytes), with zero-size dimensions, high ranks, and every
// error path (messages name the op and the shapes).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/scatter.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;

namespace {

const std::vector<tf::DType> kAllTypes = {tf::float32, tf::float64, tf::float16, tf::bfloat16,
                                          tf::int32,   tf::int64,   tf::uint8,   tf::bool_};

using Dims = std::vector<int64_t>;

int64_t count(const Dims& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Element i holds a value exact in every dtype (bool: i % 2).
double value_at(int64_t i, tf::DType dt) {
  return dt == tf::bool_ ? static_cast<double>(i % 2) : static_cast<double>(i % 97);
}
std::vector<double> iota_values(const Dims& s, tf::DType dt, int64_t offset = 0) {
  std::vector<double> v(static_cast<size_t>(count(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = value_at(static_cast<int64_t>(i) + offset, dt);
  return v;
}
tf::Tensor iota(const Dims& s, tf::DType dt, int64_t offset = 0) {
  return tf::detail::from_doubles(iota_values(s, dt, offset), tf::TensorShape(s), dt);
}

Dims unravel(int64_t flat, const Dims& s) {
  Dims idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}
int64_t ravel(const Dims& idx, const Dims& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

std::vector<double> ref_transpose(const std::vector<double>& x, const Dims& s,
                                  const std::vector<int>& perm) {
  Dims os;
  for (int p : perm) os.push_back(s[p]);
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < count(os); ++o) {
    const Dims oi = unravel(o, os);
    Dims ii(s.size());
    for (size_t d = 0; d < perm.size(); ++d) ii[perm[d]] = oi[d];
    out[o] = x[ravel(ii, s)];
  }
  return out;
}

std::vector<double> ref_slice(const std::vector<double>& x, const Dims& s, const Dims& begin,
                              const Dims& size) {
  std::vector<double> out;
  for (int64_t o = 0; o < count(size); ++o) {
    Dims i = unravel(o, size);
    for (size_t d = 0; d < s.size(); ++d) i[d] += begin[d];
    out.push_back(x[ravel(i, s)]);
  }
  return out;
}

std::vector<double> ref_broadcast(const std::vector<double>& x, const Dims& s, const Dims& os) {
  std::vector<double> out;
  const size_t off = os.size() - s.size();
  for (int64_t o = 0; o < count(os); ++o) {
    const Dims oi = unravel(o, os);
    Dims ii(s.size());
    for (size_t d = 0; d < s.size(); ++d) ii[d] = s[d] == 1 ? 0 : oi[d + off];
    out.push_back(x[ravel(ii, s)]);
  }
  return out;
}

}  // namespace

TEST_CASE("reshape is a view with one inferred dimension", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      auto x = iota({2, 3, 4}, dt);
      auto y = tf::reshape(x, {4, -1});
      CHECK(y.shape() == tf::TensorShape({4, 6}));
      CHECK(y.dtype() == dt);
      CHECK(y.raw_data() == x.raw_data());  // shares the storage
      check_values(y, iota_values({2, 3, 4}, dt));
      CHECK(tf::reshape(x, {24}).shape() == tf::TensorShape({24}));
      CHECK(tf::reshape(x, {-1}).shape() == tf::TensorShape({24}));
      CHECK(tf::reshape(x, {1, 2, 1, 3, 1, 4, 1, 1}).rank() == 8);
    }
    CHECK(tf::reshape(tf::constant({5.0f}), {}).shape() == tf::TensorShape{});
    CHECK(tf::reshape(tf::constant(5.0f), {1, 1}).shape() == tf::TensorShape({1, 1}));
    CHECK(tf::reshape(tf::zeros({0, 3}), {3, 0, 2}).shape() == tf::TensorShape({3, 0, 2}));
    CHECK(tf::reshape(tf::zeros({0, 3}), {-1, 3}).shape() == tf::TensorShape({0, 3}));
    auto x = tf::zeros({2, 2});
    TF_REQUIRE_THROWS_CONTAINING(
        tf::reshape(x, {1, 3}), tf::InvalidArgumentError,
        "[reshape] cannot reshape a tensor with 4 elements to shape (1, 3) (3 elements)");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::reshape(x, {-1, 3}), tf::InvalidArgumentError,
        "[reshape] cannot reshape a tensor with 4 elements to shape (-1, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::reshape(x, {-1, -1}), tf::InvalidArgumentError,
                                 "[reshape] only one dimension of shape (-1, -1) may be -1");
    // An empty tensor to a shape with a 0 and a -1: the -1 comes from the nonzero dimensions of
    // both, as TF's ((0, 3) to (0, -1) is (0, 3); (0, 2) to (-1, 0) is (2, 0)).
    CHECK(tf::reshape(tf::zeros({0, 3}), {0, -1}).shape() == tf::TensorShape({0, 3}));
    CHECK(tf::reshape(tf::zeros({0, 2}), {-1, 0}).shape() == tf::TensorShape({2, 0}));
    TF_REQUIRE_THROWS_CONTAINING(tf::reshape(tf::zeros({1, 2}), {-1, 0}), tf::InvalidArgumentError,
                                 "cannot reshape a tensor with 2 elements to shape (-1, 0)");
  }
}

TEST_CASE("transpose matches a reference for every permutation", "[cpu][cuda][movement]") {
  const std::vector<Dims> shapes = {
      {2, 3},    {2, 3, 4}, {70, 130}, {33, 1, 65}, {3, 1, 2, 5, 2}, {2, 2, 2, 2, 2, 2, 2, 3},
      {0, 3, 2}, {5},       {}};
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const Dims& s : shapes) {
      std::vector<int> perm(s.size());
      std::iota(perm.begin(), perm.end(), 0);
      int n_perm = 0;
      do {
        // All permutations up to rank 3, a sample for higher ranks.
        if (s.size() > 3 && (n_perm++ % (s.size() > 5 ? 211 : 7)) != 0) continue;
        for (auto dt : kAllTypes) {
          auto x = iota(s, dt);
          auto y = tf::transpose(x, perm);
          INFO("shape " << tf::TensorShape(s).to_string() << " perm "
                        << tf::detail::vec_to_string(perm) << " " << tf::dtype_name(dt));
          Dims os;
          for (int p : perm) os.push_back(s[p]);
          CHECK(y.shape() == tf::TensorShape(os));
          CHECK(y.dtype() == dt);
          check_values(y, ref_transpose(iota_values(s, dt), s, perm), 0, 0);
        }
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
    // Default: reversed dimensions.
    auto x = iota({2, 3, 4}, tf::float32);
    auto y = tf::transpose(x);
    CHECK(y.shape() == tf::TensorShape({4, 3, 2}));
    check_values(y, ref_transpose(iota_values({2, 3, 4}, tf::float32), {2, 3, 4}, {2, 1, 0}));
    // Negative entries count from the end, as TF's.
    check_values(tf::transpose(x, {-1, 0, 1}),
                 ref_transpose(iota_values({2, 3, 4}, tf::float32), {2, 3, 4}, {2, 0, 1}), 0, 0);
    // A big one goes through the tiled path with several threads.
    auto big = iota({300, 517}, tf::float32);
    check_values(tf::transpose(big),
                 ref_transpose(iota_values({300, 517}, tf::float32), {300, 517}, {1, 0}), 0, 0);
    TF_REQUIRE_THROWS_CONTAINING(tf::transpose(x, {0, 1}), tf::InvalidArgumentError,
                                 "[transpose] perm [0, 1] has 2 entries, but the tensor of "
                                 "shape (2, 3, 4) has rank 3");
    TF_REQUIRE_THROWS_CONTAINING(tf::transpose(x, {0, 1, 1}), tf::InvalidArgumentError,
                                 "[transpose] perm [0, 1, 1] is not a permutation of [0, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::transpose(x, {0, 1, 3}), tf::InvalidArgumentError,
                                 "shape (2, 3, 4)");
  }
}

TEST_CASE("expand_dims and squeeze add and remove size-1 axes", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    auto x = iota({2, 3}, tf::int32);
    CHECK(tf::expand_dims(x, 0).shape() == tf::TensorShape({1, 2, 3}));
    CHECK(tf::expand_dims(x, 1).shape() == tf::TensorShape({2, 1, 3}));
    CHECK(tf::expand_dims(x, 2).shape() == tf::TensorShape({2, 3, 1}));
    CHECK(tf::expand_dims(x, -1).shape() == tf::TensorShape({2, 3, 1}));
    CHECK(tf::expand_dims(x, -3).shape() == tf::TensorShape({1, 2, 3}));
    CHECK(tf::expand_dims(tf::constant(1.0f), 0).shape() == tf::TensorShape({1}));
    check_values(tf::expand_dims(x, 1), iota_values({2, 3}, tf::int32));
    TF_REQUIRE_THROWS_CONTAINING(
        tf::expand_dims(x, 3), tf::InvalidArgumentError,
        "[expand_dims] axis 3 is out of range for a tensor of shape (2, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::expand_dims(x, -4), tf::InvalidArgumentError,
                                 "[expand_dims] axis -4");
    TF_REQUIRE_THROWS_CONTAINING(tf::expand_dims(tf::zeros({1, 1, 1, 1, 1, 1, 1, 1}), 0),
                                 tf::InvalidArgumentError, "[expand_dims] cannot add a dimension");

    auto z = iota({1, 2, 1, 3, 1}, tf::float16);
    CHECK(tf::squeeze(z).shape() == tf::TensorShape({2, 3}));
    CHECK(tf::squeeze(z, {0}).shape() == tf::TensorShape({2, 1, 3, 1}));
    CHECK(tf::squeeze(z, {-1, 2}).shape() == tf::TensorShape({1, 2, 3}));
    check_values(tf::squeeze(z), iota_values({2, 3}, tf::float16));
    CHECK(tf::squeeze(tf::zeros({1, 1})).shape() == tf::TensorShape{});
    TF_REQUIRE_THROWS_CONTAINING(tf::squeeze(z, {1}), tf::InvalidArgumentError,
                                 "[squeeze] cannot squeeze axis 1 of shape (1, 2, 1, 3, 1): its "
                                 "size is 2, not 1");
    TF_REQUIRE_THROWS_CONTAINING(tf::squeeze(z, {5}), tf::InvalidArgumentError,
                                 "[squeeze] axis 5 is out of range for a tensor of rank 5");
  }
}

TEST_CASE("concat joins along an axis", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      for (int axis = 0; axis < 3; ++axis) {
        const std::vector<Dims> parts_shape = [&] {
          std::vector<Dims> p(3, Dims{2, 3, 4});
          p[1][axis] = 0;  // an empty part
          p[2][axis] = 5;
          return p;
        }();
        std::vector<tf::Tensor> parts;
        std::vector<std::vector<double>> vals;
        for (size_t i = 0; i < parts_shape.size(); ++i) {
          parts.push_back(iota(parts_shape[i], dt, static_cast<int64_t>(i) * 31));
          vals.push_back(iota_values(parts_shape[i], dt, static_cast<int64_t>(i) * 31));
        }
        Dims os = {2, 3, 4};
        os[axis] = parts_shape[0][axis] + parts_shape[1][axis] + parts_shape[2][axis];
        // Reference: walk the output and pick the part along the axis.
        std::vector<double> want;
        for (int64_t o = 0; o < count(os); ++o) {
          Dims i = unravel(o, os);
          size_t p = 0;
          while (i[axis] >= parts_shape[p][axis]) i[axis] -= parts_shape[p++][axis];
          want.push_back(vals[p][ravel(i, parts_shape[p])]);
        }
        auto y = tf::concat(parts, axis - 3 * (axis % 2));  // also negative axes
        INFO(tf::dtype_name(dt) << " axis " << axis);
        CHECK(y.shape() == tf::TensorShape(os));
        CHECK(y.dtype() == dt);
        check_values(y, want, 0, 0);
      }
    }
    // Large parts take the parallel path.
    auto a = iota({600, 1000}, tf::float32), b = iota({400, 1000}, tf::float32, 5);
    auto c = tf::concat({a, b}, 0);
    auto want = iota_values({600, 1000}, tf::float32);
    auto wb = iota_values({400, 1000}, tf::float32, 5);
    want.insert(want.end(), wb.begin(), wb.end());
    check_values(c, want, 0, 0);
    CHECK(tf::concat({a}, 1).shape() == tf::TensorShape({600, 1000}));

    auto x = tf::zeros({2, 3});
    TF_REQUIRE_THROWS_CONTAINING(tf::concat({}, 0), tf::InvalidArgumentError,
                                 "[concat] needs at least one tensor");
    TF_REQUIRE_THROWS_CONTAINING(tf::concat({x, tf::zeros({2, 3}, tf::int32)}, 0),
                                 tf::InvalidArgumentError,
                                 "[concat] dtypes differ: float32 and int32");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::concat({x, tf::zeros({2})}, 0), tf::InvalidArgumentError,
        "[concat] ranks differ: values[0] has shape (2, 3), values[1] has (2,)");
    TF_REQUIRE_THROWS_CONTAINING(tf::concat({x, tf::zeros({3, 3})}, 1), tf::InvalidArgumentError,
                                 "[concat] shapes (2, 3) (values[0]) and (3, 3) (values[1]) differ "
                                 "in dimension 0");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::concat({x, x}, 2), tf::InvalidArgumentError,
        "[concat] axis 2 is out of range for a tensor of rank 2 (shape (2, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::concat({tf::constant(1.0f)}, 0), tf::InvalidArgumentError,
                                 "[concat] cannot concatenate scalars");
    // Empty tensors whose sizes along the axis add up past int64 (the sum wrapped to a negative
    // size, an internal error later).
    const tf::Tensor huge = tf::zeros({0, int64_t{1} << 62});
    TF_REQUIRE_THROWS_CONTAINING(tf::concat({huge, huge}, 1), tf::InvalidArgumentError,
                                 "[concat] the sizes along axis 1 add up to more than an int64");
    const tf::Tensor big = tf::zeros({0, int64_t{1} << 61});
    CHECK(tf::concat({big, big}, 1).shape() == tf::TensorShape({0, int64_t{1} << 62}));
  }
}

TEST_CASE("stack adds a new axis", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      auto a = iota({2, 3}, dt), b = iota({2, 3}, dt, 10);
      const auto va = iota_values({2, 3}, dt), vb = iota_values({2, 3}, dt, 10);
      auto s0 = tf::stack({a, b});
      CHECK(s0.shape() == tf::TensorShape({2, 2, 3}));
      std::vector<double> w0 = va;
      w0.insert(w0.end(), vb.begin(), vb.end());
      check_values(s0, w0, 0, 0);
      auto s2 = tf::stack({a, b}, -1);
      CHECK(s2.shape() == tf::TensorShape({2, 3, 2}));
      std::vector<double> w2;
      for (size_t i = 0; i < va.size(); ++i) {
        w2.push_back(va[i]);
        w2.push_back(vb[i]);
      }
      check_values(s2, w2, 0, 0);
      auto s1 = tf::stack({a, b, a}, 1);
      CHECK(s1.shape() == tf::TensorShape({2, 3, 3}));
    }
    auto sc = tf::stack({tf::constant(1.0f), tf::constant(2.0f), tf::constant(3.0f)});
    CHECK(sc.shape() == tf::TensorShape({3}));
    check_values(sc, {1, 2, 3});
    TF_REQUIRE_THROWS_CONTAINING(tf::stack({tf::zeros({2}), tf::zeros({3})}),
                                 tf::InvalidArgumentError,
                                 "[stack] shapes differ: values[0] is (2,), values[1] is (3,)");
    TF_REQUIRE_THROWS_CONTAINING(tf::stack({tf::zeros({2})}, 2), tf::InvalidArgumentError,
                                 "[stack] axis 2 is out of range");
    TF_REQUIRE_THROWS_CONTAINING(tf::stack({}), tf::InvalidArgumentError, "[stack]");
  }
}

TEST_CASE("split into equal parts or given sizes", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      const Dims s = {4, 6};
      auto x = iota(s, dt);
      const auto v = iota_values(s, dt);
      auto parts = tf::split(x, 3, 1);
      REQUIRE(parts.size() == 3);
      for (int p = 0; p < 3; ++p) {
        CHECK(parts[p].shape() == tf::TensorShape({4, 2}));
        check_values(parts[p], ref_slice(v, s, {0, 2 * p}, {4, 2}), 0, 0);
      }
      auto rows = tf::split(x, std::vector<int64_t>{1, -1, 0}, 0);
      REQUIRE(rows.size() == 3);
      CHECK(rows[0].shape() == tf::TensorShape({1, 6}));
      CHECK(rows[1].shape() == tf::TensorShape({3, 6}));
      CHECK(rows[2].shape() == tf::TensorShape({0, 6}));
      check_values(rows[1], ref_slice(v, s, {1, 0}, {3, 6}), 0, 0);
      auto cols = tf::split(x, std::vector<int64_t>{2, 4}, -1);
      check_values(cols[1], ref_slice(v, s, {0, 2}, {4, 4}), 0, 0);
    }
    auto x = tf::zeros({2, 5});
    TF_REQUIRE_THROWS_CONTAINING(tf::split(x, 2, 1), tf::InvalidArgumentError,
                                 "[split] dimension 1 of shape (2, 5) (size 5) is not divisible "
                                 "by num_splits 2");
    TF_REQUIRE_THROWS_CONTAINING(tf::split(x, 0, 1), tf::InvalidArgumentError,
                                 "[split] num_splits must be positive");
    TF_REQUIRE_THROWS_CONTAINING(tf::split(x, std::vector<int64_t>{1, 2}, 1),
                                 tf::InvalidArgumentError,
                                 "[split] size_splits [1, 2] add up to 3, but dimension 1 of "
                                 "shape (2, 5) has size 5");
    TF_REQUIRE_THROWS_CONTAINING(tf::split(x, std::vector<int64_t>{-1, -1}, 1),
                                 tf::InvalidArgumentError, "at most one -1");
    TF_REQUIRE_THROWS_CONTAINING(tf::split(x, std::vector<int64_t>{7, -1}, 1),
                                 tf::InvalidArgumentError, "more than dimension 1");
    TF_REQUIRE_THROWS_CONTAINING(tf::split(x, 1, 2), tf::InvalidArgumentError,
                                 "[split] axis 2 is out of range");
  }
}

TEST_CASE("split: one gradient for all pieces, zeros for unused ones", "[cpu][cuda][movement]") {
  // Pieces 0 and 2 of 3 reach the result: piece 1's gradient is zeros. Central differences,
  // the second order, and many pieces (one concat, not a pad per piece).
  auto f = [](const tf::Tensor& x) {
    const std::vector<tf::Tensor> p = tf::split(x, std::vector<int64_t>{1, 2, 3}, 1);
    return tf::sin(p[0]) * tf::reduce_sum(p[2] * p[2], {1}, true);
  };
  tf::testing::check_gradient(f, {3, 6});
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::constant(tf::testing::random_values(18, -1, 1, 3), {3, 6});
    tf::GradientTape outer;
    outer.watch(x);
    tf::Tensor g;
    {
      tf::GradientTape inner;
      inner.watch(x);
      g = inner.gradient(tf::reduce_sum(f(x)), x);
    }
    CHECK(g.placement() == dev);
    // Columns 1 and 2 (piece 1) get no gradient.
    const std::vector<double> gv = tf::detail::to_double_vector(g);
    for (int r = 0; r < 3; ++r) {
      CHECK(gv[static_cast<size_t>(r * 6 + 1)] == 0.0);
      CHECK(gv[static_cast<size_t>(r * 6 + 2)] == 0.0);
    }
    // d/dx of sum(g * g): through the first gradient's concat and the zeros.
    const tf::Tensor h = outer.gradient(tf::reduce_sum(g * g), x);
    CHECK(h.shape() == x.shape());
    // 500 pieces: the gradient of each piece's sum is ones.
    const tf::Tensor long_x = tf::ones({2, 500});
    tf::GradientTape tape;
    tape.watch(long_x);
    tf::Tensor total = tf::zeros({});
    for (const tf::Tensor& piece : tf::split(long_x, 500, 1)) total = total + tf::reduce_sum(piece);
    tf::testing::check_close(tape.gradient(total, long_x), tf::ones({2, 500}), 0, 0);
  }
}

TEST_CASE("slice copies a box", "[cpu][cuda][movement]") {
  struct Case {
    Dims shape, begin, size;
  };
  const std::vector<Case> cases = {
      {{5}, {1}, {3}},
      {{4, 6}, {1, 2}, {2, 3}},
      {{4, 6}, {1, 0}, {2, -1}},  // full rows: one run
      {{4, 6}, {0, 5}, {-1, 1}},  // one column
      {{3, 4, 5}, {1, 1, 1}, {2, 2, 3}},
      {{3, 4, 5}, {0, 1, 0}, {3, 2, 5}},
      {{2, 2, 2, 2, 2, 2, 2, 2}, {1, 0, 1, 0, 1, 0, 1, 0}, {1, 2, 1, 2, 1, 2, 1, 2}},
      {{3, 4}, {3, 0}, {0, 4}},           // empty
      {{}, {}, {}},                       // scalar
      {{1000, 700}, {3, 5}, {900, 600}},  // big: parallel runs
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : kAllTypes) {
        auto x = iota(c.shape, dt);
        auto y = tf::slice(x, c.begin, c.size);
        Dims sz = c.size;
        for (size_t d = 0; d < sz.size(); ++d)
          if (sz[d] == -1) sz[d] = c.shape[d] - c.begin[d];
        INFO(tf::TensorShape(c.shape).to_string() << " " << tf::dtype_name(dt));
        CHECK(y.shape() == tf::TensorShape(sz));
        check_values(y, ref_slice(iota_values(c.shape, dt), c.shape, c.begin, sz), 0, 0);
      }
    }
    auto x = tf::zeros({2, 4});
    TF_REQUIRE_THROWS_CONTAINING(tf::slice(x, {0, 3}, {2, 2}), tf::InvalidArgumentError,
                                 "[slice] size[1] = 2 is out of bounds for dimension 1 of shape "
                                 "(2, 4) with begin[1] = 3");
    TF_REQUIRE_THROWS_CONTAINING(tf::slice(x, {3, 0}, {-1, 1}), tf::InvalidArgumentError,
                                 "[slice] begin[0] = 3 is out of bounds for dimension 0 of shape "
                                 "(2, 4)");
    TF_REQUIRE_THROWS_CONTAINING(tf::slice(x, {-1, 0}, {1, 1}), tf::InvalidArgumentError,
                                 "begin[0] = -1");
    TF_REQUIRE_THROWS_CONTAINING(tf::slice(x, {0}, {1}), tf::InvalidArgumentError,
                                 "[slice] begin [0] and size [1] need one entry per dimension of "
                                 "shape (2, 4)");
    TF_REQUIRE_THROWS_CONTAINING(tf::slice(x, {0, 0}, {1, -2}), tf::InvalidArgumentError,
                                 "size[1] = -2");
  }
}

TEST_CASE("gather picks slices along an axis and checks the indices", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      const Dims ps = {3, 4, 5};
      auto p = iota(ps, dt);
      const auto pv = iota_values(ps, dt);
      for (auto idt : {tf::int32, tf::int64}) {
        const std::vector<double> iv = {2, 0, 1, 2, 2, 0};
        for (int axis = 0; axis < 3; ++axis) {
          const Dims is = {2, 3};
          std::vector<double> ivals = iv;
          for (auto& v : ivals) v = std::fmod(v, static_cast<double>(ps[axis]));
          auto idx = tf::detail::from_doubles(ivals, tf::TensorShape(is), idt);
          auto y = tf::gather(p, idx, axis - 3 * (axis == 2));
          Dims os;
          for (int d = 0; d < axis; ++d) os.push_back(ps[d]);
          os.insert(os.end(), is.begin(), is.end());
          for (int d = axis + 1; d < 3; ++d) os.push_back(ps[d]);
          INFO(tf::dtype_name(dt) << " axis " << axis);
          CHECK(y.shape() == tf::TensorShape(os));
          CHECK(y.dtype() == dt);
          std::vector<double> want;
          for (int64_t o = 0; o < count(os); ++o) {
            const Dims oi = unravel(o, os);
            Dims pi;
            for (int d = 0; d < axis; ++d) pi.push_back(oi[d]);
            pi.push_back(static_cast<int64_t>(ivals[ravel({oi[axis], oi[axis + 1]}, is)]));
            for (int d = axis + 1; d < 3; ++d) pi.push_back(oi[d + 1]);
            want.push_back(pv[ravel(pi, ps)]);
          }
          check_values(y, want, 0, 0);
        }
      }
    }
    // A scalar index removes the axis; an empty index list gives an empty result.
    auto p = iota({3, 4}, tf::float32);
    auto row = tf::gather(p, tf::constant(2), 0);
    CHECK(row.shape() == tf::TensorShape({4}));
    check_values(row, {8, 9, 10, 11});
    auto none = tf::gather(p, tf::zeros({0}, tf::int64), 1);
    CHECK(none.shape() == tf::TensorShape({3, 0}));
    // Large: parallel copies of rows.
    auto big = iota({1000, 64}, tf::float32);
    std::vector<double> iv(5000);
    for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<double>((i * 7) % 1000);
    auto g = tf::gather(big, tf::detail::from_doubles(iv, {5000}, tf::int32));
    std::vector<double> want;
    for (double r : iv)
      for (int c = 0; c < 64; ++c)
        want.push_back(value_at(static_cast<int64_t>(r) * 64 + c, tf::float32));
    check_values(g, want, 0, 0);

    TF_REQUIRE_THROWS_CONTAINING(tf::gather(p, tf::constant({0, 5}), 0), tf::InvalidArgumentError,
                                 "[gather] indices[1] = 5 is not in [0, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::gather(p, tf::constant({{0, 1}, {-1, 2}}), 1),
                                 tf::InvalidArgumentError,
                                 "[gather] indices[1,0] = -1 is not in [0, 4)");
    TF_REQUIRE_THROWS_CONTAINING(tf::gather(p, tf::constant({0.0f}), 0), tf::InvalidArgumentError,
                                 "[gather] indices must be int32 or int64, got float32");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::gather(p, tf::constant({0}), 2), tf::InvalidArgumentError,
        "[gather] axis 2 is out of range for a tensor of rank 2 (shape (3, 4)");
  }
}

TEST_CASE("one_hot makes float32 rows - out-of-range indices give all-off rows",
          "[cpu][cuda][movement][one_hot]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto idt : {tf::int32, tf::int64}) {
      auto idx = tf::detail::from_doubles({0, 2, -1, 3, 1, 1}, {2, 3}, idt);
      auto y = tf::one_hot(idx, 3);
      CHECK(y.dtype() == tf::float32);
      CHECK(y.shape() == tf::TensorShape({2, 3, 3}));
      check_values(y, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0});
      check_values(tf::one_hot(tf::detail::from_doubles({1}, {1}, idt), 2, 5.0f, -1.0f), {-1, 5});
    }
    CHECK(tf::one_hot(tf::constant({1, 2}), 0).shape() == tf::TensorShape({2, 0}));
    CHECK(tf::one_hot(tf::constant(1), 4).shape() == tf::TensorShape({4}));
    TF_REQUIRE_THROWS_CONTAINING(tf::one_hot(tf::constant({1.0f}), 3), tf::InvalidArgumentError,
                                 "[one_hot] indices must be int32, int64 or uint8, got float32");
    TF_REQUIRE_THROWS_CONTAINING(tf::one_hot(tf::constant({1}), -1), tf::InvalidArgumentError,
                                 "[one_hot] depth must be in [0, 2^31 - 1]");
    TF_REQUIRE_THROWS_CONTAINING(tf::one_hot(tf::constant({1}), int64_t{1} << 40),
                                 tf::InvalidArgumentError, "[one_hot] depth must be in");
    // uint8 indices with a depth past 256: one hot position per row (a uint8 range of positions
    // wrapped, so index 0 was also hot at 256).
    const tf::Tensor y = tf::one_hot(tf::detail::from_doubles({0, 255}, {2}, tf::uint8), 300);
    CHECK(y.shape() == tf::TensorShape({2, 300}));
    check_values(tf::reduce_sum(y, 1), {1, 1});
    check_values(tf::argmax(y, 1), {0, 255});
  }
}

TEST_CASE("broadcast_to follows numpy's rules", "[cpu][cuda][movement]") {
  struct Case {
    Dims from, to;
  };
  const std::vector<Case> cases = {
      {{3}, {2, 3}},
      {{3, 1}, {3, 4}},
      {{1, 4}, {3, 4}},
      {{}, {2, 3}},
      {{2, 1, 3}, {4, 2, 5, 3}},
      {{1}, {0}},
      {{2, 3}, {2, 3}},
      {{1, 1}, {5, 1}},
      {{2, 1, 1, 3}, {2, 2, 2, 3}},
      {{1, 3, 1, 2}, {2, 3, 2, 2}},
      {{1}, {100000}},
      {{700, 1}, {700, 300}},
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : kAllTypes) {
        auto x = iota(c.from, dt, 1);
        auto y = tf::broadcast_to(x, tf::TensorShape(c.to));
        INFO(tf::TensorShape(c.from).to_string()
             << " -> " << tf::TensorShape(c.to).to_string() << " " << tf::dtype_name(dt));
        CHECK(y.shape() == tf::TensorShape(c.to));
        check_values(y, ref_broadcast(iota_values(c.from, dt, 1), c.from, c.to), 0, 0);
      }
    }
    TF_REQUIRE_THROWS_CONTAINING(tf::broadcast_to(tf::zeros({2, 3}), {4, 3}),
                                 tf::InvalidArgumentError,
                                 "[broadcast_to] cannot broadcast a tensor of shape (2, 3) to "
                                 "shape (4, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::broadcast_to(tf::zeros({2, 3}), {3}), tf::InvalidArgumentError,
                                 "shape (2, 3) to shape (3,)");
    TF_REQUIRE_THROWS_CONTAINING(tf::broadcast_to(tf::zeros({2}), {-1, 2}),
                                 tf::InvalidArgumentError, "[broadcast_to] the target shape");
  }
}

TEST_CASE("tile repeats along every dimension", "[cpu][cuda][movement]") {
  struct Case {
    Dims shape, multiples;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {2, 1}},
      {{2, 3}, {1, 3}},
      {{2, 3}, {2, 2}},
      {{3}, {4}},
      {{2, 3}, {0, 2}},
      {{2, 1, 2}, {1, 1, 1}},
      {{2, 2, 1, 2, 3}, {2, 2, 3, 2, 2}},  // rank 5 + 5 tiled axes: one axis at a time
      {{1, 2, 1, 2, 1, 2, 1, 2}, {2, 1, 2, 1, 2, 1, 2, 1}},
      {{}, {}},
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : kAllTypes) {
        auto x = iota(c.shape, dt);
        auto y = tf::tile(x, c.multiples);
        Dims os;
        for (size_t d = 0; d < c.shape.size(); ++d) os.push_back(c.shape[d] * c.multiples[d]);
        INFO(tf::TensorShape(c.shape).to_string() << " " << tf::dtype_name(dt));
        CHECK(y.shape() == tf::TensorShape(os));
        const auto v = iota_values(c.shape, dt);
        std::vector<double> want;
        for (int64_t o = 0; o < count(os); ++o) {
          Dims i = unravel(o, os);
          for (size_t d = 0; d < i.size(); ++d) i[d] %= c.shape[d];
          want.push_back(v[ravel(i, c.shape)]);
        }
        check_values(y, want, 0, 0);
      }
    }
    TF_REQUIRE_THROWS_CONTAINING(tf::tile(tf::zeros({2, 3}), {2}), tf::InvalidArgumentError,
                                 "[tile] multiples [2] has 1 entries, but the tensor of shape "
                                 "(2, 3) has rank 2");
    TF_REQUIRE_THROWS_CONTAINING(tf::tile(tf::zeros({2, 3}), {2, -1}), tf::InvalidArgumentError,
                                 "[tile] multiples [2, -1] has a negative entry");
  }
}

TEST_CASE("pad surrounds with a constant", "[cpu][cuda][movement]") {
  struct Case {
    Dims shape;
    std::vector<std::pair<int64_t, int64_t>> pads;
  };
  const std::vector<Case> cases = {
      {{3}, {{1, 2}}},
      {{2, 3}, {{1, 0}, {2, 1}}},
      {{2, 3}, {{0, 0}, {0, 0}}},
      {{2, 3, 4}, {{0, 1}, {1, 1}, {0, 0}}},
      {{0, 2}, {{1, 1}, {1, 0}}},
      {{}, {}},
      {{300, 400}, {{3, 5}, {7, 2}}},
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : kAllTypes) {
        const double cv = dt == tf::bool_ ? 1.0 : 9.0;
        auto x = iota(c.shape, dt);
        auto y = tf::pad(x, c.pads, cv);
        Dims os;
        for (size_t d = 0; d < c.shape.size(); ++d)
          os.push_back(c.shape[d] + c.pads[d].first + c.pads[d].second);
        INFO(tf::TensorShape(c.shape).to_string() << " " << tf::dtype_name(dt));
        CHECK(y.shape() == tf::TensorShape(os));
        CHECK(y.dtype() == dt);
        const auto v = iota_values(c.shape, dt);
        std::vector<double> want;
        for (int64_t o = 0; o < count(os); ++o) {
          Dims i = unravel(o, os);
          bool inside = true;
          for (size_t d = 0; d < i.size(); ++d) {
            i[d] -= c.pads[d].first;
            inside &= i[d] >= 0 && i[d] < c.shape[d];
          }
          want.push_back(inside ? v[ravel(i, c.shape)] : cv);
        }
        check_values(y, want, 0, 0);
      }
    }
    // The default constant is 0; an integer tensor's constant must be exact in its dtype.
    check_values(tf::pad(tf::constant({1, 2}), {{1, 1}}), {0, 1, 2, 0});
    check_values(tf::pad(tf::constant<uint8_t>({1}), {{1, 0}}, 255.0), {255, 1});
    TF_REQUIRE_THROWS_CONTAINING(tf::pad(tf::constant<uint8_t>({1}), {{1, 0}}, 300.0),
                                 tf::InvalidArgumentError,
                                 "[pad] constant_value 300 cannot be represented exactly as uint8");
    TF_REQUIRE_THROWS_CONTAINING(tf::pad(tf::constant({1}), {{1, 0}}, std::nan("")),
                                 tf::InvalidArgumentError, "[pad] constant_value nan");
    TF_REQUIRE_THROWS_CONTAINING(tf::pad(tf::constant({1}), {{1, 0}}, 0.5),
                                 tf::InvalidArgumentError, "as int32");
    check_values(tf::pad(tf::constant({1.5f}), {{0, 1}}, -0.25), {1.5, -0.25});
    TF_REQUIRE_THROWS_CONTAINING(tf::pad(tf::zeros({2, 3}), {{1, 1}}), tf::InvalidArgumentError,
                                 "[pad] paddings [{1, 1}] has 1 pairs, but the tensor of shape "
                                 "(2, 3) has rank 2");
    TF_REQUIRE_THROWS_CONTAINING(tf::pad(tf::zeros({2}), {{-1, 1}}), tf::InvalidArgumentError,
                                 "[pad] paddings [{-1, 1}] has a negative entry (tensor of shape "
                                 "(2,))");
  }
}

TEST_CASE("transpose of odd and large shapes in every element size", "[cpu][cuda][movement]") {
  struct Case {
    Dims shape;
    std::vector<std::vector<int>> perms;
  };
  const std::vector<Case> cases = {
      {{33, 65}, {{1, 0}}},
      {{65, 33}, {{1, 0}}},
      {{5, 33, 65}, {{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}},
      {{1025, 513}, {{1, 0}}},
      {{64, 3, 128}, {{1, 0, 2}, {2, 1, 0}}},  // the innermost dimension kept: rows of runs
      {{3, 100001}, {{1, 0}}},                 // thin tiles
      {{7, 1, 9, 1, 11}, {{4, 1, 2, 3, 0}, {2, 4, 0, 1, 3}}},
  };
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : cases) {
      for (auto dt : kAllTypes) {
        const auto x = iota(c.shape, dt);
        const auto xv = iota_values(c.shape, dt);
        for (const auto& perm : c.perms) {
          INFO("shape " << tf::TensorShape(c.shape).to_string() << " perm "
                        << tf::detail::vec_to_string(perm) << " " << tf::dtype_name(dt) << " on "
                        << dev.to_string());
          check_values(tf::transpose(x, perm), ref_transpose(xv, c.shape, perm), 0, 0);
        }
      }
    }
  }
}

TEST_CASE("slice, pad and broadcast_to of large and unaligned boxes", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      INFO(tf::dtype_name(dt) << " on " << dev.to_string());
      // Slices whose rows start at every alignment: runs of 1 to 16-byte elements.
      const Dims s = {517, 1031};
      const auto x = iota(s, dt);
      const auto xv = iota_values(s, dt);
      for (const auto& [begin, size] :
           std::vector<std::pair<Dims, Dims>>{{{1, 3}, {515, 1027}},
                                              {{0, 0}, {517, 1024}},
                                              {{2, 1}, {500, 1}},  // one column
                                              {{5, 0}, {300, 1031}},  // whole rows
                                              {{0, 1000}, {517, 31}}}) {
        check_values(tf::slice(x, begin, size), ref_slice(xv, s, begin, size), 0, 0);
      }
      // Pad a large box.
      const Dims ps = {1000, 333};
      const std::vector<std::pair<int64_t, int64_t>> pads = {{1, 2}, {3, 4}};
      const auto p = tf::pad(iota(ps, dt), pads, 1.0);
      std::vector<double> want;
      const auto pv = iota_values(ps, dt);
      for (int64_t i = 0; i < 1003; ++i)
        for (int64_t j = 0; j < 340; ++j) {
          const bool in = i >= 1 && i < 1001 && j >= 3 && j < 336;
          want.push_back(in ? pv[(i - 1) * 333 + (j - 3)] : 1.0);
        }
      check_values(p, want, 0, 0);
      // Broadcasts of rows, columns and middle axes.
      for (const auto& [from, to] : std::vector<std::pair<Dims, Dims>>{
               {{3, 1, 5}, {3, 1000, 5}},
               {{1000, 1}, {1000, 1000}},
               {{1, 1000}, {1000, 1000}},
               {{7, 1}, {3, 7, 4099}},
               {{1, 1, 1}, {3, 1, 70000}}}) {
        check_values(tf::broadcast_to(iota(from, dt, 1), tf::TensorShape(to)),
                     ref_broadcast(iota_values(from, dt, 1), from, to), 0, 0);
      }
    }
  }
}

TEST_CASE("concat of many inputs and stack along the last axis", "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : kAllTypes) {
      INFO(tf::dtype_name(dt) << " on " << dev.to_string());
      for (int axis : {0, 1}) {
        // 100 inputs (several launches of at most 32), some empty.
        std::vector<tf::Tensor> parts;
        std::vector<Dims> shapes;
        std::vector<std::vector<double>> vals;
        for (int i = 0; i < 100; ++i) {
          Dims sh = {3, 4};
          sh[axis] = i % 5;
          shapes.push_back(sh);
          parts.push_back(iota(sh, dt, i * 7));
          vals.push_back(iota_values(sh, dt, i * 7));
        }
        Dims os = {3, 4};
        os[axis] = 0;
        for (const auto& sh : shapes) os[axis] += sh[axis];
        std::vector<double> want;
        for (int64_t o = 0; o < count(os); ++o) {
          Dims i = unravel(o, os);
          size_t p = 0;
          while (i[axis] >= shapes[p][axis]) i[axis] -= shapes[p++][axis];
          want.push_back(vals[p][ravel(i, shapes[p])]);
        }
        const auto y = tf::concat(parts, axis);
        CHECK(y.shape() == tf::TensorShape(os));
        check_values(y, want, 0, 0);
      }
      // stack(axis=-1) of 40 vectors: inputs one element wide.
      std::vector<tf::Tensor> cols;
      for (int i = 0; i < 40; ++i) cols.push_back(iota({50}, dt, i * 50));
      std::vector<double> want;
      for (int64_t r = 0; r < 50; ++r)
        for (int i = 0; i < 40; ++i) want.push_back(value_at(i * 50 + r, dt));
      const auto st = tf::stack(cols, -1);
      CHECK(st.shape() == tf::TensorShape({50, 40}));
      check_values(st, want, 0, 0);
      // Two big inputs along the inner axis.
      const auto a = iota({300, 1001}, dt), b = iota({300, 523}, dt, 3);
      const auto av = iota_values({300, 1001}, dt), bv = iota_values({300, 523}, dt, 3);
      std::vector<double> wab;
      for (int64_t r = 0; r < 300; ++r) {
        wab.insert(wab.end(), av.begin() + r * 1001, av.begin() + (r + 1) * 1001);
        wab.insert(wab.end(), bv.begin() + r * 523, bv.begin() + (r + 1) * 523);
      }
      check_values(tf::concat({a, b}, 1), wab, 0, 0);
    }
  }
}

TEST_CASE("gather of long slabs and many indices - the first bad index is reported",
          "[cpu][cuda][movement]") {
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::float32, tf::float16, tf::uint8, tf::int64}) {
      INFO(tf::dtype_name(dt) << " on " << dev.to_string());
      // Slabs of 300 elements (long rows) and of 3 (one thread per element).
      for (const Dims& ps : {Dims{1000, 300}, Dims{7, 1000, 3}}) {
        const int axis = ps.size() == 2 ? 0 : 1;
        const auto p = iota(ps, dt);
        const auto pv = iota_values(ps, dt);
        std::vector<double> iv(5000);
        for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<double>((i * 7919) % 1000);
        for (auto idt : {tf::int32, tf::int64}) {
          const auto g = tf::gather(p, tf::detail::from_doubles(iv, {50, 100}, idt), axis);
          int64_t outer = 1, inner = 1;
          for (int d = 0; d < axis; ++d) outer *= ps[d];
          for (size_t d = static_cast<size_t>(axis) + 1; d < ps.size(); ++d) inner *= ps[d];
          std::vector<double> want;
          for (int64_t o = 0; o < outer; ++o)
            for (double r : iv)
              for (int64_t k = 0; k < inner; ++k)
                want.push_back(pv[(o * 1000 + static_cast<int64_t>(r)) * inner + k]);
          check_values(g, want, 0, 0);
        }
      }
    }
    const auto p = iota({1000, 4}, tf::float32);
    std::vector<double> iv(5000, 3.0);
    iv[4999] = 1000;
    TF_REQUIRE_THROWS_CONTAINING(
        tf::gather(p, tf::detail::from_doubles(iv, {5000}, tf::int64)), tf::InvalidArgumentError,
        "[gather] indices[4999] = 1000 is not in [0, 1000) (params of shape (1000, 4), axis 0, "
        "indices of shape (5000,))");
    iv[1234] = -7;
    TF_REQUIRE_THROWS_CONTAINING(
        tf::gather(p, tf::detail::from_doubles(iv, {50, 100}, tf::int32)),
        tf::InvalidArgumentError, "[gather] indices[12,34] = -7 is not in [0, 1000)");
    // Indices are checked even when the result is empty.
    TF_REQUIRE_THROWS_CONTAINING(tf::gather(tf::zeros({0, 3}), tf::constant({0, 4}), 1),
                                 tf::InvalidArgumentError,
                                 "[gather] indices[1] = 4 is not in [0, 3)");
  }
}

TEST_CASE("copies of rows of every short length (slice, broadcast_to, gather)",
          "[cpu][cuda][movement]") {
  const std::vector<int64_t> lengths = {1,  2,  3,  4,  5,  7,  8,   9,   15,  16, 17,
                                        31, 32, 33, 63, 64, 65, 255, 256, 257, 300};
  for (auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::uint8, tf::float16, tf::float32, tf::float64}) {
      const Dims s = {37, 301};
      const auto x = iota(s, dt);
      const auto xv = iota_values(s, dt);
      for (int64_t len : lengths) {
        INFO(tf::dtype_name(dt) << " rows of " << len << " on " << dev.to_string());
        for (int64_t b : {0, 1}) {
          check_values(tf::slice(x, {1, b}, {36, len}), ref_slice(xv, s, {1, b}, {36, len}), 0, 0);
        }
        const Dims from = {37, 1}, to = {37, len};
        check_values(tf::broadcast_to(iota(from, dt), tf::TensorShape(to)),
                     ref_broadcast(iota_values(from, dt), from, to), 0, 0);
        const auto p = tf::slice(x, {0, 0}, {37, len});
        const auto pv = ref_slice(xv, s, {0, 0}, {37, len});
        std::vector<double> iv = {36, 0, 5, 5, 17};
        const auto g = tf::gather(p, tf::detail::from_doubles(iv, {5}, tf::int32));
        std::vector<double> want;
        for (double r : iv)
          for (int64_t k = 0; k < len; ++k)
            want.push_back(pv[static_cast<size_t>(static_cast<int64_t>(r) * len + k)]);
        check_values(g, want, 0, 0);
      }
    }
  }
}

TEST_CASE("unsorted_segment_sum adds rows into segments and checks the ids",
          "[cpu][cuda][movement]") {
  // gather's gradient; negative ids drop their row (TF); ids >= n are an error eagerly and,
  // traced, from the CPU kernel (the CUDA kernel drops them inside a traced function, as TF's
  // GPU kernel).
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    for (auto dt : {tf::float32, tf::float64}) {
      for (auto idt : {tf::int32, tf::int64}) {
        const Dims ds = {5, 2, 3};
        const auto data = iota(ds, dt);
        const auto dv = iota_values(ds, dt);
        const std::vector<double> iv = {2, 0, -1, 3, 0};
        const auto ids = tf::detail::from_doubles(iv, tf::TensorShape{5}, idt);
        const tf::Tensor y = tf::unsorted_segment_sum(data, ids, 4);
        CHECK(y.shape() == tf::TensorShape({4, 2, 3}));
        std::vector<double> want(4 * 6, 0.0);
        for (int64_t i = 0; i < 5; ++i)
          for (int64_t j = 0; j < 6 && iv[i] >= 0; ++j)
            want[static_cast<size_t>(static_cast<int64_t>(iv[i]) * 6 + j)] +=
                dv[static_cast<size_t>(i * 6 + j)];
        check_values(y, want, 0, 0);
      }
    }
    const auto data = iota({3, 2}, tf::float32);
    const auto bad = tf::constant(std::vector<int32_t>{0, 4, 1}, {3});
    tf::testing::require_error([&] { tf::unsorted_segment_sum(data, bad, 4); },
                               {"segment_ids[1] = 4 is not less than num_segments 4"});
    // Negative ids (any size) drop their rows; with no segments every id must be negative.
    check_values(tf::unsorted_segment_sum(data, bad * -1, 4), {0, 1, 0, 0, 0, 0, 0, 0}, 0, 0);
    const auto all_dropped = tf::constant(std::vector<int64_t>{-1, INT64_MIN, -7}, {3});
    CHECK(tf::unsorted_segment_sum(data, all_dropped, 0).shape() == tf::TensorShape({0, 2}));
    check_values(tf::unsorted_segment_sum(data, all_dropped, 2), {0, 0, 0, 0}, 0, 0);
    tf::testing::require_error([&] { tf::unsorted_segment_sum(data, bad * 0, 0); },
                               {"segment_ids[0] = 0 is not less than num_segments 0"});
    // int64 ids are named exactly, also above 2^53 (where a double would round them).
    const auto huge = tf::constant(std::vector<int64_t>{0, (int64_t{1} << 53) + 1, 1}, {3});
    tf::testing::require_error([&] { tf::unsorted_segment_sum(data, huge, 4); },
                               {"segment_ids[1] = 9007199254740993 is not less than"});
    // Traced: the ids have no value at trace time; the kernel checks them on the CPU.
    auto f = tf::function([](const tf::Tensor& d, const tf::Tensor& i) {
      return tf::unsorted_segment_sum(d, i, 4);
    });
    const auto good = tf::constant(std::vector<int32_t>{3, 3, 0}, {3});
    check_values(f(data, good), {4, 5, 0, 0, 0, 0, 0 + 2, 1 + 3}, 0, 0);
    if (dev.is_cpu())
      tf::testing::require_error([&] { f(data, bad); }, {"segment_ids[1] = 4 is not less than"});
    check_values(f(data, bad * -1), {0, 1, 0, 0, 0, 0, 0, 0}, 0, 0);
  }
}

TEST_CASE(
    "gather's gradient (along a None axis too), unsorted_segment_sum and tensordot serve two "
    "None dimensions from one trace",
    "[cpu][cuda][movement][jit]") {
  // Before, each reshaped with sizes from the first shapes it saw (the trailing or the free
  // dimensions), so a function traced for (None, None, 5) retraced for every new shape.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor w =
        tf::detail::from_doubles(tf::testing::random_values(15, -1, 1, 3), {5, 3}, tf::float64);
    auto body = [&](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      // Columns 4, 0, 0 and 2 of the last axis; a segment sum over the rows of its transpose.
      const tf::Tensor g = tf::gather(x, tf::constant(std::vector<int64_t>{4, 0, 0, 2}), 2);
      const tf::Tensor s = tf::unsorted_segment_sum(
          tf::transpose(g, {2, 0, 1}), tf::constant(std::vector<int64_t>{1, 0, 1, 1}), 2);
      const tf::Tensor t = tf::linalg::tensordot(x, w, 1);
      // A gather along a None axis (reverse's indices are computed when the graph runs): its
      // gradient's segment count is that axis's length, read when the graph runs too.
      const tf::Tensor r = tf::reverse(x, {1});
      const tf::Tensor loss = tf::reduce_sum(g * g) + tf::reduce_sum(t * t) + tf::reduce_sum(s) +
                              tf::reduce_sum(r * tf::sin(x));
      return tf::concat(
          {tf::reshape(tape.gradient(loss, x), {-1}), tf::reshape(s, {-1}), tf::reshape(t, {-1})},
          0);
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, tf::None, 5}, tf::float64)};
    auto f = tf::function(body, opts);
    for (const Dims& shape : {Dims{2, 3, 5}, Dims{4, 1, 5}, Dims{1, 6, 5}}) {
      const tf::TensorShape s(shape);
      const tf::Tensor x = tf::detail::from_doubles(
          tf::testing::random_values(static_cast<size_t>(s.num_elements()), -1, 1, 7), s,
          tf::float64);
      tf::testing::check_close(f(x), body(x), 1e-12, 1e-12);
    }
    CHECK(f.tracing_count() == 1);
  }
}
