#include "core/shape.h"

#include <ostream>

#include "core/check.h"

namespace tapeflow {

TensorShape::TensorShape(std::initializer_list<int64_t> dims)
    : TensorShape(std::span<const int64_t>(dims.begin(), dims.size())) {}

TensorShape::TensorShape(std::span<const int64_t> dims) {
  TF_CHECK_ARG(dims.size() <= kMaxRank, "TensorShape",
               "rank {} exceeds the maximum rank {}", dims.size(), kMaxRank);
  for (int64_t d : dims) {
    TF_CHECK_ARG(d >= -1, "TensorShape", "dimension {} is negative", d);
    dims_[rank_++] = d;
  }
  known_elements();
}

TensorShape::TensorShape(const std::vector<int>& dims) {
  TF_CHECK_ARG(dims.size() <= kMaxRank, "TensorShape",
               "rank {} exceeds the maximum rank {}", dims.size(), kMaxRank);
  for (int d : dims) {
    TF_CHECK_ARG(d >= -1, "TensorShape", "dimension {} is negative", d);
    dims_[rank_++] = d;
  }
  known_elements();
}

int64_t TensorShape::known_elements() const {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] == 0) zero = true;
    else if (dims_[i] > 0)
      TF_CHECK_ARG(!__builtin_mul_overflow(n, dims_[i], &n), "TensorShape",
                   "shape {} has more elements than an int64 can count", to_string());
  }
  return zero ? 0 : n;
}

void TensorShape::throw_index(int i) const {
  TF_THROW(InvalidArgumentError, "TensorShape",
           "dimension index {} is out of range for shape {} (rank {}: indices {} to {})", i,
           to_string(), rank_, -rank_, rank_ - 1);
}

void TensorShape::pop_back() {
  TF_CHECK_ARG(rank_ > 0, "TensorShape", "pop_back of a scalar shape ()");
  --rank_;
}

int64_t TensorShape::num_elements() const {
  int64_t n = 1;
  bool overflow = false, zero = false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) return -1;
    if (dims_[i] == 0) zero = true;
    else overflow |= __builtin_mul_overflow(n, dims_[i], &n);
  }
  if (overflow) [[unlikely]]
    known_elements();  // throws
  return zero ? 0 : n;
}

bool TensorShape::is_fully_defined() const {
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] < 0) return false;
  return true;
}

void TensorShape::push_back(int64_t d) {
  TF_CHECK_ARG(rank_ < kMaxRank, "TensorShape", "rank exceeds the maximum rank {}", kMaxRank);
  TF_CHECK_ARG(d >= None, "TensorShape",
               "dimension {} is negative (a size, or tf::None for an unknown one)", d);
  dims_[rank_++] = d;
}

bool TensorShape::operator==(const TensorShape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string TensorShape::to_string() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += dims_[i] < 0 ? std::string("None") : std::to_string(dims_[i]);
  }
  if (rank_ == 1) s += ",";
  s += ")";
  return s;
}

std::ostream& operator<<(std::ostream& os, const TensorShape& s) { return os << s.to_string(); }

}  // namespace tapeflow
