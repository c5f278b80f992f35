#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tapeflow::logging {

namespace detail {
static int initial_level() {
  const char* env = std::getenv("TAPEFLOW_LOG_LEVEL");
  if (!env) return static_cast<int>(Level::info);
  const char* names[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (int i = 0; i < 6; ++i)
    if (std::strcmp(env, names[i]) == 0) return i;
  return static_cast<int>(Level::info);
}
std::atomic<int> g_level{initial_level()};
}  // namespace detail

static spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto existing = spdlog::get("tapeflow");
    if (existing) return existing;
    auto lg = spdlog::stderr_color_mt("tapeflow");
    lg->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [tapeflow] [%^%l%$] %v");
    lg->set_level(spdlog::level::trace);  // filtering happens in enabled()
    return lg;
  }();
  return *l;
}

void set_level(Level level) { detail::g_level.store(static_cast<int>(level)); }
Level level() { return static_cast<Level>(detail::g_level.load()); }

void write(Level level, std::string_view message) {
  logger().log(static_cast<spdlog::level::level_enum>(static_cast<int>(level)), message);
}

}  // namespace tapeflow::logging
