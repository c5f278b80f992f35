// Progbar: Keras' progress bar for fit/evaluate/predict (tf.keras 2.x layout):
//   1875/1875 [==============================] - 3s 1ms/step - loss: 0.2990 - accuracy: 0.9127
// On a terminal (dynamic) the line is redrawn in place with an ETA while the epoch runs; when
// the stream is not a terminal (a log file, CI) only the final line of each epoch is written, so
// logs stay one line per epoch. Values are shown as given (fit passes running means), as Keras'
// stateful metrics. Not thread-safe: one Progbar per loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::keras::utils {

// (name, value) in display order.
using Values = std::vector<std::pair<std::string, double>>;

struct ProgbarOptions {
  int width = 30;
  // 1: the bar; 2: one summary line per epoch without the bar (Keras' verbose=2); 0: silent.
  int verbose = 1;
  // Minimum seconds between two redraws of a dynamic bar.
  double interval = 0.05;
  std::string unit_name = "step";
  // Redraw in place; default: whether the stream is std::cout/std::cerr and that is a terminal.
  std::optional<bool> dynamic = std::nullopt;
  // Where to write (default std::cout).
  std::ostream* stream = nullptr;
  // Seconds since an arbitrary origin (tests inject a fake clock).
  std::function<double()> clock = {};
};

class Progbar {
 public:
  // target: the number of steps, or -1 when unknown (a dataset of unknown cardinality).
  explicit Progbar(int64_t target, ProgbarOptions options = {});

  // `current` steps are done; `finalize` defaults to current >= target.
  void update(int64_t current, const Values& values = {}, std::optional<bool> finalize = {});

  // "3s", "1ms", "85us": Keras' duration texts.
  static std::string format_time_per_unit(double seconds, const std::string& unit);
  static std::string format_eta(double seconds);
  static std::string format_value(double v);
  // Whether a bar with these options redraws in place (showing each update's values); else it
  // writes one line when finalized.
  static bool redraws(const ProgbarOptions& options);

 private:
  double now() const;
  double step_duration(int64_t current, double t);

  int64_t target_;
  ProgbarOptions opt_;
  bool dynamic_;
  double start_;
  double last_update_ = 0;
  std::optional<double> first_step_end_;  // when step 1 was reported
  size_t total_width_ = 0;
  bool done_ = false;
};

}  // namespace tapeflow::keras::utils
