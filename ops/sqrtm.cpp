// tf::linalg::sqrtm's frontend, shape rules and gradient (ops/sqrtm.h).
#include "ops/sqrtm.h"

#include "core/check.h"
#include "ops/dispatch.h"

namespace tapeflow {

namespace {

void check_square(const char* op, const Tensor& a) {
  const TensorShape& s = a.shape();
  TF_CHECK_ARG(a.dtype() == float32 || a.dtype() == float64, op,
               "expects a float32 or float64 tensor (TF's real kernels), got {}",
               dtype_name(a.dtype()));
  TF_CHECK_ARG(s.rank() >= 2, op, "expects a tensor of rank >= 2 (..., n, n), got shape {}",
               s.to_string());
  TF_CHECK_ARG(s[-1] == s[-2] || s[-1] == None || s[-2] == None, op,
               "expects square matrices (..., n, n), got shape {}", s.to_string());
}

}  // namespace

namespace prims {

void MatrixSquareRoot::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_square(name(), in[0]);
  out[0] = {in[0].shape(), in[0].dtype()};
}

uint32_t MatrixSquareRoot::vjp_saves() const {
  return save_output(0);
}

std::vector<Tensor> MatrixSquareRoot::vjp(std::span<const Tensor>, std::span<const Tensor> cts,
                                          std::span<const int> argnums,
                                          std::span<const Tensor> outs) const {
  std::vector<Tensor> grads;
  for (size_t k = 0; k < argnums.size(); ++k)
    grads.push_back(detail::dispatch(MatrixSquareRootGrad{}, {outs[0], cts[0]}));
  return grads;
}

void MatrixSquareRootGrad::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_square(name(), in[0]);
  TF_CHECK_ARG(in.size() == 2 && in[1].dtype() == in[0].dtype() && in[1].shape() == in[0].shape(),
               name(), "expects a root and a gradient of one shape and dtype, got {} {} and {} {}",
               in[0].shape().to_string(), dtype_name(in[0].dtype()), in[1].shape().to_string(),
               dtype_name(in[1].dtype()));
  out[0] = {in[0].shape(), in[0].dtype()};
}

uint32_t MatrixSquareRootGrad::vjp_saves() const {
  return 0;
}

std::vector<Tensor> MatrixSquareRootGrad::vjp(std::span<const Tensor>, std::span<const Tensor>,
                                              std::span<const int>, std::span<const Tensor>) const {
  TF_THROW(UnimplementedError, name(),
           "sqrtm has a first-order gradient only (no gradient of its gradient)");
}

}  // namespace prims

namespace linalg {

Tensor sqrtm(const Tensor& a) {
  TF_CHECK_ARG(a.defined(), "sqrtm", "the input is an undefined tensor (TF's None)");
  check_square("sqrtm", a);
  return detail::dispatch(prims::MatrixSquareRoot{}, {a});
}

}  // namespace linalg

}  // namespace tapeflow
