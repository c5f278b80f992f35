#pragma once
// How much memory a device has (host_memory_bytes(), for the CPU, is in core/allocator.h).
#include <cstddef>

namespace tapeflow::detail {
// What one logical GPU can hold in bytes: its memory limit where one was configured, else the
// physical GPU's memory (0 without CUDA).
size_t gpu_memory_bytes(int logical_index);
}  // namespace tapeflow::detail
