// Adversarial inputs for the rest of tf::nn (ops/nn_more.h): activations, losses, embedding
// lookup, normalisations, space/depth rearrangements and CTC, with empty, scalar, mismatched
// and special-valued tensors in every dtype on every device under test. A readable result (and
// gradients where differentiable) or a tf::Error naming the op.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::kShapes;
using adversarial::make;
using adversarial::on_every_device;
using adversarial::probe;
using adversarial::with_gradients;
using tf::testing::kAllDTypes;

TEST_CASE("adversarial: activations, losses, normalisations and rearrangements", "[adversarial]") {
  namespace nn = tf::nn;
  on_every_device([&] {
    for (const auto& s : kShapes)
      for (tf::DType d : kAllDTypes) {
        const tf::Tensor x = make(s, d, true);
        const std::string what = describe(x);
        probe("relu6", what, [&] { return with_gradients({x}, [&] { return nn::relu6(x); }); });
        probe("log_sigmoid", what,
              [&] { return with_gradients({x}, [&] { return nn::log_sigmoid(x); }); });
        probe("l2_loss", what, [&] { return with_gradients({x}, [&] { return nn::l2_loss(x); }); });
        for (int axis : {-5, -1, 0, 2})
          probe("crelu", what,
                [&] { return with_gradients({x}, [&] { return nn::crelu(x, axis); }); });
        for (const auto& sb : kShapes) {
          const tf::Tensor y = make(sb, d, false, 2);
          const std::string wb = what + ", " + describe(y);
          for (int axis : {-1, 0, 3})
            probe("softmax_cross_entropy_with_logits", wb, [&] {
              return with_gradients(
                  {x, y}, [&] { return nn::softmax_cross_entropy_with_logits(y, x, axis); });
            });
          probe("weighted_cross_entropy_with_logits", wb, [&] {
            return with_gradients({x, y}, [&] {
              return nn::weighted_cross_entropy_with_logits(y, x, make({}, d, false, 3));
            });
          });
          for (double max_norm : {0.0, 1.0, -1.0})
            probe("embedding_lookup", wb, [&] {
              return with_gradients({x}, [&] { return nn::embedding_lookup(x, y, max_norm); });
            });
          probe("batch_normalization", wb, [&] {
            return with_gradients(
                {x, y}, [&] { return nn::batch_normalization(x, y, y, tf::Tensor(), y, 1e-3); });
          });
          probe("normalize_moments", wb, [&] {
            auto [m, v] = nn::normalize_moments(x, y, y, y);
            return std::vector<tf::Tensor>{m, v};
          });
        }
        for (int radius : {-1, 0, 2, 1 << 30})
          for (double beta : {0.5, 0.0, -1.0})
            probe("local_response_normalization", what, [&] {
              return with_gradients(
                  {x}, [&] { return nn::local_response_normalization(x, radius, 1.0, 1.0, beta); });
            });
        for (int block : {-1, 0, 1, 2, 1 << 30}) {
          probe("space_to_depth", what,
                [&] { return with_gradients({x}, [&] { return nn::space_to_depth(x, block); }); });
          probe("depth_to_space", what,
                [&] { return with_gradients({x}, [&] { return nn::depth_to_space(x, block); }); });
        }
      }
  });
}

TEST_CASE("adversarial: ctc_loss", "[adversarial]") {
  on_every_device([&] {
    const std::vector<tf::TensorShape> logit_shapes = {{5, 2, 4}, {0, 2, 4}, {5, 0, 4},
                                                       {5, 2, 1}, {5, 2},    {5, 2, 0}};
    const std::vector<tf::TensorShape> label_shapes = {{2, 3}, {2, 0}, {3, 3}, {2}, {2, 9}};
    const std::vector<std::vector<int64_t>> lengths = {{3, 2}, {0, 0}, {-1, 2}, {9, 9}, {1}};
    for (tf::DType d : {tf::float32, tf::float64, tf::float16, tf::int32})
      for (bool special : {false, true})
        for (const auto& ls : logit_shapes) {
          const tf::Tensor logits = make(ls, d, special);
          for (const auto& lb : label_shapes)
            for (tf::DType label_type : {tf::int32, tf::int64, tf::float32}) {
              const tf::Tensor labels = make(lb, label_type, special, 2);
              for (const auto& ll : lengths)
                for (int blank : {0, -1, 3, 7})
                  for (bool time_major : {true, false}) {
                    const tf::Tensor label_len =
                        tf::constant(ll, {static_cast<int64_t>(ll.size())});
                    const tf::Tensor logit_len =
                        tf::constant(std::vector<int64_t>(ll.size(), ls.rank() >= 1 ? ls[0] : 1),
                                     {static_cast<int64_t>(ll.size())});
                    probe("ctc_loss",
                          describe(logits) + ", " + describe(labels) + ", blank " +
                              std::to_string(blank),
                          [&] {
                            return with_gradients({logits}, [&] {
                              return tf::nn::ctc_loss(labels, logits, label_len, logit_len,
                                                      time_major, blank);
                            });
                          });
                  }
            }
        }
  });
}
