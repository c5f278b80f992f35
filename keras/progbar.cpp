#include "keras/progbar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "core/check.h"

namespace tapeflow::keras::utils {

namespace {
bool is_terminal(std::ostream* s) {
  if (s == &std::cout) return ::isatty(STDOUT_FILENO) != 0;
  if (s == &std::cerr || s == &std::clog) return ::isatty(STDERR_FILENO) != 0;
  return false;
}
// Width of the step count, so "  7/100" lines up with "100/100" (Keras' numdigits).
int digits_of(int64_t target) {
  return target > 0 ? static_cast<int>(std::floor(std::log10(static_cast<double>(target)))) + 1 : 1;
}
double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progbar::Progbar(int64_t target, ProgbarOptions options) : target_(target), opt_(std::move(options)) {
  TF_CHECK_ARG(opt_.width >= 1, "Progbar", "width must be at least 1, got {}", opt_.width);
  if (!opt_.stream) opt_.stream = &std::cout;
  if (!opt_.clock) opt_.clock = steady_seconds;
  dynamic_ = redraws(opt_);
  start_ = now();
}

bool Progbar::redraws(const ProgbarOptions& options) {
  return options.dynamic.value_or(is_terminal(options.stream ? options.stream : &std::cout));
}

double Progbar::now() const { return opt_.clock(); }

// Keras' _estimate_step_duration: once step 1 was reported, the time per step leaves it out
// (it holds the tracing and warm-up), else it is the mean since the start.
double Progbar::step_duration(int64_t current, double t) {
  if (current <= 0) return 0.0;
  const double per_unit = first_step_end_ && current > 1
                              ? (t - *first_step_end_) / static_cast<double>(current - 1)
                              : (t - start_) / static_cast<double>(current);
  if (current == 1) first_step_end_ = t;
  return per_unit;
}

std::string Progbar::format_time_per_unit(double s, const std::string& unit) {
  if (s >= 1 || s == 0) return fmt::format("{:.0f}s/{}", s, unit);
  if (s >= 1e-3) return fmt::format("{:.0f}ms/{}", s * 1e3, unit);
  return fmt::format("{:.0f}us/{}", s * 1e6, unit);
}

std::string Progbar::format_eta(double eta) {
  // Not a time worth printing (and not convertible to an integer): a stalled clock or a
  // giant target.
  if (!std::isfinite(eta) || eta < 0 || eta >= 1e15) return "?";
  const auto e = static_cast<int64_t>(eta);
  if (e > 3600) return fmt::format("{}:{:02d}:{:02d}", e / 3600, (e % 3600) / 60, e % 60);
  if (e > 60) return fmt::format("{}:{:02d}", e / 60, e % 60);
  return fmt::format("{}s", e);
}

std::string Progbar::format_value(double v) {
  return std::abs(v) > 1e-3 ? fmt::format("{:.4f}", v) : fmt::format("{:.4e}", v);
}

void Progbar::update(int64_t current, const Values& values, std::optional<bool> finalize_arg) {
  if (opt_.verbose == 0 || done_) return;
  const bool finalize = finalize_arg.value_or(target_ >= 0 && current >= target_);
  const double t = now();
  const double elapsed = t - start_;
  std::string values_text;
  for (const auto& [name, v] : values) values_text += " - " + name + ": " + format_value(v);
  const double per_unit = step_duration(current, t);
  std::ostream& os = *opt_.stream;

  if (opt_.verbose == 2 || !dynamic_) {
    // One line at the end: verbose 2 without the bar, verbose 1 (not a terminal) with it.
    if (!finalize) return;
    done_ = true;
    const int digits = digits_of(target_);
    std::string line;
    if (opt_.verbose == 2) {
      line = target_ >= 0 ? fmt::format("{:>{}}/{}", current, digits, target_)
                          : fmt::format("{}", current);
      // tf.keras 2's verbose-2 line: the epoch's time over its steps, the first included.
      line += fmt::format(" - {:.0f}s", elapsed) + values_text + " - " +
              format_time_per_unit(elapsed, "epoch") + " - " +
              format_time_per_unit(current > 0 ? elapsed / static_cast<double>(current) : 0.0,
                                   opt_.unit_name);
    } else {
      std::string bar = target_ >= 0 ? fmt::format("{:>{}}/{} [", current, digits, target_)
                                     : fmt::format("{:>7}/Unknown", current);
      if (target_ >= 0) bar += std::string(static_cast<size_t>(opt_.width), '=') + "]";
      line = bar + fmt::format(" - {:.0f}s ", elapsed) +
             format_time_per_unit(per_unit, opt_.unit_name) + values_text;
    }
    os << line << '\n' << std::flush;
    return;
  }

  // Dynamic: redraw at most every `interval` seconds, always at the end.
  if (!finalize && t - last_update_ < opt_.interval && current > 1) return;
  last_update_ = t;
  std::string bar;
  if (target_ >= 0) {
    const int digits = digits_of(target_);
    bar = fmt::format("{:>{}}/{} [", current, digits, target_);
    const double prog =
        target_ > 0 ? static_cast<double>(current) / static_cast<double>(target_) : 1.0;
    // Clamped before the conversion: a current far past the target must not overflow an int.
    const int filled = static_cast<int>(opt_.width * std::clamp(prog, 0.0, 1.0));
    if (filled > 0) {
      bar += std::string(static_cast<size_t>(filled - 1), '=');
      bar += current < target_ ? '>' : '=';
    }
    bar += std::string(static_cast<size_t>(opt_.width - filled), '.');
    bar += ']';
  } else {
    bar = fmt::format("{:>7}/Unknown", current);
  }
  std::string info;
  if (target_ >= 0 && current < target_ && !finalize) {
    info = " - ETA: " + format_eta(per_unit * static_cast<double>(target_ - current));
  } else {
    info = fmt::format(" - {:.0f}s ", elapsed) + format_time_per_unit(per_unit, opt_.unit_name);
  }
  std::string line = bar + info + values_text;
  const size_t width = line.size();
  if (width < total_width_) line += std::string(total_width_ - width, ' ');
  total_width_ = width;
  os << '\r' << line;
  if (finalize) {
    os << '\n';
    done_ = true;
  }
  os << std::flush;
}

}  // namespace tapeflow::keras::utils
