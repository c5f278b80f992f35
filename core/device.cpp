#include "core/device.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <mutex>
#include <ostream>

#include "core/check.h"
#include "core/context.h"
#include "core/log.h"

namespace tapeflow {

namespace detail {
int cuda_device_count();  // core/cuda/runtime.cpp, or core/no_cuda.cpp without the toolkit
}

std::string Device::to_string() const {
  return fmt::format("/device:{}:{}", type == DeviceType::CPU ? "CPU" : "GPU", index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.to_string(); }

Device Device::parse(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  // Keep only the last "/"-separated component that names a device.
  auto pos = s.rfind("device:");
  std::string rest = pos != std::string::npos ? s.substr(pos + 7) : s;
  if (!rest.empty() && rest[0] == '/') rest = rest.substr(1);
  Device d;
  std::string type = rest, index;
  if (auto c = rest.find(':'); c != std::string::npos) {
    type = rest.substr(0, c);
    index = rest.substr(c + 1);
  }
  if (type == "cpu") d.type = DeviceType::CPU;
  else if (type == "gpu" || type == "cuda") d.type = DeviceType::GPU;
  else TF_THROW(InvalidArgumentError, "device", "cannot parse device name '{}'", name);
  if (!index.empty()) {
    TF_CHECK_ARG(std::all_of(index.begin(), index.end(), ::isdigit) && index.size() < 6, "device",
                 "cannot parse device index in '{}'", name);
    d.index = std::stoi(index);
  }
  return d;
}

DeviceScope::DeviceScope(std::string_view name) : DeviceScope(Device::parse(name)) {}

DeviceScope::DeviceScope(Device device) : device_(detail::resolve_device(device)) {
  auto& stack = detail::thread_context().device_stack;
  stack.push_back(device_);
  stack_ = &stack;
  depth_ = stack.size();
}

DeviceScope::~DeviceScope() {
  auto& stack = detail::thread_context().device_stack;
  if (&stack == stack_ && stack.size() == depth_) {
    stack.pop_back();
    return;
  }
  // Destructors must not throw: a misuse is logged (TF raises "Exiting device scope without
  // proper scope nesting") and this scope's entry removed where that is still possible.
  TF_LOG_ERROR("DeviceScope({}) ended {}: scopes must end in reverse order on the thread that "
               "made them",
               device_.to_string(),
               &stack != stack_ ? "on another thread than it began" : "out of order");
  if (&stack != stack_) return;  // another thread's stack: not ours to edit
  // Earlier scopes that ended out of order shifted this entry down, never up.
  for (size_t i = std::min(depth_, stack.size()); i-- > 0;)
    if (stack[i] == device_) {
      stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

// ---- registry ----
namespace {
struct Registry {
  std::mutex mu;
  bool frozen_cpu = false, frozen_gpu = false;
  int num_cpu = 1;
  int num_physical_gpu = -1;
  // Per physical GPU: its logical splits (empty: one logical device, no limit).
  std::vector<std::vector<config::LogicalDeviceConfiguration>> gpu_splits;
  std::vector<int> gpu_logical_to_physical;
  std::vector<std::optional<int64_t>> gpu_logical_limit;

  void init_gpus_locked() {
    if (num_physical_gpu >= 0) return;
    num_physical_gpu = detail::cuda_device_count();
    gpu_splits.assign(num_physical_gpu, {});
    rebuild_gpu_map_locked();
  }
  void rebuild_gpu_map_locked() {
    gpu_logical_to_physical.clear();
    gpu_logical_limit.clear();
    for (int p = 0; p < num_physical_gpu; ++p) {
      if (gpu_splits[p].empty()) {
        gpu_logical_to_physical.push_back(p);
        gpu_logical_limit.push_back(std::nullopt);
      } else {
        for (auto& c : gpu_splits[p]) {
          gpu_logical_to_physical.push_back(p);
          gpu_logical_limit.push_back(c.memory_limit);
        }
      }
    }
  }
};
Registry& registry() {
  static Registry r;
  return r;
}
std::atomic<bool> g_log_placement{false};

int parse_physical_index(const config::PhysicalDevice& d, const char* type) {
  auto c = d.name.rfind(':');
  TF_CHECK_ARG(c != std::string::npos && d.device_type == type, "set_logical_device_configuration",
               "'{}' is not a physical {} device", d.name, type);
  const std::string digits = d.name.substr(c + 1);
  int index = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  TF_CHECK_ARG(ec == std::errc() && end == digits.data() + digits.size() && index >= 0,
               "set_logical_device_configuration",
               "'{}' is not a physical {} device (its index is not a number)", d.name, type);
  return index;
}
}  // namespace

namespace config {

std::vector<PhysicalDevice> list_physical_devices(std::string_view device_type) {
  std::string t(device_type);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::toupper(c); });
  std::vector<PhysicalDevice> out;
  if (t.empty() || t == "CPU") out.push_back({"/physical_device:CPU:0", "CPU"});
  if (t.empty() || t == "GPU") {
    int n = detail::num_physical_gpus();
    for (int i = 0; i < n; ++i) out.push_back({fmt::format("/physical_device:GPU:{}", i), "GPU"});
  }
  return out;
}

std::vector<LogicalDevice> list_logical_devices(std::string_view device_type) {
  std::string t(device_type);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::toupper(c); });
  std::vector<LogicalDevice> out;
  if (t.empty() || t == "CPU") {
    int n = detail::num_logical_devices(DeviceType::CPU);
    for (int i = 0; i < n; ++i) out.push_back({fmt::format("/device:CPU:{}", i), "CPU"});
  }
  if (t.empty() || t == "GPU") {
    int n = detail::num_logical_devices(DeviceType::GPU);
    for (int i = 0; i < n; ++i) out.push_back({fmt::format("/device:GPU:{}", i), "GPU"});
  }
  return out;
}

void set_logical_device_configuration(const PhysicalDevice& device,
                                      const std::vector<LogicalDeviceConfiguration>& logical) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  TF_CHECK_ARG(!logical.empty(), "set_logical_device_configuration",
               "at least one logical device is needed for '{}'", device.name);
  // Megabytes, shifted into bytes later: beyond 2^43 MB the byte count would overflow.
  for (size_t i = 0; i < logical.size(); ++i) {
    const std::optional<int64_t>& mb = logical[i].memory_limit;
    TF_CHECK_ARG(!mb || (*mb > 0 && *mb < (int64_t{1} << 43)),
                 "set_logical_device_configuration",
                 "logical device {} of '{}' has memory_limit {} MB; it must be positive and below "
                 "2^43 MB",
                 i, device.name, *mb);
  }
  if (device.device_type == "CPU") {
    // One physical CPU: "/physical_device:CPU:0".
    TF_CHECK_ARG(parse_physical_index(device, "CPU") == 0, "set_logical_device_configuration",
                 "no physical device '{}' (the CPU is /physical_device:CPU:0)", device.name);
    TF_CHECK_T(FailedPreconditionError, !r.frozen_cpu, "set_logical_device_configuration",
               "virtual devices cannot be modified after being initialized (a CPU device was "
               "already looked up: a DeviceScope, a strategy or list_logical_devices)");
    r.num_cpu = static_cast<int>(logical.size());
  } else {
    r.init_gpus_locked();
    int p = parse_physical_index(device, "GPU");
    TF_CHECK_ARG(p >= 0 && p < r.num_physical_gpu, "set_logical_device_configuration",
                 "no physical device '{}'", device.name);
    TF_CHECK_T(FailedPreconditionError, !r.frozen_gpu, "set_logical_device_configuration",
               "virtual devices cannot be modified after being initialized (the GPUs were "
               "already in use: an op, a DeviceScope, a strategy or list_logical_devices)");
    r.gpu_splits[p] = logical;
    r.rebuild_gpu_map_locked();
  }
}

std::vector<LogicalDeviceConfiguration> get_logical_device_configuration(
    const PhysicalDevice& device) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  if (device.device_type == "CPU") {
    if (r.num_cpu == 1) return {};
    return std::vector<LogicalDeviceConfiguration>(r.num_cpu);
  }
  r.init_gpus_locked();
  int p = parse_physical_index(device, "GPU");
  TF_CHECK_ARG(p >= 0 && p < r.num_physical_gpu, "get_logical_device_configuration",
               "no physical device '{}'", device.name);
  return r.gpu_splits[p];
}

}  // namespace config

namespace config::experimental {
namespace {
std::atomic<bool> g_tf32{false};
}
void enable_tensor_float_32_execution(bool enabled) { g_tf32.store(enabled); }
bool tensor_float_32_execution_enabled() { return g_tf32.load(); }
}  // namespace config::experimental

namespace debugging {
void set_log_device_placement(bool enabled) { g_log_placement.store(enabled); }
bool log_device_placement() { return g_log_placement.load(std::memory_order_relaxed); }
}  // namespace debugging

namespace detail {

int num_physical_gpus() {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.init_gpus_locked();
  return r.num_physical_gpu;
}

int num_logical_devices(DeviceType type) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  if (type == DeviceType::CPU) {
    r.frozen_cpu = true;
    return r.num_cpu;
  }
  r.init_gpus_locked();
  r.frozen_gpu = true;
  return static_cast<int>(r.gpu_logical_to_physical.size());
}

int physical_gpu_of(int logical_index) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.init_gpus_locked();
  TF_CHECK_ARG(logical_index >= 0 &&
                   logical_index < static_cast<int>(r.gpu_logical_to_physical.size()),
               "device", "no GPU device with index {}", logical_index);
  return r.gpu_logical_to_physical[logical_index];
}

std::optional<int64_t> logical_gpu_memory_limit(int logical_index) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.init_gpus_locked();
  if (logical_index < 0 || logical_index >= static_cast<int>(r.gpu_logical_limit.size()))
    return std::nullopt;
  return r.gpu_logical_limit[logical_index];
}

std::optional<Device> scoped_device() {
  auto& st = thread_context().device_stack;
  if (st.empty()) return std::nullopt;
  return st.back();
}

Device default_device() {
  static const Device d = num_logical_devices(DeviceType::GPU) > 0 ? Device{DeviceType::GPU, 0}
                                                                  : Device{DeviceType::CPU, 0};
  return d;
}

Device resolve_device(Device requested) {
  const int n = num_logical_devices(requested.type);
  if (requested.index >= 0 && requested.index < n) return requested;
  if (requested.type == DeviceType::GPU) {
    TF_LOG_WARN_ONCE("{} is not available ({} GPU devices); placing on /device:CPU:0 instead "
                     "(soft device placement)",
                     requested.to_string(), n);
    return Device{DeviceType::CPU, 0};
  }
  TF_THROW(InvalidArgumentError, "device",
           "{} does not exist: there are {} logical CPU devices (split the CPU with "
           "tf::config::set_logical_device_configuration before any DeviceScope)",
           requested.to_string(), n);
}

}  // namespace detail
}  // namespace tapeflow
