// The float32 loops of the fusable elementwise primitives, for the tf::function fusion pass
// (jit/fusion.cpp): the very loops eager execution runs (same vectorised code and ISA choice),
// so a fused chain computes exactly what the unfused ops compute.
#pragma once

#include <cstdint>

#include "ops/primitive.h"

namespace tapeflow::cpu {

using UnaryRangeF32 = void (*)(const float* in, float* out, int64_t n);
struct BinaryRangesF32 {
  void (*vv)(const float* a, const float* b, float* out, int64_t n) = nullptr;
  void (*sv)(float a, const float* b, float* out, int64_t n) = nullptr;
  void (*vs)(const float* a, float b, float* out, int64_t n) = nullptr;
  explicit operator bool() const { return vv != nullptr; }
};

// Null / empty when the primitive is not a fusable unary / binary elementwise op.
UnaryRangeF32 unary_range_f32(const Primitive& prim);      // ops/cpu/elementwise.cpp
UnaryRangeF32 relu_range_f32(const Primitive& prim);       // ops/cpu/activation.cpp
BinaryRangesF32 binary_ranges_f32(const Primitive& prim);  // ops/cpu/elementwise_binary.cpp

}  // namespace tapeflow::cpu
