// A build without the CUDA toolkit: no GPUs, and any GPU memory request is an error.
#include "core/allocator.h"
#include "core/check.h"
#include "core/device_memory.h"
#include "core/host_to_device.h"

namespace tapeflow::detail {

int cuda_device_count() { return 0; }

int64_t physical_gpu_identity(int) { return 0; }

size_t gpu_memory_bytes(int) {
  return 0;
}

bool async_host_to_device() {
  return false;
}
void set_async_host_to_device(bool) {}

Allocator& cuda_allocator(int logical_index) {
  TF_THROW(UnimplementedError, "device",
           "/device:GPU:{} needs CUDA, but this tapeflow was built without it", logical_index);
}

void cuda_copy_bytes(void*, Device dst, const void*, Device src, size_t) {
  TF_THROW(UnimplementedError, "copy",
           "copying {} -> {} needs CUDA, but this tapeflow was built without it", src.to_string(),
           dst.to_string());
}

}  // namespace tapeflow::detail
