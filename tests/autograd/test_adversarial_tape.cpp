// Adversarial uses of GradientTape: targets and sources of every dtype and of empty, scalar and
// mismatched shapes with special values; output_gradients of the wrong shape or dtype;
// unconnected, integer and undefined sources; jacobian and batch_jacobian of odd shapes; a
// non-persistent tape asked twice; Variables of every dtype. Readable gradients (undefined where
// TF gives None), or a tf::Error naming the tape's call — never another exception or a crash.
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::make;
using adversarial::on_every_device;

namespace {

const std::vector<tf::TensorShape> kShapes = {{}, {0}, {3}, {2, 3}, {3, 0}, {1, 3}, {2, 1, 3}};

}  // namespace

TEST_CASE("adversarial: gradient tapes on odd targets, sources and seeds", "[adversarial]") {
  const adversarial::QuietLogs quiet;  // "the tape ignores integer tensors" by the hundred
  on_every_device([&] {
    for (const tf::TensorShape& sx : kShapes)
      for (tf::DType dx : tf::testing::kAllDTypes)
        for (bool special : {false, true}) {
          const tf::Tensor x = make(sx, dx, special, 1);
          const std::string what = describe(x) + (special ? " (special values)" : "");
          for (tf::UnconnectedGradients u :
               {tf::UnconnectedGradients::NONE, tf::UnconnectedGradients::ZERO}) {
            adversarial::probe_readable("gradient of x * x by x, " + what, [&] {
              tf::GradientTape tape;
              tape.watch(x);
              const tf::Tensor y = x * x;
              return std::vector<tf::Tensor>{tape.gradient(y, x, u)};
            });
            adversarial::probe_readable("gradient of an unrelated target, " + what, [&] {
              tf::GradientTape tape;
              tape.watch(x);
              const tf::Tensor y = tf::ones({2});
              return std::vector<tf::Tensor>{tape.gradient(y, x, u)};
            });
            adversarial::probe_readable("jacobian, " + what, [&] {
              tf::GradientTape tape({.persistent = true});
              tape.watch(x);
              const tf::Tensor y = tf::reduce_sum(x * x, -1);
              return std::vector<tf::Tensor>{tape.jacobian(y, x, u), tape.jacobian(x, x, u)};
            });
            adversarial::probe_readable("batch_jacobian, " + what, [&] {
              tf::GradientTape tape;
              tape.watch(x);
              return std::vector<tf::Tensor>{tape.batch_jacobian(x * x, x, u)};
            });
          }
          for (const tf::TensorShape& ss : kShapes)
            for (tf::DType ds : {tf::float32, tf::float64, tf::int32}) {
              const tf::Tensor seed = make(ss, ds, special, 2);
              adversarial::probe_readable("output_gradients " + describe(seed) + ", " + what, [&] {
                tf::GradientTape tape;
                tape.watch(x);
                return std::vector<tf::Tensor>{tape.gradient(x * x, x, seed)};
              });
              adversarial::probe_readable("targets and seeds " + describe(seed) + ", " + what, [&] {
                tf::GradientTape tape;
                tape.watch(x);
                return tape.gradient(std::vector<tf::Tensor>{x * x, x}, std::vector<tf::Tensor>{x},
                                     std::vector<tf::Tensor>{seed, tf::Tensor()});
              });
              adversarial::probe_readable(
                  "batch_jacobian of another batch " + describe(seed) + ", " + what, [&] {
                    tf::GradientTape tape;
                    tape.watch(x);
                    tape.watch(seed);
                    return std::vector<tf::Tensor>{tape.batch_jacobian(seed * seed, x)};
                  });
            }
          adversarial::probe_readable("a non-persistent tape asked twice, " + what, [&] {
            tf::GradientTape tape;
            tape.watch(x);
            const tf::Tensor y = x * x;
            const tf::Tensor g = tape.gradient(y, x);
            return std::vector<tf::Tensor>{g, tape.gradient(y, x)};
          });
          adversarial::probe_readable("undefined target and source, " + what, [&] {
            tf::GradientTape tape({.persistent = true});
            tape.watch(x);
            return std::vector<tf::Tensor>{tape.gradient(tf::Tensor(), x),
                                           tape.gradient(x * x, tf::Tensor())};
          });
          adversarial::probe_readable("a variable of " + what, [&] {
            tf::Variable v(x, "v");
            tf::GradientTape tape;
            const tf::Tensor y = v.value() * v.value();
            v.assign(x);
            return std::vector<tf::Tensor>{tape.gradient(y, v)};
          });
          adversarial::probe_readable("reset and stop_recording, " + what, [&] {
            tf::GradientTape tape({.persistent = true});
            tape.watch(x);
            tf::Tensor y = x * x;
            {
              auto pause = tape.stop_recording();
              y = y * x;
            }
            const tf::Tensor g1 = tape.gradient(y, x);
            tape.reset();
            return std::vector<tf::Tensor>{g1, tape.gradient(y, x)};
          });
        }
  });
}
