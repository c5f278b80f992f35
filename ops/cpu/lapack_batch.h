// Internal to the CPU LAPACK kernels (ops/cpu/lapack_decomp.cpp, ops/cpu/sqrtm.cpp): a batch of
// matrices, one LAPACK call each, spread over the thread pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "core/parallel.h"

namespace tapeflow::detail {

// Runs fn(b) for every matrix b of the batch, spread over the threads when there are several;
// returns the first matrix whose fn returned a nonzero LAPACK info (and that info), or -1.
template <class F>
std::pair<int64_t, int> for_each_matrix(int64_t batches, F&& fn) {
  std::atomic<int64_t> first{-1};
  std::atomic<int> first_info{0};
  auto run = [&](int64_t b) {
    const int info = fn(b);
    if (info == 0) return;
    int64_t none = -1;
    if (first.compare_exchange_strong(none, b)) first_info.store(info);
  };
  if (batches == 1) {
    run(0);
  } else if (batches > 1) {
    parallel_for(batches, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) run(b);
    });
  }
  return {first.load(), first_info.load()};
}

}  // namespace tapeflow::detail
