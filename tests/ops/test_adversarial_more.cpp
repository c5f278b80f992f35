// Adversarial inputs for the op families test_adversarial.cpp does not reach: the other
// convolutions (depthwise, separable, grouped, transposed, 1-D) and poolings, sorting and
// searching, segment reductions, signal processing. Each op, given empty, scalar, mismatched,
// huge-window and special-valued inputs in several dtypes on every device under test, returns a
// readable tensor (and gradients where it is differentiable) or raises a tf::Error naming the op.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "support/adversarial.h"
#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;
using adversarial::describe;
using adversarial::make;
using adversarial::on_every_device;
using adversarial::probe;
using adversarial::with_gradients;

namespace {

const std::vector<tf::DType> kProbeDTypes = {tf::float32, tf::float64, tf::float16, tf::int32};

}  // namespace

TEST_CASE("adversarial: depthwise, separable, grouped, transposed and 1-D convolutions",
          "[adversarial]") {
  on_every_device([&] {
    const std::vector<tf::TensorShape> inputs = {
        {}, {1, 5, 5, 2}, {2, 4, 4, 4}, {1, 0, 5, 2}, {0, 3, 3, 2}, {1, 3, 3, 0}, {1, 5, 5}};
    const std::vector<tf::TensorShape> filters = {{3, 3, 2, 2}, {1, 1, 4, 1}, {2, 2, 1, 4},
                                                  {6, 6, 2, 1}, {0, 3, 2, 1}, {3, 3, 2, 0},
                                                  {3, 3, 2}};
    const std::vector<std::vector<int>> windows = {{1}, {2},  {1, 3}, {1, 2, 2, 1},
                                                   {0}, {-1}, {},     {1 << 30}};
    for (tf::DType d : kProbeDTypes)
      for (const auto& si : inputs) {
        const tf::Tensor x = make(si, d, false);
        for (const auto& sf : filters) {
          const tf::Tensor f = make(sf, d, false, 2);
          for (const auto& w : windows)
            for (const char* padding : {"SAME", "VALID", "bad"}) {
              const std::string what = describe(x) + ", " + describe(f) + ", " + padding;
              probe("depthwise_conv2d", what, [&] {
                return with_gradients({x, f},
                                      [&] { return tf::nn::depthwise_conv2d(x, f, w, padding); });
              });
              probe("depthwise_conv2d", what + ", dilated",
                    [&] { return tf::nn::depthwise_conv2d(x, f, {1}, padding, w); });
              // (TF's grouped convolution is conv2d, and its errors say so.)
              probe("conv2d", what + ", grouped", [&] {
                return with_gradients({x, f},
                                      [&] { return tf::nn::grouped_conv2d(x, f, w, padding); });
              });
              if (sf.rank() == 4) {
                const tf::Tensor pointwise = make({1, 1, sf[2] * sf[3], 3}, d, false, 3);
                probe("separable_conv2d", what,
                      [&] { return tf::nn::separable_conv2d(x, f, pointwise, w, padding); });
              }
              if (si.rank() == 4 && sf.rank() == 4) {
                // An input of the filters' in-channels that a conv2d of `out` would give.
                tf::TensorShape out = si;
                out[3] = sf[2];
                const tf::Tensor t = make({si[0], si[1], si[2], sf[3]}, d, false, 3);
                probe("conv2d_transpose", what, [&] {
                  return with_gradients(
                      {t, f}, [&] { return tf::nn::conv2d_transpose(t, f, out, w, padding); });
                });
              }
            }
          for (const std::pair<int, int>& p :
               std::vector<std::pair<int, int>>{{0, 0}, {1, 2}, {-1, 0}, {1 << 16, 0}})
            probe("depthwise_conv2d", describe(x) + ", explicit padding", [&] {
              return tf::nn::depthwise_conv2d(x, f, {1}, {p, {0, 1}});
            });
        }
        // 1-D: the rank-3 views of the same shapes.
        for (const auto& sf : filters) {
          if (si.rank() < 1 || sf.rank() < 1) continue;
          const tf::Tensor x3 =
              make(si.rank() == 4 ? tf::TensorShape{si[0], si[1], si[3]} : si, d, false);
          const tf::Tensor f3 =
              make(sf.rank() == 4 ? tf::TensorShape{sf[0], sf[2], sf[3]} : sf, d, false, 2);
          for (int s : {1, 2, 0, -1, 1 << 30})
            for (const char* padding : {"SAME", "VALID", "CAUSAL"}) {
              const std::string what = describe(x3) + ", " + describe(f3) + ", " + padding;
              probe("conv1d", what, [&] {
                return with_gradients({x3, f3}, [&] { return tf::nn::conv1d(x3, f3, s, padding); });
              });
              probe("max_pool1d", what, [&] { return tf::nn::max_pool1d(x3, s, s, padding); });
              probe("avg_pool1d", what, [&] { return tf::nn::avg_pool1d(x3, s, 1, padding); });
              if (x3.rank() == 3 && f3.rank() == 3)
                probe("conv1d_transpose", what, [&] {
                  return tf::nn::conv1d_transpose(
                      make({x3.shape()[0], x3.shape()[1], f3.shape()[2]}, d, false, 3), f3,
                      {x3.shape()[0], x3.shape()[1] * std::min(s, 2), f3.shape()[1]}, s, padding);
                });
            }
        }
        for (const auto& k : windows)
          probe("max_pool_with_argmax", describe(x), [&] {
            auto [y, arg] = tf::nn::max_pool_with_argmax(x, k, k, "SAME");
            return std::vector<tf::Tensor>{y, arg};
          });
      }
  });
}

TEST_CASE("adversarial: sorting, searching and counting", "[adversarial]") {
  on_every_device([&] {
    for (const auto& s : adversarial::kShapes)
      for (tf::DType d : tf::testing::kAllDTypes) {
        const tf::Tensor x = make(s, d, true);
        const std::string what = describe(x);
        for (int axis : {-3, -1, 0, 1, 3}) {
          probe("sort", what,
                [&] { return with_gradients({x}, [&] { return tf::sort(x, axis); }); });
          probe("argsort", what, [&] { return tf::argsort(x, axis, "DESCENDING"); });
        }
        probe("sort", what, [&] { return tf::sort(x, -1, "SIDEWAYS"); });
        for (int64_t k : {-1, 0, 1, 3, 1 << 30}) {
          probe("top_k", what + ", k " + std::to_string(k), [&] {
            auto [v, i] = tf::math::top_k(x, k);
            return std::vector<tf::Tensor>{v, i};
          });
          probe("in_top_k", what,
                [&] { return tf::math::in_top_k(make({2}, tf::int32, true), x, k); });
        }
        for (const auto& sv : adversarial::kShapes) {
          const tf::Tensor v = make(sv, d, true, 2);
          probe("searchsorted", what + ", " + describe(v),
                [&] { return tf::searchsorted(x, v, "right", tf::int64); });
        }
        probe("searchsorted", what, [&] { return tf::searchsorted(x, x, "middle"); });
        probe("unique", what, [&] {
          auto [y, idx] = tf::unique(x);
          return std::vector<tf::Tensor>{y, idx};
        });
        probe("unique_with_counts", what, [&] {
          auto [y, idx, count] = tf::unique_with_counts(x, tf::int64);
          return std::vector<tf::Tensor>{y, idx, count};
        });
        for (const auto& range : {std::vector<double>{0, 1}, std::vector<double>{1, 0},
                                  std::vector<double>{0, 0}, std::vector<double>{-1e300, 1e300}})
          for (int64_t bins : {-1, 0, 1, 100})
            probe("histogram_fixed_width", what, [&] {
              return tf::histogram_fixed_width(x, tf::cast(tf::constant(range), d), bins);
            });
        for (int64_t len : {-1, 0, 3})
          probe("bincount", what,
                [&] { return tf::math::bincount(x, tf::Tensor(), len, len == 0 ? 0 : -1); });
        probe("confusion_matrix", what, [&] { return tf::math::confusion_matrix(x, x, 4); });
      }
  });
}

TEST_CASE("adversarial: segment reductions", "[adversarial]") {
  on_every_device([&] {
    const std::vector<std::vector<int64_t>> ids = {
        {}, {0}, {0, 0, 1}, {2, 1, 0}, {-1, 0, 1}, {0, 1, 1 << 30}, {1, 0}};
    for (const auto& s : adversarial::kShapes)
      for (tf::DType d : tf::testing::kAllDTypes) {
        const tf::Tensor x = make(s, d, true);
        for (const auto& idv : ids)
          for (tf::DType id_type : {tf::int32, tf::int64, tf::float32}) {
            const tf::Tensor seg =
                tf::cast(tf::constant(idv, {static_cast<int64_t>(idv.size())}), id_type);
            const std::string what = describe(x) + ", ids " + describe(seg);
            for (int64_t n : {-1, 0, 2, 1 << 10}) {
              probe("unsorted_segment_sum", what, [&] {
                return with_gradients({x},
                                      [&] { return tf::math::unsorted_segment_sum(x, seg, n); });
              });
              probe("unsorted_segment_max", what, [&] {
                return with_gradients({x},
                                      [&] { return tf::math::unsorted_segment_max(x, seg, n); });
              });
              probe("unsorted_segment_prod", what,
                    [&] { return tf::math::unsorted_segment_prod(x, seg, n); });
              probe("unsorted_segment_mean", what,
                    [&] { return tf::math::unsorted_segment_mean(x, seg, n); });
            }
            // (Sorted ids of 2^30 ask for 2^30 rows: a real allocation, not probed.)
            if (!idv.empty() && idv.back() >= (1 << 30)) continue;
            probe("segment_sum", what, [&] {
              return with_gradients({x}, [&] { return tf::math::segment_sum(x, seg); });
            });
            probe("segment_min", what, [&] { return tf::math::segment_min(x, seg); });
            probe("segment_mean", what, [&] { return tf::math::segment_mean(x, seg); });
          }
      }
  });
}

TEST_CASE("adversarial: signal processing", "[adversarial]") {
  on_every_device([&] {
    namespace sig = tf::signal;
    for (const auto& s : adversarial::kShapes)
      for (tf::DType d : tf::testing::kAllDTypes) {
        const tf::Tensor x = make(s, d, true);
        const std::string what = describe(x);
        const sig::ComplexTensor z{x, x};
        probe("fft", what, [&] {
          const auto r = sig::fft(z);
          return std::vector<tf::Tensor>{r.real, r.imag};
        });
        probe("fft2d", what, [&] {
          const auto r = sig::ifft2d(z);
          return std::vector<tf::Tensor>{r.real, r.imag};
        });
        probe("fft", what + ", mismatched parts", [&] {
          const auto r = sig::fft({x, make({2}, d, true)});
          return std::vector<tf::Tensor>{r.real, r.imag};
        });
        for (int64_t n : {-2, -1, 0, 1, 5, 1 << 12}) {
          const std::string wn = what + ", n " + std::to_string(n);
          probe("rfft", wn, [&] {
            return with_gradients({x}, [&] {
              const auto r = sig::rfft(x, n);
              return r.real + r.imag;
            });
          });
          probe("irfft", wn, [&] { return sig::irfft(z, n); });
          for (int type : {0, 1, 2, 3, 4, 5})
            probe("dct", wn + ", type " + std::to_string(type),
                  [&] { return sig::dct(x, type, n, -1, type == 1 ? "" : "ortho"); });
          probe("frame", wn, [&] { return sig::frame(x, n, 2, true); });
          probe("frame", wn, [&] { return sig::frame(x, 3, n); });
          probe("overlap_and_add", wn, [&] { return sig::overlap_and_add(x, n); });
          probe("stft", wn, [&] {
            const auto r = sig::stft(x, n, 2);
            return std::vector<tf::Tensor>{r.real, r.imag};
          });
          probe("stft", wn + ", fft_length", [&] {
            const auto r = sig::stft(x, 4, 2, n, sig::hann_window_fn(), true);
            return std::vector<tf::Tensor>{r.real, r.imag};
          });
          probe("inverse_stft", wn,
                [&] { return sig::inverse_stft(z, n, 2, -1, sig::hann_window_fn()); });
          probe("mdct", wn, [&] { return sig::mdct(x, n); });
          probe("hann_window", wn, [&] { return sig::hann_window(n, true, d); });
          probe("kaiser_window", wn, [&] { return sig::kaiser_window(n, -1.0, d); });
        }
        probe("fftshift", what, [&] { return sig::fftshift(x, {0, -1, 7}); });
        probe("inverse_mdct", what, [&] { return sig::inverse_mdct(x); });
        for (int64_t bins : {-1, 0, 1, 20})
          probe("linear_to_mel_weight_matrix", std::to_string(bins), [&] {
            return sig::linear_to_mel_weight_matrix(bins, bins + 1, 16000.0, 0.0, 8000.0, d);
          });
        probe("mfccs_from_log_mel_spectrograms", what,
              [&] { return sig::mfccs_from_log_mel_spectrograms(x); });
      }
  });
}
