#include "core/parallel.h"

#include <algorithm>
#include <atomic>

namespace tapeflow::detail {


namespace {
std::atomic<int> g_threads{0};
thread_local int t_share = 1;
}

std::atomic<void (*)(int)> g_library_threads_hook{nullptr};

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = omp_get_max_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return t_share > 1 ? std::max(1, n / t_share) : n;
}

void set_thread_share(int ways) {
  t_share = std::max(1, ways);
  // This thread's OpenMP default (an ICV of the calling thread only).
  omp_set_num_threads(num_threads());
}

void set_num_threads(int n) {
  if (n < 1) n = 1;
  g_threads.store(n);
  omp_set_num_threads(n);
  if (auto hook = g_library_threads_hook.load()) hook(n);
}

}  // namespace tapeflow::detail
