// Hashing integers into buckets, the ops behind Keras' Hashing, HashedCrossing and
// IntegerLookup(oov_method="farmhash"). tapeflow has no string tensors, so the string ops of TF
// take integer tensors here and hash their decimal text, as TF's do after tf.strings.as_string:
//
//   tf::strings::to_hash_bucket_fast(ids, 1000)  ==  tf.strings.to_hash_bucket_fast(
//                                                        tf.strings.as_string(ids), 1000)
//
// Every value equals TF's (FarmHash Fingerprint64, SipHash-2-4 and FingerprintCat64; see
// ops/cpu/hash_math.h), eagerly and in traced functions (None dimensions too); the CUDA kernels
// run the CPU's scalar code (written 2026-12-06, not yet run on a GPU). The outputs are int64
// and carry no gradient (TF registers none).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

namespace strings {
// Fingerprint64(as_string(x)) % num_buckets for every element of an int32, int64 or uint8 tensor
// (num_buckets >= 1), as tf.strings.to_hash_bucket_fast. Same shape, int64. (TF's older
// to_hash_bucket uses another hash, which tapeflow does not offer.)
Tensor to_hash_bucket_fast(const Tensor& input, int64_t num_buckets);
// SipHash-2-4 of as_string(x) under the 128-bit key {key[0], key[1]} (TF's list of two ints, read
// as unsigned), modulo num_buckets, as tf.strings.to_hash_bucket_strong.
Tensor to_hash_bucket_strong(const Tensor& input, int64_t num_buckets,
                             const std::array<int64_t, 2>& key);
}  // namespace strings

namespace sparse {
// TF's default hash_key of cross_hashed (0xDECAFCAFFE).
inline constexpr int64_t kDefaultCrossHashKey = 0xDECAFCAFFE;
// tf.sparse.cross_hashed for dense integer features: inputs of shape (batch, width_i), int32 or
// int64 (int32 values read as int64), batch sizes equal. Row r of the result holds, for every
// combination of one value per input (the first input's index varying slowest, as TF's), the
// chained FingerprintCat64(... FingerprintCat64(hash_key, v_0) ..., v_k) modulo num_buckets
// (num_buckets = 0: modulo 2^63 - 1, TF's default). TF returns a SparseTensor whose rows are
// full for dense inputs; this is that tensor dense: (batch, width_0 * width_1 * ...), int64.
// At most 32 inputs.
Tensor cross_hashed(const std::vector<Tensor>& inputs, int64_t num_buckets = 0,
                    int64_t hash_key = kDefaultCrossHashKey);
}  // namespace sparse

namespace prims {

// to_hash_bucket_fast (strong = false) and to_hash_bucket_strong of an int64 tensor (the
// frontends cast the others first).
struct HashBucket final : PrimitiveBase<HashBucket> {
  int64_t num_buckets;
  bool strong;
  uint64_t key0, key1;
  HashBucket(int64_t n, bool s, uint64_t k0, uint64_t k1)
      : num_buckets(n), strong(s), key0(k0), key1(k1) {}
  const char* name() const override {
    return strong ? "to_hash_bucket_strong" : "to_hash_bucket_fast";
  }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool stops_gradients() const override { return true; }
  std::string attributes() const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

// cross_hashed of int64 (batch, width_i) inputs.
struct HashCross final : PrimitiveBase<HashCross> {
  static constexpr int kMaxInputs = 32;
  int64_t num_buckets;
  uint64_t hash_key;
  HashCross(int64_t n, uint64_t key) : num_buckets(n), hash_key(key) {}
  const char* name() const override { return "cross_hashed"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  bool stops_gradients() const override { return true; }
  std::string attributes() const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
};

}  // namespace prims

}  // namespace tapeflow
