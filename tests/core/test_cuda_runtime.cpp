// The CUDA runtime layer: copies through pinned staging buffers, the caching allocator's statistics
// and its out-of-memory error. Every case needs a GPU and reports itself skipped without one.
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/host_to_device.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::has_gpu;

#define TF_REQUIRE_GPU()                                         \
  if (!has_gpu()) {                                              \
    WARN("skipped: no GPU on this machine");                     \
    return;                                                      \
  }

TEST_CASE("cuda: host to device round trip keeps every byte", "[cuda]") {
  TF_REQUIRE_GPU();
  const tf::Device gpu{tf::DeviceType::GPU, 0};
  // An empty tensor, odd sizes, and one of four whole 16 MiB staging chunks plus a 12-byte tail
  // (the two staging buffers taking turns).
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1001}, (int64_t{64} << 20) / 4 + 3}) {
    std::vector<int32_t> host(static_cast<size_t>(n));
    std::iota(host.begin(), host.end(), -7);
    tf::Tensor t = tf::detail::from_host(host.data(), tf::TensorShape{n}, gpu, false);
    CHECK(t.device() == "/device:GPU:0");
    CHECK(t.numpy<int32_t>() == host);
    // device -> device (same GPU) and back to the CPU through the Copy op.
    tf::Tensor c = tf::detail::copy_to(tf::identity(t), tf::Device{});
    CHECK(c.device() == "/device:CPU:0");
    CHECK(c.numpy<int32_t>() == host);
  }
}

TEST_CASE("cuda: asynchronous host to device copies keep every byte behind running kernels",
          "[cuda]") {
  TF_REQUIRE_GPU();
  // With TAPEFLOW_ASYNC_HOST_TO_DEVICE a copy returns once its DMA is queued: the staging
  // buffers are reused while earlier DMAs wait behind kernels, the sources are freed at once,
  // and a device-to-host read may follow. Every value must still arrive.
  struct Restore {
    bool was = tf::detail::async_host_to_device();
    ~Restore() { tf::detail::set_async_host_to_device(was); }
  } restore;
  tf::detail::set_async_host_to_device(true);
  const tf::Device gpu{tf::DeviceType::GPU, 0};
  tf::DeviceScope scope("/GPU:0");
  const tf::Tensor big = tf::random::normal({2048, 2048}, 0, 1, tf::float32, 3);
  std::vector<tf::Tensor> copies;
  std::vector<std::vector<int32_t>> wants;
  for (int i = 0; i < 40; ++i) {
    if (i % 10 == 0) (void)tf::matmul(big, big);  // keeps the stream busy
    // Small copies, and every tenth one of three 16 MiB chunks and a tail.
    const int64_t n = i % 10 == 5 ? (int64_t{48} << 20) / 4 + 5 : 1000 + i;
    std::vector<int32_t> host(static_cast<size_t>(n));
    std::iota(host.begin(), host.end(), i * 7);
    copies.push_back(tf::detail::from_host(host.data(), tf::TensorShape{n}, gpu, false));
    wants.push_back(std::move(host));  // the source may go: the copy is staged
    if (i % 13 == 12) CHECK(copies.back().numpy<int32_t>() == wants.back());
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    INFO("copy " << i);
    CHECK(tf::reduce_sum(tf::cast(copies[i], tf::int64)).item<int64_t>() ==
          std::accumulate(wants[i].begin(), wants[i].end(), int64_t{0}));
    CHECK(copies[i].numpy<int32_t>() == wants[i]);
  }
}

TEST_CASE("cuda: bool and half tensors survive the copies", "[cuda]") {
  TF_REQUIRE_GPU();
  tf::DeviceScope scope("/GPU:0");
  tf::Tensor b = tf::constant(std::vector<bool>{true, false, true}, {3});
  CHECK(b.device() == "/device:GPU:0");
  CHECK(b.numpy<bool>() == std::vector<bool>{true, false, true});
  tf::Tensor h = tf::constant(tf::constant(std::vector<double>{1.5, -2.25, 65504}), tf::float16);
  CHECK(h.device() == "/device:GPU:0");
  tf::testing::check_values(h, {1.5, -2.25, 65504}, 0, 0);
}

TEST_CASE("cuda: the caching allocator reuses freed blocks and counts them", "[cuda]") {
  TF_REQUIRE_GPU();
  const tf::Device gpu{tf::DeviceType::GPU, 0};
  tf::Allocator& a = tf::allocator_for(gpu);
  const auto before = a.stats();
  {
    tf::Tensor t = tf::detail::empty(tf::TensorShape{1 << 20}, tf::float32, gpu);
    CHECK(a.stats().bytes_in_use == before.bytes_in_use + (4 << 20));
    CHECK(a.stats().peak_bytes_in_use >= before.bytes_in_use + (4 << 20));
  }
  const auto freed = a.stats();
  CHECK(freed.bytes_in_use == before.bytes_in_use);
  CHECK(freed.bytes_cached >= (4 << 20));
  {
    tf::Tensor t = tf::detail::empty(tf::TensorShape{1 << 20}, tf::float32, gpu);
    CHECK(a.stats().num_cache_hits == freed.num_cache_hits + 1);
  }
  a.release_cached_memory();
  CHECK(a.stats().bytes_cached == 0);
}

TEST_CASE("cuda: running out of device memory is a ResourceExhaustedError", "[cuda]") {
  TF_REQUIRE_GPU();
  const tf::Device gpu{tf::DeviceType::GPU, 0};
  // 64 TiB: more than any GPU has.
  TF_REQUIRE_THROWS_CONTAINING(tf::detail::empty(tf::TensorShape{int64_t{16} << 40}, tf::float32, gpu),
                               tf::ResourceExhaustedError, "requested 70368744177664 bytes");
  // The allocator still works afterwards.
  tf::Tensor t = tf::detail::empty(tf::TensorShape{16}, tf::float32, gpu);
  CHECK(t.num_elements() == 16);
}
