// TensorShape: up to 8 dimensions stored inline (no heap allocation). tf::None (-1) marks an
// unknown dimension in signatures. A value type; safe to copy between threads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace tapeflow {

inline constexpr int64_t None = -1;

class TensorShape {
 public:
  static constexpr int kMaxRank = 8;

  TensorShape() = default;  // a scalar: ()
  TensorShape(std::initializer_list<int64_t> dims);
  TensorShape(std::span<const int64_t> dims);
  TensorShape(const std::vector<int64_t>& dims) : TensorShape(std::span<const int64_t>(dims)) {}
  TensorShape(const std::vector<int>& dims);

  int rank() const { return rank_; }
  // Negative i counts from the end (x.shape()[-1] is the last dimension, as in Python); out of
  // range throws InvalidArgumentError.
  int64_t operator[](int i) const { return dims_[index(i)]; }
  int64_t& operator[](int i) { return dims_[index(i)]; }
  // The same as operator[].
  int64_t dim(int i) const { return dims_[index(i)]; }
  // Product of the dimensions (1 for a scalar); -1 when a dimension is unknown. A shape whose
  // non-zero known dimensions multiply past int64's range (so its strides would overflow, even
  // with a zero dimension) is an InvalidArgumentError: at construction, or here for a shape
  // grown through operator[] or push_back.
  int64_t num_elements() const;
  // Product of the known dimensions (those not -1); 0 when one of them is 0.
  int64_t known_elements() const;
  bool is_fully_defined() const;
  // d is a size or tf::None; push_back past kMaxRank and pop_back of a scalar throw.
  void push_back(int64_t d);
  void pop_back();

  const int64_t* begin() const { return dims_; }
  const int64_t* end() const { return dims_ + rank_; }
  const int64_t* data() const { return dims_; }
  std::vector<int64_t> dims() const { return {dims_, dims_ + rank_}; }

  bool operator==(const TensorShape& o) const;
  bool operator!=(const TensorShape& o) const { return !(*this == o); }

  // As TF prints: "(2, 3)", "(5,)", "()", unknown dimensions as "None".
  std::string to_string() const;

 private:
  int index(int i) const {
    if (i < 0) i += rank_;
    if (static_cast<unsigned>(i) >= static_cast<unsigned>(rank_)) [[unlikely]]
      throw_index(i < rank_ ? i - rank_ : i);
    return i;
  }
  [[noreturn]] void throw_index(int i) const;
  int64_t dims_[kMaxRank]{};
  int rank_ = 0;
};

std::ostream& operator<<(std::ostream& os, const TensorShape& s);

}  // namespace tapeflow
