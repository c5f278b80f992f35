// CPU kernels of the hashing ops (ops/hash.h): one scalar hash per element
// (ops/cpu/hash_math.h), split over the thread pool.
#include "ops/hash.h"

#include <vector>

#include "core/parallel.h"
#include "ops/cpu/hash_math.h"

namespace tapeflow::prims {

void HashBucket::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  const int64_t* x = in[0].data<int64_t>();
  int64_t* y = out[0].data<int64_t>();
  const auto buckets = static_cast<uint64_t>(num_buckets);
  detail::parallel_for(n, 2048, [&](int64_t lo, int64_t hi) {
    unsigned char text[20];
    for (int64_t i = lo; i < hi; ++i) {
      const auto len = static_cast<size_t>(hashing::decimal(x[i], text));
      const uint64_t h =
          strong ? hashing::siphash(key0, key1, text, len) : hashing::fingerprint64(text, len);
      y[i] = static_cast<int64_t>(h % buckets);
    }
  });
}

void HashCross::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t batch = out[0].shape()[0], width = out[0].shape()[1];
  const size_t k = in.size();
  std::vector<const int64_t*> data(k);
  std::vector<int64_t> widths(k);
  for (size_t f = 0; f < k; ++f) {
    data[f] = in[f].data<int64_t>();
    widths[f] = in[f].shape()[1];
  }
  int64_t* y = out[0].data<int64_t>();
  const uint64_t modulus =
      num_buckets > 0 ? static_cast<uint64_t>(num_buckets) : uint64_t{0x7fffffffffffffff};
  detail::parallel_for(batch * width, 1024, [&](int64_t lo, int64_t hi) {
    for (int64_t e = lo; e < hi; ++e) {
      const int64_t r = e / width;
      // The combination's index per input, the first input's varying slowest.
      int64_t j = e % width, idx[kMaxInputs];
      for (size_t f = k; f-- > 0;) {
        idx[f] = j % widths[f];
        j /= widths[f];
      }
      uint64_t h = hash_key;
      for (size_t f = 0; f < k; ++f)
        h = hashing::fingerprint_cat64(h, static_cast<uint64_t>(data[f][r * widths[f] + idx[f]]));
      y[e] = static_cast<int64_t>(h % modulus);
    }
  });
}

}  // namespace tapeflow::prims
