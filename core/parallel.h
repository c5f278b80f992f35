// The one CPU thread pool: OpenMP's, shared with oneDNN and OpenBLAS (both built on libgomp
// here), so no two pools spin against each other. Kernels split work with parallel_for, which
// runs on the calling thread when the work is small. Kernels must not throw inside fn.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace tapeflow::detail {

// Threads used by CPU kernels (default: the number of cores, or OMP_NUM_THREADS), divided on
// threads that share the cores with others (set_thread_share).
int num_threads();
// On the calling thread: kernels use 1/`ways` of the pool (at least one thread), and OpenMP
// regions opened here (oneDNN's, OpenBLAS's) as many. A strategy's replica threads call it with
// their number, so that replicas running side by side do not oversubscribe the cores. 1 undoes it.
void set_thread_share(int ways);
// Sets the pool size for tapeflow, OpenBLAS and oneDNN together.
void set_num_threads(int n);
// Set by ops/cpu: tells the GEMM libraries about a new pool size.
extern std::atomic<void (*)(int)> g_library_threads_hook;

// Calls fn(begin, end) on disjoint chunks covering [0, n). `grain` is the smallest chunk worth
// a thread: below 2 * grain everything runs inline on the calling thread.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  const int max_t = num_threads();
  if (max_t <= 1 || n < 2 * grain || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  const int nt = static_cast<int>(std::min<int64_t>(max_t, n / grain));
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t team = omp_get_num_threads();
    const int64_t chunk = (n + team - 1) / team;
    const int64_t b = t * chunk;
    const int64_t e = std::min(n, b + chunk);
    if (b < e) fn(b, e);
  }
}

}  // namespace tapeflow::detail
