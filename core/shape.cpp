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
}

TensorShape::TensorShape(const std::vector<int>& dims) {
  TF_CHECK_ARG(dims.size() <= kMaxRank, "TensorShape",
               "rank {} exceeds the maximum rank {}", dims.size(), kMaxRank);
  for (int d : dims) {
    TF_CHECK_ARG(d >= -1, "TensorShape", "dimension {} is negative", d);
    dims_[rank_++] = d;
  }
}

int64_t TensorShape::dim(int i) const {
  TF_CHECK_ARG(i >= -rank_ && i < rank_, "TensorShape",
               "dimension index {} is out of range for shape {}", i, to_string());
  return dims_[i < 0 ? i + rank_ : i];
}

int64_t TensorShape::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) return -1;
    n *= dims_[i];
  }
  return n;
}

bool TensorShape::is_fully_defined() const {
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] < 0) return false;
  return true;
}

void TensorShape::push_back(int64_t d) {
  TF_CHECK_ARG(rank_ < kMaxRank, "TensorShape", "rank exceeds the maximum rank {}", kMaxRank);
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
