// Shared by the distribute tests: CPU:0 split into 4 logical devices (once per process, before
// any op: call split_cpu() first thing in every TEST_CASE) and small comparison helpers.
#pragma once

#include <cstring>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "support/testing.h"

namespace distribute_testing {

inline constexpr int kLogicalCpus = 4;

inline void split_cpu() {
  static const bool done = [] {
    namespace cfg = tapeflow::config;
    cfg::set_logical_device_configuration(
        cfg::list_physical_devices("CPU").at(0),
        std::vector<cfg::LogicalDeviceConfiguration>(kLogicalCpus));
    return true;
  }();
  (void)done;
}

inline std::vector<std::string> cpus(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("/cpu:" + std::to_string(i));
  return out;
}

// Same shape, dtype and bytes.
inline bool bit_identical(const tapeflow::Tensor& a, const tapeflow::Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  auto ha = tapeflow::detail::host_bytes(a);
  auto hb = tapeflow::detail::host_bytes(b);
  return a.nbytes() == 0 || std::memcmp(ha.data, hb.data, a.nbytes()) == 0;
}

}  // namespace distribute_testing
