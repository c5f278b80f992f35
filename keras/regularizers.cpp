#include "keras/regularizers.h"

#include <cmath>
#include <string>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
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

Regularizer OrthogonalRegularizer(double factor, const std::string& mode) {
  const char* op = "OrthogonalRegularizer";
  TF_CHECK_ARG(std::isfinite(factor) && factor >= 0.0, op,
               "factor must be a non-negative number, got {}", factor);
  TF_CHECK_ARG(mode == "rows" || mode == "columns", op,
               "Invalid value for argument `mode`. Expected one of {{\"rows\", \"columns\"}}. "
               "Received: mode={}",
               mode);
  const bool rows = mode == "rows";
  // Keras keeps the factor as a float32.
  const double f = static_cast<double>(static_cast<float>(factor));
  return Regularizer(
      "OrthogonalRegularizer", {{"factor", f}, {"columns", rows ? 0.0 : 1.0}},
      [f, rows, op](const Tensor& w) {
        TF_CHECK_ARG(w.rank() == 2, op,
                     "Inputs to OrthogonalRegularizer must have rank 2. Received: "
                     "inputs.shape={}",
                     w.shape().to_string());
        const int axis = rows ? 1 : 0;
        const Tensor inv = minimum(rsqrt(reduce_sum(square(w), axis, true)), Tensor(1e7));
        const Tensor n = multiply(w, inv);
        const Tensor product = rows ? matmul(n, n, false, true) : matmul(n, n, true, false);
        const int64_t size = w.shape()[rows ? 0 : 1];
        if (size < 2) return zeros({}, w.dtype());
        const Tensor off = multiply(product, subtract(Tensor(1.0), eye(size, w.dtype())));
        const double pairs = static_cast<double>(size) * (static_cast<double>(size) - 1.0) / 2.0;
        return divide(multiply(multiply(reduce_sum(abs(off)), Tensor(f)), Tensor(0.5)),
                      Tensor(pairs));
      });
}

}  // namespace regularizers
}  // namespace tapeflow::keras
