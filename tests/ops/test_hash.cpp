// The hashing ops (ops/hash.h): FarmHash Fingerprint64 and SipHash-2-4 of byte strings against
// values TF 2.21 printed (tf.strings.to_hash_bucket_fast / _strong with 2^63 - 1 buckets, lengths
// 0 to 160, every branch of FarmHash), to_hash_bucket_* of integer tensors and
// tf.sparse.cross_hashed against TF on every device, traced with None dimensions against eager,
// the dtypes and shapes they refuse, and no gradient.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/cpu/hash_math.h"
#include "ops/factory.h"
#include "ops/hash.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::require_error;

namespace {

tf::Tensor i64(const std::vector<int64_t>& v, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return tf::constant(v, tf::TensorShape(shape));
}

std::vector<int64_t> values(const tf::Tensor& t) {
  return tf::cast(t, tf::int64).numpy<int64_t>();
}

}  // namespace

TEST_CASE("hash: Fingerprint64 and SipHash of byte strings equal TF's", "[cpu][hash]") {
  // tf.strings.to_hash_bucket_fast([s], 2**63 - 1) and
  // tf.strings.to_hash_bucket_strong([s], 2**63 - 1, key=[1, 2]).
  std::string hex;
  for (int i = 0; i < 10; ++i) hex += "0123456789abcdef";
  const struct {
    std::string s;
    uint64_t fast, strong;
  } rows[] = {
      {"", 1936946117179621456ULL, 443797209252341628ULL},
      {"a", 3694432073954588132ULL, 5158252350249958646ULL},
      {"ab", 3066228220894225695ULL, 9219471107255029106ULL},
      {"abc", 2640714258260161385ULL, 5862226954915230110ULL},
      {"abcd", 1897425971756105985ULL, 8889024970603298004ULL},
      {"hello", 3786372426573024489ULL, 2957200328589801622ULL},
      {"12345678", 3430003927990384362ULL, 6508726819379278012ULL},
      {"123456789", 7102376421209267306ULL, 1922551951543731451ULL},
      {"-9223372036854775808", 1493431938208774112ULL, 6437832829967508285ULL},
      {"9223372036854775807", 3516461496058286512ULL, 8684318068938644019ULL},
      {"18446744073709551615xyzabcdefghij", 6311843487192891060ULL, 2372197246651582415ULL},
      {std::string(33, 'x'), 3046993373088323128ULL, 6251573502786715488ULL},
      {std::string(64, 'y'), 4471793200125962424ULL, 1169733625819952541ULL},
      {std::string(65, 'z'), 8299915583762718517ULL, 6134168396876199303ULL},
      {hex, 1380417811020115037ULL, 5142986919801709410ULL},
  };
  const uint64_t m = (uint64_t{1} << 63) - 1;
  for (const auto& r : rows) {
    INFO(r.s.size() << " bytes");
    const auto* p = reinterpret_cast<const unsigned char*>(r.s.data());
    CHECK(tf::hashing::fingerprint64(p, r.s.size()) % m == r.fast);
    CHECK(tf::hashing::siphash(1, 2, p, r.s.size()) % m == r.strong);
  }
  // The decimal text of the int64 extremes, as tf.strings.as_string.
  unsigned char buf[20];
  CHECK(std::string(reinterpret_cast<char*>(buf), static_cast<size_t>(tf::hashing::decimal(
                                                      INT64_MIN, buf))) == "-9223372036854775808");
  CHECK(std::string(reinterpret_cast<char*>(buf),
                    static_cast<size_t>(tf::hashing::decimal(0, buf))) == "0");
}

TEST_CASE("hash: to_hash_bucket_fast and _strong of integers equal TF's on every device",
          "[cpu][cuda][hash]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.strings.to_hash_bucket_fast(tf.strings.as_string(x), 97) and _strong(..., key=[7, -3]).
    const tf::Tensor x = i64({0, 1, -1, 123456789012});
    const tf::Tensor fast = tf::strings::to_hash_bucket_fast(x, 97);
    CHECK(fast.dtype() == tf::int64);
    CHECK(fast.device() == tf::identity(x).device());
    CHECK(values(fast) == std::vector<int64_t>{12, 88, 27, 84});
    CHECK(values(tf::strings::to_hash_bucket_strong(x, 97, {7, -3})) ==
          std::vector<int64_t>{94, 50, 46, 64});
    // int32 and uint8 hash their own decimal text.
    const tf::Tensor small = i64({0, 1, -1, 2147483647, -2147483647 - 1});
    CHECK(values(tf::strings::to_hash_bucket_fast(tf::cast(small, tf::int32), 97)) ==
          values(tf::strings::to_hash_bucket_fast(small, 97)));
    CHECK(values(tf::strings::to_hash_bucket_fast(
              tf::constant(std::vector<uint8_t>{0, 200, 255}, tf::TensorShape({3})), 97)) ==
          std::vector<int64_t>{12, 72, 92});
    // keras.layers.Hashing(1000) bins of these int64 values (its to_hash_bucket_fast), shape kept.
    const tf::Tensor ids = i64({3, -5, 0, 77, int64_t{1} << 40, INT64_MIN, INT64_MAX}, {7, 1});
    const tf::Tensor bins = tf::strings::to_hash_bucket_fast(ids, 1000);
    CHECK(bins.shape() == tf::TensorShape({7, 1}));
    CHECK(values(bins) == std::vector<int64_t>{921, 816, 735, 75, 378, 112, 319});
    // Empty tensors stay empty.
    CHECK(tf::strings::to_hash_bucket_fast(i64({}, {0, 3}), 5).shape() == tf::TensorShape({0, 3}));
  }
}

TEST_CASE("hash: cross_hashed equals tf.sparse.cross_hashed on every device", "[cpu][cuda][hash]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.sparse.to_dense(tf.sparse.cross_hashed([a, b], num_buckets=0)) and with buckets / key.
    const tf::Tensor a = i64({1, 2}, {2, 1}), b = i64({4, 5}, {2, 1});
    CHECK(values(tf::sparse::cross_hashed({a, b})) ==
          std::vector<int64_t>{3174199038560320725, 4812323992653911631});
    CHECK(values(tf::sparse::cross_hashed({a, b}, 100, 12345)) == std::vector<int64_t>{14, 61});
    // Several values per row: every combination, the first input's index varying slowest.
    const tf::Tensor w1 = i64({1, 2, 2, 3}, {2, 2});
    const tf::Tensor w2 = tf::cast(i64({4, 7, 8, 5, 6, 9}, {2, 3}), tf::int32);
    const tf::Tensor wide = tf::sparse::cross_hashed({w1, w2}, 100);
    CHECK(wide.shape() == tf::TensorShape({2, 6}));
    CHECK(values(wide) == std::vector<int64_t>{25, 89, 22, 47, 7, 12, 38, 36, 82, 12, 43, 80});
    const tf::Tensor w3 = i64({0, 1}, {2, 1});
    CHECK(values(tf::sparse::cross_hashed({w1, tf::cast(w2, tf::int64), w3})) ==
          std::vector<int64_t>{395262884128643700, 333768564438886668, 1001884365739841490,
                               4568183982880929540, 2733585041775727279, 2835332191551033343,
                               8502529621442390534, 2843914769479214704, 2787245955994619313,
                               3814060599150828884, 3914238346009566118, 6503672415279850977});
    // A feature without values gives rows without crosses.
    CHECK(tf::sparse::cross_hashed({w1, i64({}, {2, 0})}).shape() == tf::TensorShape({2, 0}));
  }
}

TEST_CASE("hash: traced with None dimensions equals eager, no gradient", "[cpu][cuda][hash]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 1}, tf::int64),
                            tf::TensorSpec({tf::None, 1}, tf::int32)};
    auto body = [](const tf::Tensor& p, const tf::Tensor& q) {
      return std::vector<tf::Tensor>{tf::strings::to_hash_bucket_fast(p, 1000),
                                     tf::strings::to_hash_bucket_strong(q, 33, {5, 6}),
                                     tf::sparse::cross_hashed({p, q}, 50)};
    };
    auto f = tf::function(body, opts);
    for (int64_t n : {3, 1, 6}) {
      std::vector<int64_t> pv, qv;
      for (int64_t i = 0; i < n; ++i) {
        pv.push_back(i * 7919 - 3);
        qv.push_back(static_cast<int64_t>(i * i) - 2);
      }
      const tf::Tensor p = i64(pv, {n, 1});
      const tf::Tensor q = tf::cast(i64(qv, {n, 1}), tf::int32);
      const auto got = f(p, q), want = body(p, q);
      for (size_t k = 0; k < want.size(); ++k) CHECK(values(got[k]) == values(want[k]));
    }
    CHECK(f.tracing_count() == 1);
    // Integer outputs carry no gradient.
    tf::Variable v(tf::constant(2.0f));
    tf::GradientTape tape;
    const tf::Tensor h = tf::strings::to_hash_bucket_fast(tf::cast(v.value(), tf::int64), 10);
    const tf::Tensor y = tf::cast(h, tf::float32) * v.value();
    CHECK(tape.gradient(y, v).item<float>() == static_cast<float>(values(h)[0]));
  }
}

TEST_CASE("hash: bad dtypes, shapes and bucket counts are errors naming the op", "[cpu][hash]") {
  require_error([] { tf::strings::to_hash_bucket_fast(tf::constant({1.5f}), 10); },
                {"to_hash_bucket_fast", "float32", "no string tensors"});
  require_error([] { tf::strings::to_hash_bucket_fast(i64({1}), 0); },
                {"to_hash_bucket_fast", "num_buckets must be >= 1, got 0"});
  require_error(
      [] {
        tf::strings::to_hash_bucket_strong(i64({1}), -2, {1, 2});
      },
      {"to_hash_bucket_strong", "num_buckets"});
  require_error([] { tf::sparse::cross_hashed({}); }, {"cross_hashed", "takes 1 to 32 inputs"});
  require_error(
      [] {
        tf::sparse::cross_hashed({i64({1, 2})});
      },
      {"cross_hashed", "(batch, width)", "(2,)"});
  require_error(
      [] {
        tf::sparse::cross_hashed({i64({1, 2}, {2, 1}), i64({1, 2, 3}, {3, 1})});
      },
      {"cross_hashed", "batch size", "(3, 1)"});
  require_error(
      [] {
        tf::sparse::cross_hashed({i64({1}, {1, 1}), tf::constant({{1.0f}})});
      },
      {"cross_hashed", "float32", "input 1"});
  require_error(
      [] {
        tf::sparse::cross_hashed({i64({1}, {1, 1})}, -1);
      },
      {"cross_hashed", "num_buckets must be >= 0"});
}
