// TensorSpec: a shape (tf::None for unknown dimensions) and a dtype, as in
// tf::TensorSpec({tf::None, 784}, tf::float32); used by tf::function input signatures.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/shape.h"

namespace tapeflow {

struct TensorSpec {
  TensorShape shape;
  DType dtype = float32;
  std::string name;

  TensorSpec() = default;
  TensorSpec(TensorShape s, DType d = float32, std::string n = {})
      : shape(s), dtype(d), name(std::move(n)) {}
  // True when `s` has the same rank and agrees on every known dimension.
  bool is_compatible_with(const TensorShape& s) const {
    if (s.rank() != shape.rank()) return false;
    for (int i = 0; i < s.rank(); ++i)
      if (shape[i] != None && shape[i] != s[i]) return false;
    return true;
  }
};

}  // namespace tapeflow
