// Neural-network ops: activations, softmax and losses (composites of primitives), convolution
// and pooling (NHWC inputs, HWIO filters, "SAME" or "VALID" padding, as TF).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::nn {

Tensor relu(const Tensor& features);
Tensor softmax(const Tensor& logits, int axis = -1);
Tensor log_softmax(const Tensor& logits, int axis = -1);
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// labels: int32/int64 class indices of logits' leading shape; one loss per example.
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// strides: 1, 2 or 4 values as TF (a single value applies to both spatial dimensions).
Tensor conv2d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations = {1});
Tensor max_pool2d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding);
Tensor avg_pool2d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding);
// Zeroes elements with probability rate and scales the rest by 1 / (1 - rate).
Tensor dropout(const Tensor& x, double rate, std::optional<int64_t> seed = std::nullopt);
Tensor bias_add(const Tensor& value, const Tensor& bias);

}  // namespace tapeflow::nn
