// Internals shared by the files that implement tf::data::Dataset (not part of the public API).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

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

// Component c of the elements stacked along a new first axis (batch's stacking; op names the
// transformation in the error when the elements' dtypes or shapes differ).
Tensor stack_elements(const std::vector<Element>& elems, size_t c,
                      const char* op = "Dataset.batch");

// An element's dtypes as "(int64, float32)", for errors (data/dataset_more.cpp).
std::string dtypes_of(const Element& e);

// A dataset of these elements, in order (Dataset() is the empty one).
Dataset elements_dataset(std::vector<Element> elements);

}  // namespace tapeflow::data::detail
