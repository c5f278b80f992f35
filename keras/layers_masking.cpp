// Keras' Masking layer.
#include "keras/layers_masking.h"

#include <memory>
#include <utility>

#include "core/check.h"
#include "keras/serialization_access_sequence.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"

namespace tapeflow::keras {
namespace {

class MaskingImpl final : public detail::LayerImpl {
 public:
  MaskingImpl(double mask_value, std::string name)
      : LayerImpl("Masking", "masking", std::move(name)), mask_value_(mask_value) {}
  double mask_value() const { return mask_value_; }
  bool supports_masking() const override { return true; }
  Tensor compute_mask(const Tensor& x, const Tensor&) const override {
    return reduce_any(not_equal(x, Tensor(mask_value_)), -1);
  }

 protected:
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() < 2)
      incompatible(s, "expected ndim >= 2 (batch, ..., features): the mask reduces the last axis");
  }
  Tensor call(const Tensor& x, bool) override {
    const Tensor keep = reduce_any(not_equal(x, Tensor(mask_value_)), -1, true);
    return where(keep, x, zeros_like(x));
  }

 private:
  double mask_value_;
};

}  // namespace

std::optional<double> detail::layer_options::masking_value(const detail::LayerImpl& layer) {
  const auto* p = dynamic_cast<const MaskingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->mask_value();
}

namespace layers {

Masking::Masking(double mask_value, std::string name)
    : Layer(std::make_shared<MaskingImpl>(mask_value, std::move(name))) {}

double Masking::mask_value() const {
  auto* p = dynamic_cast<MaskingImpl*>(&impl());
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "Masking", "the layer is not a Masking layer");
  return p->mask_value();
}

}  // namespace layers
}  // namespace tapeflow::keras
