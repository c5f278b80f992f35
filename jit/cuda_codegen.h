// CUDA C++ source for fused elementwise float32 kernels (jit_compile on GPUs). Pure text
// generation, compiled in every build so that it is tested everywhere; jit/cuda_kernels.h
// compiles the source with NVRTC and launches it.
//
// The generated module defines two kernels over n elements, `<name>` (a grid-stride loop over
// elements) and `<name>_v4` (16-byte float4 loads and stores for every full-size operand, then
// the tail of n % 4 elements), with the signature
//   (const float* in0, ..., const float* in{k-1}, float* out, long long n).
// One-element inputs are read once per thread; rows repeated along the output (a bias over
// channels) through a running position, without a division per element. Each step computes
// exactly what the eager CUDA kernel of its op computes (the functors of
// ops/cuda/elementwise_kernels.cuh and ops/cuda/activation.cu); add, subtract, multiply and
// divide use the round-to-nearest intrinsics (__fadd_rn, ...), which the compiler never
// contracts into fused multiply-adds across steps, so a fused chain rounds as the op-by-op one
// does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tapeflow::jit {

struct CudaFusedStep {
  std::string op;  // the primitive's name: "exp", "add", ...
  // Operand o < num_inputs is kernel input o, else the result of step o - num_inputs.
  int a = -1;
  int b = -1;  // -1 for unary ops
};

// Whether a primitive of this name (float32, one or two operands) has a generated form.
bool cuda_codegen_supports(std::string_view op, int num_operands);

// The module's source. `period[k]` says how input k is read: 0 at every element (full size),
// 1 once per thread (one element), m >= 2 as a row of m elements repeated along the output
// (element i reads i mod m). Throws InvalidArgumentError for an unsupported op, an operand out
// of range or a negative period. With `output_may_alias`, `out` may be the buffer of full-size
// inputs (an update computed into a variable's buffer): the pointers are not declared
// __restrict__ (each element is still read before it is written, by the thread that writes it).
std::string cuda_fused_source(std::string_view kernel_name, int num_inputs,
                              const std::vector<int64_t>& period,
                              std::span<const CudaFusedStep> steps,
                              bool output_may_alias = false);

}  // namespace tapeflow::jit
