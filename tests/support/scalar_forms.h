// The loops GCC makes from the float32 scalar forms of exp, tanh and sigmoid (ops/cpu/unary_ops.h)
// for AVX-512, as the op loops had them before ops/cpu/math_avx512.h: the reference of
// test_unary.cpp's bit-for-bit case. Their file is compiled at -O3 in every build
// (tests/CMakeLists.txt): the tests' own level (-O0 under the sanitizers, -O1 in Release)
// vectorises less and contracts no a * b + c into a fused multiply-add, which changes bits.
#pragma once

#include <cstdint>

namespace tapeflow::testing {

// Only on x86-64 builds with run-time ISA dispatch (TF_CPU_MULTIVERSION), and only to be called
// where cpu_level() is Avx512.
void exp_scalar_form_avx512(const float* in, float* out, int64_t n);
void tanh_scalar_form_avx512(const float* in, float* out, int64_t n);
void sigmoid_scalar_form_avx512(const float* in, float* out, int64_t n);

}  // namespace tapeflow::testing
