#include "ops/space_batch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "core/check.h"
#include "ops/movement.h"
#include "ops/nn.h"

namespace tapeflow {

namespace {

// The checks both directions make; returns M.
int check_blocks(const char* op, const Tensor& input, const std::vector<int64_t>& block_shape,
                 const std::vector<std::pair<int64_t, int64_t>>& amounts, const char* what) {
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  const int m = static_cast<int>(block_shape.size());
  TF_CHECK_ARG(m >= 1, op, "block_shape must have at least one entry");
  TF_CHECK_ARG(amounts.size() == block_shape.size(), op,
               "{} must have one pair per entry of block_shape [{}], got {}", what,
               fmt::join(block_shape, ", "), amounts.size());
  const TensorShape& s = input.shape();
  TF_CHECK_ARG(s.rank() >= 1 + m, op,
               "the input (shape {}) needs a batch dimension and {} block dimension(s)",
               s.to_string(), m);
  for (int i = 0; i < m; ++i) {
    TF_CHECK_ARG(block_shape[static_cast<size_t>(i)] >= 1, op,
                 "block_shape must be positive, got [{}]", fmt::join(block_shape, ", "));
    const auto [a, b] = amounts[static_cast<size_t>(i)];
    TF_CHECK_ARG(a >= 0 && b >= 0, op, "{}[{}] = ({}, {}) must be non-negative", what, i, a, b);
  }
  for (int d = 1; d < s.rank(); ++d)
    TF_CHECK_ARG(s[d] != None, op,
                 "dimension {} of the input (shape {}) must be known (only the batch may be None)",
                 d, s.to_string());
  return m;
}

}  // namespace

Tensor space_to_batch_nd(const Tensor& input, const std::vector<int64_t>& block_shape,
                         const std::vector<std::pair<int64_t, int64_t>>& paddings) {
  const char* op = "space_to_batch_nd";
  const int m = check_blocks(op, input, block_shape, paddings, "paddings");
  const TensorShape& s = input.shape();
  const int r = s.rank();
  std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(r), {0, 0});
  std::vector<int64_t> padded(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    const size_t k = static_cast<size_t>(i);
    pads[k + 1] = paddings[k];
    padded[k] = s[i + 1] + paddings[k].first + paddings[k].second;
    TF_CHECK_ARG(padded[k] % block_shape[k] == 0, op,
                 "padded_shape[{}]={} is not divisible by block_shape[{}]={} (input shape {})", i,
                 padded[k], i, block_shape[k], s.to_string());
  }
  // [batch, p0 / b0, b0, ..., remaining] -> [b0, ..., batch, p0 / b0, ..., remaining].
  std::vector<int64_t> split{-1};
  for (int i = 0; i < m; ++i) {
    split.push_back(padded[static_cast<size_t>(i)] / block_shape[static_cast<size_t>(i)]);
    split.push_back(block_shape[static_cast<size_t>(i)]);
  }
  std::vector<int> perm;
  for (int i = 0; i < m; ++i) perm.push_back(2 + 2 * i);
  perm.push_back(0);
  for (int i = 0; i < m; ++i) perm.push_back(1 + 2 * i);
  std::vector<int64_t> merged{-1};
  for (int i = 0; i < m; ++i) merged.push_back(split[static_cast<size_t>(1 + 2 * i)]);
  for (int d = m + 1; d < r; ++d) {
    split.push_back(s[d]);
    perm.push_back(static_cast<int>(split.size()) - 1);
    merged.push_back(s[d]);
  }
  const Tensor t = reshape(pad(input, pads), TensorShape(split));
  return reshape(transpose(t, perm), TensorShape(merged));
}

Tensor batch_to_space_nd(const Tensor& input, const std::vector<int64_t>& block_shape,
                         const std::vector<std::pair<int64_t, int64_t>>& crops) {
  const char* op = "batch_to_space_nd";
  const int m = check_blocks(op, input, block_shape, crops, "crops");
  const TensorShape& s = input.shape();
  const int r = s.rank();
  const int64_t blocks =
      std::accumulate(block_shape.begin(), block_shape.end(), int64_t{1}, std::multiplies<>());
  TF_CHECK_ARG(s[0] == None || s[0] % blocks == 0, op,
               "Input batch dimension ({}) is not divisible by product of block sizes ({})", s[0],
               blocks);
  // [b0, ..., batch', s0, ..., remaining] -> [batch', s0, b0, ..., remaining].
  std::vector<int64_t> split(block_shape.begin(), block_shape.end());
  split.push_back(-1);
  for (int d = 1; d < r; ++d) split.push_back(s[d]);
  std::vector<int> perm{m};
  std::vector<int64_t> merged{-1}, begin(static_cast<size_t>(r), 0), size(begin.size(), -1);
  for (int i = 0; i < m; ++i) {
    const size_t k = static_cast<size_t>(i);
    perm.push_back(m + 1 + i);
    perm.push_back(i);
    const int64_t full = s[i + 1] * block_shape[k];
    merged.push_back(full);
    TF_CHECK_ARG(crops[k].first + crops[k].second <= full, op,
                 "crops[{}] = ({}, {}) exceed dimension {} of the result, {} (input shape {})", i,
                 crops[k].first, crops[k].second, i + 1, full, s.to_string());
    begin[k + 1] = crops[k].first;
    size[k + 1] = full - crops[k].first - crops[k].second;
  }
  for (int d = m + 1; d < r; ++d) {
    perm.push_back(d + m);
    merged.push_back(s[d]);
  }
  const Tensor t =
      reshape(transpose(reshape(input, TensorShape(split)), perm), TensorShape(merged));
  bool cropped = false;
  for (const auto& [a, b] : crops) cropped |= a > 0 || b > 0;
  return cropped ? slice(t, begin, size) : t;
}

namespace nn {

Tensor atrous_conv2d(const Tensor& value, const Tensor& filters, int rate,
                     const std::string& padding) {
  TF_CHECK_ARG(rate >= 1, "atrous_conv2d", "rate must be positive, got {}", rate);
  return conv2d(value, filters, std::vector<int>{1}, padding, std::vector<int>{rate});
}

Tensor atrous_conv2d_transpose(const Tensor& value, const Tensor& filters,
                               const TensorShape& output_shape, int rate,
                               const std::string& padding) {
  TF_CHECK_ARG(rate >= 1, "atrous_conv2d_transpose", "rate must be positive, got {}", rate);
  return conv2d_transpose(value, filters, output_shape, std::vector<int>{1}, padding,
                          std::vector<int>{rate});
}

}  // namespace nn

}  // namespace tapeflow
