#include "keras/regularizers.h"

#include "core/check.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {

Tensor Regularizer::operator()(const Tensor& weight) const {
  TF_CHECK_T(FailedPreconditionError, defined(), "Regularizer",
             "the regularizer is empty (default-constructed)");
  TF_CHECK_ARG(weight.defined(), name_.c_str(), "the weight is an undefined tensor");
  return fn_(weight);
}

namespace regularizers {

Regularizer L1(double l1) {
  TF_CHECK_ARG(l1 >= 0.0, "L1", "the factor must be non-negative, got {}", l1);
  return Regularizer("L1", {{"l1", l1}}, [l1](const Tensor& w) { return reduce_sum(abs(w)) * l1; });
}
Regularizer L2(double l2) {
  TF_CHECK_ARG(l2 >= 0.0, "L2", "the factor must be non-negative, got {}", l2);
  return Regularizer("L2", {{"l2", l2}},
                     [l2](const Tensor& w) { return reduce_sum(square(w)) * l2; });
}
Regularizer L1L2(double l1, double l2) {
  TF_CHECK_ARG(l1 >= 0.0 && l2 >= 0.0, "L1L2", "the factors must be non-negative, got {} and {}",
               l1, l2);
  return Regularizer("L1L2", {{"l1", l1}, {"l2", l2}}, [l1, l2](const Tensor& w) {
    return reduce_sum(abs(w)) * l1 + reduce_sum(square(w)) * l2;
  });
}

}  // namespace regularizers
}  // namespace tapeflow::keras
