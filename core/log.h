// Logging through one spdlog logger ("tapeflow"), behind this header so that spdlog stays an
// implementation detail. Thread-safe. Per-op messages are trace level only.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string_view>

namespace tapeflow::logging {

enum class Level { trace = 0, debug, info, warn, error, off };

// Messages below this level are dropped (default: info; env TAPEFLOW_LOG_LEVEL overrides).
void set_level(Level level);
Level level();
void write(Level level, std::string_view message);

namespace detail {
extern std::atomic<int> g_level;
}
inline bool enabled(Level l) {
  return static_cast<int>(l) >= detail::g_level.load(std::memory_order_relaxed);
}

}  // namespace tapeflow::logging

#define TF_LOG(LEVEL, ...)                                                                   \
  do {                                                                                       \
    if (::tapeflow::logging::enabled(::tapeflow::logging::Level::LEVEL))                             \
      ::tapeflow::logging::write(::tapeflow::logging::Level::LEVEL, ::fmt::format(__VA_ARGS__));     \
  } while (0)
#define TF_LOG_TRACE(...) TF_LOG(trace, __VA_ARGS__)
#define TF_LOG_DEBUG(...) TF_LOG(debug, __VA_ARGS__)
#define TF_LOG_INFO(...) TF_LOG(info, __VA_ARGS__)
#define TF_LOG_WARN(...) TF_LOG(warn, __VA_ARGS__)
#define TF_LOG_ERROR(...) TF_LOG(error, __VA_ARGS__)
// Logs at most once per call site (TF's log_first_n with n = 1).
#define TF_LOG_WARN_ONCE(...)                                         \
  do {                                                                \
    static std::atomic<bool> tf_logged_once_{false};                  \
    if (!tf_logged_once_.exchange(true)) TF_LOG(warn, __VA_ARGS__);   \
  } while (0)
