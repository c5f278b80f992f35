// matmul, inv, solve and det against plain float64 reference loops.
#include <dnnl_types.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/cuda/det_element.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

tf::Tensor make(const std::vector<double>& v, const tf::TensorShape& s, tf::DType dt) {
  return tf::detail::from_doubles(v, s, dt);
}

// Whole numbers in [-4, 4] (exact in every dtype, products exact in float16 for small K).
std::vector<double> random_ints(size_t n, unsigned seed) {
  auto v = random_values(n, -4.5, 4.5, seed);
  for (double& x : v) x = std::round(x);
  return v;
}

std::vector<int64_t> batch_dims(const tf::TensorShape& s) {
  std::vector<int64_t> b;
  for (int i = 0; i + 2 < s.rank(); ++i) b.push_back(s[i]);
  return b;
}

// Reference matmul in float64 with broadcast batch dimensions; returns the values and the shape.
std::vector<double> ref_matmul(const tf::Tensor& ta, const tf::Tensor& tb, bool tra, bool trb,
                               tf::TensorShape* shape) {
  const auto a = tf::detail::to_double_vector(ta);
  const auto b = tf::detail::to_double_vector(tb);
  const tf::TensorShape& sa = ta.shape();
  const tf::TensorShape& sb = tb.shape();
  const int ra = sa.rank(), rb = sb.rank();
  const int64_t ar = sa[ra - 2], ac = sa[ra - 1], br = sb[rb - 2], bc = sb[rb - 1];
  const int64_t m = tra ? ac : ar, k = tra ? ar : ac, n = trb ? br : bc;
  auto ba = batch_dims(sa), bb = batch_dims(sb);
  const size_t r = std::max(ba.size(), bb.size());
  while (ba.size() < r) ba.insert(ba.begin(), 1);
  while (bb.size() < r) bb.insert(bb.begin(), 1);
  std::vector<int64_t> bo(r);
  int64_t nb = 1;
  for (size_t i = 0; i < r; ++i) {
    bo[i] = std::max(ba[i], bb[i]);
    nb *= bo[i];
  }
  std::vector<int64_t> dims(bo);
  dims.push_back(m);
  dims.push_back(n);
  *shape = tf::TensorShape(dims);
  std::vector<double> c(static_cast<size_t>(nb * m * n), 0.0);
  for (int64_t t = 0; t < nb; ++t) {
    // Decompose t and map to a's and b's batch index.
    int64_t rem = t, ia = 0, ib = 0, sa_ = 1, sb_ = 1;
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      const int64_t idx = rem % bo[d];
      rem /= bo[d];
      ia += (ba[d] == 1 ? 0 : idx) * sa_;
      ib += (bb[d] == 1 ? 0 : idx) * sb_;
      sa_ *= ba[d];
      sb_ *= bb[d];
    }
    const double* pa = a.data() + ia * ar * ac;
    const double* pb = b.data() + ib * br * bc;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double x = tra ? pa[q * ac + i] : pa[i * ac + q];
          const double y = trb ? pb[j * bc + q] : pb[q * bc + j];
          s += x * y;
        }
        c[(t * m + i) * n + j] = s;
      }
  }
  return c;
}

void check_matmul(const tf::TensorShape& sa, const tf::TensorShape& sb, tf::DType dt,
                  bool tra = false, bool trb = false, double tol = 1e-5, unsigned seed = 1) {
  INFO("a " << sa.to_string() << " b " << sb.to_string() << " " << tf::dtype_name(dt)
            << " transpose_a=" << tra << " transpose_b=" << trb);
  const bool whole = !tf::is_floating(dt) || dt == tf::float16 || dt == tf::bfloat16;
  const auto va = whole ? random_ints(sa.num_elements(), seed)
                        : random_values(sa.num_elements(), -1, 1, seed);
  const auto vb = whole ? random_ints(sb.num_elements(), seed + 7)
                        : random_values(sb.num_elements(), -1, 1, seed + 7);
  const tf::Tensor a = make(va, sa, dt), b = make(vb, sb, dt);
  tf::TensorShape want_shape;
  const auto want = ref_matmul(a, b, tra, trb, &want_shape);
  const tf::Tensor c = tf::matmul(a, b, tra, trb);
  CHECK(c.dtype() == dt);
  CHECK(c.device() == a.device());
  REQUIRE(c.shape() == want_shape);
  check_values(c, want, tol, tol);
}

// ---- float64 references for the LU ops ----

using Mat = std::vector<double>;

// Gauss-Jordan elimination with partial pivoting: solves A X = B (n x n, n x k) in place.
// Returns false when A is singular.
bool ref_solve(Mat a, Mat& b, int64_t n, int64_t k, double* det = nullptr) {
  double d = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
    if (a[p * n + c] == 0) {
      if (det) *det = 0;
      return false;
    }
    if (p != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[p * n + j], a[c * n + j]);
      for (int64_t j = 0; j < k; ++j) std::swap(b[p * k + j], b[c * k + j]);
      d = -d;
    }
    d *= a[c * n + c];
    for (int64_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r * n + c] / a[c * n + c];
      for (int64_t j = 0; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
      for (int64_t j = 0; j < k; ++j) b[r * k + j] -= f * b[c * k + j];
    }
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) b[r * k + j] /= a[r * n + r];
  if (det) *det = d;
  return true;
}

// Random well-conditioned matrices: uniform [-1, 1) plus n on the diagonal, batch of them.
std::vector<double> well_conditioned(int64_t batches, int64_t n, unsigned seed) {
  auto v = random_values(static_cast<size_t>(batches * n * n), -1, 1, seed);
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < n; ++i) v[(b * n + i) * n + i] += static_cast<double>(n);
  return v;
}

void check_inverse(const tf::TensorShape& s, tf::DType dt, double tol, unsigned seed = 3) {
  INFO("inv of " << s.to_string() << " " << tf::dtype_name(dt));
  const int64_t n = s[s.rank() - 1];
  const int64_t batches = s.num_elements() / std::max<int64_t>(n * n, 1);
  const tf::Tensor a = make(well_conditioned(batches, n, seed), s, dt);
  const auto va = tf::detail::to_double_vector(a);
  std::vector<double> want;
  for (int64_t b = 0; b < batches; ++b) {
    Mat m(va.begin() + b * n * n, va.begin() + (b + 1) * n * n);
    Mat id(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) id[i * n + i] = 1;
    REQUIRE(ref_solve(m, id, n, n));
    want.insert(want.end(), id.begin(), id.end());
  }
  const tf::Tensor x = tf::linalg::inv(a);
  CHECK(x.dtype() == dt);
  REQUIRE(x.shape() == s);
  check_values(x, want, tol, tol);
}

// solve of `batches` systems (a: [batches, n, n] well conditioned, b: [batches, n, k]) against
// elimination in float64; batches == 0 means unbatched shapes [n, n] and [n, k].
void check_solve(int64_t batches, int64_t n, int64_t k, tf::DType dt, double tol,
                 unsigned seed = 11) {
  INFO("solve batches=" << batches << " n=" << n << " k=" << k << " " << tf::dtype_name(dt));
  const int64_t nb = std::max<int64_t>(batches, 1);
  const tf::TensorShape sa = batches == 0 ? tf::TensorShape{n, n} : tf::TensorShape{batches, n, n};
  const tf::TensorShape sb = batches == 0 ? tf::TensorShape{n, k} : tf::TensorShape{batches, n, k};
  const tf::Tensor a = make(well_conditioned(nb, n, seed), sa, dt);
  const tf::Tensor b = make(random_values(sb.num_elements(), -2, 2, seed + 1), sb, dt);
  const auto va = tf::detail::to_double_vector(a), vb = tf::detail::to_double_vector(b);
  std::vector<double> want;
  for (int64_t i = 0; i < nb; ++i) {
    Mat m(va.begin() + i * n * n, va.begin() + (i + 1) * n * n);
    Mat r(vb.begin() + i * n * k, vb.begin() + (i + 1) * n * k);
    REQUIRE(ref_solve(m, r, n, k));
    want.insert(want.end(), r.begin(), r.end());
  }
  const tf::Tensor x = tf::linalg::solve(a, b);
  CHECK(x.dtype() == dt);
  CHECK(x.device() == a.device());
  REQUIRE(x.shape() == sb);
  check_values(x, want, tol, tol);
}

// Sets TF's TensorFloat-32 switch for a scope and restores it.
struct Tf32Guard {
  bool saved = tf::config::experimental::tensor_float_32_execution_enabled();
  explicit Tf32Guard(bool on) { tf::config::experimental::enable_tensor_float_32_execution(on); }
  ~Tf32Guard() { tf::config::experimental::enable_tensor_float_32_execution(saved); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// matmul

TEST_CASE("matmul matches a float64 reference for plain shapes", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    check_matmul({2, 3}, {3, 4}, tf::float32);
    check_matmul({1, 1}, {1, 1}, tf::float32);
    check_matmul({4, 4}, {4, 4}, tf::float32);
    check_matmul({7, 1}, {1, 9}, tf::float32);
    check_matmul({1, 33}, {33, 1}, tf::float32);
    check_matmul({37, 41}, {41, 29}, tf::float32);  // the oneDNN path
    // The exact values of a small product.
    const tf::Tensor a = tf::constant<float>({{1, 2, 3}, {4, 5, 6}});
    const tf::Tensor b = tf::constant<float>({{7, 8}, {9, 10}, {11, 12}});
    const tf::Tensor c = tf::matmul(a, b);
    CHECK(c.shape() == tf::TensorShape({2, 2}));
    check_values(c, {58, 64, 139, 154}, 0, 0);
    check_values(tf::linalg::matmul(a, b), {58, 64, 139, 154}, 0, 0);
  }
}

TEST_CASE("matmul with an empty inner dimension gives zeros", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64, tf::float16, tf::int32, tf::int64}) {
      const tf::Tensor c = tf::matmul(tf::zeros({5, 0}, dt), tf::zeros({0, 3}, dt));
      CHECK(c.shape() == tf::TensorShape({5, 3}));
      CHECK(c.dtype() == dt);
      check_values(c, std::vector<double>(15, 0.0), 0, 0);
    }
    // Empty outputs.
    CHECK(tf::matmul(tf::zeros({0, 4}), tf::zeros({4, 3})).shape() == tf::TensorShape({0, 3}));
    CHECK(tf::matmul(tf::zeros({2, 4}), tf::zeros({4, 0})).shape() == tf::TensorShape({2, 0}));
    CHECK(tf::matmul(tf::zeros({0, 2, 4}), tf::zeros({4, 3})).shape() ==
          tf::TensorShape({0, 2, 3}));
  }
}

TEST_CASE("matmul transposes either operand", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64, tf::int32}) {
      // a stored (2, 3) or (3, 2); b stored (3, 4) or (4, 3): always a (2, 3) @ (3, 4) product.
      check_matmul({2, 3}, {3, 4}, dt, false, false);
      check_matmul({3, 2}, {3, 4}, dt, true, false);
      check_matmul({2, 3}, {4, 3}, dt, false, true);
      check_matmul({3, 2}, {4, 3}, dt, true, true);
      // Bigger: the library paths (and the integer kernel's blocks).
      check_matmul({70, 50}, {70, 60}, dt, true, false, 1e-4);
      check_matmul({50, 70}, {60, 70}, dt, false, true, 1e-4);
      check_matmul({70, 50}, {60, 70}, dt, true, true, 1e-4);
    }
    // Batched with transposes.
    check_matmul({2, 4, 3}, {2, 5, 4}, tf::float32, true, true);
    check_matmul({3, 5, 2}, {5, 4}, tf::float32, true, false);
    check_matmul({3, 2, 5}, {4, 5}, tf::float32, false, true);
  }
}

TEST_CASE("matmul batches and broadcasts leading dimensions", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    check_matmul({2, 3, 4}, {2, 4, 5}, tf::float32);
    check_matmul({2, 1, 3, 4}, {3, 4, 2}, tf::float32);  // -> (2, 3, 3, 2)
    check_matmul({3, 4}, {2, 3, 4, 2}, tf::float32);     // a shared by every batch
    check_matmul({2, 3, 4}, {4, 5}, tf::float32);        // b shared: one tall GEMM
    check_matmul({4, 1, 6, 7}, {1, 3, 7, 5}, tf::float32);
    check_matmul({5, 6, 7}, {1, 7, 5}, tf::float64);
    // Many small matrices: spread over the threads.
    check_matmul({64, 8, 9}, {64, 9, 7}, tf::float32);
    check_matmul({64, 8, 9}, {64, 9, 7}, tf::int64);
    check_matmul({50, 40, 30}, {50, 30, 20}, tf::float32, false, false, 1e-4);
    // Big matrices in a batch: one threaded GEMM after the other.
    check_matmul({2, 130, 120}, {2, 120, 110}, tf::float32, false, false, 1e-4);
    // Rank-1 batch dims of size one on both sides.
    check_matmul({1, 3, 4}, {1, 4, 2}, tf::float32);
  }
}

TEST_CASE("matmul supports every numeric dtype", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    check_matmul({4, 6}, {6, 5}, tf::float64, false, false, 1e-12);
    check_matmul({2, 4, 6}, {2, 6, 5}, tf::float64, false, false, 1e-12);
    check_matmul({4, 6}, {6, 5}, tf::int32, false, false, 0);
    check_matmul({4, 6}, {6, 5}, tf::int64, false, false, 0);
    check_matmul({45, 300}, {300, 70}, tf::int32, false, false, 0);  // several k blocks
    check_matmul({3, 8, 1100}, {1100, 9}, tf::int32, false, false, 0);
    // Whole numbers up to 4 with K = 6: exact in float16/bfloat16 (|sums| <= 96).
    check_matmul({4, 6}, {6, 5}, tf::float16, false, false, 0);
    check_matmul({2, 4, 6}, {6, 5}, tf::bfloat16, false, false, 0);
    check_matmul({3, 6}, {5, 6}, tf::float16, false, true, 0);
    // Larger float16 product: rounding of the result only.
    check_matmul({30, 40}, {40, 20}, tf::float16, false, false, 2e-3);
    // int32 wraps around as TF's does.
    const tf::Tensor big = tf::constant<int>({{65536}});
    CHECK(tf::matmul(big, big).item<int64_t>() == 0);
  }
}

TEST_CASE("matmul of a 300x200 by 200x100 product uses the library path", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    check_matmul({300, 200}, {200, 100}, tf::float32, false, false, 1e-4);
    check_matmul({200, 300}, {100, 200}, tf::float32, true, true, 1e-4);
    check_matmul({300, 200}, {200, 100}, tf::float64, false, false, 1e-12);
    check_matmul({300, 200}, {200, 100}, tf::bfloat16, false, false, 1e-2);
  }
}

TEST_CASE("matmul of odd sizes, transposes and broadcast batches", "[cpu][cuda][linalg]") {
  // Shapes for the GPU's paths as much as the CPU's: sizes that are not multiples of the
  // tensor-core tiles, every batch layout (one tall GEMM, strided batches with a shared operand,
  // pointer arrays for batches broadcast against each other) and the integer kernel's partial
  // tiles.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float32, tf::float64}) {
      const double tol = dt == tf::float64 ? 1e-12 : 1e-4;
      check_matmul({33, 17}, {17, 65}, dt, false, false, tol);
      check_matmul({127, 129}, {129, 31}, dt, false, false, tol);
      check_matmul({129, 127}, {31, 129}, dt, true, true, tol);
      check_matmul({129, 5}, {129, 3}, dt, true, false, tol);
      check_matmul({1, 257}, {3, 257}, dt, false, true, tol);
      check_matmul({5, 1}, {1, 1}, dt, false, false, tol);
    }
    // Whole numbers: exact products and float32 sums; only the result is rounded.
    check_matmul({33, 70}, {70, 45}, tf::float16, false, false, 1e-3);
    check_matmul({70, 33}, {45, 70}, tf::float16, true, true, 1e-3);
    check_matmul({17, 9}, {9, 130}, tf::bfloat16, false, false, 1e-2);
    check_matmul({9, 17}, {130, 9}, tf::bfloat16, true, true, 1e-2);
    // Batch layouts.
    check_matmul({6, 5, 7}, {7, 4}, tf::float32);               // a stack, b shared: one GEMM
    check_matmul({6, 7, 5}, {7, 4}, tf::float32, true, false);  // transposed stack: strided
    check_matmul({5, 7}, {6, 7, 4}, tf::float32);               // a shared: strided, stride 0
    check_matmul({5, 7}, {6, 4, 7}, tf::float64, false, true, 1e-12);
    check_matmul({6, 5, 7}, {6, 7, 4}, tf::float16, false, false, 1e-3);  // strided
    check_matmul({2, 6, 5, 7}, {2, 6, 7, 4}, tf::bfloat16, false, false, 1e-2);
    check_matmul({3, 1, 5, 7}, {1, 4, 4, 7}, tf::float32, false, true);  // pointer arrays
    check_matmul({2, 3, 1, 5, 7}, {3, 4, 7, 6}, tf::float64, false, false, 1e-12);
    check_matmul({3, 1, 7, 5}, {1, 4, 7, 6}, tf::bfloat16, true, false, 1e-2);
    check_matmul({1, 3, 1, 5, 7}, {2, 1, 4, 7, 6}, tf::float16, false, false, 1e-3);
    // Integers: partial 16 x 16 tiles, transposes, broadcast batches, several k steps.
    check_matmul({3, 1, 17, 33}, {1, 4, 33, 18}, tf::int32, false, false, 0);
    check_matmul({2, 33, 17}, {18, 33}, tf::int64, true, true, 0);
    check_matmul({40, 3}, {2, 1, 40, 5}, tf::int32, true, false, 0);
    check_matmul({1, 100}, {100, 1}, tf::int64, false, false, 0);
    check_matmul({65, 1}, {1, 70}, tf::int32, false, false, 0);
  }
}

TEST_CASE("matmul honours the TensorFloat-32 switch on GPUs", "[cuda][linalg]") {
  if (!tf::testing::has_gpu()) {
    WARN("no GPU: skipping the TensorFloat-32 case");
    return;
  }
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    if (dev.is_cpu()) continue;
    tf::DeviceScope scope(dev);
    const int64_t n = 512;
    const tf::Tensor a = make(random_values(n * n, -1, 1, 5), {n, n}, tf::float32);
    const tf::Tensor b = make(random_values(n * n, -1, 1, 6), {n, n}, tf::float32);
    tf::TensorShape shape;
    const auto want = ref_matmul(a, b, false, false, &shape);
    auto max_error = [&](const tf::Tensor& c) {
      const auto got = tf::detail::to_double_vector(c);
      double e = 0;
      for (size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
      return e;
    };
    double exact, tf32;
    {
      Tf32Guard off(false);
      exact = max_error(tf::matmul(a, b));
    }
    {
      Tf32Guard on(true);
      tf32 = max_error(tf::matmul(a, b));
    }
    INFO("float32 error " << exact << ", TensorFloat-32 error " << tf32);
    CHECK(exact < 1e-4);  // float32 products: rounding of the sums only
    CHECK(tf32 > 1e-4);   // 10-bit mantissa products
    CHECK(tf32 < 0.1);
  }
}

TEST_CASE("matmul reports bad arguments with the shapes and dtypes", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 3}), tf::zeros({4, 5})),
                                 tf::InvalidArgumentError,
                                 "[matmul] inner dimensions differ: a is (2, 3), b is (4, 5)");
  // A product too large to count its elements names the op (the count fails in TensorShape).
  TF_REQUIRE_THROWS_CONTAINING(
      tf::matmul(tf::zeros({int64_t{1} << 40, 0}), tf::zeros({0, int64_t{1} << 40})),
      tf::InvalidArgumentError, "[matmul] [TensorShape] shape (1099511627776, 1099511627776)");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 3}), tf::zeros({4, 5}), true, false),
                                 tf::InvalidArgumentError,
                                 "a is (2, 3) (transpose_a=true), b is (4, 5)");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 3}), tf::zeros({4, 5}), false, true),
                                 tf::InvalidArgumentError,
                                 "a is (2, 3), b is (4, 5) (transpose_b=true)");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({3}), tf::zeros({3, 4})),
                                 tf::InvalidArgumentError,
                                 "[matmul] expects tensors of rank at least 2, got shapes (3,) "
                                 "and (3, 4)");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 3}), tf::zeros({3})),
                                 tf::InvalidArgumentError, "rank at least 2");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 2, 3}), tf::zeros({3, 3, 4})),
                                 tf::InvalidArgumentError,
                                 "[matmul] batch dimensions (2,) and (3,) cannot be broadcast");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::matmul(tf::zeros({2, 2}, tf::bool_), tf::zeros({2, 2}, tf::bool_)),
        tf::InvalidArgumentError, "[matmul] does not support dtype bool");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::matmul(tf::zeros({2, 2}, tf::uint8), tf::zeros({2, 2}, tf::uint8)),
        tf::InvalidArgumentError, "[matmul] does not support dtype uint8");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 2}), tf::zeros({2, 2}, tf::float64)),
                                 tf::InvalidArgumentError,
                                 "[matmul] dtypes differ: float32 and float64");
    TF_REQUIRE_THROWS_CONTAINING(tf::matmul(tf::zeros({2, 2}), tf::Tensor()),
                                 tf::InvalidArgumentError, "undefined");
  }
}

TEST_CASE("the GEMM backend description names the libraries", "[cpu][linalg]") {
  const std::string info = tf::detail::gemm_backend_info();
  CHECK(info.find("oneDNN") != std::string::npos);
  CHECK(info.find("OpenBLAS core") != std::string::npos);
}

TEST_CASE("float32 products either side of the OpenBLAS-oneDNN crossover agree",
          "[cpu][linalg]") {
  // The crossover depends on OpenBLAS's kernels and the thread count: products just below and
  // just above it, squares and transposed rectangles, with one thread and with two, and a batch
  // of small products split over the threads (each a one-thread GEMM inside the parallel
  // region, where the one-thread crossover applies).
  tf::DeviceScope cpu("/device:CPU:0");
  struct RestoreThreads {
    int before = tf::detail::num_threads();
    ~RestoreThreads() { tf::detail::set_num_threads(before); }
  } restore;
  for (int threads : {1, 2}) {
    tf::detail::set_num_threads(threads);
    const double mnk = tf::detail::sgemm_openblas_max_mnk();
    INFO("threads " << threads << ", OpenBLAS up to M*N*K = " << mnk);
    CHECK(mnk >= 28.0 * 28 * 28);
    const auto n = static_cast<int64_t>(std::cbrt(mnk) + 1e-6);  // n^3 <= mnk < (n + 1)^3
    CHECK(static_cast<double>(n) * n * n <= mnk);
    CHECK(static_cast<double>(n + 1) * (n + 1) * (n + 1) > mnk);
    for (int64_t s : {n, n + 1}) {
      check_matmul({s, s}, {s, s}, tf::float32, false, false, 1e-4);
      check_matmul({s, 2 * s}, {s, s / 2}, tf::float32, true, false, 1e-4);
      check_matmul({s / 2, s}, {2 * s, s}, tf::float32, false, true, 1e-4);
    }
    check_matmul({8, 80, 80}, {8, 80, 80}, tf::float32, false, false, 1e-4);
  }
}

TEST_CASE("detail::gemm writes a strided output", "[cpu][linalg]") {
  // A 2x3 times 3x2 product written into the left half of a 2x4 buffer.
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12};
  std::vector<float> c(8, -1.0f);
  tf::detail::gemm(false, false, 2, 2, 3, a.data(), 3, b.data(), 2, c.data(), 4);
  CHECK(c == std::vector<float>{58, 64, -1, -1, 139, 154, -1, -1});
  const std::vector<double> ad{1, 4, 2, 5, 3, 6};  // a transposed
  std::vector<double> cd(4, 0.0);
  tf::detail::gemm(true, false, 2, 2, 3, ad.data(), 2, std::vector<double>(b.begin(), b.end()).data(),
                   2, cd.data(), 2);
  CHECK(cd == std::vector<double>{58, 64, 139, 154});
}

// ---------------------------------------------------------------------------------------------
// inv, solve, det

TEST_CASE("inv matches a float64 reference", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    check_inverse({1, 1}, tf::float32, 1e-6);
    check_inverse({2, 2}, tf::float32, 1e-6);
    check_inverse({5, 5}, tf::float64, 1e-12);
    check_inverse({3, 4, 4}, tf::float32, 1e-5);
    check_inverse({2, 3, 6, 6}, tf::float64, 1e-12);
    check_inverse({200, 5, 5}, tf::float32, 1e-5);  // small matrices spread over the threads
    check_inverse({30, 20, 20}, tf::float64, 1e-12);  // the same with getrs (n >= 16)
    check_inverse({150, 150}, tf::float32, 1e-5);   // threaded LAPACK
    check_inverse({2, 130, 130}, tf::float64, 1e-12);
    check_inverse({4, 4}, tf::float16, 2e-3);
    check_inverse({2, 3, 3}, tf::bfloat16, 1e-2);
    // Exact values with pivoting.
    const tf::Tensor a = tf::constant<float>({{0, 2}, {4, 0}});
    check_values(tf::linalg::inv(a), {0, 0.25, 0.5, 0}, 0, 0);
    // Empty matrices and empty batches.
    CHECK(tf::linalg::inv(tf::zeros({0, 0})).shape() == tf::TensorShape({0, 0}));
    CHECK(tf::linalg::inv(tf::zeros({0, 3, 3})).shape() == tf::TensorShape({0, 3, 3}));
  }
}

TEST_CASE("inv of a singular matrix raises TF's error", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(tf::constant<float>({{1, 2}, {2, 4}})),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(tf::zeros({3, 3}, tf::float64)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    // One singular matrix in a batch (the parallel path).
    std::vector<double> v = well_conditioned(40, 3, 9);
    for (int i = 0; i < 9; ++i) v[17 * 9 + i] = 0;
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(v, {40, 3, 3}, tf::float32)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    std::vector<double> w = well_conditioned(40, 20, 10);
    for (int i = 0; i < 20; ++i) w[(33 * 20 + i) * 20 + 7] = 0;  // a zero column
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(w, {40, 20, 20}, tf::float32)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    // A big singular one (the threaded path): a zero column gives an exact zero pivot. (Like
    // TF's, the check catches exact zero pivots only, not every numerically singular matrix.)
    std::vector<double> big = well_conditioned(1, 120, 4);
    for (int i = 0; i < 120; ++i) big[i * 120 + 50] = 0;
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(big, {120, 120}, tf::float64)),
                                 tf::InvalidArgumentError, "Input is not invertible.");
    // A NaN input leaves a NaN pivot: not invertible, as TF's test |u_ii| > 0 (inv and solve
    // returned NaNs), for every dtype and both CPU paths (getri below order 16, getrs above).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (tf::DType dt : {tf::float32, tf::float64, tf::float16, tf::bfloat16}) {
      INFO("dtype " << tf::dtype_name(dt));
      TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make({nan, 0, 0, 1}, {2, 2}, dt)),
                                   tf::InvalidArgumentError, "[inv] Input is not invertible.");
      TF_REQUIRE_THROWS_CONTAINING(
          tf::linalg::solve(make({nan, nan, nan, nan}, {2, 2}, dt), tf::ones({2, 1}, dt)),
          tf::InvalidArgumentError, "[solve] Input matrix is not invertible.");
    }
    std::vector<double> with_nan = well_conditioned(40, 20, 11);
    with_nan[(5 * 20 + 19) * 20 + 19] = nan;
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(with_nan, {40, 20, 20}, tf::float64)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    // An infinite entry is no error (TF's too); det of a NaN matrix is NaN.
    CHECK(std::isnan(tf::linalg::det(make({nan, 0, 0, 1}, {2, 2}, tf::float64)).item<double>()));
    // Also where the NaN's column or row holds the zero pivot that ends the elimination.
    for (const std::vector<double>& m :
         {std::vector<double>{0, nan, 0, 0}, {0, 0, nan, 0}, {nan, 0, 0, 0}})
      for (tf::DType dt : {tf::float32, tf::float64})
        CHECK(
            std::isnan(tf::cast(tf::linalg::det(make(m, {2, 2}, dt)), tf::float64).item<double>()));
    // det's gradient goes through the inverse: at a singular matrix it says so, naming det.
    const tf::Tensor s = tf::constant<double>({{1, 2}, {2, 4}});
    tf::GradientTape tape;
    tape.watch(s);
    const tf::Tensor d = tf::linalg::det(s);
    TF_REQUIRE_THROWS_CONTAINING(tape.gradient(d, s), tf::InvalidArgumentError,
                                 "[det] its gradient at a singular matrix is not computed");
  }
}

TEST_CASE("solve matches a float64 reference", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    struct Case {
      int64_t batches, n, k;
      tf::DType dt;
      double tol;
    };
    for (const Case& c : {Case{1, 3, 1, tf::float32, 1e-5}, Case{1, 3, 2, tf::float64, 1e-12},
                          Case{4, 5, 3, tf::float32, 1e-5}, Case{64, 4, 2, tf::float64, 1e-12},
                          Case{1, 140, 7, tf::float32, 1e-5}, Case{2, 100, 1, tf::float64, 1e-12},
                          Case{3, 4, 2, tf::float16, 3e-3}, Case{2, 3, 3, tf::bfloat16, 2e-2}}) {
      INFO("solve batches=" << c.batches << " n=" << c.n << " k=" << c.k << " "
                            << tf::dtype_name(c.dt));
      const tf::TensorShape sa = c.batches == 1 ? tf::TensorShape{c.n, c.n}
                                                : tf::TensorShape{c.batches, c.n, c.n};
      const tf::TensorShape sb = c.batches == 1 ? tf::TensorShape{c.n, c.k}
                                                : tf::TensorShape{c.batches, c.n, c.k};
      const tf::Tensor a = make(well_conditioned(c.batches, c.n, 11), sa, c.dt);
      const tf::Tensor b = make(random_values(sb.num_elements(), -2, 2, 12), sb, c.dt);
      const auto va = tf::detail::to_double_vector(a), vb = tf::detail::to_double_vector(b);
      std::vector<double> want;
      for (int64_t i = 0; i < c.batches; ++i) {
        Mat m(va.begin() + i * c.n * c.n, va.begin() + (i + 1) * c.n * c.n);
        Mat r(vb.begin() + i * c.n * c.k, vb.begin() + (i + 1) * c.n * c.k);
        REQUIRE(ref_solve(m, r, c.n, c.k));
        want.insert(want.end(), r.begin(), r.end());
      }
      const tf::Tensor x = tf::linalg::solve(a, b);
      CHECK(x.dtype() == c.dt);
      REQUIRE(x.shape() == sb);
      check_values(x, want, c.tol, c.tol);
    }
    // Exact: a permutation (pivoting) system.
    const tf::Tensor p = tf::constant<double>({{0, 0, 2}, {1, 0, 0}, {0, 4, 0}});
    const tf::Tensor r = tf::constant<double>({{2, 4}, {3, 6}, {8, 12}});
    check_values(tf::linalg::solve(p, r), {3, 6, 2, 3, 1, 2}, 0, 0);
  }
}

TEST_CASE("solve reports bad arguments and singular systems", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::solve(tf::zeros({2, 2}), tf::ones({2, 1})),
                                 tf::InvalidArgumentError,
                                 "[solve] Input matrix is not invertible.");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::solve(tf::zeros({2, 3}), tf::ones({2, 1})),
                                 tf::InvalidArgumentError,
                                 "[solve] expects square matrices, got shape (2, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::solve(tf::ones({3, 3}), tf::ones({4, 1})),
                                 tf::InvalidArgumentError, "[solve] a is (3, 3) and b is (4, 1)");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::solve(tf::ones({2, 3, 3}), tf::ones({4, 3, 1})),
                                 tf::InvalidArgumentError,
                                 "[solve] a is (2, 3, 3) and b is (4, 3, 1)");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::solve(tf::ones({3, 3}), tf::ones({3})),
                                 tf::InvalidArgumentError, "[solve] expects b of the same rank");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::linalg::solve(tf::ones({3, 3}), tf::ones({3, 1}, tf::float64)),
        tf::InvalidArgumentError, "[solve] dtypes differ: float32 and float64");
    TF_REQUIRE_THROWS_CONTAINING(
        tf::linalg::solve(tf::ones({3, 3}, tf::int32), tf::ones({3, 1}, tf::int32)),
        tf::InvalidArgumentError, "[solve] expects a floating-point tensor");
  }
}

TEST_CASE("det matches a float64 reference - with the pivot sign", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    // Exact small cases; each needs row exchanges.
    check_values(tf::linalg::det(tf::constant<float>({{0, 1}, {1, 0}})), {-1}, 0, 0);
    check_values(tf::linalg::det(tf::constant<float>({{0, 2}, {3, 0}})), {-6}, 0, 0);
    check_values(tf::linalg::det(tf::constant<double>({{0, 0, 1}, {0, 1, 0}, {1, 0, 0}})), {-1},
                 0, 0);
    check_values(tf::linalg::det(tf::constant<double>({{0, 1, 0}, {0, 0, 1}, {1, 0, 0}})), {1}, 0,
                 0);
    check_values(tf::linalg::det(tf::constant<double>({{1, 2}, {3, 4}})), {-2}, 1e-15, 0);
    check_values(tf::linalg::det(tf::constant<float>({{1, 2}, {2, 4}})), {0}, 0, 0);  // singular
    check_values(tf::linalg::det(tf::zeros({3, 3})), {0}, 0, 0);
    // det of the empty matrix is 1; empty batch gives an empty result.
    check_values(tf::linalg::det(tf::zeros({2, 0, 0})), {1, 1}, 0, 0);
    CHECK(tf::linalg::det(tf::zeros({0, 3, 3})).shape() == tf::TensorShape({0}));
    // Random batches against elimination in float64.
    for (tf::DType dt : {tf::float32, tf::float64, tf::float16}) {
      // (300: the CUDA kernel's block per matrix.)
      for (int64_t n : {1, 3, 8, 120, 300}) {
        const int64_t batches = n >= 100 ? 2 : 30;
        INFO("det n=" << n << " " << tf::dtype_name(dt));
        std::vector<double> v = random_values(static_cast<size_t>(batches * n * n), -1, 1, 21);
        if (n >= 100) {  // keep the value in float32's range: identity plus small noise
          for (double& x : v) x *= 0.05;
          for (int64_t b = 0; b < batches; ++b)
            for (int64_t i = 0; i < n; ++i) v[(b * n + i) * n + i] += 1.0;
        }
        const tf::Tensor a = make(v, {batches, n, n}, dt);
        const auto va = tf::detail::to_double_vector(a);
        std::vector<double> want;
        for (int64_t b = 0; b < batches; ++b) {
          Mat m(va.begin() + b * n * n, va.begin() + (b + 1) * n * n), r;
          double d = 0;
          ref_solve(m, r, n, 0, &d);
          want.push_back(d);
        }
        const tf::Tensor d = tf::linalg::det(a);
        CHECK(d.dtype() == dt);
        REQUIRE(d.shape() == tf::TensorShape({batches}));
        const double tol = dt == tf::float64 ? 1e-11 : dt == tf::float32 ? 2e-4 : 4e-3;
        check_values(d, want, tol, tol * 1e-3);
      }
    }
    // Products that overflow partway but not at the end.
    check_values(tf::linalg::det(tf::constant<double>({{1e200, 0, 0}, {0, 1e200, 0}, {0, 0, 1e-300}})),
                 {1e100}, 1e-14, 0);
    // A large batch member with a NaN is NaN, one with a zero column 0, the other as the rest
    // (the CUDA kernel's block per matrix).
    {
      const int64_t n = 300;
      std::vector<double> v(static_cast<size_t>(3 * n * n), 0.0);
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t i = 0; i < n; ++i) v[(b * n + i) * n + i] = i % 2 ? 2.0 : 0.5;
      v[(0 * n + 5) * n + 9] = std::numeric_limits<double>::quiet_NaN();
      for (int64_t i = 0; i < n; ++i) v[(1 * n + i) * n + 17] = 0;
      const std::vector<double> d =
          tf::detail::to_double_vector(tf::linalg::det(make(v, {3, n, n}, tf::float64)));
      CHECK(std::isnan(d[0]));
      CHECK(d[1] == 0);
      CHECK(d[2] == 1);  // 150 factors of 2 and 150 of 0.5
    }
  }
}

// The CUDA kernel for large matrices combines 256 strided parts of U's diagonal in a tree
// (ops/cuda/det_element.h): the same product as the sequential loop, checked here on the host.
TEST_CASE("det's diagonal parts combine in a tree as the sequential product", "[cpu][linalg]") {
  namespace d = tf::detail;
  constexpr int kThreads = 256;
  auto tree = [&](const std::vector<double>& u, const std::vector<bool>& swapped) {
    std::vector<d::DetPart> parts(kThreads, d::det_identity());
    for (size_t i = 0; i < u.size(); ++i)
      parts[i % kThreads] = d::det_push(parts[i % kThreads], u[i], swapped[i]);
    for (int half = kThreads / 2; half > 0; half /= 2)
      for (int t = 0; t < half; ++t) parts[t] = d::det_combine(parts[t], parts[t + half]);
    return d::det_finish(parts[0]);
  };
  auto sequential = [&](const std::vector<double>& u, const std::vector<bool>& swapped) {
    d::DetPart p = d::det_identity();
    for (size_t i = 0; i < u.size(); ++i) p = d::det_push(p, u[i], swapped[i]);
    return d::det_finish(p);
  };
  for (const size_t n : {size_t{256}, size_t{1000}, size_t{4096}}) {
    INFO("n = " << n);
    // Magnitudes 2^-40 to 2^40: the plain product leaves double's range, the parts do not.
    const auto mags = tf::testing::random_values(n, -40, 40, n);
    const auto signs = tf::testing::random_values(n, -1, 1, n + 1);
    const auto swaps = tf::testing::random_values(n, 0, 1, n + 2);
    std::vector<double> u(n);
    std::vector<bool> swapped(n);
    double log2_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      u[i] = std::ldexp(signs[i] < 0 ? -1.5 : 1.25, static_cast<int>(mags[i]));
      swapped[i] = swaps[i] < 0.3;
      log2_sum += std::log2(std::abs(u[i]));
    }
    const double s = sequential(u, swapped), t = tree(u, swapped);
    if (std::abs(log2_sum) > 1100) {  // far beyond double's range: both inf or both 0
      CHECK(t == s);
    } else {
      CHECK(t == Approx(s).epsilon(1e-12));
    }
    CHECK(std::signbit(t) == std::signbit(s));
    // Scaled into range: every entry halved until the product's exponent is near 0.
    std::vector<double> scaled = u;
    const int shift = static_cast<int>(std::floor(log2_sum / static_cast<double>(n)));
    for (double& v : scaled) v = std::ldexp(v, -shift);
    const double s2 = sequential(scaled, swapped), t2 = tree(scaled, swapped);
    CHECK(t2 == Approx(s2).epsilon(1e-12));
  }
  // Special values: an infinite entry gives an infinite determinant, a NaN a NaN.
  std::vector<double> u(300, 0.75);
  const std::vector<bool> none(300, false);
  u[7] = std::numeric_limits<double>::infinity();
  CHECK(std::isinf(tree(u, none)));
  CHECK(std::isinf(sequential(u, none)));
  u[7] = std::numeric_limits<double>::quiet_NaN();
  CHECK(std::isnan(tree(u, none)));
  // 300 factors of 0.75 underflow nothing with the bookkeeping: 0.75^300 = 2^-124.5.
  u[7] = 0.75;
  CHECK(tree(u, none) == Approx(std::pow(0.75, 300)).epsilon(1e-12));
  // The kernels' result per matrix: a NaN input, then an exact zero pivot, then the product.
  const d::DetPart two = d::det_push(d::det_identity(), 2.0, true);
  CHECK(std::isnan(d::det_value(true, true, two)));
  CHECK(d::det_value(false, true, two) == 0);
  CHECK(d::det_value(false, false, two) == -2);
  CHECK(d::det_value(false, false, d::det_identity()) == 1);
}

TEST_CASE("inv, solve and det of batches take every path", "[cpu][cuda][linalg]") {
  // On GPUs, batches of small matrices go through cuBLAS's batched LU and bigger ones through
  // cuSOLVER one matrix after the other; both must agree with the references, raise the
  // singular error and give det 0 for an exact zero pivot.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    check_inverse({100, 7, 7}, tf::float64, 1e-12);
    check_inverse({2, 2, 32, 32}, tf::float32, 1e-5);
    check_inverse({3, 33, 33}, tf::float32, 1e-5);
    check_inverse({5, 1, 1}, tf::float64, 1e-14);
    check_inverse({6, 5, 5}, tf::bfloat16, 2e-2);
    check_inverse({40, 40}, tf::float16, 3e-3);
    check_solve(50, 5, 1, tf::float32, 1e-5);
    check_solve(50, 5, 3, tf::float64, 1e-12);
    check_solve(3, 40, 1, tf::float64, 1e-12);
    check_solve(3, 40, 6, tf::float32, 1e-5);
    check_solve(0, 33, 7, tf::float32, 1e-5);
    check_solve(8, 4, 2, tf::float16, 3e-3);
    check_solve(2, 36, 3, tf::bfloat16, 3e-2);
    // k == 0 and n == 0: empty results, no error even for a singular matrix (as TF's).
    CHECK(tf::linalg::solve(tf::zeros({2, 3, 3}), tf::zeros({2, 3, 0})).shape() ==
          tf::TensorShape({2, 3, 0}));
    CHECK(tf::linalg::solve(tf::zeros({0, 0}), tf::zeros({0, 4})).shape() ==
          tf::TensorShape({0, 4}));

    // One singular matrix in a batch, small and big, in solve.
    std::vector<double> v = well_conditioned(10, 4, 12);
    for (int i = 0; i < 16; ++i) v[6 * 16 + i] = 0;
    TF_REQUIRE_THROWS_CONTAINING(
        tf::linalg::solve(make(v, {10, 4, 4}, tf::float32), tf::ones({10, 4, 2})),
        tf::InvalidArgumentError, "[solve] Input matrix is not invertible.");
    std::vector<double> w = well_conditioned(2, 40, 13);
    for (int i = 0; i < 40; ++i) w[(40 + i) * 40 + 11] = 0;  // a zero column in the second
    TF_REQUIRE_THROWS_CONTAINING(
        tf::linalg::solve(make(w, {2, 40, 40}, tf::float64), tf::ones({2, 40, 1}, tf::float64)),
        tf::InvalidArgumentError, "[solve] Input matrix is not invertible.");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(w, {2, 40, 40}, tf::float64)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(v, {10, 4, 4}, tf::float16)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    // The op still works after the error (nothing left half-done on the device).
    check_inverse({10, 4, 4}, tf::float32, 1e-5);

    // det with a singular matrix in the batch: exactly 0 there, the others as the reference.
    for (int64_t n : {4, 40}) {
      INFO("det with a singular matrix, n=" << n);
      std::vector<double> d = well_conditioned(6, n, 14);
      for (double& x : d) x /= static_cast<double>(n);  // |det| near 1
      for (int64_t i = 0; i < n; ++i) d[(3 * n + i) * n + 1] = 0;
      const tf::Tensor a = make(d, {6, n, n}, tf::float64);
      std::vector<double> want;
      for (int64_t b = 0; b < 6; ++b) {
        Mat m(d.begin() + b * n * n, d.begin() + (b + 1) * n * n), r;
        double det = 0;
        ref_solve(m, r, n, 0, &det);
        want.push_back(det);
      }
      CHECK(want[3] == 0);
      check_values(tf::linalg::det(a), want, 1e-11, 1e-14);
    }
  }
}

TEST_CASE("inv and det reject bad shapes and dtypes", "[cpu][cuda][linalg]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(tf::zeros({2, 3})), tf::InvalidArgumentError,
                                 "[inv] expects square matrices, got shape (2, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::det(tf::zeros({4, 2, 3})), tf::InvalidArgumentError,
                                 "[det] expects square matrices, got shape (4, 2, 3)");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(tf::zeros({3})), tf::InvalidArgumentError,
                                 "[inv] expects a tensor of rank at least 2, got shape (3,)");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(tf::zeros({2, 2}, tf::int32)),
                                 tf::InvalidArgumentError,
                                 "[inv] expects a floating-point tensor (float16, bfloat16, "
                                 "float32, float64), got int32");
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::det(tf::zeros({2, 2}, tf::bool_)),
                                 tf::InvalidArgumentError, "[det] expects a floating-point tensor");
  }
}

TEST_CASE("big float32 matrices take the blocked LU path", "[cpu][cuda][linalg]") {
  // n >= 512 and not a multiple of the block width: partial blocks at the end.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const int64_t n = 600;
    check_inverse({n, n}, tf::float32, 2e-5, 31);
    // solve through the same LU.
    const std::vector<double> va = well_conditioned(1, 520, 32);
    const tf::Tensor a = make(va, {520, 520}, tf::float32);
    const tf::Tensor b = make(random_values(520 * 3, -1, 1, 33), {520, 3}, tf::float32);
    const auto fa = tf::detail::to_double_vector(a);
    Mat x = tf::detail::to_double_vector(b);
    REQUIRE(ref_solve(fa, x, 520, 3));
    check_values(tf::linalg::solve(a, b), x, 1e-5, 1e-6);
    // det's sign follows the pivots: swapping two rows flips it.
    std::vector<double> small = well_conditioned(1, 530, 34);
    for (double& v : small) v /= 530.0;  // |det| near 1
    std::vector<double> swapped = small;
    for (int j = 0; j < 530; ++j) std::swap(swapped[3 * 530 + j], swapped[400 * 530 + j]);
    const double d1 = tf::linalg::det(make(small, {530, 530}, tf::float32)).item<double>();
    const double d2 = tf::linalg::det(make(swapped, {530, 530}, tf::float32)).item<double>();
    Mat r;
    double want = 0;
    ref_solve(small, r, 530, 0, &want);
    CHECK(std::abs(d1 - want) <= 1e-3 * std::abs(want));
    CHECK(std::abs(d2 + want) <= 1e-3 * std::abs(want));
    // A zero column in a later panel: an exact zero pivot there.
    std::vector<double> sing = well_conditioned(1, n, 35);
    for (int64_t i = 0; i < n; ++i) sing[i * n + 300] = 0;
    TF_REQUIRE_THROWS_CONTAINING(tf::linalg::inv(make(sing, {n, n}, tf::float32)),
                                 tf::InvalidArgumentError, "[inv] Input is not invertible.");
    check_values(tf::linalg::det(make(sing, {n, n}, tf::float32)), {0}, 0, 0);
  }
}

TEST_CASE("set_num_threads reaches OpenBLAS and results do not depend on it", "[cpu][linalg]") {
  tf::DeviceScope cpu("/device:CPU:0");  // the CPU libraries, whatever the default device
  const int before = tf::detail::num_threads();
  tf::detail::set_num_threads(1);
  CHECK(tf::detail::gemm_backend_info().find(", 1 threads)") != std::string::npos);
  check_matmul({130, 140}, {140, 150}, tf::float32, false, false, 1e-4);
  check_matmul({130, 140}, {140, 150}, tf::float64, false, false, 1e-12);
  check_inverse({400, 400}, tf::float32, 2e-5, 41);
  tf::detail::set_num_threads(before);
  CHECK(tf::detail::gemm_backend_info().find(", " + std::to_string(before) + " threads)") !=
        std::string::npos);
}

// oneDNN's sgemm returns dnnl_out_of_memory when it cannot allocate the scratch space it packs
// the operands into; matmul and the blocked float32 LU / inverse used to discard the status and
// return whatever the output buffer held. Every status goes through check_dnnl_status (the
// allocation failure itself was checked by hand with an LD_PRELOAD shim that fails big
// posix_memalign calls, which CTest cannot do portably).
TEST_CASE("check_dnnl_status raises oneDNN failures naming the op and the shapes",
          "[cpu][linalg]") {
  tf::detail::check_dnnl_status(dnnl_success, "matmul", "float32 product");  // returns
  TF_REQUIRE_THROWS_CONTAINING(
      tf::detail::check_dnnl_status(dnnl_out_of_memory, "matmul",
                                    "float32 product of (512, 512) and (512, 512)"),
      tf::ResourceExhaustedError,
      "[matmul] float32 product of (512, 512) and (512, 512): oneDNN's sgemm ran out of memory");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::detail::check_dnnl_status(dnnl_invalid_arguments, "matrix_inverse",
                                    "float32 input of shape (400, 400)"),
      tf::InternalError,
      "[matrix_inverse] float32 input of shape (400, 400): oneDNN's sgemm failed with "
      "dnnl_invalid_arguments (2)");
  TF_REQUIRE_THROWS_CONTAINING(tf::detail::check_dnnl_status(99, "matmul", "x"), tf::InternalError,
                               "an unknown status (99)");
  // Not an InvalidArgumentError: a caller catching bad arguments must not swallow these.
  CHECK_THROWS_AS(tf::detail::check_dnnl_status(dnnl_out_of_memory, "matmul", "x"),
                  tf::ResourceExhaustedError);
}

// The paths that now check the status still compute: oneDNN products (above OpenBLAS's size),
// batched small products spread over threads, and the blocked float32 inverse (order >= 384).
TEST_CASE("float32 matmul and inverse on oneDNN's sgemm still match float64", "[cpu][linalg]") {
  tf::DeviceScope scope("/cpu:0");
  const int64_t n = 160;
  const tf::Tensor a = tf::random::normal({n, n}, 0, 1, tf::float32, 3);
  const tf::Tensor b = tf::random::normal({n, n}, 0, 1, tf::float32, 4);
  tf::testing::check_close(
      tf::cast(tf::matmul(a, b, false, true), tf::float64),
      tf::matmul(tf::cast(a, tf::float64), tf::cast(b, tf::float64), false, true), 1e-4, 1e-3);
  const tf::Tensor sa = tf::random::normal({64, 30, 40}, 0, 1, tf::float32, 5);
  const tf::Tensor sb = tf::random::normal({64, 40, 50}, 0, 1, tf::float32, 6);
  tf::testing::check_close(tf::cast(tf::matmul(sa, sb), tf::float64),
                           tf::matmul(tf::cast(sa, tf::float64), tf::cast(sb, tf::float64)), 1e-4,
                           1e-3);
  const int64_t m = 400;
  const tf::Tensor w = tf::random::normal({m, m}, 0, 1, tf::float32, 7) +
                       tf::eye(m) * static_cast<float>(4 * std::sqrt(m));
  const tf::Tensor ident = tf::matmul(w, tf::linalg::inv(w));
  tf::testing::check_close(ident, tf::eye(m), 1e-3, 1e-3);
}
