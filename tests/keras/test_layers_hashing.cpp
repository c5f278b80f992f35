// Hashing, HashedCrossing and IntegerLookup(oov_method="farmhash") against Keras 3.15.1 on
// TF 2.21 (every expected bin below is what Keras printed for the same values and options):
// masks, salts, the encodings, floating inputs, scalars, configs both ways, a functional model,
// traced calls with a None batch, errors, and every device.
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_extra.h"
#include "keras/layers_hashing.h"
#include "keras/layers_merge.h"
#include "keras/model.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor i64(const std::vector<int64_t>& v, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  return tf::constant(v, tf::TensorShape(shape));
}
std::vector<int64_t> ints(const tf::Tensor& t) {
  return tf::cast(t, tf::int64).numpy<int64_t>();
}
const std::vector<int64_t> kValues = {3, -5, 0, 77, int64_t{1} << 40, INT64_MIN, INT64_MAX};

}  // namespace

TEST_CASE("Hashing equals Keras' bins with masks, salts and floating inputs",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = i64(kValues, {7, 1});
    // keras.layers.Hashing(1000)(x), with mask_value=77, with salt=[-1, 2**62].
    L::Hashing plain(1000);
    CHECK(plain.name().rfind("hashing", 0) == 0);
    const tf::Tensor y = plain(x);
    CHECK(y.dtype() == tf::int64);
    CHECK(y.shape() == tf::TensorShape({7, 1}));
    CHECK(ints(y) == std::vector<int64_t>{921, 816, 735, 75, 378, 112, 319});
    CHECK(ints(L::Hashing(1000, {.mask_value = 77})(x)) ==
          std::vector<int64_t>{202, 829, 20, 0, 741, 960, 414});
    CHECK(ints(L::Hashing(1000, {.salt = {-1, int64_t{1} << 62}})(x)) ==
          std::vector<int64_t>{333, 890, 394, 496, 170, 608, 826});
    // One bin: no mask (Keras masks only with num_bins > 1).
    CHECK(ints(L::Hashing(1, {.mask_value = 3})(x)) == std::vector<int64_t>(7, 0));
    // keras.layers.Hashing(7)(...) of int64, int32 and [1.5, 2.0, -3.25] (truncated), and a
    // single-integer salt: Hashing(7, salt=133) equals salt=[133, 133].
    const tf::Tensor small = i64({1, -5, 123456789, 0, int64_t{1} << 40});
    CHECK(ints(L::Hashing(7)(small)) == std::vector<int64_t>{5, 0, 3, 2, 0});
    CHECK(ints(L::Hashing(7)(tf::cast(i64({1, -5, 123456789, 0}), tf::int32))) ==
          std::vector<int64_t>{5, 0, 3, 2});
    CHECK(ints(L::Hashing(7)(tf::constant({1.5f, 2.0f, -3.25f}))) == std::vector<int64_t>{5, 5, 4});
    CHECK(ints(L::Hashing(7, {.salt = {133}})(small)) == std::vector<int64_t>{5, 4, 5, 1, 1});
    CHECK(ints(L::Hashing(7, {.mask_value = 0})(small)) == std::vector<int64_t>{4, 1, 3, 0, 3});
    CHECK(ints(L::Hashing(7, {.salt = {3, 4}})(small)) == std::vector<int64_t>{0, 0, 0, 2, 2});
    // Floating values are compared with the mask before Keras' cast:
    // Hashing(10, mask_value=0)([0.0, 0.5, -0.5, 1.0, 2.7]).
    CHECK(ints(L::Hashing(10, {.mask_value = 0})(tf::constant({0.0f, 0.5f, -0.5f, 1.0f, 2.7f}))) ==
          std::vector<int64_t>{0, 2, 2, 1, 5});
    // 2-D and uint8 inputs: Hashing(11)([[1, 2, 3], [4, 5, 6]]) and uint8 [[1, 2, 3], [4, 5, 255]].
    CHECK(ints(L::Hashing(11)(i64({1, 2, 3, 4, 5, 6}, {2, 3}))) ==
          std::vector<int64_t>{8, 0, 4, 6, 10, 8});
    CHECK(ints(L::Hashing(11)(
              tf::constant(std::vector<uint8_t>{1, 2, 3, 4, 5, 255}, tf::TensorShape({2, 3})))) ==
          std::vector<int64_t>{8, 0, 4, 6, 10, 6});
  }
}

TEST_CASE("Hashing encodings equal Keras'", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.layers.Hashing(5, output_mode=...)([1, 2, 3]) and ([[1, 2], [3, 3]]).
    const tf::Tensor oh = L::Hashing(5, {.output_mode = "one_hot"})(i64({1, 2, 3}));
    CHECK(oh.dtype() == tf::float32);
    CHECK(oh.shape() == tf::TensorShape({3, 5}));
    check_values(oh, {0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0}, 0, 0);
    check_values(L::Hashing(5, {.output_mode = "multi_hot"})(i64({1, 2, 3, 3}, {2, 2})),
                 {0, 0, 0, 0, 1, 0, 1, 0, 0, 0}, 0, 0);
    check_values(L::Hashing(5, {.output_mode = "count"})(i64({1, 2, 3, 3}, {2, 2})),
                 {0, 0, 0, 0, 2, 0, 2, 0, 0, 0}, 0, 0);
  }
}

TEST_CASE("HashedCrossing equals Keras' crosses", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor a = i64({1, 2, 3, -7}), b = i64({4, 5, 6, int64_t{1} << 35});
    // keras.layers.HashedCrossing(num_bins=10)((a, b)) and of the (batch, 1) columns.
    L::HashedCrossing cross(10);
    CHECK(cross.name().rfind("hashed_crossing", 0) == 0);
    const tf::Tensor y = cross({a, b});
    CHECK(y.dtype() == tf::int64);
    CHECK(y.shape() == tf::TensorShape({4}));
    CHECK(ints(y) == std::vector<int64_t>{5, 8, 3, 8});
    const tf::Tensor col = cross({tf::reshape(a, {4, 1}), tf::reshape(b, {4, 1})});
    CHECK(col.shape() == tf::TensorShape({4, 1}));
    CHECK(ints(col) == std::vector<int64_t>{5, 8, 3, 8});
    // int32 values are read as int64 (2^35 wraps to 0 in the cast, as in Keras).
    CHECK(ints(cross({tf::cast(a, tf::int32), tf::cast(b, tf::int32)})) ==
          std::vector<int64_t>{5, 8, 3, 3});
    CHECK(ints(L::HashedCrossing(1000)({a, b, a})) == std::vector<int64_t>{223, 408, 88, 693});
    const tf::Tensor a5 = i64({1, 2, 3, -7, 0}), b5 = i64({4, 5, 6, int64_t{1} << 35, 0});
    const tf::Tensor c5 = i64({9, 9, 9, 9, 9});
    CHECK(ints(L::HashedCrossing(1000)({a5, b5, c5})) ==
          std::vector<int64_t>{615, 127, 810, 344, 881});
    CHECK(ints(L::HashedCrossing(13)({tf::reshape(a5, {5, 1}), tf::reshape(c5, {5, 1})})) ==
          std::vector<int64_t>{9, 7, 0, 11, 9});
    // one_hot, and scalars (Keras gives a scalar bin, and one_hot (1, num_bins)).
    check_values(L::HashedCrossing(4, "one_hot")({a, b}),
                 {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0}, 0, 0);
    const tf::Tensor s = L::HashedCrossing(10)(
        std::vector<tf::Tensor>{tf::constant(int64_t{1}), tf::constant(int64_t{4})});
    CHECK(s.shape() == tf::TensorShape(std::vector<int64_t>{}));
    CHECK(s.item<int64_t>() == 5);
    const tf::Tensor s1 = L::HashedCrossing(
        4, "one_hot")(std::vector<tf::Tensor>{tf::constant(int64_t{1}), tf::constant(int64_t{4})});
    CHECK(s1.shape() == tf::TensorShape({1, 4}));
    check_values(s1, {0, 1, 0, 0}, 0, 0);
  }
}

TEST_CASE("IntegerLookup with oov_method farmhash equals Keras'", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor t = i64({10, 20, 5, 6, 7, -1, 100});
    // keras.layers.IntegerLookup(vocabulary=[10, 20], num_oov_indices=3, oov_method="farmhash"),
    // with salt=[1, 2], and num_oov_indices=4 with salt=9; mask_token=0 shifts the OOV indices.
    L::IntegerLookup fh({.vocabulary = {10, 20}, .num_oov_indices = 3, .oov_method = "farmhash"});
    CHECK(ints(fh(t)) == std::vector<int64_t>{3, 4, 1, 2, 1, 0, 0});
    CHECK(ints(L::IntegerLookup({.vocabulary = {10, 20},
                                 .num_oov_indices = 3,
                                 .oov_method = "farmhash",
                                 .salt = {1, 2}})(t)) == std::vector<int64_t>{3, 4, 0, 0, 1, 2, 2});
    CHECK(
        ints(L::IntegerLookup(
            {.vocabulary = {10, 20}, .num_oov_indices = 4, .oov_method = "farmhash", .salt = {9}})(
            t)) == std::vector<int64_t>{4, 5, 0, 2, 2, 0, 3});
    CHECK(ints(L::IntegerLookup({.vocabulary = {10, 20},
                                 .num_oov_indices = 3,
                                 .mask_token = 0,
                                 .oov_method = "farmhash"})(i64({0, 10, 5, 6, 7}))) ==
          std::vector<int64_t>{0, 4, 2, 3, 2});
  }
}

TEST_CASE("Hashing and HashedCrossing: traced with a None batch, in a functional model",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    L::Hashing h(8, {.output_mode = "one_hot", .name = "hh"});
    L::HashedCrossing cr(16, "one_hot", "cr");
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 1}, tf::int64),
                            tf::TensorSpec({tf::None, 1}, tf::int64)};
    auto body = [&](const tf::Tensor& p, const tf::Tensor& q) {
      return std::vector<tf::Tensor>{h(p), cr({p, q})};
    };
    auto f = tf::function(body, opts);
    for (int64_t n : {3, 5}) {
      std::vector<int64_t> pv, qv;
      for (int64_t i = 0; i < n; ++i) {
        pv.push_back(i * 31 - 4);
        qv.push_back(i % 2);
      }
      const tf::Tensor p = i64(pv, {n, 1}), q = i64(qv, {n, 1});
      const auto got = f(p, q), want = body(p, q);
      tf::testing::check_close(got[0], want[0], 0, 0);
      tf::testing::check_close(got[1], want[1], 0, 0);
    }
    CHECK(f.tracing_count() == 1);
    // keras.Model([inp, inp2], Dense(2, "ones")(Concatenate()([cr, hh]))): each row sums 1 + 1.
    auto in1 = K::Input({1}, tf::int64), in2 = K::Input({1}, tf::int64);
    auto cat = L::Concatenate()({cr({in1, in2}), h(in1)});
    CHECK(cat.shape() == tf::TensorShape({tf::None, 24}));
    K::Model m({in1, in2}, {L::Dense(2, {.kernel_initializer = "ones"})(cat)});
    const auto out = m({i64({1, 2, 3}, {3, 1}), i64({4, 5, 6}, {3, 1})});
    check_values(out[0], {2, 2, 2, 2, 2, 2});
  }
}

TEST_CASE("Hashing and HashedCrossing: Keras configs both ways", "[cpu][keras][serialization]") {
  // keras.layers.Hashing(7, salt=[3, 4], mask_value=2, name="h").get_config(),
  // Hashing(5, output_mode="multi_hot", name="hm") and
  // HashedCrossing(num_bins=4, output_mode="one_hot", name="hc").
  const Config h = Config::parse(R"({"name": "h", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "int64"}, "registered_name": null}, "num_bins": 7,
"salt": [3, 4], "mask_value": 2, "output_mode": "int", "sparse": false})");
  const Config hm = Config::parse(R"({"name": "hm", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"num_bins": 5, "salt": null, "mask_value": null, "output_mode": "multi_hot", "sparse": false})");
  const Config hc = Config::parse(R"({"num_bins": 4, "output_mode": "one_hot", "sparse": false,
"name": "hc", "dtype": "float32"})");
  CHECK(K::saving::serialize(
            L::Hashing(7, {.mask_value = 2, .salt = {3, 4}, .name = "h"}))["config"] == h);
  CHECK(K::saving::serialize(L::Hashing(5, {.output_mode = "multi_hot", .name = "hm"}))["config"] ==
        hm);
  CHECK(K::saving::serialize(L::HashedCrossing(4, "one_hot", "hc"))["config"] == hc);
  CHECK(K::saving::from_config("Hashing", h).class_name() == "Hashing");
  for (const auto& [cls, c] : {std::pair{"Hashing", &h}, {"Hashing", &hm}, {"HashedCrossing", &hc}})
    CHECK(K::saving::serialize(K::saving::from_config(cls, *c))["config"] == *c);
  const tf::Tensor x = i64({1, -5, 123456789, 0, int64_t{1} << 40});
  CHECK(ints(K::saving::from_config("Hashing", h)(x)) ==
        ints(L::Hashing(7, {.mask_value = 2, .salt = {3, 4}})(x)));
  // Keras' salt=9 is written [9, 9]; IntegerLookup writes its oov_method and salt.
  Config il = K::saving::serialize(L::IntegerLookup({.vocabulary = {10, 20},
                                                     .num_oov_indices = 4,
                                                     .oov_method = "farmhash",
                                                     .salt = {9}}))["config"];
  CHECK(il["oov_method"] == "farmhash");
  CHECK(il["salt"] == Config::array({9, 9}));
  const tf::Tensor t = i64({10, 20, 5, 6, 7, -1, 100});
  CHECK(ints(K::saving::from_config("IntegerLookup", il)(t)) ==
        std::vector<int64_t>{4, 5, 0, 2, 2, 0, 3});
  Config bad = hm;
  bad["salt"] = Config::array({1, 2, 3});
  require_error([&] { K::saving::from_config("Hashing", bad); },
                {"Hashing config key \"salt\"", "two integers"});
}

TEST_CASE("Hashing and HashedCrossing: bad arguments and inputs are errors naming the layer",
          "[cpu][keras]") {
  require_error([] { L::Hashing(0); }, {"Hashing", "num_bins", "Received: num_bins=0"});
  require_error([] { L::Hashing(4, {.output_mode = "tf_idf"}); }, {"Hashing", "tf_idf"});
  require_error([] { L::Hashing(4, {.salt = {1, 2, 3}}); }, {"Hashing", "salt"});
  require_error([] { L::Hashing(4, {.name = "hb"})(tf::constant({true, false})); }, {"hb", "bool"});
  require_error([] { L::HashedCrossing(0); }, {"HashedCrossing", "num_bins"});
  require_error([] { L::HashedCrossing(4, "multi_hot"); }, {"HashedCrossing", "multi_hot"});
  L::HashedCrossing c(4, "int", "hc");
  require_error([&] { c(std::vector<tf::Tensor>{i64({1, 2})}); }, {"hc", "at least two inputs"});
  require_error([&] { c({i64({1, 2}), i64({1, 2, 3})}); }, {"hc", "equal shape"});
  require_error(
      [&] {
        c({i64({1, 2, 3, 4}, {2, 2}), i64({1, 2, 3, 4}, {2, 2})});
      },
      {"hc", "(batch_size, 1)"});
  require_error([&] { c({tf::constant({1.0f, 2.0f}), i64({1, 2})}); }, {"hc", "integer dtype"});
  require_error([] { L::IntegerLookup({.vocabulary = {1}, .oov_method = "md5"}); },
                {"IntegerLookup", "oov_method", "md5"});
  require_error([] { L::IntegerLookup({.vocabulary = {1}, .salt = {4}}); },
                {"IntegerLookup", "salt", "farmhash"});
}
