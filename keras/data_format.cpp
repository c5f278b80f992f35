#include "keras/data_format.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "keras/layers.h"
#include "ops/movement.h"

namespace tapeflow::keras {

namespace {
std::atomic<bool> g_channels_first{false};  // backend::image_data_format()
}  // namespace

namespace backend {
std::string image_data_format() {
  return g_channels_first.load() ? "channels_first" : "channels_last";
}
void set_image_data_format(const std::string& data_format) {
  TF_CHECK_ARG(data_format == "channels_last" || data_format == "channels_first",
               "set_image_data_format",
               "the image data format must be \"channels_last\" or \"channels_first\", got "
               "\"{}\"",
               data_format);
  g_channels_first.store(data_format == "channels_first");
}
}  // namespace backend

}  // namespace tapeflow::keras

namespace tapeflow::keras::detail {
namespace {

// Axis permutations between the layouts of a rank-r tensor.
std::vector<int> last_perm(int r) {  // channels_first -> channels_last: (0, 2, ..., r-1, 1)
  std::vector<int> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::rotate(p.begin() + 1, p.begin() + 2, p.end());
  return p;
}
std::vector<int> first_perm(int r) {  // channels_last -> channels_first: (0, r-1, 1, ..., r-2)
  std::vector<int> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::rotate(p.begin() + 1, p.end() - 1, p.end());
  return p;
}

}  // namespace

DataFormat DataFormat::parse(const char* cls, const std::string& data_format) {
  std::string f = data_format;
  std::transform(f.begin(), f.end(), f.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  TF_CHECK_ARG(f.empty() || f == "channels_last" || f == "channels_first", cls,
               "data_format must be \"channels_last\" or \"channels_first\", got \"{}\"",
               data_format);
  DataFormat out;
  out.first_ = f.empty() ? g_channels_first.load() : f == "channels_first";
  return out;
}

std::string DataFormat::layout(int spatial) const {
  switch (spatial) {
    case 1:
      return first_ ? "(batch, channels, steps) (channels_first)" : "(batch, steps, channels)";
    case 2:
      return first_ ? "NCHW (channels_first)" : "NHWC";
    case 3:
      return first_ ? "NCDHW (channels_first)" : "NDHWC";
    default:
      return first_ ? "channels_first" : "channels_last";
  }
}

std::string DataFormat::expected_ndim(int spatial) const {
  const std::string l = layout(spatial);
  return spatial == 1 ? fmt::format("expected ndim=3 {}", l)
                      : fmt::format("expected ndim={} ({})", spatial + 2, l);
}

TensorShape DataFormat::to_last(const TensorShape& s) const {
  if (!first_ || s.rank() < 3) return s;
  std::vector<int64_t> d = s.dims();
  std::rotate(d.begin() + 1, d.begin() + 2, d.end());
  return TensorShape(d);
}

TensorShape DataFormat::to_first(const TensorShape& s) const {
  if (!first_ || s.rank() < 3) return s;
  std::vector<int64_t> d = s.dims();
  std::rotate(d.begin() + 1, d.end() - 1, d.end());
  return TensorShape(d);
}

Tensor DataFormat::to_last(const Tensor& x) const {
  if (!first_ || x.rank() < 3) return x;
  return transpose(x, last_perm(x.rank()));
}

Tensor DataFormat::to_first(const Tensor& x) const {
  if (!first_ || x.rank() < 3) return x;
  return transpose(x, first_perm(x.rank()));
}

TensorShape DataFormat::image_to_last(const TensorShape& s) const {
  if (!first_ || s.rank() != 3) return s.rank() == 4 ? to_last(s) : s;
  return TensorShape{s[1], s[2], s[0]};
}

TensorShape DataFormat::image_to_first(const TensorShape& s) const {
  if (!first_ || s.rank() != 3) return s.rank() == 4 ? to_first(s) : s;
  return TensorShape{s[2], s[0], s[1]};
}

Tensor DataFormat::image_to_last(const Tensor& x) const {
  if (!first_ || x.rank() != 3) return x.rank() == 4 ? to_last(x) : x;
  return transpose(x, {1, 2, 0});
}

Tensor DataFormat::image_to_first(const Tensor& x) const {
  if (!first_ || x.rank() != 3) return x.rank() == 4 ? to_first(x) : x;
  return transpose(x, {2, 0, 1});
}

std::string DataFormat::image_mismatch(const TensorShape& s, bool known_hw) const {
  if (s.rank() != 3 && s.rank() != 4)
    return first_ ? "expected images of rank 3 (channels, height, width) or 4 (batch, channels, "
                    "height, width)"
                  : "expected images of rank 3 (height, width, channels) or 4 (batch, height, "
                    "width, channels)";
  const TensorShape t = image_to_last(s);
  if (known_hw && (t[t.rank() - 3] == None || t[t.rank() - 2] == None))
    return "expected images with known height and width";
  return "";
}

std::string DataFormat::mismatch(const TensorShape& s, int rank, int64_t channels) const {
  if (s.rank() == rank) {
    const int64_t c = s[channel_axis(rank)];
    if (c == channels || c == None) return {};
  }
  return fmt::format("expected ndim={} and axis {} of input shape to have value {}", rank,
                     first_ ? 1 : -1, channels);
}

}  // namespace tapeflow::keras::detail
