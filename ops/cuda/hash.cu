// CUDA kernels of the hashing ops (ops/hash.h): one thread per output element (grid-stride),
// each running the CPU kernels' scalar code (ops/cpu/hash_math.h) compiled for the device, so
// both devices give the same bits.
#include "ops/cpu/hash_math.h"
#include "ops/cuda/common.cuh"
#include "ops/hash.h"

namespace tapeflow::prims {

namespace {

__global__ void hash_bucket_kernel(const int64_t* x, int64_t* y, int64_t n, uint64_t buckets,
                                   bool strong, uint64_t key0, uint64_t key1) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    unsigned char text[20];
    const auto len = static_cast<size_t>(hashing::decimal(x[i], text));
    const uint64_t h =
        strong ? hashing::siphash(key0, key1, text, len) : hashing::fingerprint64(text, len);
    y[i] = static_cast<int64_t>(h % buckets);
  }
}

// The inputs of a cross, by value (32 pointers and widths: 512 bytes of kernel parameters).
struct CrossInputs {
  const int64_t* data[HashCross::kMaxInputs];
  int64_t width[HashCross::kMaxInputs];
  int count;
};

__global__ void hash_cross_kernel(CrossInputs in, int64_t* y, int64_t n, int64_t width,
                                  uint64_t modulus, uint64_t key) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = e / width;
    int64_t j = e % width, idx[HashCross::kMaxInputs];
    for (int f = in.count - 1; f >= 0; --f) {
      idx[f] = j % in.width[f];
      j /= in.width[f];
    }
    uint64_t h = key;
    for (int f = 0; f < in.count; ++f)
      h = hashing::fingerprint_cat64(h,
                                     static_cast<uint64_t>(in.data[f][r * in.width[f] + idx[f]]));
    y[e] = static_cast<int64_t>(h % modulus);
  }
}

}  // namespace

void HashBucket::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  hash_bucket_kernel<<<cuda::grid_for(n, dev), cuda::kThreads, 0, detail::cuda::stream(dev)>>>(
      cuda::dptr<int64_t>(in[0]), cuda::dptr<int64_t>(out[0]), n,
      static_cast<uint64_t>(num_buckets), strong, key0, key1);
  detail::cuda::check_launch(name());
}

void HashCross::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  CrossInputs args{};
  args.count = static_cast<int>(in.size());
  for (size_t f = 0; f < in.size(); ++f) {
    args.data[f] = cuda::dptr<int64_t>(in[f]);
    args.width[f] = in[f].shape()[1];
  }
  const uint64_t modulus =
      num_buckets > 0 ? static_cast<uint64_t>(num_buckets) : uint64_t{0x7fffffffffffffff};
  hash_cross_kernel<<<cuda::grid_for(n, dev), cuda::kThreads, 0, detail::cuda::stream(dev)>>>(
      args, cuda::dptr<int64_t>(out[0]), n, out[0].shape()[1], modulus, hash_key);
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
