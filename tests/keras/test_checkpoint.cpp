// safetensors files (every dtype, the byte layout, corrupt files), tf::train::Checkpoint with
// optimizer state (deferred slot restoration), CheckpointManager (max_to_keep, index, restart),
// mirrored variables, a child process SIGKILLed mid-save leaving the previous checkpoint, and the
// metrics whose state Keras builds at the first update (F-scores, R2, multi_label AUC), restored
// into fresh metrics by building that state from the saved shapes.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/checkpoint.h"
#include "keras/metrics.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/safetensors.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
namespace st = tapeflow::keras::safetensors;
namespace opt = tapeflow::keras::optimizers;
using tf::testing::check_values;

using tf::testing::TempDir;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
// A file with the given JSON header (padded as the format asks) and data bytes.
std::string make_file(const std::string& header, const std::string& data) {
  std::string h = header;
  while (h.size() % 8) h += ' ';
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + h + data;
}

// A model stand-in: two variables under stable names.
struct TinyModel final : tf::keras::Trackable {
  tf::Variable kernel, bias;
  TinyModel()
      : kernel(tf::constant({{1.0f, 2.0f}, {3.0f, 4.0f}}), "dense/kernel"),
        bias(tf::constant({0.5f, -0.5f}), "dense/bias") {}
  std::vector<std::pair<std::string, tf::Variable>> tracked_variables() const override {
    return {{"dense/kernel", kernel}, {"dense/bias", bias}};
  }
  std::vector<tf::Variable> vars() const { return {kernel, bias}; }
};

// A checkpoint at `prefix` of a TinyModel and an Adam optimizer after one step (so it holds
// Adam's m and v slots); returns its path.
std::string save_adam_checkpoint(const std::string& prefix) {
  TinyModel model;
  opt::Adam adam(0.05);
  adam.apply_gradients({model.kernel.value(), model.bias.value()}, model.vars());
  tf::train::Checkpoint saved({{"model", model}, {"optimizer", adam}});
  return saved.save(prefix);
}

}  // namespace

TEST_CASE("safetensors: every dtype round-trips with the exact byte layout", "[keras][cpu]") {
  TempDir dir;
  const std::string path = dir / "all.safetensors";
  std::vector<std::pair<std::string, tf::Tensor>> tensors = {
      {"f32", tf::constant({{1.5f, -2.0f, 3.25f}, {4.0f, 5.0f, 6.0f}})},
      {"f64", tf::constant({1.0 / 3.0, -1e300})},
      {"f16", tf::cast(tf::constant({0.5f, -1.25f, 65504.0f}), tf::float16)},
      {"bf16", tf::cast(tf::constant({1.0f, -3.0f}), tf::bfloat16)},
      {"i32", tf::constant({-7, 0, 2147483647})},
      {"i64", tf::constant(std::vector<int64_t>{-9007199254740993LL, 5})},
      {"u8", tf::constant(std::vector<uint8_t>{0, 7, 255})},
      {"bool", tf::constant({true, false, true})},
      {"scalar", tf::constant(42.0f)},
      {"empty", tf::zeros({0, 3})},
      {"rank3", tf::reshape(tf::range(0, 24, 1, tf::float32), {2, 3, 4})},
  };
  st::save_file(path, tensors, {{"framework", "tapeflow"}, {"note", "round trip"}});
  std::map<std::string, std::string> meta;
  auto loaded = st::load_file(path, &meta);
  CHECK(meta == std::map<std::string, std::string>{{"framework", "tapeflow"}, {"note", "round trip"}});
  REQUIRE(loaded.size() == tensors.size());
  for (const auto& [name, want] : tensors) {
    INFO(name);
    auto it = std::find_if(loaded.begin(), loaded.end(), [&](auto& p) { return p.first == name; });
    REQUIRE(it != loaded.end());
    const tf::Tensor& got = it->second;
    CHECK(got.dtype() == want.dtype());
    CHECK(got.shape() == want.shape());
    REQUIRE(got.nbytes() == want.nbytes());
    // Host bytes (want lives on the default device, a GPU where there is one; loads are host
    // tensors). An empty tensor has no buffer (memcmp on null is undefined).
    const tf::Tensor host = tf::detail::copy_to_device(want, tf::Device{});
    if (got.nbytes() > 0) CHECK(std::memcmp(got.raw_data(), host.raw_data(), got.nbytes()) == 0);
  }
  // The layout by hand: little-endian length, 8-aligned JSON, contiguous data that fills the
  // file, each tensor aligned to its element size.
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[static_cast<size_t>(i)])) << (8 * i);
  CHECK(n % 8 == 0);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["__metadata__"]["framework"] == "tapeflow");
  CHECK(header["f32"]["dtype"] == "F32");
  CHECK(header["f32"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(header["bool"]["dtype"] == "BOOL");
  CHECK(header["bf16"]["dtype"] == "BF16");
  CHECK(header["scalar"]["shape"] == nlohmann::json::array());
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const uint64_t b = it.value()["data_offsets"][0], e = it.value()["data_offsets"][1];
    const std::string code = it.value()["dtype"];
    const uint64_t size = code == "F64" || code == "I64" ? 8 : code == "F32" || code == "I32" ? 4
                          : code == "F16" || code == "BF16"                   ? 2
                                                                              : 1;
    CHECK((8 + n + b) % size == 0);
    spans.emplace_back(b, e);
  }
  std::sort(spans.begin(), spans.end());
  uint64_t at = 0;
  for (auto [b, e] : spans) {
    CHECK(b == at);
    at = e;
  }
  CHECK(8 + n + at == bytes.size());
  // The f32 values sit at their offsets in little-endian order.
  float first;
  std::memcpy(&first, bytes.data() + 8 + n + header["f32"]["data_offsets"][0].get<uint64_t>(), 4);
  CHECK(first == 1.5f);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("safetensors: corrupt or mismatched files are clear errors naming file and tensor",
          "[keras][cpu]") {
  TempDir dir;
  const std::string good = dir / "good.safetensors";
  st::save_file(good, {{"w", tf::constant({1.0f, 2.0f, 3.0f})}, {"b", tf::constant({7.0})}});
  const std::string bytes = read_bytes(good);
  const std::string bad = dir / "bad.safetensors";

  TF_REQUIRE_THROWS_CONTAINING(st::Reader(dir / "missing.safetensors"), tf::NotFoundError,
                               "missing.safetensors");
  write_bytes(bad, bytes.substr(0, 5));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"bad.safetensors", "too short"});
  std::string huge = bytes;
  huge[6] = '\x7f';
  write_bytes(bad, huge);
  tf::testing::require_error([&] { st::Reader r(bad); }, {"bad.safetensors", "invalid header length"});
  write_bytes(bad, make_file("{\"w\": {\"dtype\": \"F32\", ", ""));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"bad.safetensors", "not valid JSON"});
  write_bytes(bad, make_file("[1, 2]", ""));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"not a JSON object"});
  // Truncated data: the last tensor's offsets point past the end.
  write_bytes(bad, bytes.substr(0, bytes.size() - 4));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"bad.safetensors", "tensor 'w'", "outside"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                             std::string(8, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"tensor 'x'", "need 12"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})",
                             std::string(2, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"tensor 'x'", "unsupported dtype 'I8'"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "U8", "shape": [-2], "data_offsets": [0, 2]}})",
                             std::string(2, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"tensor 'x'", "negative"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "U8", "shape": [2]}})", std::string(2, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"tensor 'x'", "data_offsets"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                               "y": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})",
                             std::string(3, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"tensor 'y'", "overlapping"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})",
                             std::string(5, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"cover 2 bytes", "holds 5"});
  // Bool bytes other than 0/1 read as true.
  write_bytes(bad, make_file(R"({"x": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}})",
                             std::string("\x00\x02\x01", 3)));
  CHECK(st::Reader(bad).read("x").numpy<bool>() == std::vector<bool>{false, true, true});

  // Loading into variables: mismatches name the file, the tensor and both shapes/dtypes, and
  // nothing is assigned when any check fails.
  tf::Variable w(tf::zeros({3}), "w"), b(tf::zeros({1}, tf::float64), "b");
  tf::Variable w2(tf::zeros({2}), "w2"), b32(tf::zeros({1}), "b32");
  tf::testing::require_error([&] { st::load_variables(good, {{"b", b}, {"w", w2}}); },
                             {"good.safetensors", "tensor 'w'", "(3,)", "(2,)"});
  check_values(b, {0.0});  // untouched
  tf::testing::require_error([&] { st::load_variables(good, {{"b", b32}}); },
                             {"tensor 'b'", "float64", "float32"});
  TF_REQUIRE_THROWS_CONTAINING(st::load_variables(good, {{"w", w}, {"nope", b}}),
                               tf::NotFoundError, "'nope'");
  CHECK(st::load_variables(good, {{"w", w}}) == std::vector<std::string>{"b"});
  check_values(w, {1, 2, 3});
  TF_REQUIRE_THROWS_CONTAINING(st::save_file(bad, {{"a", tf::ones({1})}, {"a", tf::ones({1})}}),
                               tf::InvalidArgumentError, "appears twice");
  TF_REQUIRE_THROWS_CONTAINING(st::save_file(dir / "no/such/dir/x.safetensors", {{"a", tf::ones({1})}}),
                               tf::NotFoundError, "no/such/dir");
}

TEST_CASE("safetensors: deeply nested header JSON is rejected without recursion", "[keras][cpu]") {
  TempDir dir;
  const std::string bad = dir / "deep.safetensors";
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  write_bytes(
      bad, make_file(R"({"x": {"dtype": "U8", "shape": )" + deep + R"(, "data_offsets": [0, 2]}})",
                     std::string(2, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); },
                             {"[safetensors]", "deep.safetensors", "nests deeper"});
  // Within the depth bound, a nested shape or offsets entry is named by its type, not dumped.
  write_bytes(bad, make_file(R"({"x": {"dtype": "U8", "shape": [[[1]]], "data_offsets": [0, 1]}})",
                             std::string(1, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); }, {"[safetensors]", "tensor 'x'", "array"});
  write_bytes(bad, make_file(R"({"x": {"dtype": "U8", "shape": [1], "data_offsets": [[[0]], 1]}})",
                             std::string(1, '\0')));
  tf::testing::require_error([&] { st::Reader r(bad); },
                             {"[safetensors]", "tensor 'x'", "2-element array"});
}

TEST_CASE("safetensors: non-UTF-8 tensor names or metadata are InvalidArgumentError",
          "[keras][cpu]") {
  TempDir dir;
  const std::string path = dir / "utf8.safetensors";
  tf::testing::require_error(
      [&] {
        st::save_file(path, {{"w\xff", tf::ones({1})}});
      },
      {"[safetensors]", "utf8.safetensors", "UTF-8"});
  tf::testing::require_error(
      [&] {
        st::save_file(path, {{"w", tf::ones({1})}}, {{"k", "v\xc3"}});
      },
      {"[safetensors]", "UTF-8"});
  CHECK(!fs::exists(path));
}

TEST_CASE("checkpoint: model and optimizer state round-trip, slots restored lazily",
          "[keras][cpu]") {
  TempDir dir;
  TinyModel model;
  opt::Adam adam(0.05);
  auto grads = [](const TinyModel& m) {
    return std::vector<tf::Tensor>{m.kernel.value() * 0.5f - 1.0f, m.bias.value() + 0.25f};
  };
  tf::train::Checkpoint ckpt({{"model", model}, {"optimizer", adam}});
  for (int i = 0; i < 2; ++i) adam.apply_gradients(grads(model), model.vars());
  const std::string path = ckpt.save(dir / "ckpt");
  CHECK(path == dir / "ckpt-1");
  CHECK(fs::exists(path + ".safetensors"));
  std::vector<std::string> names;
  for (auto& [n, v] : ckpt.variables()) names.push_back(n);
  // Slots are named after their variable's path in the checkpoint (not its process-wide name).
  CHECK(names == std::vector<std::string>{"save_counter", "model/dense/kernel", "model/dense/bias",
                                          "optimizer/iterations", "optimizer/learning_rate",
                                          "optimizer/model/dense/kernel/m",
                                          "optimizer/model/dense/kernel/v",
                                          "optimizer/model/dense/bias/m",
                                          "optimizer/model/dense/bias/v"});
  // One more step from the saved state: the values a restored run must reproduce.
  adam.apply_gradients(grads(model), model.vars());
  const auto want_kernel = model.kernel.value().numpy<float>();
  const auto want_bias = model.bias.value().numpy<float>();

  // Restoring into the same objects rolls everything back.
  ckpt.restore(path).assert_consumed();
  CHECK(adam.iterations().value().item<int64_t>() == 2);
  adam.apply_gradients(grads(model), model.vars());
  CHECK(model.kernel.value().numpy<float>() == want_kernel);

  // A fresh process's objects: no slots yet. Their values wait in the optimizer and are used
  // when the first apply_gradients creates the slots (TF's deferred restoration).
  TinyModel fresh;
  opt::Adam fresh_adam(0.05);
  tf::train::Checkpoint restored({{"model", fresh}, {"optimizer", fresh_adam}});
  auto status = restored.restore(path + ".safetensors");
  status.assert_existing_objects_matched();
  CHECK(status.unused.empty());  // the slot values are pending, not unused
  CHECK(restored.save_counter().value().item<int64_t>() == 1);
  CHECK(fresh_adam.iterations().value().item<int64_t>() == 2);
  fresh_adam.apply_gradients(grads(fresh), fresh.vars());
  CHECK(fresh.kernel.value().numpy<float>() == want_kernel);
  CHECK(fresh.bias.value().numpy<float>() == want_bias);
  // Numbering continues from the restored counter; write() takes an exact path.
  CHECK(restored.save(dir / "ckpt") == dir / "ckpt-2");
  CHECK(restored.write(dir / "exact") == dir / "exact");
  CHECK(fs::exists(dir / "exact.safetensors"));

  // Missing variables are reported (and asserted on request).
  tf::Variable extra(tf::zeros({2}), "extra");
  tf::train::Checkpoint more({{"model", fresh}, {"extra", extra}});
  auto s2 = more.restore(path);
  CHECK(s2.missing == std::vector<std::string>{"extra"});
  CHECK(!s2.unused.empty());
  TF_REQUIRE_THROWS_CONTAINING(s2.assert_consumed(), tf::FailedPreconditionError, "extra");
  // A shared_ptr and a std::ref hold objects too; keys are checked.
  auto shared = std::make_shared<TinyModel>();
  tf::train::Checkpoint by_ptr({{"model", shared}});
  by_ptr.restore(path);
  tf::testing::check_close(shared->kernel.value(),
                           st::Reader(path + ".safetensors").read("model/dense/kernel"), 0, 0);
  tf::train::Checkpoint by_ref({{"model", std::ref(fresh)}});
  CHECK(by_ref.variables().size() == 3);
  TF_REQUIRE_THROWS_CONTAINING(tf::train::Checkpoint({{"a", model}, {"a", adam}}),
                               tf::InvalidArgumentError, "used twice");
  TF_REQUIRE_THROWS_CONTAINING(ckpt.restore(dir / "nothing"), tf::NotFoundError, "nothing");
  // A shape mismatch names the file and the variable; nothing changes.
  tf::Variable wrong(tf::zeros({3}), "wrong");
  tf::train::Checkpoint mismatch({{"save_counter_like", wrong}});
  st::save_variables(dir / "w.safetensors", {{"save_counter_like", tf::Variable(tf::zeros({4}))}});
  tf::testing::require_error([&] { mismatch.restore(dir / "w"); },
                             {"w.safetensors", "save_counter_like", "(4,)", "(3,)"});
}

TEST_CASE("checkpoint: optimizer slots follow their variables' paths, not process-wide names",
          "[keras][cpu]") {
  // Two models of the same architecture in one process get other automatic layer names
  // ("dense", "dense_1" then "dense_2", "dense_3"); the second must still receive the first's
  // Adam slots, exactly.
  namespace K = tf::keras;
  TempDir dir;
  auto make = [] { return K::Sequential({K::layers::Dense(4, "relu"), K::layers::Dense(2)}); };
  const tf::Tensor x = tf::random::uniform({8, 3}, -1, 1, tf::float32, 1);
  const tf::Tensor y = tf::random::uniform({8, 2}, -1, 1, tf::float32, 2);
  auto a = make();
  opt::Adam adam_a(0.01);
  {
    tf::GradientTape tape;
    tf::Tensor loss = tf::reduce_mean(tf::square(a(x, true) - y));
    auto vars = a.trainable_variables();
    adam_a.apply_gradients(tape.gradient(loss, vars), vars);
  }
  tf::train::Checkpoint saved({{"model", a}, {"optimizer", adam_a}});
  const std::string path = saved.save(dir / "ckpt");

  auto b = make();
  (void)b(x, false);  // built: its variables exist, its optimizer's slots do not yet
  CHECK(b.trainable_variables()[0].name() != a.trainable_variables()[0].name());
  opt::Adam adam_b(0.01);
  tf::train::Checkpoint restored({{"model", b}, {"optimizer", adam_b}});
  auto status = restored.restore(path);
  status.assert_existing_objects_matched();
  CHECK(status.unused.empty());
  adam_b.build(b.trainable_variables());  // the slots take the pending values
  const auto slots_a = adam_a.slots(), slots_b = adam_b.slots();
  REQUIRE(slots_a.size() == 4);
  REQUIRE(slots_b.size() == 4);
  for (size_t i = 0; i < slots_a.size(); ++i)
    for (size_t k = 0; k < 2; ++k)
      tf::testing::check_close(slots_b[i].second[k].value(), slots_a[i].second[k].value(), 0, 0);
  // Saving again names the slots the same way.
  std::vector<std::string> names;
  for (auto& [n, v] : restored.variables()) names.push_back(n);
  CHECK(std::find(names.begin(), names.end(), "optimizer/model/dense_1/kernel/v") != names.end());

  // A checkpoint that named slots after the variables ("optimizer/dense/kernel/m", earlier
  // versions) still restores into objects whose variables carry those names.
  TinyModel tiny;
  opt::Adam adam_t(0.05);
  adam_t.build(tiny.vars());
  st::save_variables(dir / "old.safetensors",
                     {{"optimizer/dense/kernel/m", tf::Variable(tf::fill({2, 2}, tf::Tensor(0.5f)))}});
  TinyModel tiny2;
  opt::Adam adam_t2(0.05);
  tf::train::Checkpoint legacy({{"model", tiny2}, {"optimizer", adam_t2}});
  (void)legacy.restore(dir / "old");
  adam_t2.build(tiny2.vars());
  tf::testing::check_values(adam_t2.slots()[0].second[0].value(), {0.5, 0.5, 0.5, 0.5}, 0, 0);
}

TEST_CASE("checkpoint: CheckpointManager keeps max_to_keep, writes an index, resumes",
          "[keras][cpu]") {
  TempDir dir;
  tf::Variable step(tf::constant(int64_t{0}), "step");
  tf::train::Checkpoint ckpt({{"step", step}});
  {
    tf::train::CheckpointManager manager(ckpt, dir.path().string(), 2);
    CHECK(manager.latest_checkpoint().empty());
    CHECK(manager.restore_or_initialize().empty());
    for (int i = 1; i <= 4; ++i) {
      step.assign(tf::constant(int64_t{i * 10}));
      CHECK(manager.save() == dir / ("ckpt-" + std::to_string(i)));
    }
    CHECK(manager.checkpoints() == std::vector<std::string>{dir / "ckpt-3", dir / "ckpt-4"});
    CHECK(!fs::exists(dir / "ckpt-1.safetensors"));
    CHECK(!fs::exists(dir / "ckpt-2.safetensors"));
    CHECK(fs::exists(dir / "ckpt-3.safetensors"));
    CHECK(read_bytes(dir / "checkpoint") ==
          "model_checkpoint_path: \"ckpt-4\"\nall_model_checkpoint_paths: \"ckpt-3\"\n"
          "all_model_checkpoint_paths: \"ckpt-4\"\n");
    CHECK(manager.save(100) == dir / "ckpt-100");
  }
  CHECK(tf::train::latest_checkpoint(dir.path().string()) == dir / "ckpt-100");
  // A new process: fresh objects, the manager reads the index and the counter continues.
  tf::Variable step2(tf::constant(int64_t{0}), "step");
  tf::train::Checkpoint ckpt2({{"step", step2}});
  // A temporary file of a dead writer is cleaned up.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string stale =
      dir / ("ckpt-9.safetensors.tmp-" + tf::detail::temporary_writer_tag(child) + "-0123abcd");
  write_bytes(stale, "torn");
  // Another host's (or PID namespace's) writer with that pid may be alive: its file stays, as
  // does an older "<path>.tmp-<pid>" of an unknown host, and a live writer's.
  const std::string other_host =
      dir / ("ckpt-9.safetensors.tmp-otherhost-1-" + std::to_string(child) + "-0123abcd");
  std::string tag = tf::detail::temporary_writer_tag(child);  // "<host>-<namespace>-<pid>"
  const size_t pid_at = tag.rfind('-'), namespace_at = tag.rfind('-', pid_at - 1);
  tag.replace(namespace_at, pid_at - namespace_at, "-1");
  const std::string other_namespace = dir / ("ckpt-9.safetensors.tmp-" + tag + "-0123abcd");
  const std::string unknown_host = dir / ("ckpt-9.safetensors.tmp-" + std::to_string(child));
  const std::string live = tf::detail::temporary_path_for(dir / "ckpt-9.safetensors");
  for (const std::string& f : {other_host, other_namespace, unknown_host, live})
    write_bytes(f, "in progress");
  tf::train::CheckpointManager manager2(ckpt2, dir.path().string(), 2);
  CHECK(!fs::exists(stale));
  for (const std::string& f : {other_host, other_namespace, unknown_host, live}) {
    INFO(f);
    CHECK(fs::exists(f));
    fs::remove(f);
  }
  CHECK(manager2.checkpoints() == std::vector<std::string>{dir / "ckpt-4", dir / "ckpt-100"});
  CHECK(manager2.restore_or_initialize() == dir / "ckpt-100");
  CHECK(step2.value().item<int64_t>() == 40);
  CHECK(ckpt2.save_counter().value().item<int64_t>() == 5);
  CHECK(manager2.save() == dir / "ckpt-6");
  CHECK(manager2.checkpoints() == std::vector<std::string>{dir / "ckpt-100", dir / "ckpt-6"});
  TF_REQUIRE_THROWS_CONTAINING(tf::train::CheckpointManager(ckpt2, dir.path().string(), 0),
                               tf::InvalidArgumentError, "max_to_keep");
}

TEST_CASE("checkpoint: a child killed mid-save leaves the previous checkpoint loadable",
          "[keras][cpu]") {
  // Host variables: a forked child must not touch CUDA (the parent's context does not survive
  // fork), so nothing here may live on a GPU.
  tf::DeviceScope cpu("/cpu:0");
  TempDir dir;
  const int64_t n = 4 << 20;  // two 16 MiB variables: a save takes long enough to be caught
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    fs::remove_all(dir.path());
    fs::create_directories(dir.path());
    tf::Variable a(tf::zeros({n}), "a"), b(tf::zeros({n}), "b");
    tf::Variable step(tf::constant(int64_t{0}), "step");
    tf::train::Checkpoint ckpt({{"a", a}, {"b", b}, {"step", step}});
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The child: saves forever with every value equal to the save number. Only host copies
      // and tiny ops here (no OpenMP region after fork).
      tf::train::CheckpointManager manager(ckpt, dir.path().string(), 2);
      std::vector<float> host(static_cast<size_t>(n));
      for (int64_t k = 1; k < 100000; ++k) {
        std::fill(host.begin(), host.end(), static_cast<float>(k));
        a.assign(tf::detail::from_host<float>(host.data(), {n}, tf::Device{}));
        b.assign(tf::detail::from_host<float>(host.data(), {n}, tf::Device{}));
        step.assign(tf::constant(tf::Tensor(k), tf::int64));
        manager.save();
      }
      ::_exit(0);
    }
    // The parent: waits for the first checkpoint, then kills the child at a random moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (tf::train::latest_checkpoint(dir.path().string()).empty() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300000));
    ::kill(child, SIGKILL);
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    REQUIRE(WIFSIGNALED(wstatus));
    REQUIRE(WTERMSIG(wstatus) == SIGKILL);

    tf::Variable a2(tf::zeros({n}), "a"), b2(tf::zeros({n}), "b");
    tf::Variable step2(tf::constant(int64_t{0}), "step");
    tf::train::Checkpoint restored({{"a", a2}, {"b", b2}, {"step", step2}});
    tf::train::CheckpointManager manager(restored, dir.path().string(), 2);
    const std::string latest = manager.restore_or_initialize();
    REQUIRE(!latest.empty());
    const int64_t k = step2.value().item<int64_t>();
    CHECK(k >= 1);
    CHECK(latest == dir / ("ckpt-" + std::to_string(k)));
    // Every element of both variables comes from that same save.
    for (const tf::Variable& v : {a2, b2}) {
      CHECK(tf::reduce_min(v.value()).item<float>() == static_cast<float>(k));
      CHECK(tf::reduce_max(v.value()).item<float>() == static_cast<float>(k));
    }
    // Every checkpoint the index names is whole; the dead child's temporary file is gone.
    for (const auto& p : manager.checkpoints()) CHECK_NOTHROW(st::Reader(p + ".safetensors"));
    for (const auto& e : fs::directory_iterator(dir.path()))
      CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  }
}

TEST_CASE("checkpoint: mirrored variables save their first copy and restore every copy",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  TempDir dir;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  tf::Variable w;
  opt::SGD sgd(0.1, 0.9);
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    w = tf::Variable(tf::constant({1.0f, 2.0f}), "w");
    sgd = opt::SGD(0.1, 0.9);
  }
  sgd.apply_gradients({tf::constant({1.0f, 1.0f})}, {w});
  tf::train::Checkpoint ckpt({{"w", w}, {"opt", sgd}});
  const std::string path = ckpt.save(dir / "ckpt");
  auto file = st::load_file(path + ".safetensors");
  std::map<std::string, tf::Tensor> by_name(file.begin(), file.end());
  check_values(by_name.at("w"), {0.9, 1.9});
  check_values(by_name.at("opt/w/m"), {-0.1, -0.1});
  // Scribble on each copy differently, restore: every copy holds the saved value again.
  {
    tf::detail::ReplicaComponentScope r1(1);
    w.assign(tf::constant({5.0f, 5.0f}));
  }
  w.components()[0].assign(tf::constant({7.0f, 7.0f}));
  ckpt.restore(path).assert_consumed();
  for (const auto& c : w.components()) check_values(c.value(), {0.9, 1.9});
  for (auto& [name, v] : sgd.tracked_variables())
    if (name == "w/m")
      for (const auto& c : v.components()) check_values(c.value(), {-0.1, -0.1});
  // A plain (non-mirrored) process restores the same file (the restore without the strategy).
  tf::Variable plain(tf::zeros({2}), "w");
  tf::train::Checkpoint single({{"w", plain}});
  single.restore(path);
  check_values(plain, {0.9, 1.9});
}

TEST_CASE("checkpoint: filesystem failures are tf errors, unreadable index entries are absent",
          "[keras][cpu]") {
  TempDir dir;
  TinyModel model;
  tf::train::Checkpoint ckpt({{"model", model}});
  write_bytes(dir / "blocker", "x");
  // The parent of the file is a regular file: no std::filesystem::filesystem_error escapes.
  TF_REQUIRE_THROWS_CONTAINING(ckpt.write(dir / "blocker/sub/ckpt"), tf::FailedPreconditionError,
                               "[Checkpoint]");
  // An index naming a file whose name is too long to stat: treated as not present.
  fs::create_directories(dir / "managed");
  const std::string long_name(300, 'a');
  write_bytes(dir / "managed/checkpoint", "model_checkpoint_path: \"" + long_name +
                                              "\"\nall_model_checkpoint_paths: \"" + long_name +
                                              "\"\n");
  CHECK(tf::train::latest_checkpoint(dir / "managed").empty());
  tf::train::CheckpointManager manager(ckpt, dir / "managed", 2);
  CHECK(manager.checkpoints().empty());
  CHECK(manager.latest_checkpoint().empty());
}

TEST_CASE("checkpoint: a model that is not built gets its values when it builds", "[keras][cpu]") {
  namespace K = tf::keras;
  TempDir dir;
  auto a = K::Sequential({K::layers::Dense(3, "relu"), K::layers::Dense(2)});
  const tf::Tensor x = tf::random::normal({4, 5}, 0, 1, tf::float32, 7);
  const tf::Tensor want = a(x, false);
  tf::train::Checkpoint saved({{"model", a}});
  const std::string path = saved.save(dir / "ckpt");

  auto b = K::Sequential({K::layers::Dense(3, "relu"), K::layers::Dense(2)});
  tf::train::Checkpoint restored({{"model", b}});
  const auto status = restored.restore(path);
  CHECK(status.unused.empty());
  CHECK(status.missing.empty());
  auto deferred = status.deferred;
  std::sort(deferred.begin(), deferred.end());
  CHECK(deferred == std::vector<std::string>{"model/dense/bias", "model/dense/kernel",
                                             "model/dense_1/bias", "model/dense_1/kernel"});
  CHECK(status.waiting() == deferred);
  status.assert_existing_objects_matched();
  TF_REQUIRE_THROWS_CONTAINING(status.assert_consumed(), tf::FailedPreconditionError,
                               "still wait for variables that do not exist: model/dense/bias");
  // The first call already computes with the restored weights (TF's restore-on-create).
  tf::testing::check_close(b(x, false), want, 0, 0);
  CHECK(status.waiting().empty());
  status.assert_consumed();
  // build(input_shape) without a call restores too.
  auto c = K::Sequential({K::layers::Dense(3, "relu"), K::layers::Dense(2)});
  tf::train::Checkpoint({{"model", c}}).restore(path);
  c.build({tf::None, 5});
  tf::testing::check_close(c(x, false), want, 0, 0);
}

namespace {
class TwoDense : public tf::keras::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool) override { return d2(d1(x)); }
  tf::keras::layers::Dense d1{3, "tanh"};
  tf::keras::layers::Dense d2{2};
};
}  // namespace

TEST_CASE("checkpoint: a subclassed model and its optimizer slots restore when the model builds",
          "[keras][cpu]") {
  TempDir dir;
  const tf::Tensor x = tf::random::normal({4, 5}, 0, 1, tf::float32, 3);
  const tf::Tensor y = tf::random::normal({4, 2}, 0, 1, tf::float32, 4);
  auto step = [&](TwoDense& m, opt::Adam& adam) {
    tf::GradientTape tape;
    const tf::Tensor loss = tf::reduce_mean(tf::square(m(x, true) - y));
    const auto vars = m.trainable_variables();
    adam.apply_gradients(tape.gradient(loss, vars), vars);
  };
  TwoDense a;
  opt::Adam adam_a(0.01);
  step(a, adam_a);
  step(a, adam_a);
  tf::train::Checkpoint saved({{"model", a}, {"optimizer", adam_a}});
  const std::string path = saved.save(dir / "ckpt");
  step(a, adam_a);  // the step that a restored run must reproduce

  TwoDense b;
  opt::Adam adam_b(0.01);
  tf::train::Checkpoint restored({{"model", b}, {"optimizer", adam_b}});
  const auto status = restored.restore(path);
  CHECK(status.unused.empty());
  CHECK(status.deferred.size() == 12);  // four weights and their eight slots
  step(b, adam_b);
  CHECK(status.waiting().empty());
  status.assert_consumed();
  const auto wa = a.trainable_variables(), wb = b.trainable_variables();
  REQUIRE(wa.size() == wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    tf::testing::check_close(wb[i].value(), wa[i].value(), 0, 0);
}

TEST_CASE("checkpoint: deferred values that do not fit fail the build or wait with a warning",
          "[keras][cpu]") {
  namespace K = tf::keras;
  TempDir dir;
  auto a = K::Sequential({K::layers::Dense(2), K::layers::Dense(2)});
  (void)a(tf::zeros({1, 3}), false);
  const std::string path = tf::train::Checkpoint({{"model", a}}).save(dir / "ckpt");

  // A kernel of another shape: the call that builds the layer names both shapes; the bias,
  // whose shape fits, is restored. The model's build stopped there: the next call finishes it.
  auto b = K::Sequential({K::layers::Dense(2), K::layers::Dense(2)});
  const auto status = tf::train::Checkpoint({{"model", b}}).restore(path);
  tf::testing::require_error(
      [&] {
        (void)b(tf::zeros({1, 4}), false);
      },
      {"model/dense/kernel", "(3, 2)", "(4, 2)"});
  CHECK(status.waiting() == std::vector<std::string>{"model/dense/kernel", "model/dense_1/bias",
                                                     "model/dense_1/kernel"});
  (void)b(tf::zeros({1, 4}), false);
  CHECK(status.waiting() == std::vector<std::string>{"model/dense/kernel"});
  tf::testing::check_close(b.layers()[0].impl().weight("bias").value(),
                           a.layers()[0].impl().weight("bias").value(), 0, 0);
  tf::testing::check_close(b.layers()[1].impl().weight("kernel").value(),
                           a.layers()[1].impl().weight("kernel").value(), 0, 0);
  TF_REQUIRE_THROWS_CONTAINING(status.assert_consumed(), tf::FailedPreconditionError,
                               "model/dense/kernel");

  // A model built without some of the checkpoint's weights: those keep waiting, with a warning.
  auto c = K::Sequential({K::layers::Dense(2)});
  const auto partial = tf::train::Checkpoint({{"model", c}}).restore(path);
  const std::string log = tf::testing::capture_stderr([&] { (void)c(tf::zeros({1, 3}), false); });
  CHECK(log.find("was built without weights named dense_1/bias, dense_1/kernel: their "
                 "checkpoint values wait for layers that create them") != std::string::npos);
  tf::testing::check_close(c.layers()[0].impl().weight("kernel").value(),
                           a.layers()[0].impl().weight("kernel").value(), 0, 0);
  CHECK(partial.waiting() ==
        std::vector<std::string>{"model/dense_1/bias", "model/dense_1/kernel"});
}

TEST_CASE("checkpoint: a mirrored model that is not built gets its values in every copy",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  namespace K = tf::keras;
  TempDir dir;
  auto a = K::Sequential({K::layers::Dense(2)});
  const tf::Tensor x = tf::random::normal({2, 3}, 0, 1, tf::float32, 5);
  const tf::Tensor want = a(x, false);
  const std::string path = tf::train::Checkpoint({{"model", a}}).save(dir / "ckpt");

  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  K::Sequential b;
  {
    auto scope = strategy.scope();
    b = K::Sequential({K::layers::Dense(2)});
  }
  const auto status = tf::train::Checkpoint({{"model", b}}).restore(path);
  // The first call comes from the replicas: one builds, every copy gets the value.
  const auto out = strategy.run([&] { return b(x, false); });
  for (const auto& v : out.values()) tf::testing::check_close(v, want, 0, 0);
  const auto saved_vars = a.trainable_variables(), mirrored = b.trainable_variables();
  REQUIRE(mirrored.size() == saved_vars.size());
  for (size_t i = 0; i < mirrored.size(); ++i) {
    REQUIRE(mirrored[i].components().size() == 2);
    for (const auto& c : mirrored[i].components())
      tf::testing::check_close(c.value(), saved_vars[i].value(), 0, 0);
  }
  status.assert_consumed();

  // A subclassed model: its member layers build on whichever replica comes first; the others
  // must not compute with initial weights meanwhile (the values reach a layer before it is
  // published as built).
  TwoDense sa;
  const tf::Tensor x5 = tf::random::normal({2, 5}, 0, 1, tf::float32, 6);
  const tf::Tensor want5 = sa(x5, false);
  const std::string path5 = tf::train::Checkpoint({{"model", sa}}).save(dir / "sub");
  std::optional<TwoDense> sb;
  {
    auto scope = strategy.scope();
    sb.emplace();
  }
  const auto sub_status = tf::train::Checkpoint({{"model", *sb}}).restore(path5);
  const auto outs = strategy.run([&] { return (*sb)(x5, false); });
  for (const auto& v : outs.values()) tf::testing::check_close(v, want5, 0, 0);
  sub_status.assert_consumed();
}

TEST_CASE("safetensors: two threads saving to one path each write a whole file", "[keras][cpu]") {
  // Every save writes its own temporary file (they shared one per process before: interleaved
  // writes, failed renames and files that mixed both models' tensors).
  namespace K = tf::keras;
  TempDir dir;
  const std::string path = dir / "w.safetensors";
  std::vector<K::Sequential> models;
  for (float v : {1.0f, 2.0f}) {
    auto m = K::Sequential({K::layers::Dense(8), K::layers::Dense(8), K::layers::Dense(8)});
    (void)m(tf::zeros({1, 8}), false);
    for (auto& w : m.variables()) w.assign(tf::fill(w.shape(), tf::Tensor(v)));
    models.push_back(m);
  }
  std::vector<int> failures(2, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 30; ++round) {
        try {
          models[t].save_weights(path);
        } catch (const tf::Error&) {
          ++failures[t];
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == std::vector<int>{0, 0});
  auto loaded = K::Sequential({K::layers::Dense(8), K::layers::Dense(8), K::layers::Dense(8)});
  (void)loaded(tf::zeros({1, 8}), false);
  loaded.load_weights(path);
  std::set<float> values;
  for (const auto& w : loaded.variables())
    for (float v : w.value().numpy<float>()) values.insert(v);
  CHECK(values.size() == 1);  // one model's tensors, not a mix
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("checkpoint: optimizer slots that nothing can take are unused", "[keras][cpu]") {
  TempDir dir;
  const std::string path = save_adam_checkpoint(dir / "ckpt");

  // An optimizer without Adam's slots: m and v can never be restored.
  TinyModel a;
  opt::SGD sgd(0.1);
  tf::train::Checkpoint into_sgd({{"model", a}, {"optimizer", sgd}});
  auto status = into_sgd.restore(path);
  status.assert_existing_objects_matched();
  // (In the file's order: by data offset.)
  CHECK(status.unused == std::vector<std::string>{
                             "optimizer/model/dense/bias/m", "optimizer/model/dense/bias/v",
                             "optimizer/model/dense/kernel/m", "optimizer/model/dense/kernel/v"});
  TF_REQUIRE_THROWS_CONTAINING(status.assert_consumed(), tf::FailedPreconditionError,
                               "optimizer/model/dense/kernel/m");

  // The slots of a variable this checkpoint's model does not have.
  struct KernelOnly final : tf::keras::Trackable {
    tf::Variable kernel{tf::constant({{0.0f, 0.0f}, {0.0f, 0.0f}}), "dense/kernel"};
    std::vector<std::pair<std::string, tf::Variable>> tracked_variables() const override {
      return {{"dense/kernel", kernel}};
    }
  };
  KernelOnly b;
  opt::Adam adam_b(0.05);
  tf::train::Checkpoint partial({{"model", b}, {"optimizer", adam_b}});
  auto s2 = partial.restore(path);
  CHECK(s2.unused == std::vector<std::string>{"model/dense/bias", "optimizer/model/dense/bias/m",
                                              "optimizer/model/dense/bias/v"});
  TF_REQUIRE_THROWS_CONTAINING(s2.assert_consumed(), tf::FailedPreconditionError,
                               "optimizer/model/dense/bias/m");
  // The kernel's slots wait for adam_b's first step, legitimately.
  adam_b.build({b.kernel});
  // m after Adam's one step: (1 - beta_1) g, with g the saved kernel [[1, 2], [3, 4]].
  tf::testing::check_values(adam_b.slots()[0].second[0].value(), {0.1, 0.2, 0.3, 0.4}, 1e-6, 1e-7);
}

TEST_CASE("checkpoint: a wrong-shaped deferred slot fails every step and changes nothing",
          "[keras][cpu]") {
  TempDir dir;
  const std::string path = save_adam_checkpoint(dir / "ckpt");
  auto tensors = st::load_file(path + ".safetensors");
  for (auto& [n, t] : tensors)
    if (n == "optimizer/model/dense/kernel/m") t = tf::zeros({3});
  st::save_file(path + ".safetensors", tensors);

  TinyModel fresh;
  opt::Adam fresh_adam(0.05);
  tf::train::Checkpoint restored({{"model", fresh}, {"optimizer", fresh_adam}});
  restored.restore(path);
  const std::vector<tf::Tensor> grads = {fresh.kernel.value(), fresh.bias.value()};
  // The retry used to succeed with m at zeros and the slots renamed "dense/kernel_1/m".
  for (int attempt = 0; attempt < 2; ++attempt)
    TF_REQUIRE_THROWS_CONTAINING(fresh_adam.apply_gradients(grads, fresh.vars()),
                                 tf::InvalidArgumentError,
                                 "slot 'dense/kernel/m' has shape (3,) and dtype float32");
  CHECK(fresh_adam.slots().empty());
  CHECK(fresh_adam.iterations().value().item<int64_t>() == 1);
  for (const auto& [name, v] : fresh_adam.tracked_variables())
    CHECK(name.find("_1") == std::string::npos);
}

TEST_CASE(
    "checkpoint: a CheckpointManager name with a folder is recorded relative to the directory",
    "[keras][cpu]") {
  TempDir dir;
  tf::Variable v(tf::constant(1.0f), "v");
  tf::train::Checkpoint ckpt({{"v", v}});
  {
    tf::train::CheckpointManager manager(ckpt, dir.path().string(), 2, "sub/ckpt");
    for (int i = 0; i < 3; ++i) manager.save();
    CHECK(manager.latest_checkpoint() == dir / "sub/ckpt-3");
  }
  // The index used to record only "ckpt-3", which names no file of the directory.
  const std::string index = read_bytes(dir / "checkpoint");
  CHECK(index.find("model_checkpoint_path: \"sub/ckpt-3\"") != std::string::npos);
  CHECK(index.find("all_model_checkpoint_paths: \"sub/ckpt-2\"") != std::string::npos);
  CHECK(tf::train::latest_checkpoint(dir.path().string()) == dir / "sub/ckpt-3");

  // A new manager finds them, restores the latest and keeps deleting beyond max_to_keep.
  tf::train::CheckpointManager again(ckpt, dir.path().string(), 2, "sub/ckpt");
  CHECK(again.checkpoints() == std::vector<std::string>{dir / "sub/ckpt-2", dir / "sub/ckpt-3"});
  CHECK(again.restore_or_initialize() == dir / "sub/ckpt-3");
  again.save();
  again.save();
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir.path() / "sub"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"ckpt-4.safetensors", "ckpt-5.safetensors"});
}

TEST_CASE("checkpoint: a named pipe or a directory in place of a file is an error and not a hang",
          "[keras][cpu]") {
  TempDir dir;
  const std::string fifo = dir / "pipe.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // Opening the pipe used to wait forever for a writer.
  TF_REQUIRE_THROWS_CONTAINING(st::Reader{fifo}, tf::InvalidArgumentError,
                               "'" + fifo + "' is not a regular file (a named pipe)");
  tf::Variable v(tf::zeros({2}), "v");
  TF_REQUIRE_THROWS_CONTAINING(st::load_variables(fifo, {{"v", v}}), tf::InvalidArgumentError,
                               "a named pipe");
  TF_REQUIRE_THROWS_CONTAINING(st::Reader{dir.path().string()}, tf::InvalidArgumentError,
                               "is not a regular file (a directory)");

  // The manager's index file as a named pipe.
  const std::string run = dir / "run";
  fs::create_directories(run);
  REQUIRE(::mkfifo((run + "/checkpoint").c_str(), 0644) == 0);
  TF_REQUIRE_THROWS_CONTAINING(
      tf::train::latest_checkpoint(run), tf::InvalidArgumentError,
      "[latest_checkpoint] the checkpoint index '" + run + "/checkpoint' is not a regular file");
  tf::train::Checkpoint ckpt({{"v", v}});
  TF_REQUIRE_THROWS_CONTAINING(tf::train::CheckpointManager(ckpt, run), tf::InvalidArgumentError,
                               "[CheckpointManager] the checkpoint index");
}

TEST_CASE("safetensors: messages never quote the header and cut and escape names from the file",
          "[keras][cpu]") {
  TempDir dir;
  auto message = [](const std::string& path) {
    try {
      st::Reader r(path);
    } catch (const tf::InvalidArgumentError& e) {
      return std::string(e.what());
    }
    FAIL("no InvalidArgumentError for " << path);
    return std::string();
  };
  // A 1 MB string then a control character: nlohmann's message quoted all of it ("last read").
  const std::string long_json = dir / "long.safetensors";
  write_bytes(long_json, make_file("{\"" + std::string(1 << 20, 'A') + "\x01\"}", ""));
  std::string m = message(long_json);
  CHECK(m.size() < 300);
  CHECK(m.find("the header is not valid JSON (parse error at byte") != std::string::npos);
  CHECK(m.find("AAAA") == std::string::npos);
  CHECK(m.find("last read") == std::string::npos);

  // A 100000-character tensor name with a bad entry: cut to 64 characters.
  const std::string long_name = dir / "long_name.safetensors";
  write_bytes(long_name, make_file("{\"" + std::string(100000, 'B') +
                                       "\":{\"dtype\":1,\"shape\":[],\"data_offsets\":[0,0]}}",
                                   ""));
  m = message(long_name);
  CHECK(m.size() < 300);
  CHECK(m.find("tensor '" + std::string(64, 'B') + "...': dtype is not a string") !=
        std::string::npos);

  // Terminal escapes and bytes outside ASCII in a name are escaped.
  const std::string escapes = dir / "escapes.safetensors";
  write_bytes(
      escapes,
      make_file("{\"\\u001b[31mEVIL\\u00ff\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":"
                "[0,0]}}",
                ""));
  m = message(escapes);
  CHECK(m.find("tensor '\\x1b[31mEVIL\\xc3\\xbf'") != std::string::npos);
  CHECK(m.find('\x1b') == std::string::npos);
  CHECK(st::detail::printable(std::string(70, 'x')) == std::string(64, 'x') + "...");
}

TEST_CASE("checkpoint: saving inside a traced function is a FailedPreconditionError",
          "[keras][cpu]") {
  TempDir dir;
  tf::Variable v(tf::constant(1.0f), "v");
  tf::train::Checkpoint ckpt({{"v", v}});
  tf::train::CheckpointManager manager(ckpt, dir.path().string(), 2);
  // save_counter's .item() inside the trace used to raise an InvalidArgumentError first.
  auto save = tf::function([&](const tf::Tensor& x) {
    ckpt.save(dir / "ckpt");
    return x;
  });
  TF_REQUIRE_THROWS_CONTAINING(
      save(tf::constant(1.0f)), tf::FailedPreconditionError,
      "[Checkpoint] cannot save '" + (dir / "ckpt") + "' inside a traced tf::function");
  auto managed = tf::function([&](const tf::Tensor& x) {
    manager.save();
    return x;
  });
  TF_REQUIRE_THROWS_CONTAINING(managed(tf::constant(1.0f)), tf::FailedPreconditionError,
                               "[CheckpointManager] cannot save");
  auto write = tf::function([&](const tf::Tensor& x) {
    ckpt.write(dir / "exact");
    return x;
  });
  TF_REQUIRE_THROWS_CONTAINING(write(tf::constant(1.0f)), tf::FailedPreconditionError,
                               "inside a traced tf::function");
  CHECK(ckpt.save_counter().value().item<int64_t>() == 0);
  CHECK(manager.checkpoints().empty());
}

TEST_CASE("safetensors: a zero size next to huge ones names the file and the tensor",
          "[keras][cpu]") {
  TempDir dir;
  const std::string path = dir / "zero.safetensors";
  const std::string big = std::to_string(uint64_t{1} << 39);
  write_bytes(path, make_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[0," + big + "," + big + "," +
                                  big + "],\"data_offsets\":[0,0]}}",
                              ""));
  // Used to be a [TensorShape] error about int64 that named neither.
  TF_REQUIRE_THROWS_CONTAINING(st::Reader{path}, tf::InvalidArgumentError,
                               "'" + path + "': tensor 't': shape is too large");
  // A zero size with ordinary ones reads as an empty tensor.
  write_bytes(path,
              make_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}", ""));
  CHECK(st::Reader(path).read("t").shape() == tf::TensorShape({0, 3}));
}

TEST_CASE("safetensors: a file whose name is 255 bytes long saves atomically", "[keras][cpu]") {
  TempDir dir;
  const std::string name = std::string(255 - 12, 's') + ".safetensors";
  const std::string path = dir / name;
  st::save_file(path, {{"t", tf::constant({1.0f, 2.0f})}});
  st::save_file(path, {{"t", tf::constant({3.0f, 4.0f})}});
  check_values(st::Reader(path).read("t"), {3, 4});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  CHECK(names == std::vector<std::string>{name});
}

// ---- metrics whose state is built at the first update ----

namespace {

// Multi-label targets and scores for the lazily built metrics, (4, 3) then (3, 3).
tf::Tensor m_yt1() {
  return tf::constant({{0.f, 1.f, 0.f}, {1.f, 0.f, 0.f}, {0.f, 0.f, 1.f}, {0.f, 1.f, 1.f}});
}
tf::Tensor m_yp1() {
  return tf::constant(
      {{0.2f, 0.7f, 0.1f}, {0.6f, 0.3f, 0.1f}, {0.3f, 0.4f, 0.3f}, {0.1f, 0.5f, 0.5f}});
}
tf::Tensor m_yt2() {
  return tf::constant({{1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}});
}
tf::Tensor m_yp2() {
  return tf::constant({{0.8f, 0.1f, 0.1f}, {0.4f, 0.35f, 0.25f}, {0.2f, 0.2f, 0.6f}});
}

// Writes {"m": saved} to a file of `dir` and restores it into {"m": fresh}.
tf::train::CheckpointLoadStatus metric_round_trip(const TempDir& dir,
                                                  const tf::keras::metrics::Metric& saved,
                                                  const tf::keras::metrics::Metric& fresh) {
  const std::string path = tf::train::Checkpoint({{"m", saved}}).write(dir / "metric");
  return tf::train::Checkpoint({{"m", fresh}}).restore(path);
}

// The restored state: the saved names, shapes and values.
void check_same_state(const tf::keras::metrics::Metric& got,
                      const tf::keras::metrics::Metric& want) {
  const auto g = got.tracked_variables(), w = want.tracked_variables();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    CHECK(g[i].first == w[i].first);
    CHECK(g[i].second.shape() == w[i].second.shape());
    tf::testing::check_close(g[i].second.value(), w[i].second.value(), 0, 0);
  }
}

}  // namespace

TEST_CASE("metric checkpoint: lazily built F-scores and R2 restore into fresh metrics",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    TempDir dir;
    // keras.metrics.F1Score(average="macro") without weights: 0.8222220540046692 after the
    // first batch, 0.7555554509162903 after both.
    tf::keras::metrics::F1Score f1("macro");
    f1.update_state(m_yt1(), m_yp1());
    tf::keras::metrics::F1Score fresh("macro");
    REQUIRE(fresh.variables().empty());
    const auto status = metric_round_trip(dir, f1, fresh);
    status.assert_consumed();
    CHECK(status.deferred.empty());
    check_same_state(fresh, f1);
    check_values(fresh.result(), {0.8222220540046692}, 2e-6);
    fresh.update_state(m_yt2(), m_yp2());
    check_values(fresh.result(), {0.7555554509162903}, 2e-6);
    // The restored state fixes the class count as the first update does.
    TF_REQUIRE_THROWS_CONTAINING(fresh.update_state(tf::ones({2, 4}), tf::ones({2, 4})),
                                 tf::InvalidArgumentError,
                                 "F1Score 'f1_score' was built for y_pred of shape "
                                 "(batch_size, 3)");

    // "micro" keeps scalars, which do not tell the class count: the next update fixes it.
    tf::keras::metrics::FBetaScore micro("micro", 2.0, 0.5);
    micro.update_state(m_yt1(), m_yp1());
    tf::keras::metrics::FBetaScore micro_fresh("micro", 2.0, 0.5);
    metric_round_trip(dir, micro, micro_fresh).assert_consumed();
    check_same_state(micro_fresh, micro);
    tf::testing::check_close(micro_fresh.result(), micro.result(), 0, 0);
    micro.update_state(m_yt2(), m_yp2());
    micro_fresh.update_state(m_yt2(), m_yp2());
    tf::testing::check_close(micro_fresh.result(), micro.result(), 0, 0);
    TF_REQUIRE_THROWS_CONTAINING(micro_fresh.update_state(tf::ones({2, 4}), tf::ones({2, 4})),
                                 tf::InvalidArgumentError, "(batch_size, 3)");

    // R2Score: num_samples is made by the constructor, the per-output sums by the build.
    tf::keras::metrics::R2Score r2(std::nullopt, 2);
    r2.update_state(m_yt1(), m_yp1());
    tf::keras::metrics::R2Score r2_fresh(std::nullopt, 2);
    REQUIRE(r2_fresh.variables().size() == 1);
    metric_round_trip(dir, r2, r2_fresh).assert_consumed();
    check_same_state(r2_fresh, r2);
    tf::testing::check_close(r2_fresh.result(), r2.result(), 0, 0);
    r2.update_state(m_yt2(), m_yp2());
    r2_fresh.update_state(m_yt2(), m_yp2());
    tf::testing::check_close(r2_fresh.result(), r2.result(), 0, 0);
  }
}

TEST_CASE("metric checkpoint: a lazily built multi_label AUC restores into a fresh one",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    TempDir dir;
    tf::keras::metrics::AUCOptions o;
    o.num_thresholds = 7;
    o.curve = "PR";
    o.multi_label = true;
    o.label_weights = {1.0, 2.0, 0.5};
    tf::keras::metrics::AUC auc(o);
    auc.update_state(m_yt1(), m_yp1());
    tf::keras::metrics::AUC fresh(o);
    TF_REQUIRE_THROWS_CONTAINING(fresh.result(), tf::FailedPreconditionError,
                                 "multi_label builds its state at the first update_state");
    metric_round_trip(dir, auc, fresh).assert_consumed();
    check_same_state(fresh, auc);
    CHECK(fresh.variables()[0].shape() == tf::TensorShape({7, 3}));
    tf::testing::check_close(fresh.result(), auc.result(), 0, 0);
    // A traced update continues from the restored state as the eager one does.
    auto step = tf::function([&](const tf::Tensor& y, const tf::Tensor& p) {
      fresh.update_state(y, p);
      return fresh.result();
    });
    step(m_yt2(), m_yp2());
    auc.update_state(m_yt2(), m_yp2());
    tf::testing::check_close(fresh.result(), auc.result(), 1e-6, 1e-7);
    TF_REQUIRE_THROWS_CONTAINING(fresh.update_state(tf::ones({2, 2}), tf::ones({2, 2})),
                                 tf::InvalidArgumentError, "3 label_weights");
  }
}

TEST_CASE("metric checkpoint: saved state that does not fit the metric is a clear error",
          "[keras][cpu]") {
  TempDir dir;
  tf::keras::metrics::F1Score macro("macro");
  macro.update_state(m_yt1(), m_yp1());
  const std::string path = tf::train::Checkpoint({{"m", macro}}).write(dir / "macro");
  // Scalar micro counts cannot take (3,) ones.
  tf::keras::metrics::F1Score micro("micro");
  tf::testing::require_error(
      [&] {
        tf::train::Checkpoint({{"m", micro}}).restore(path);
      },
      {"f1_score", "macro.safetensors", "true_positives", "(3,)", "with shape ()"});
  CHECK(micro.variables().empty());  // left unbuilt

  tf::keras::metrics::AUCOptions o;
  o.multi_label = true;
  o.num_thresholds = 5;
  tf::keras::metrics::AUC auc(o);
  auc.update_state(m_yt1(), m_yp1());
  const std::string auc_path = tf::train::Checkpoint({{"m", auc}}).write(dir / "auc");
  // Another num_thresholds, and label_weights for another number of labels.
  o.num_thresholds = 6;
  tf::keras::metrics::AUC other(o);
  tf::testing::require_error(
      [&] {
        tf::train::Checkpoint({{"m", other}}).restore(auc_path);
      },
      {"auc", "true_positives", "(5, 3)", "(6, 3)"});
  o.num_thresholds = 5;
  o.label_weights = {1.0, 1.0};
  tf::keras::metrics::AUC weighted(o);
  tf::testing::require_error(
      [&] {
        tf::train::Checkpoint({{"m", weighted}}).restore(auc_path);
      },
      {"auc", "2 label_weights", "3 labels"});
  CHECK(weighted.variables().empty());

  // A file without the metric's state leaves it unbuilt (nothing to restore, nothing missing).
  tf::Variable step(tf::constant(int64_t{3}), "step");
  const std::string other_path = tf::train::Checkpoint({{"step", step}}).write(dir / "step");
  tf::keras::metrics::F1Score unbuilt("macro");
  tf::train::Checkpoint({{"m", unbuilt}}).restore(other_path).assert_existing_objects_matched();
  CHECK(unbuilt.variables().empty());
  TF_REQUIRE_THROWS_CONTAINING(unbuilt.result(), tf::FailedPreconditionError,
                               "has no state before its first update_state");
}

TEST_CASE("metric checkpoint: mirrored metric state is saved as its total over the replicas",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  namespace M = tf::keras::metrics;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  TempDir dir;
  std::optional<M::Sum> sum;
  std::optional<M::Mean> mean;
  std::optional<M::TruePositives> tp;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    sum.emplace();
    mean.emplace();
    tp.emplace();
  }
  // Replica 0 sees {1, 2}, replica 1 sees {4}: Sum 7, Mean 7 / 3; true positives 1 + 2.
  const std::vector<tf::Tensor> values = {tf::constant({1.f, 2.f}), tf::constant({4.f})};
  const std::vector<tf::Tensor> labels = {tf::constant({1.f, 0.f}), tf::constant({1.f, 1.f})};
  const std::vector<tf::Tensor> preds = {tf::constant({0.9f, 0.2f}), tf::constant({0.8f, 0.7f})};
  for (int r = 0; r < 2; ++r) {
    tf::detail::ReplicaComponentScope replica(r);
    tf::DeviceScope place(devs[static_cast<size_t>(r)]);
    sum->update_state(values[static_cast<size_t>(r)]);
    mean->update_state(values[static_cast<size_t>(r)]);
    tp->update_state(labels[static_cast<size_t>(r)], preds[static_cast<size_t>(r)]);
  }
  check_values(sum->result(), {7.0});
  check_values(mean->result(), {7.0 / 3.0}, 1e-6);
  check_values(tp->result(), {3.0});
  const std::string path =
      tf::train::Checkpoint({{"sum", *sum}, {"mean", *mean}, {"tp", *tp}}).write(dir / "m");

  // The file holds the totals (what result() reads), not one replica's copy.
  std::map<std::string, tf::Tensor> saved;
  for (auto& [name, t] : tf::keras::safetensors::load_file(path + ".safetensors"))
    saved.emplace(name, t);
  check_values(saved.at("sum/total"), {7.0});
  check_values(saved.at("mean/count"), {3.0});
  check_values(saved.at("tp/accumulator"), {3.0});  // Keras' variable name

  // Restored into mirrored metrics: the same results (not once per copy), and updates go on.
  std::optional<M::Sum> sum2;
  std::optional<M::Mean> mean2;
  std::optional<M::TruePositives> tp2;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    sum2.emplace();
    mean2.emplace();
    tp2.emplace();
  }
  tf::train::Checkpoint({{"sum", *sum2}, {"mean", *mean2}, {"tp", *tp2}})
      .restore(path)
      .assert_consumed();
  check_values(sum2->result(), {7.0});
  check_values(mean2->result(), {7.0 / 3.0}, 1e-6);
  check_values(tp2->result(), {3.0});
  {
    tf::detail::ReplicaComponentScope replica(1);
    tf::DeviceScope place(devs[1]);
    sum2->update_state(tf::constant({2.f}));
  }
  check_values(sum2->result(), {9.0});

  // And into plain metrics: the totals.
  M::Sum plain_sum;
  M::Mean plain_mean;
  M::TruePositives plain_tp;
  tf::train::Checkpoint({{"sum", plain_sum}, {"mean", plain_mean}, {"tp", plain_tp}})
      .restore(path)
      .assert_consumed();
  check_values(plain_sum.result(), {7.0});
  check_values(plain_mean.result(), {7.0 / 3.0}, 1e-6);
  check_values(plain_tp.result(), {3.0});
}
