// Which instruction set the CPU kernels' hot loops run with. They are compiled for the baseline
// ISA and for wider ones through target attributes (TF_TARGET_AVX2, TF_TARGET_AVX512), and the
// variant is picked at run time by cpu_level(), which TAPEFLOW_CPU_ISA caps; never through
// ifuncs (target_clones), whose resolvers run before a sanitizer's runtime has started.
#pragma once

#include <cstdlib>
#include <string_view>

// Hot loops are compiled for the baseline ISA (SSE2 on x86-64) and for AVX2 + FMA; the unary
// loops (transcendental functions) also for AVX-512, where they run about twice as fast. The
// variant is picked at run time (cpu_level). The AVX2 and AVX-512 variants contract a * b + c
// into FMA, so they may differ from the baseline in the last bit of transcendental results (all
// within the documented error).
#if defined(__x86_64__) && defined(__GNUC__)
#define TF_CPU_MULTIVERSION 1
#define TF_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TF_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define TF_CPU_MULTIVERSION 0
#define TF_TARGET_AVX2
#define TF_TARGET_AVX512
#endif

namespace tapeflow::cpu {

enum class CpuLevel { Baseline, Avx2, Avx512 };

// The widest loop variant this CPU runs. TAPEFLOW_CPU_ISA=baseline or avx2 in the environment
// caps it (to test the other variants on a newer machine).
inline CpuLevel cpu_level() {
#if TF_CPU_MULTIVERSION
  static const CpuLevel level = [] {
    __builtin_cpu_init();
    CpuLevel l = CpuLevel::Baseline;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      l = CpuLevel::Avx2;
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
        l = CpuLevel::Avx512;
    }
    if (const char* cap = std::getenv("TAPEFLOW_CPU_ISA")) {
      const std::string_view c(cap);
      if (c == "baseline") l = CpuLevel::Baseline;
      else if (c == "avx2" && l == CpuLevel::Avx512) l = CpuLevel::Avx2;
    }
    return l;
  }();
  return level;
#else
  return CpuLevel::Baseline;
#endif
}
inline bool cpu_has_avx2() {
  return cpu_level() != CpuLevel::Baseline;
}

// Calls NAME_avx512, NAME_avx2 or NAME_baseline with the arguments, by cpu_level(); the three
// are usually one always-inline body compiled three times (TF_CPU_VARIANTS).
#define TF_CPU_DISPATCH(NAME, ...)                                                                \
  (::tapeflow::cpu::cpu_level() == ::tapeflow::cpu::CpuLevel::Avx512 ? NAME##_avx512(__VA_ARGS__) \
   : ::tapeflow::cpu::cpu_level() == ::tapeflow::cpu::CpuLevel::Avx2                              \
       ? NAME##_avx2(__VA_ARGS__)                                                                 \
       : NAME##_baseline(__VA_ARGS__))

// Defines void NAME_baseline, NAME_avx2 and NAME_avx512 with the parameter list PARAMS, each
// calling BODY (an always-inline function, so that it is compiled for each target) with ARGS.
#define TF_CPU_VARIANTS(NAME, BODY, PARAMS, ARGS)               \
  [[maybe_unused]] void NAME##_baseline PARAMS {                \
    BODY ARGS;                                                  \
  }                                                             \
  [[maybe_unused]] TF_TARGET_AVX2 void NAME##_avx2 PARAMS {     \
    BODY ARGS;                                                  \
  }                                                             \
  [[maybe_unused]] TF_TARGET_AVX512 void NAME##_avx512 PARAMS { \
    BODY ARGS;                                                  \
  }

}  // namespace tapeflow::cpu
