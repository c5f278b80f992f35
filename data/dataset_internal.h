// Internals shared by the files that implement tf::data::Dataset (not part of the public API).
#pragma once

#include <utility>

#include "core/context.h"
#include "core/device.h"
#include "data/dataset.h"

namespace tapeflow::data::detail {

// Runs a user function as TF runs dataset functions: eagerly, on the CPU, unseen by the
// caller's gradient tapes and traces (they belong to the model code around the loop).
class UserFnScope {
 public:
  UserFnScope() : scope_(Device{}) {
    trace_ = std::exchange(tapeflow::detail::thread_context().trace, nullptr);
  }
  ~UserFnScope() { tapeflow::detail::thread_context().trace = trace_; }
  UserFnScope(const UserFnScope&) = delete;
  UserFnScope& operator=(const UserFnScope&) = delete;

 private:
  DeviceScope scope_;
  tapeflow::detail::PauseTapes pause_;
  tapeflow::detail::TraceObserver* trace_ = nullptr;
};

}  // namespace tapeflow::data::detail
