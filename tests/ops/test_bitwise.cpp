// tf::bitwise (bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift, invert),
// logical_xor and the &, |, ^, ~ operators on every device of devices_under_test(): random
// int32 / int64 / uint8 operands against a reference written here per element, broadcasting,
// TF 2.21's literal results (shift amounts out of range are clamped), the dtype and shape
// errors, no gradient through the integer path, and a trace over a None batch.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

enum class Op { And, Or, Xor, Left, Right };

// The reference: C++ on the element type, the shift amount clamped to [0, bits - 1] and the
// left shift computed on the unsigned type, as TF documents its kernels.
template <class T>
T reference(Op op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  constexpr int64_t kBits = sizeof(T) * 8;
  int64_t s = static_cast<int64_t>(b);
  s = s < 0 ? 0 : (s > kBits - 1 ? kBits - 1 : s);
  switch (op) {
    case Op::And:
      return static_cast<T>(a & b);
    case Op::Or:
      return static_cast<T>(a | b);
    case Op::Xor:
      return static_cast<T>(a ^ b);
    case Op::Left:
      return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) << s));
    case Op::Right: {
      // Arithmetic: floor(a / 2^s), written without >> on a negative value.
      if constexpr (std::is_signed_v<T>) {
        if (a < 0) return static_cast<T>(-1 - static_cast<T>((-1 - a) / (static_cast<T>(1) << s)));
      }
      return static_cast<T>(a / (static_cast<T>(1) << s));
    }
  }
  return T{};
}

tf::Tensor apply(Op op, const tf::Tensor& a, const tf::Tensor& b) {
  switch (op) {
    case Op::And:
      return tf::bitwise::bitwise_and(a, b);
    case Op::Or:
      return tf::bitwise::bitwise_or(a, b);
    case Op::Xor:
      return tf::bitwise::bitwise_xor(a, b);
    case Op::Left:
      return tf::bitwise::left_shift(a, b);
    case Op::Right:
      return tf::bitwise::right_shift(a, b);
  }
  return {};
}

template <class T>
std::vector<T> random_ints(size_t n, int64_t lo, int64_t hi, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// (2, 3, 4) against (3, 1): b broadcasts along the first and last axes.
template <class T>
void check_dtype(tf::DType dtype) {
  INFO("dtype " << tf::dtype_name(dtype));
  constexpr int64_t kBits = sizeof(T) * 8;
  const auto lo = static_cast<int64_t>(std::numeric_limits<T>::min());
  const auto hi = static_cast<int64_t>(std::numeric_limits<T>::max());
  const std::vector<T> a = random_ints<T>(24, lo, hi, 7);
  for (Op op : {Op::And, Op::Or, Op::Xor, Op::Left, Op::Right}) {
    INFO("op " << static_cast<int>(op));
    const bool shift = op == Op::Left || op == Op::Right;
    // Shift amounts run past both ends of [0, bits - 1] (negative only for signed types).
    const std::vector<T> b = shift ? random_ints<T>(3, std::is_signed_v<T> ? -3 : 0, kBits + 3, 11)
                                   : random_ints<T>(3, lo, hi, 11);
    const tf::Tensor ta = tf::constant(a, {2, 3, 4});
    const tf::Tensor tb = tf::constant(b, {3, 1});
    const tf::Tensor got = apply(op, ta, tb);
    REQUIRE(got.dtype() == dtype);
    REQUIRE(got.shape() == tf::TensorShape{2, 3, 4});
    const std::vector<T> g = got.numpy<T>();
    for (int64_t i = 0; i < 24; ++i) {
      const T want = reference(op, a[static_cast<size_t>(i)], b[static_cast<size_t>(i / 4 % 3)]);
      INFO("element " << i << ": " << +a[static_cast<size_t>(i)] << ", "
                      << +b[static_cast<size_t>(i / 4 % 3)]);
      CHECK(+g[static_cast<size_t>(i)] == +want);
    }
    // Same-shape and scalar operands take the flat paths.
    const std::vector<T> b_full =
        shift ? random_ints<T>(24, 0, kBits - 1, 13) : random_ints<T>(24, lo, hi, 13);
    const std::vector<T> flat = apply(op, ta, tf::constant(b_full, {2, 3, 4})).template numpy<T>();
    const std::vector<T> scalar =
        apply(op, ta, tf::constant(std::vector<T>{b[1]}, {})).template numpy<T>();
    for (size_t i = 0; i < 24; ++i) {
      CHECK(+flat[i] == +reference(op, a[i], b_full[i]));
      CHECK(+scalar[i] == +reference(op, a[i], b[1]));
    }
  }
  const std::vector<T> inv = tf::bitwise::invert(tf::constant(a, {2, 3, 4})).template numpy<T>();
  for (size_t i = 0; i < 24; ++i) CHECK(+inv[i] == +static_cast<T>(~a[i]));
}

}  // namespace

TEST_CASE("bitwise ops against a per-element reference", "[cpu][cuda][bitwise]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    check_dtype<int32_t>(tf::int32);
    check_dtype<int64_t>(tf::int64);
    check_dtype<uint8_t>(tf::uint8);
  }
}

TEST_CASE("bitwise ops match TF 2.21's results", "[cpu][cuda][bitwise]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.bitwise.left_shift / right_shift([1, 5, 100, 127], [0, 1, 7, 31]) for each dtype.
    const std::vector<double> x = {1, 5, 100, 127}, y = {0, 1, 7, 31};
    auto v = [](const std::vector<double>& d, tf::DType t) {
      return tf::cast(tf::constant(d, {static_cast<int64_t>(d.size())}), t);
    };
    check_values(tf::bitwise::left_shift(v(x, tf::int32), v(y, tf::int32)),
                 {1, 10, 12800, -2147483648.0}, 0, 0);
    check_values(tf::bitwise::left_shift(v(x, tf::int64), v(y, tf::int64)),
                 {1, 10, 12800, 272730423296.0}, 0, 0);
    check_values(tf::bitwise::left_shift(v(x, tf::uint8), v(y, tf::uint8)), {1, 10, 0, 128}, 0, 0);
    for (tf::DType t : {tf::int32, tf::int64, tf::uint8})
      check_values(tf::bitwise::right_shift(v(x, t), v(y, t)), {1, 2, 0, 0}, 0, 0);
    // Out-of-range amounts: [-8, -1, 7, -2^31] >> [1, 33, -1, 31] and << [1, 33, -1, 32].
    const tf::Tensor s = tf::constant(std::vector<int32_t>{-8, -1, 7, -2147483647 - 1});
    check_values(tf::bitwise::right_shift(s, tf::constant(std::vector<int32_t>{1, 33, -1, 31})),
                 {-4, -1, 7, -1}, 0, 0);
    check_values(tf::bitwise::left_shift(s, tf::constant(std::vector<int32_t>{1, 33, -1, 32})),
                 {-16, -2147483648.0, 7, 0}, 0, 0);
    CHECK(tf::bitwise::left_shift(tf::constant(std::vector<int64_t>{1}),
                                  tf::constant(std::vector<int64_t>{64}))
              .numpy<int64_t>()[0] == std::numeric_limits<int64_t>::min());
    check_values(tf::bitwise::invert(v({0, 5, -1}, tf::int32)), {-1, -6, 0}, 0, 0);
    check_values(tf::bitwise::invert(v({0, 5, 255}, tf::uint8)), {255, 250, 0}, 0, 0);
    const tf::Tensor p = v({12, -3}, tf::int32), q = v({10, 6}, tf::int32);
    check_values(tf::bitwise::bitwise_and(p, q), {8, 4}, 0, 0);
    check_values(tf::bitwise::bitwise_or(p, q), {14, -1}, 0, 0);
    check_values(tf::bitwise::bitwise_xor(p, q), {6, -5}, 0, 0);
  }
}

TEST_CASE("&, |, ^ and ~ are logical on bool tensors and bitwise on integers",
          "[cpu][cuda][bitwise]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // TF 2.21: t = [5, 3]; t & 1, t | 8, t ^ 1, ~t.
    const tf::Tensor t = tf::constant(std::vector<int32_t>{5, 3});
    check_values(t & 1, {1, 1}, 0, 0);
    check_values(t | 8, {13, 11}, 0, 0);
    check_values(t ^ 1, {4, 2}, 0, 0);
    check_values(~t, {-6, -4}, 0, 0);
    CHECK((t & 1).dtype() == tf::int32);
    const tf::Tensor a = tf::constant(std::vector<bool>{true, true, false, false});
    const tf::Tensor b = tf::constant(std::vector<bool>{true, false, true, false});
    CHECK((a & b).dtype() == tf::bool_);
    check_values(a & b, {1, 0, 0, 0}, 0, 0);
    check_values(a | b, {1, 1, 1, 0}, 0, 0);
    check_values(a ^ b, {0, 1, 1, 0}, 0, 0);
    check_values(tf::logical_xor(a, b), {0, 1, 1, 0}, 0, 0);
    check_values(~a, {0, 0, 1, 1}, 0, 0);
    check_values(tf::logical_xor(a, tf::constant(std::vector<bool>{true})), {0, 0, 1, 1}, 0, 0);
  }
}

TEST_CASE("bitwise ops refuse non-integer dtypes, mixed dtypes and bad shapes", "[cpu][bitwise]") {
  const tf::Tensor f = tf::constant({1.0f, 2.0f});
  const tf::Tensor i = tf::constant(std::vector<int32_t>{1, 2});
  const tf::Tensor l = tf::constant(std::vector<int64_t>{1, 2});
  const tf::Tensor b = tf::constant(std::vector<bool>{true, false});
  require_error([&] { tf::bitwise::bitwise_and(f, f); },
                {"[bitwise_and] expects integer tensors (int32, int64, uint8), got float32"});
  require_error([&] { tf::bitwise::bitwise_or(b, b); }, {"[bitwise_or]", "got bool"});
  require_error([&] { tf::bitwise::left_shift(i, l); },
                {"[left_shift] dtypes differ: int32 and int64"});
  require_error(
      [&] {
        tf::bitwise::right_shift(i, tf::constant(std::vector<int32_t>{1, 2, 3}));
      },
      {"[right_shift]", "(2,)", "(3,)"});
  require_error([&] { tf::bitwise::invert(f); },
                {"[invert] expects an integer tensor (int32, int64, uint8), got float32"});
  require_error([&] { (void)(f & f); }, {"[bitwise_and]", "got float32"});
  require_error([&] { (void)(~f); }, {"[invert]", "got float32"});
  require_error([&] { tf::logical_xor(i, i); }, {"[logical_xor] expects bool tensors, got int32"});
}

TEST_CASE("bitwise ops carry no gradient and trace over a None batch", "[cpu][cuda][bitwise]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // y = x * (int(x) & 1): the integer path is constant, so dy/dx is the mask.
    const tf::Tensor x = tf::constant({1.5f, 2.5f, 3.5f, -1.5f});
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor mask =
        tf::cast(tf::bitwise::bitwise_and(tf::cast(x, tf::int32), 1), tf::float32);
    const tf::Tensor y = tf::reduce_sum(x * mask);
    check_values(tape.gradient(y, x), {1, 0, 1, 1}, 0, 0);

    auto f = tf::function(
        [](const tf::Tensor& t) {
          return tf::bitwise::right_shift(tf::bitwise::bitwise_xor(t, 6), 1) | ~t;
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 2}, tf::int64)}});
    for (int64_t n : {1, 3}) {
      const tf::Tensor in = tf::reshape(tf::cast(tf::range(0, 2 * n), tf::int64), {n, 2});
      std::vector<double> want;
      for (int64_t k = 0; k < 2 * n; ++k) want.push_back(static_cast<double>(((k ^ 6) >> 1) | ~k));
      check_values(f(in), want, 0, 0);
    }
    CHECK(f.tracing_count() == 1);
  }
}
