// Misuse of the core types is a tf::Error, never a crash, a read out of bounds or silent
// garbage: the undefined tensor's accessors, shape indices (negative ones count from the end, as
// in Python), float-to-integer reads, out-of-range C++ scalars, convert_to_tensor's inputs,
// DeviceScopes ended out of order, logical device limits, Variable updates, and freeing tensors
// once the host memory has run out.
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/primitive.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

TEST_CASE("the undefined tensor's accessors raise an error naming them", "[cpu]") {
  const tf::Tensor none;
  require_error([&] { (void)none.shape(); }, {"[Tensor::shape]", "undefined"});
  require_error([&] { (void)none.dtype(); }, {"[Tensor::dtype]", "undefined"});
  require_error([&] { (void)none.device(); }, {"[Tensor::device]"});
  require_error([&] { (void)none.placement(); }, {"[Tensor::placement]"});
  require_error([&] { (void)none.rank(); }, {"[Tensor::rank]"});
  require_error([&] { (void)none.num_elements(); }, {"[Tensor::num_elements]"});
  require_error([&] { (void)none.nbytes(); }, {"undefined"});
  require_error([&] { (void)none.raw_data(); }, {"[Tensor::raw_data]"});
  require_error([&] { (void)none.item<float>(); }, {"[item]", "undefined"});
  require_error([&] { (void)none.numpy<float>(); }, {"undefined"});
  // Where users meet it: the gradient of a source the target does not depend on.
  tf::Tensor x = tf::constant({1.0f, 2.0f}), unrelated = tf::constant({3.0f});
  tf::GradientTape tape;
  tape.watch(x);
  tape.watch(unrelated);
  const tf::Tensor y = tf::reduce_sum(x * x);
  const tf::Tensor g = tape.gradient(y, unrelated);
  CHECK_FALSE(g.defined());
  require_error([&] { (void)g.shape(); }, {"gradient of a source the target does not depend on"});
}

TEST_CASE("shape indices count from the end when negative and are range-checked", "[cpu]") {
  tf::TensorShape s{2, 3, 4};
  CHECK(s[-1] == 4);
  CHECK(s[-3] == 2);
  CHECK(s.dim(-2) == 3);
  s[-1] = 5;
  CHECK(s == tf::TensorShape({2, 3, 5}));
  require_error([&] { (void)s[3]; }, {"[TensorShape]", "index 3 is out of range", "(2, 3, 5)"});
  require_error([&] { (void)s[-4]; }, {"index -4 is out of range", "-3 to 2"});
  volatile int past_max_rank = tf::TensorShape::kMaxRank;  // not a constant: g++ would warn
  require_error([&] { s[past_max_rank] = 1; }, {"index 8"});
  const tf::TensorShape scalar;
  require_error([&] { (void)scalar[0]; }, {"index 0 is out of range for shape ()"});
  // x.shape()[-1], as Python's x.shape[-1].
  CHECK(tf::zeros({2, 7}).shape()[-1] == 7);
  // pop_back of a scalar and negative sizes other than None are refused.
  tf::TensorShape t;
  require_error([&] { t.pop_back(); }, {"pop_back of a scalar shape"});
  CHECK(t.rank() == 0);
  require_error([&] { t.push_back(-2); }, {"dimension -2 is negative"});
  t.push_back(tf::None);
  t.push_back(3);
  CHECK(t.to_string() == "(None, 3)");
  t.pop_back();
  CHECK(t.rank() == 1);
}

TEST_CASE("reading floats as integers saturates as tf::cast does", "[cpu]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {std::nanf(""), 1e30f, -1e30f, -1.5f, 2.7f, inf, -inf, 300.0f};
  const tf::Tensor x = tf::constant(v, {8});
  const std::vector<int32_t> i32 = x.numpy<int32_t>();
  CHECK(i32 == std::vector<int32_t>{0, INT32_MAX, INT32_MIN, -1, 2, INT32_MAX, INT32_MIN, 300});
  CHECK(i32 == tf::cast(x, tf::int32).numpy<int32_t>());
  const std::vector<int64_t> i64 = x.numpy<int64_t>();
  CHECK(i64 == std::vector<int64_t>{0, INT64_MAX, INT64_MIN, -1, 2, INT64_MAX, INT64_MIN, 300});
  CHECK(i64 == tf::cast(x, tf::int64).numpy<int64_t>());
  // Narrower than 32 bits: through int32, as cast to uint8.
  CHECK(x.numpy<uint8_t>() == tf::cast(x, tf::uint8).numpy<uint8_t>());
  CHECK(tf::constant(300.0f).item<uint8_t>() == 44);
  CHECK(tf::constant(std::nan("")).item<int>() == 0);
  CHECK(tf::constant(1e300).item<int64_t>() == INT64_MAX);
  CHECK(tf::constant(-7.9).item<int>() == -7);
}

TEST_CASE("a DType outside the listed ones is refused before any kernel runs", "[cpu]") {
  // DType is an aggregate: a cast integer makes one. It segfaulted in the first kernel that
  // switched on it (transpose) after factories had made "unknown" tensors.
  const tf::DType bad{static_cast<tf::DTypeId>(8)};
  require_error([&] { (void)tf::zeros({2, 3}, bad); }, {"[tensor]", "dtype id 8"});
  require_error([&] { (void)tf::cast(tf::ones({2}), bad); }, {"dtype id 8"});
  require_error([&] { (void)tf::eye(2, bad); }, {"dtype id 8"});
  require_error([&] { (void)tf::range(0, 3, 1, bad); }, {"dtype id 8"});
  require_error([&] { (void)tf::range(0.0, 3.0, 1.0, bad); }, {"dtype id 8"});
  require_error([&] { (void)tf::constant(2, bad); }, {"[constant]", "dtype id 8"});
  auto f = tf::function([&](const tf::Tensor& x) { return tf::cast(x, bad); });
  require_error([&] { (void)f(tf::ones({2})); }, {"dtype id 8"});
}

TEST_CASE("C++ scalars beyond int64 are refused", "[cpu]") {
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  require_error([&] { (void)tf::Tensor(big); },
                {"[Tensor]", "18446744073709551615 is beyond int64's range"});
  const uint64_t fits = uint64_t{1} << 62;
  CHECK(tf::Tensor(fits).item<int64_t>() == int64_t{1} << 62);
}

TEST_CASE("convert_to_tensor checks its shape, pointer and size", "[cpu]") {
  const int16_t i16[4] = {1, -2, 3, 4};
  require_error([&] { tf::convert_to_tensor(i16, {tf::None}); },
                {"[convert_to_tensor]", "(None,) has an unknown (None) dimension"});
  const float f[2] = {1, 2};
  require_error([&] { tf::convert_to_tensor(f, {tf::None, 2}); }, {"unknown (None) dimension"});
  require_error([&] { tf::convert_to_tensor(static_cast<const float*>(nullptr), {4}); },
                {"[convert_to_tensor]", "null pointer", "(4,)"});
  CHECK(tf::convert_to_tensor(static_cast<const float*>(nullptr), {0, 3}).shape() ==
        tf::TensorShape({0, 3}));
  // 2^40 bools would be staged on the host first: more than any machine here has.
  const bool b[2] = {true, false};
  TF_REQUIRE_THROWS_CONTAINING(tf::convert_to_tensor(b, {int64_t{1} << 40}),
                               tf::ResourceExhaustedError, "convert_to_tensor");
  check_values(tf::convert_to_tensor(i16, {2, 2}), {1, -2, 3, 4});
  check_values(tf::convert_to_tensor(b, {2}), {1, 0});
  require_error([] { tf::constant(std::vector<float>{1, 2, 3}, {tf::None}); },
                {"[constant]", "(None,) has an unknown (None) dimension"});
}

TEST_CASE("device scopes ended out of order leave no stale entry", "[cpu]") {
  REQUIRE_FALSE(tf::detail::scoped_device().has_value());
  std::optional<tf::DeviceScope> a, b;
  a.emplace("/cpu:0");
  b.emplace("/cpu:0");
  a.reset();  // out of order: logged, and a's entry removed
  CHECK(tf::detail::scoped_device().has_value());
  b.reset();
  CHECK_FALSE(tf::detail::scoped_device().has_value());
  {
    tf::DeviceScope in_order("/cpu:0");
    CHECK(tf::detail::scoped_device() == tf::Device{});
  }
  CHECK_FALSE(tf::detail::scoped_device().has_value());
}

TEST_CASE("logical device configurations are validated", "[cpu]") {
  const tf::config::PhysicalDevice cpu{"/physical_device:CPU:0", "CPU"};
  // Only CPU:0 exists (CPU:7 silently split CPU:0 before).
  require_error(
      [] { tf::config::set_logical_device_configuration({"/physical_device:CPU:7", "CPU"}, {{}}); },
      {"[set_logical_device_configuration]", "no physical device '/physical_device:CPU:7'"});
  require_error([&] { tf::config::set_logical_device_configuration(cpu, {{-5}}); },
                {"memory_limit -5 MB", "must be positive"});
  require_error(
      [&] { tf::config::set_logical_device_configuration(cpu, {{}, {int64_t{1} << 44}}); },
      {"logical device 1", "below 2^43 MB"});
}

TEST_CASE("variable updates check the delta and assignments refuse finished symbols", "[cpu]") {
  tf::Variable v(tf::zeros({3, 1}), "v");
  require_error([&] { v.assign_add(tf::ones({1, 3})); },
                {"[assign_add]", "variable 'v:0' has shape (3, 1)", "the delta has shape (1, 3)"});
  require_error([&] { v.assign_sub(tf::ones({3, 1}, tf::float64)); },
                {"[assign_sub]", "dtype float64"});
  require_error([&] { v.assign_add(tf::Tensor()); }, {"[assign_add]", "undefined"});
  tf::Variable w(tf::zeros({2, 3}), "w");
  require_error([&] { w.assign_add(tf::ones({3})); }, {"the delta has shape (3,)"});
  // A scalar is added to every element; a C++ value takes the variable's dtype.
  w.assign_add(2.0);
  w.assign_sub(tf::constant(0.5f));
  check_values(w.value(), {1.5, 1.5, 1.5, 1.5, 1.5, 1.5});
  check_values(v.value(), {0, 0, 0});  // the refused updates changed nothing
  // A C++ value an integer variable cannot hold exactly is refused, not truncated.
  tf::Variable n(tf::constant({1, 2}), "n");
  require_error([&] { n.assign_add(0.5); }, {"[assign_add]", "0.5", "int32"});
  require_error([&] { n.assign(3e9); }, {"[assign]", "3000000000", "int32"});
  n.assign_add(2.0);
  CHECK(n.value().numpy<int>() == std::vector<int>{3, 4});

  // A symbolic tensor kept from a trace has no storage once the trace ends.
  tf::Variable u(tf::zeros({2}), "u");
  tf::Tensor leaked;
  auto f = tf::function([&](const tf::Tensor& x) {
    leaked = x * 2.0f;
    return x;
  });
  f(tf::ones({2}));
  REQUIRE(leaked.is_symbolic());
  TF_REQUIRE_THROWS_CONTAINING(u.assign(leaked), tf::FailedPreconditionError,
                               "symbolic tensor from a finished trace");
  check_values(u.value(), {0, 0});
}

namespace {
// A primitive whose GPU kernel fails as a library call does: an error that names the call, not
// the op (its eval_cuda touches no GPU, so this runs everywhere).
struct FailingKernel final : tf::PrimitiveBase<FailingKernel> {
  bool named = false;
  const char* name() const override { return "failing_kernel"; }
  void infer(std::span<const tf::Tensor> in, std::span<tf::TensorMeta> out) const override {
    out[0] = {in[0].shape(), in[0].dtype()};
  }
  void eval_cpu(std::span<const tf::Tensor>, std::span<tf::Tensor>) const override {}
  void eval_cuda(std::span<const tf::Tensor>, std::span<tf::Tensor>) const override {
    if (named) TF_THROW(UnimplementedError, "other_op", "refused");
    throw tf::ResourceExhaustedError("cuDNN call cudnnFoo failed with status 2000: BAD_PARAM");
  }
};
}  // namespace

TEST_CASE("a GPU kernel's library error names the op, with its type kept", "[cpu]") {
  const tf::Tensor x = tf::zeros({2});
  std::array<tf::Tensor, 1> out{tf::zeros({2})};
  FailingKernel k;
  const tf::Device gpu{tf::DeviceType::GPU, 0};
  TF_REQUIRE_THROWS_CONTAINING(tf::detail::run_kernel(k, gpu, {&x, 1}, out),
                               tf::ResourceExhaustedError,
                               "[failing_kernel] cuDNN call cudnnFoo failed with status 2000");
  // A message that names an op already is left as it is.
  k.named = true;
  try {
    tf::detail::run_kernel(k, gpu, {&x, 1}, out);
    FAIL("no error");
  } catch (const tf::UnimplementedError& e) {
    CHECK(std::string(e.what()) == "[other_op] refused");
  }
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST_CASE("tensors freed after the host memory ran out are freed without an abort", "[cpu]") {
  // The caching allocator's free lists grow as tensors die; with no memory left that growth
  // failed with std::bad_alloc inside a tensor destructor (std::terminate). A cap on this
  // process's address space (not under AddressSanitizer or ThreadSanitizer, whose shadow
  // memory needs more) makes the memory run out for real.
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  REQUIRE(pages > 0);
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_AS, &old) == 0);
  const uint64_t cap = pages * 4096 + (uint64_t{256} << 20);
  if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur <= cap) {
    WARN("skipped: the address space is already capped");
    return;
  }
  tf::cpu_allocator().release_cached_memory();
  rlimit lower = old;
  lower.rlim_cur = cap;
  REQUIRE(setrlimit(RLIMIT_AS, &lower) == 0);
  bool exhausted = false;
  {
    std::vector<tf::Tensor> held;
    held.reserve(1 << 20);  // no growth of this vector while memory runs out
    try {
      for (int i = 0; i < (1 << 20); ++i) held.push_back(tf::zeros({4096}));
    } catch (const tf::ResourceExhaustedError&) {
      exhausted = true;
    } catch (const std::bad_alloc&) {  // a tensor handle, not its buffer
      exhausted = true;
    }
  }  // every tensor is freed here, while the free lists have no room left to grow
  REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
  tf::cpu_allocator().release_cached_memory();
  CHECK(exhausted);
  check_values(tf::zeros({3}) + 1.0f, {1, 1, 1});  // the allocator still works
}
#endif

TEST_CASE("temporary files of atomic writes are unique to the writer and the write", "[cpu]") {
  // Workers on several hosts or in containers (each with pid 1, say) may write into one shared
  // folder: the name holds the host, the PID namespace and the pid, and a random token.
  const std::string tag = tapeflow::detail::temporary_writer_tag();
  CHECK(tag.size() > std::to_string(::getpid()).size() + 2);
  CHECK(tag.substr(tag.size() - std::to_string(::getpid()).size()) == std::to_string(::getpid()));
  const std::string a = tapeflow::detail::temporary_path_for("/some/folder/weights.safetensors");
  const std::string b = tapeflow::detail::temporary_path_for("/some/folder/weights.safetensors");
  CHECK(a != b);
  CHECK(a.rfind("/some/folder/weights.safetensors.tmp-" + tag + "-", 0) == 0);
  // Another host's file is never stale here, whatever its pid; a live writer's is not either.
  CHECK_FALSE(tapeflow::detail::is_stale_temporary("w.tmp-otherhost-1-999999999-0123abcd"));
  CHECK_FALSE(tapeflow::detail::is_stale_temporary(std::filesystem::path(a).filename().string()));
  CHECK_FALSE(tapeflow::detail::is_stale_temporary("w.safetensors"));
}
