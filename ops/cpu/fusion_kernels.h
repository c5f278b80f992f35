// The float32 and float64 loops of the fusable elementwise primitives, for the tf::function
// fusion pass (jit/fusion.cpp): the very loops eager execution runs (same vectorised code and
// ISA choice), so a fused chain computes exactly what the unfused ops compute.
#pragma once

#include <cstdint>

#include "ops/primitive.h"

namespace tapeflow::cpu {

// T is float or double.
template <class T>
using UnaryRange = void (*)(const T* in, T* out, int64_t n);
template <class T>
struct BinaryRanges {
  void (*vv)(const T* a, const T* b, T* out, int64_t n) = nullptr;
  void (*sv)(T a, const T* b, T* out, int64_t n) = nullptr;
  void (*vs)(const T* a, T b, T* out, int64_t n) = nullptr;
  // In place: the result overwrites the first (av) or the second (va) operand.
  void (*av)(T* a_out, const T* b, int64_t n) = nullptr;
  void (*va)(const T* a, T* b_out, int64_t n) = nullptr;
  explicit operator bool() const { return vv != nullptr; }
};

// Null / empty when the primitive is not a fusable unary / binary elementwise op.
template <class T>
UnaryRange<T> unary_range(const Primitive& prim);  // ops/cpu/elementwise.cpp
template <class T>
UnaryRange<T> relu_range(const Primitive& prim);  // ops/cpu/activation.cpp
// Binary loops for spans of at least kWideSpan elements and, with `short_spans`, for shorter
// ones: on AVX-512 machines the long-span loops are AVX-512 and the short-span ones AVX2 (at a
// few elements the wide loops' set-up and remainder cost more than their width gains: a fused
// chain of 100 steps over 4 elements ran 1.8x slower on AVX-512 loops); elsewhere both are the
// same. Both compute the same values.
inline constexpr int64_t kWideSpan = 64;
template <class T>
BinaryRanges<T> binary_ranges(const Primitive& prim,
                              bool short_spans);  // ops/cpu/elementwise_binary.cpp

}  // namespace tapeflow::cpu
