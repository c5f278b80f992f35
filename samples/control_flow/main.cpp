// Aims a projectile with air drag at a target: data-dependent control flow in a traced function.
//   - tf::while_loop steps the flight (explicit Euler, quadratic drag) until the projectile
//     lands: the number of steps depends on the launch speed, yet one graph serves every speed;
//   - tf::cond interpolates the landing point only when the loop ended by landing (not at its
//     step limit);
//   - Newton's method on the launch speed uses the derivative of the range, taken with a
//     GradientTape through the loop and the cond inside the traced function.
// First checks the simulation without drag against the closed form v^2 sin(2a) / g, then solves
// for the speed that reaches the target and prints each Newton step, and the time of one
// evaluation traced and eager, with and without the derivative. Exits 1 unless the range found
// is within 1 mm of the target and the traced and eager results agree.
//   build/samples/control_flow [target_m] [drag] [angle_deg]
#include <tapeflow/tapeflow.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;

namespace {

constexpr double kG = 9.81;
constexpr double kDt = 1e-3;
constexpr int64_t kMaxSteps = 200000;

// The horizontal distance where a projectile launched at `speed` (m/s, a float64 scalar) and
// `angle` (radians) lands, with drag acceleration -k |v| v; also the number of steps it flew.
std::pair<tf::Tensor, tf::Tensor> range_of(const tf::Tensor& speed, double angle, double k) {
  const tf::Tensor zero = tf::constant(0.0);
  const std::vector<tf::Tensor> start = {
      tf::constant(int64_t{0}), zero, zero, speed * std::cos(angle),
      speed * std::sin(angle),  zero, zero};
  // Loop variables: step, x, y, vx, vy, and the position before the step (px, py).
  const std::vector<tf::Tensor> end = tf::while_loop(
      [](const std::vector<tf::Tensor>& s) {
        // Fly until the projectile is below the ground again (after the first step).
        return tf::logical_or(tf::equal(s[0], int64_t{0}), tf::greater(s[2], 0.0));
      },
      [&](const std::vector<tf::Tensor>& s) {
        const tf::Tensor v = tf::sqrt(s[3] * s[3] + s[4] * s[4]);
        const tf::Tensor ax = -k * v * s[3], ay = -kG - k * v * s[4];
        return std::vector<tf::Tensor>{s[0] + int64_t{1},
                                       s[1] + s[3] * kDt,
                                       s[2] + s[4] * kDt,
                                       s[3] + ax * kDt,
                                       s[4] + ay * kDt,
                                       s[1],
                                       s[2]};
      },
      start, {.maximum_iterations = kMaxSteps});
  const tf::Tensor landed = tf::less_equal(end[2], 0.0);
  // The ground crossing between the last two positions (linear), if it landed.
  const tf::Tensor distance = tf::cond(
      landed, [&] { return end[5] + (end[1] - end[5]) * end[6] / (end[6] - end[2]); },
      [&] { return end[1]; });
  return {distance, end[0]};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args(argc, argv,
                     "Aims a projectile with air drag at a target with Newton's method, "
                     "differentiating a traced tf::while_loop.",
                     "Exits 1 unless the range found is within 1 mm of the target.");
  const double target = args.real("target_m", 100.0, 1.0, 10000.0, "the target distance (m)");
  const double drag = args.real("drag", 0.002, 0.0, 1.0, "drag coefficient k (1/m)");
  const double angle_deg = args.real("angle_deg", 40.0, 1.0, 89.0, "launch angle (degrees)");
  args.done();
  const double angle = angle_deg * std::numbers::pi / 180.0;

  // Range and its derivative with respect to the speed, one graph for every speed.
  auto range_and_slope = [&](double k) {
    return tf::function([k, angle](const tf::Tensor& speed) {
      tf::GradientTape tape;
      tape.watch(speed);
      auto [distance, steps] = range_of(speed, angle, k);
      const tf::Tensor slope = tape.gradient(distance, speed);
      return std::vector<tf::Tensor>{distance, slope, steps};
    });
  };

  // 1. Without drag the simulation must agree with the closed form (to Euler's O(dt) error).
  auto vacuum = range_and_slope(0.0);
  for (double v : {10.0, 30.0}) {
    const auto r = vacuum(tf::constant(v));
    const double want = v * v * std::sin(2 * angle) / kG;
    const double got = r[0].item<double>();
    std::printf(
        "no drag, %4.1f m/s: range %8.4f m (closed form %8.4f m), %lld steps, "
        "d range / d speed %.5f s (closed form %.5f s)\n",
        v, got, want, static_cast<long long>(r[2].item<int64_t>()), r[1].item<double>(),
        2 * v * std::sin(2 * angle) / kG);
    if (std::abs(got - want) > 0.01 * want) {
      std::printf("the simulation disagrees with the closed form\n");
      return 1;
    }
  }

  // 2. Newton's method on the speed: speed -= (range - target) / (d range / d speed).
  auto f = range_and_slope(drag);
  tf::Tensor speed = tf::constant(std::sqrt(target * kG / std::sin(2 * angle)));  // no-drag guess
  double error = 0;
  for (int it = 0; it < 30; ++it) {
    const auto r = f(speed);
    const double range = r[0].item<double>(), slope = r[1].item<double>();
    error = range - target;
    std::printf(
        "newton %2d: speed %9.5f m/s  range %10.5f m  error %+.3e m  slope %.4f s  "
        "%lld steps\n",
        it, speed.item<double>(), range, error, slope,
        static_cast<long long>(r[2].item<int64_t>()));
    if (std::abs(error) < 1e-4) break;
    speed = speed - error / slope;
  }
  std::printf("traces: %lld (one graph for every speed and step count)\n",
              static_cast<long long>(f.tracing_count()));

  // 3. One evaluation, traced and eager, without and with the derivative (the eager loop runs
  //    its ops one by one; the traced one runs the body's sub-graph per step).
  auto range_only =
      tf::function([&](const tf::Tensor& v) { return range_of(v, angle, drag).first; });
  range_only(speed);
  auto eager_slope = [&](const tf::Tensor& v) {
    tf::GradientTape tape;
    tape.watch(v);
    return tape.gradient(range_of(v, angle, drag).first, v);
  };
  auto time_ms = [](const auto& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    const double value = fn();
    return std::pair<double, double>{1e3 * seconds_since(t0), value};
  };
  const auto [traced_ms, traced] = time_ms([&] { return range_only(speed).item<double>(); });
  const auto [eager_ms, eager] =
      time_ms([&] { return range_of(speed, angle, drag).first.item<double>(); });
  const auto [traced_grad_ms, traced_slope] = time_ms([&] { return f(speed)[1].item<double>(); });
  const auto [eager_grad_ms, eager_slope_value] =
      time_ms([&] { return eager_slope(speed).item<double>(); });
  std::printf(
      "one evaluation: range traced %.1f ms, eager %.1f ms; range and slope traced %.1f "
      "ms, eager %.1f ms\n",
      traced_ms, eager_ms, traced_grad_ms, eager_grad_ms);
  if (std::abs(traced - eager) > 1e-9 * target ||
      std::abs(traced_slope - eager_slope_value) > 1e-9 * std::abs(eager_slope_value)) {
    std::printf(
        "FAILED: traced and eager disagree (range %.9f and %.9f m, slope %.9f and %.9f "
        "s)\n",
        traced, eager, traced_slope, eager_slope_value);
    return 1;
  }
  if (std::abs(error) > 1e-3) {
    std::printf("FAILED: the range is %.6f m off the target\n", error);
    return 1;
  }
  std::printf("hit the %.1f m target at %.5f m/s (angle %.1f degrees, drag %.4f /m)\n", target,
              speed.item<double>(), angle_deg, drag);
  return 0;
}
