// Frontends, shape rules and (empty) gradients of the hashing ops (ops/hash.h).
#include "ops/hash.h"

#include <fmt/format.h>

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/unary.h"

namespace tapeflow {

namespace prims {

void HashBucket::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(in.size() == 1 && in[0].dtype() == int64, name(),
               "expects one int64 tensor (the frontend casts), got {} inputs", in.size());
  out[0] = {in[0].shape(), int64};
}

std::string HashBucket::attributes() const {
  if (!strong) return fmt::format("num_buckets={}", num_buckets);
  return fmt::format("num_buckets={}, key=[{}, {}]", num_buckets, key0, key1);
}

uint32_t HashBucket::vjp_saves() const {
  return 0;
}

std::vector<Tensor> HashBucket::vjp(std::span<const Tensor>, std::span<const Tensor>,
                                    std::span<const int> argnums, std::span<const Tensor>) const {
  return std::vector<Tensor>(argnums.size());
}

void HashCross::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  int64_t batch = None, width = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorShape& s = in[i].shape();
    TF_CHECK_ARG(in[i].dtype() == int64 && s.rank() == 2, name(),
                 "expects int64 inputs of shape (batch, width), got {} {} at input {}",
                 dtype_name(in[i].dtype()), s.to_string(), i);
    if (s[0] != None) {
      TF_CHECK_ARG(batch == None || batch == s[0], name(),
                   "every input needs the same batch size, got {} and {} (input {}, shape {})",
                   batch, s[0], i, s.to_string());
      batch = s[0];
    }
    width = (width == None || s[1] == None) ? None : width * s[1];
  }
  out[0] = {TensorShape({batch, width}), int64};
}

std::string HashCross::attributes() const {
  return fmt::format("num_buckets={}, hash_key={}", num_buckets, hash_key);
}

uint32_t HashCross::vjp_saves() const {
  return 0;
}

std::vector<Tensor> HashCross::vjp(std::span<const Tensor>, std::span<const Tensor>,
                                   std::span<const int> argnums, std::span<const Tensor>) const {
  return std::vector<Tensor>(argnums.size());
}

}  // namespace prims

namespace {

Tensor hash_bucket(const char* op, const Tensor& input, int64_t num_buckets, bool strong,
                   uint64_t key0, uint64_t key1) {
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  const DType d = input.dtype();
  TF_CHECK_ARG(d == int32 || d == int64 || d == uint8, op,
               "hashes the decimal text of int32, int64 or uint8 values (tapeflow has no string "
               "tensors), got a {} tensor of shape {}; cast it first",
               dtype_name(d), input.shape().to_string());
  TF_CHECK_ARG(num_buckets >= 1, op, "num_buckets must be >= 1, got {}", num_buckets);
  const Tensor x = d == int64 ? input : cast(input, int64);
  return detail::dispatch(prims::HashBucket(num_buckets, strong, key0, key1), {x});
}

}  // namespace

namespace strings {

Tensor to_hash_bucket_fast(const Tensor& input, int64_t num_buckets) {
  return hash_bucket("to_hash_bucket_fast", input, num_buckets, false, 0, 0);
}

Tensor to_hash_bucket_strong(const Tensor& input, int64_t num_buckets,
                             const std::array<int64_t, 2>& key) {
  return hash_bucket("to_hash_bucket_strong", input, num_buckets, true,
                     static_cast<uint64_t>(key[0]), static_cast<uint64_t>(key[1]));
}

}  // namespace strings

namespace sparse {

Tensor cross_hashed(const std::vector<Tensor>& inputs, int64_t num_buckets, int64_t hash_key) {
  const char* op = "cross_hashed";
  TF_CHECK_ARG(!inputs.empty() && inputs.size() <= prims::HashCross::kMaxInputs, op,
               "takes 1 to {} inputs, got {}", prims::HashCross::kMaxInputs, inputs.size());
  TF_CHECK_ARG(num_buckets >= 0, op, "num_buckets must be >= 0 (0: no bucketing), got {}",
               num_buckets);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    TF_CHECK_ARG(t.defined(), op, "input {} is an undefined tensor (TF's None)", i);
    TF_CHECK_ARG(t.dtype() == int32 || t.dtype() == int64, op,
                 "takes int32 or int64 features (tapeflow has no string tensors), got {} at "
                 "input {} (shape {})",
                 dtype_name(t.dtype()), i, t.shape().to_string());
    TF_CHECK_ARG(t.shape().rank() == 2, op,
                 "takes dense features of shape (batch, width), got shape {} at input {}",
                 t.shape().to_string(), i);
    xs.push_back(t.dtype() == int64 ? t : cast(t, int64));
  }
  return detail::dispatch(prims::HashCross(num_buckets, static_cast<uint64_t>(hash_key)),
                          std::span<const Tensor>(xs));
}

}  // namespace sparse

}  // namespace tapeflow
