// TF's higher-order functions over a tensor's first dimension: tf.map_fn, tf.foldl, tf.foldr
// and tf.scan. fn is any C++ callable written with tapeflow ops. Eagerly it runs once per
// element, in order. Inside tf::function it is traced once and one loop node runs that trace per
// element (jit/scan_loop.cpp): the graph does not grow with the number of elements and a None
// first dimension is served by one trace; fn holding a random op or a variable assignment is
// unrolled instead (one copy per element). Gradients flow through fn, to any order.
#pragma once

#include <concepts>
#include <functional>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_spec.h"

namespace tapeflow {

namespace detail {
using MapFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using FoldFn = std::function<Tensor(const Tensor&, const Tensor&)>;
std::vector<Tensor> map_fn_impl(const MapFn& fn, const std::vector<Tensor>& elems,
                                const std::vector<TensorSpec>& fn_output_signature,
                                bool single_output);
Tensor fold_impl(const char* op, const FoldFn& fn, const Tensor& elems,
                 const std::optional<Tensor>& initializer, bool reverse);
Tensor scan_impl(const FoldFn& fn, const Tensor& elems, const std::optional<Tensor>& initializer,
                 bool reverse);
}  // namespace detail

// TF's tf.map_fn(fn, elems): stacks fn(elems[i]) for i = 0 .. n-1 along a new first dimension.
// Every result must have the same shape; its dtype must be fn_output_signature's, else elems'
// (TF's rule), and a different one is an InvalidArgumentError naming the element and both
// dtypes. A scalar elems is an InvalidArgumentError. With no elements (n = 0) the output is
// (0, ...) of fn_output_signature's shape when it gives one fully, else fn runs once on zeros of
// an element's shape to learn it (TF traces fn for the same reason).
template <class F>
requires std::is_invocable_r_v<Tensor, F, Tensor> Tensor
map_fn(F fn, const Tensor& elems, std::optional<TensorSpec> fn_output_signature = {}) {
  detail::MapFn f = [fn = std::move(fn)](const std::vector<Tensor>& x) -> std::vector<Tensor> {
    return {fn(x[0])};
  };
  std::vector<TensorSpec> sig;
  if (fn_output_signature) sig.push_back(*fn_output_signature);
  return detail::map_fn_impl(f, {elems}, sig, true)[0];
}
// Several tensors unstacked together (TF's tuple elems): fn takes one slice of each (all must
// have the same first dimension) and returns several tensors, each stacked; fn_output_signature,
// when given, has one spec per result (else each result takes the first elems' dtype).
template <class F>
requires std::is_invocable_r_v<std::vector<Tensor>, F, std::vector<Tensor>> std::vector<Tensor>
map_fn(F fn, const std::vector<Tensor>& elems,
       const std::vector<TensorSpec>& fn_output_signature = {}) {
  return detail::map_fn_impl(detail::MapFn(std::move(fn)), elems, fn_output_signature, false);
}

// TF's tf.foldl(fn, elems, initializer): a = initializer (else elems[0], folding from
// elems[1]); a = fn(a, elems[i]) for each i in order; returns the last a. Empty elems without an
// initializer is an InvalidArgumentError. The accumulator keeps its shape and dtype.
template <class F>
requires std::is_invocable_r_v<Tensor, F, Tensor, Tensor> Tensor
foldl(F fn, const Tensor& elems, std::optional<Tensor> initializer = std::nullopt) {
  return detail::fold_impl("foldl", detail::FoldFn(std::move(fn)), elems, initializer, false);
}
// TF's tf.foldr: as foldl from the last element to the first.
template <class F>
requires std::is_invocable_r_v<Tensor, F, Tensor, Tensor> Tensor
foldr(F fn, const Tensor& elems, std::optional<Tensor> initializer = std::nullopt) {
  return detail::fold_impl("foldr", detail::FoldFn(std::move(fn)), elems, initializer, true);
}
// TF's tf.scan(fn, elems, initializer, reverse): the stacked accumulators of foldl (foldr with
// reverse, stacked in elems' order). Without an initializer the first output is elems[0] (the
// last with reverse). Empty elems without an initializer is an InvalidArgumentError; with one,
// the output is (0, ...) of the initializer's shape.
template <class F>
requires std::is_invocable_r_v<Tensor, F, Tensor, Tensor> Tensor
scan(F fn, const Tensor& elems, std::optional<Tensor> initializer = std::nullopt,
     bool reverse = false) {
  return detail::scan_impl(detail::FoldFn(std::move(fn)), elems, initializer, reverse);
}

}  // namespace tapeflow
