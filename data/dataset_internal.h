// Internals shared by the files that implement tf::data::Dataset (not part of the public API).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
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

// Starts `threads` threads running make_body(i) for an owner (a parallel iterator) whose
// `stop` joins the threads started so far. If a thread cannot start, the started ones are joined
// before the error leaves (a joinable std::thread destroyed would end the process): running out
// of threads is a ResourceExhaustedError naming `op`; anything else (out of memory) is rethrown.
inline void start_threads(std::vector<std::thread>& workers, int threads, const char* op,
                          const std::function<std::function<void()>()>& make_body,
                          const std::function<void()>& stop) {
  workers.reserve(static_cast<size_t>(threads));
  try {
    for (int i = 0; i < threads; ++i) workers.emplace_back(make_body());
  } catch (const std::system_error& e) {
    const size_t started = workers.size();
    stop();
    TF_THROW(ResourceExhaustedError, op,
             "could not start thread {} of {} for num_parallel_calls: {}", started + 1, threads,
             e.what());
  } catch (...) {
    stop();
    throw;
  }
}

}  // namespace tapeflow::data::detail
