// Keras' Hashing and HashedCrossing (keras/layers_hashing.h): composites of the hashing ops
// (ops/hash.h) and Keras' categorical encodings, so they run on every device and in traced
// functions.
#include "keras/layers_hashing.h"

#include "core/check.h"
#include "keras/categorical.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/hash.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace detail {
namespace {

std::string text(const std::vector<TensorShape>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i].to_string();
  return s + "]";
}

// ---- Hashing ----
class HashingImpl final : public LayerImpl {
 public:
  HashingImpl(int64_t num_bins, layers::HashingOptions o)
      : LayerImpl("Hashing", "hashing", o.name), num_bins_(num_bins), o_(std::move(o)) {
    const char* cls = "Hashing";
    TF_CHECK_ARG(num_bins > 0, cls,
                 "The `num_bins` for `Hashing` cannot be `None` or non-positive values. "
                 "Received: num_bins={}",
                 num_bins);
    check_output_mode(cls, o_.output_mode);
    TF_CHECK_ARG(o_.salt.size() <= 2, cls,
                 "The `salt` argument for `Hashing` can only be a tuple of size 2 integers, or a "
                 "single integer. Received: salt={} integers",
                 o_.salt.size());
  }
  int64_t num_bins() const { return num_bins_; }
  const layers::HashingOptions& options() const { return o_; }

 protected:
  bool casts_all_inputs() const override { return false; }
  bool autocast() const override { return false; }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    return encoded_shape(s, o_.output_mode, num_bins_);
  }
  Tensor call(const Tensor& x, bool) override {
    const DType d = x.dtype();
    TF_CHECK_ARG(d == int32 || d == int64 || d == uint8 || is_floating(d), name_.c_str(),
                 "layer \"{}\" (Hashing) hashes integer values (int32, int64, uint8; floating "
                 "values are truncated to int64), got {} (tapeflow has no string tensors)",
                 name_, dtype_name(d));
    int64_t bins = num_bins_;
    Tensor mask;
    if (o_.mask_value && num_bins_ > 1) {
      // Keras compares before its cast of floating values.
      bins -= 1;
      mask = is_floating(d) ? equal(x, static_cast<double>(*o_.mask_value))
                            : equal(cast(x, int64), *o_.mask_value);
    }
    const Tensor v = is_floating(d) ? cast(x, int64) : x;
    Tensor h = hash_to_bins(v, bins, o_.salt);
    if (mask.defined()) h = where(mask, zeros_like(h), h + int64_t{1});
    if (o_.output_mode == "int") return h;
    return encode_categorical(h, num_bins_, o_.output_mode, float32, Tensor(), name_, "Hashing");
  }

 private:
  int64_t num_bins_;
  layers::HashingOptions o_;
};

// ---- HashedCrossing ----
class HashedCrossingImpl final : public MergeImpl {
 public:
  HashedCrossingImpl(int64_t num_bins, std::string mode, std::string name)
      : MergeImpl("HashedCrossing", "hashed_crossing", std::move(name)),
        num_bins_(num_bins),
        mode_(std::move(mode)) {
    const char* cls = "HashedCrossing";
    TF_CHECK_ARG(num_bins > 0, cls, "num_bins must be positive, got {}", num_bins);
    TF_CHECK_ARG(mode_ == "int" || mode_ == "one_hot", cls,
                 "output_mode must be \"int\" or \"one_hot\", got \"{}\"", mode_);
  }
  int64_t num_bins() const { return num_bins_; }
  const std::string& mode() const { return mode_; }

  // Keras' checks: at least two inputs, all of one shape (), (batch,) or (batch, 1).
  TensorShape merged_shape(const std::vector<TensorShape>& shapes) const override {
    const std::string n = name();
    TF_CHECK_ARG(shapes.size() >= 2, n.c_str(),
                 "`HashedCrossing` should be called on at least two inputs. Received: inputs of "
                 "shapes {} (layer \"{}\")",
                 text(shapes), n);
    const TensorShape& first = shapes[0];
    TF_CHECK_ARG(first.rank() <= 1 || (first.rank() == 2 && first[1] == 1), n.c_str(),
                 "All `HashedCrossing` inputs should have shape `()`, `(batch_size)` or "
                 "`(batch_size, 1)`. Received: inputs of shapes {} (layer \"{}\")",
                 text(shapes), n);
    for (const TensorShape& s : shapes) {
      bool same = s.rank() == first.rank();
      for (int i = 0; same && i < s.rank(); ++i)
        same = s[i] == first[i] || s[i] == None || first[i] == None;
      TF_CHECK_ARG(same, n.c_str(),
                   "All `HashedCrossing` inputs should have equal shape. Received: inputs of "
                   "shapes {} (layer \"{}\")",
                   text(shapes), n);
    }
    if (mode_ == "int") return first;
    // A scalar crosses as a batch of one (Keras' one_hot of a scalar is (1, num_bins)).
    return TensorShape({first.rank() == 0 ? 1 : first[0], num_bins_});
  }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override {
    const std::string n = name();
    std::vector<Tensor> columns;
    for (const Tensor& x : inputs) {
      TF_CHECK_ARG(x.dtype() == int32 || x.dtype() == int64 || x.dtype() == uint8, n.c_str(),
                   "All `HashedCrossing` inputs should have an integer dtype (tapeflow has no "
                   "string tensors). Received: {} inputs of shapes {} (layer \"{}\")",
                   dtype_name(x.dtype()), x.shape().to_string(), n);
      columns.push_back(reshape(x.dtype() == uint8 ? cast(x, int64) : x, TensorShape({-1, 1})));
    }
    Tensor bins = sparse::cross_hashed(columns, num_bins_);
    const TensorShape& s = inputs[0].shape();
    if (s.rank() == 0)
      bins = reshape(bins, TensorShape(std::vector<int64_t>{}));
    else if (s.rank() == 1)
      bins = squeeze(bins, {1});
    if (mode_ == "int") return bins;
    return encode_categorical(s.rank() == 0 ? reshape(bins, TensorShape({1})) : bins, num_bins_,
                              "one_hot", float32, Tensor(), n, "HashedCrossing");
  }

 private:
  int64_t num_bins_;
  std::string mode_;
};

}  // namespace

Tensor hash_to_bins(const Tensor& values, int64_t bins, const std::vector<int64_t>& salt) {
  if (salt.empty()) return strings::to_hash_bucket_fast(values, bins);
  return strings::to_hash_bucket_strong(values, bins, {salt.front(), salt.back()});
}

}  // namespace detail

namespace layers {

Hashing::Hashing(int64_t num_bins, HashingOptions options)
    : Layer(std::make_shared<detail::HashingImpl>(num_bins, std::move(options))) {}

HashedCrossing::HashedCrossing(int64_t num_bins, std::string output_mode, std::string name)
    : Merge(std::make_shared<detail::HashedCrossingImpl>(num_bins, std::move(output_mode),
                                                         std::move(name))) {}

}  // namespace layers

namespace detail::layer_options {

std::optional<HashingConfig> hashing(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const HashingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return HashingConfig{p->num_bins(), p->options()};
}

std::optional<HashedCrossingConfig> hashed_crossing(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const HashedCrossingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return HashedCrossingConfig{p->num_bins(), p->mode()};
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
