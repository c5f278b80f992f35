#include "core/parallel.h"

#include <atomic>

namespace tapeflow::detail {


namespace {
std::atomic<int> g_threads{0};
}

std::atomic<void (*)(int)> g_library_threads_hook{nullptr};

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = omp_get_max_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_num_threads(int n) {
  if (n < 1) n = 1;
  g_threads.store(n);
  omp_set_num_threads(n);
  if (auto hook = g_library_threads_hook.load()) hook(n);
}

}  // namespace tapeflow::detail
