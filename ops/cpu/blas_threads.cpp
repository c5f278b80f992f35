// Keeps OpenBLAS's thread count in step with tapeflow's (detail::set_num_threads): OpenBLAS keeps
// its own count, while oneDNN's OpenMP regions follow omp_set_num_threads, which
// set_num_threads already calls. Also describes the GEMM backends for benchmark reports.
#include <cblas.h>
#include <dnnl.h>

#include <fmt/format.h>

#include <cmath>

#include "core/parallel.h"
#include "ops/linalg.h"

namespace tapeflow::detail {

namespace {

void set_library_threads(int n) { openblas_set_num_threads(n); }

// Installed when libtapeflow is loaded.
const bool g_hook_installed = [] {
  g_library_threads_hook.store(&set_library_threads);
  return true;
}();

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "all";
  }
}

}  // namespace

std::string gemm_backend_info() {
  (void)g_hook_installed;
  const dnnl_version_t* v = dnnl_version();
  const char* core = openblas_get_corename();
  const char* config = openblas_get_config();
  return fmt::format(
      "float32: OpenBLAS sgemm for M*N*K <= {}^3, oneDNN {}.{}.{} sgemm (max ISA {}) above; "
      "float64: OpenBLAS dgemm; LU/inverse: blocked on oneDNN sgemm for float32 n >= 384, "
      "OpenBLAS LAPACK otherwise. OpenBLAS core {} ({}, {} threads)",
      std::lround(std::cbrt(sgemm_openblas_max_mnk())), v->major, v->minor, v->patch,
      isa_name(dnnl_get_effective_cpu_isa()), core ? core : "unknown", config ? config : "",
      openblas_get_num_threads());
}

}  // namespace tapeflow::detail
