#pragma once
// How host-to-device copies return (core/cuda/runtime.cpp; without CUDA there are none).

namespace tapeflow::detail {
// Whether a host-to-device copy returns once the data is in a pinned staging buffer and its DMA
// is queued on the device's stream (later work on the stream sees the data), instead of waiting
// for the stream: a copy then no longer waits for the kernels queued before it (a training
// loop's next batch for the previous step). Off by default until a GPU run has measured it;
// TAPEFLOW_ASYNC_HOST_TO_DEVICE=1 turns it on, as does the setter (tests and benchmarks).
bool async_host_to_device();
void set_async_host_to_device(bool on);
}  // namespace tapeflow::detail
