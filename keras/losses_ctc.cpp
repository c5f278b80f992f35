// Keras 3's CTC loss (keras/losses.h): tf::nn::ctc_loss on batch-major logits, blank and padding
// label 0, each label's length its count of non-zero entries.
#include <string>
#include <utility>

#include "core/check.h"
#include "keras/loss_config.h"
#include "keras/losses.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn_more.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"

namespace tapeflow::keras::losses {

Tensor ctc(const Tensor& y_true, const Tensor& y_pred) {
  const char* op = "ctc";
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op,
               "an input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(y_true.rank() == 2, op,
               "Targets `y_true` are expected to be a tensor of shape `(batch_size, max_length)` "
               "in integer format. Received: y_true.shape={}",
               y_true.shape().to_string());
  TF_CHECK_ARG(y_pred.rank() == 3, op,
               "Logits `y_pred` are expected to be a tensor of shape `(batch_size, max_length, "
               "num_classes)`. Received: y_pred.shape={}",
               y_pred.shape().to_string());
  return ::tapeflow::detail::naming_errors(op, [&] {
    const Tensor labels = cast(y_true, int32);  // Keras casts them (floats truncate)
    const Tensor label_length = reduce_sum(cast(not_equal(labels, 0), int32), -1);
    // Every sequence spans all the frames: each batch entry's length is y_pred's time size.
    const Tensor frames = gather(shape(y_pred, int32), constant(Tensor(1), int32));
    const Tensor logit_length = zeros_like(label_length) + frames;
    // float16 and bfloat16 compute in float32 (as Keras); float64 stays float64, where Keras
    // computes in float32.
    const DType d = y_pred.dtype();
    const bool half = d == float16 || d == bfloat16;
    const Tensor loss = nn::ctc_loss(labels, half ? cast(y_pred, float32) : y_pred, label_length,
                                     logit_length, /*logits_time_major=*/false, /*blank_index=*/0);
    return half ? cast(loss, d) : loss;
  });
}

namespace {
struct CtcLoss final : detail::ConfiguredLoss {
  Tensor call(const Tensor& t, const Tensor& p) const override { return ctc(t, p); }
};
}  // namespace

CTC::CTC(Reduction reduction, std::string name) {
  auto impl = std::make_shared<CtcLoss>();
  impl->name = std::move(name);
  impl->kind = "ctc";
  impl->reduction = reduction;
  impl_ = std::move(impl);
}

}  // namespace tapeflow::keras::losses
