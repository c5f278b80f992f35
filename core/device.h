// Devices: a {type, index} pair naming a logical device, the thread-local DeviceScope (TF's
// `with tf.device(...)`), and tf::config's device listing and logical-device splitting.
// The device registry is configured before the first op and read-only afterwards.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapeflow {

enum class DeviceType : uint8_t { CPU = 0, GPU = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr bool operator==(const Device&) const = default;
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_gpu() const { return type == DeviceType::GPU; }
  // "/device:CPU:0", "/device:GPU:1"
  std::string to_string() const;
  // Accepts "/device:GPU:0", "/gpu:0", "GPU:0", "gpu", "/job:localhost/.../device:CPU:0",
  // case-insensitively. Throws InvalidArgumentError on anything else.
  static Device parse(std::string_view name);
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// Places the ops and tensors made on this thread while it lives (TF's `with tf.device(name)`).
// Scopes nest; the innermost wins. A GPU that does not exist falls back to the CPU with a
// warning (TF's soft placement); a CPU index beyond the logical CPUs is an InvalidArgumentError.
class DeviceScope {
 public:
  // [[nodiscard]]: `tf::DeviceScope("/gpu:0");` alone would end at once, placing nothing.
  [[nodiscard]] explicit DeviceScope(std::string_view name);
  [[nodiscard]] explicit DeviceScope(Device device);
  // Ends the scope; one ended out of order or on another thread is logged as an error.
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device device_;
  const void* stack_ = nullptr;  // the thread's scope stack it was pushed on
  size_t depth_ = 0;             // the stack's size after the push
};

namespace detail {
// The device named by the innermost DeviceScope of this thread, if any.
std::optional<Device> scoped_device();
// TF's default placement: GPU:0 when a GPU exists, else CPU:0.
Device default_device();
// Resolves a requested device against the registry (soft placement for GPUs).
Device resolve_device(Device requested);
}  // namespace detail

namespace config {

struct PhysicalDevice {
  std::string name;         // "/physical_device:CPU:0"
  std::string device_type;  // "CPU" or "GPU"
  bool operator==(const PhysicalDevice&) const = default;
};
struct LogicalDevice {
  std::string name;         // "/device:CPU:0"
  std::string device_type;  // "CPU" or "GPU"
  bool operator==(const LogicalDevice&) const = default;
};
struct LogicalDeviceConfiguration {
  std::optional<int64_t> memory_limit;  // megabytes, as in TF (GPUs only)
};

// Physical devices of a type ("CPU", "GPU" or "" for all).
std::vector<PhysicalDevice> list_physical_devices(std::string_view device_type = "");
std::vector<LogicalDevice> list_logical_devices(std::string_view device_type = "");
// Splits one physical device into several logical ones. Must run before the first op touches a
// device of that type, else FailedPreconditionError (as TF's RuntimeError).
void set_logical_device_configuration(const PhysicalDevice& device,
                                      const std::vector<LogicalDeviceConfiguration>& logical);
std::vector<LogicalDeviceConfiguration> get_logical_device_configuration(
    const PhysicalDevice& device);

namespace experimental {
// TF's switch for TensorFloat-32 matrix products on GPUs (float32 inputs, 10-bit mantissa
// products, float32 accumulation). Off by default in tapeflow: float32 means float32.
void enable_tensor_float_32_execution(bool enabled);
bool tensor_float_32_execution_enabled();
}  // namespace experimental

}  // namespace config

namespace debugging {
// Logs the device of every op (through spdlog, at info level).
void set_log_device_placement(bool enabled);
bool log_device_placement();
}  // namespace debugging

namespace detail {
// Number of logical devices of a type; freezes the configuration.
int num_logical_devices(DeviceType type);
// Number of physical GPUs (0 without CUDA or without a GPU).
int num_physical_gpus();
// Physical GPU behind a logical GPU index.
int physical_gpu_of(int logical_index);
// A number that identifies a physical GPU across processes and machines (from its UUID; 0
// without CUDA). Two processes that see the same GPU get the same number.
int64_t physical_gpu_identity(int physical_gpu);
std::optional<int64_t> logical_gpu_memory_limit(int logical_index);
}  // namespace detail

}  // namespace tapeflow
