// The layers of keras/layers_extra.h: RMSNormalization, AlphaDropout, Lambda, the adaptive
// poolings, CategoryEncoding, Discretization and IntegerLookup. All are composites of existing
// ops, so they run on every device and inside traced functions.
#include "keras/layers_extra.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/context.h"
#include "core/error.h"
#include "keras/categorical.h"
#include "keras/data_format.h"
#include "keras/serialization_access_conv.h"
#include "keras/serialization_access_sequence.h"
#include "keras/utils.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace detail {
namespace {

std::string shape_str(const TensorShape& s) {
  return s.to_string();
}

// The normalised, sorted, distinct axes of a rank-`rank` input; InvalidArgumentError naming
// the layer otherwise.
std::vector<int> normalise_axes(const std::vector<int>& axes, int rank, const std::string& layer,
                                const char* cls, const TensorShape& s) {
  TF_CHECK_ARG(!axes.empty(), layer.c_str(), "layer \"{}\" ({}): axis must name at least one axis",
               layer, cls);
  std::vector<int> out;
  for (int a : axes) {
    TF_CHECK_ARG(a >= -rank && a < rank, layer.c_str(),
                 "layer \"{}\" ({}): axis {} is out of range for inputs of shape {}", layer, cls, a,
                 shape_str(s));
    const int n = a < 0 ? a + rank : a;
    TF_CHECK_ARG(std::find(out.begin(), out.end(), n) == out.end(), layer.c_str(),
                 "layer \"{}\" ({}): axis {} is listed twice", layer, cls, a);
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- RMSNormalization ----
class RMSNormImpl final : public LayerImpl {
 public:
  // Keras computes in float32 at least (result_type(x.dtype, "float32")).
  bool autocast() const override { return false; }
  bool supports_masking() const override { return true; }  // a per-example op
  RMSNormImpl(std::vector<int> axes, double epsilon, std::string name)
      : LayerImpl("RMSNormalization", "rms_normalization", std::move(name)),
        axes_arg_(std::move(axes)),
        epsilon_(epsilon) {
    TF_CHECK_ARG(!axes_arg_.empty(), "RMSNormalization", "axis must name at least one axis");
    TF_CHECK_ARG(epsilon >= 0.0 && std::isfinite(epsilon), "RMSNormalization",
                 "epsilon must be >= 0 and finite, got {}", epsilon);
  }

 protected:
  void build(const TensorShape& s) override {
    rank_ = s.rank();
    axes_ = normalise_axes(axes_arg_, rank_, name_, "RMSNormalization", s);
    TensorShape param;
    bshape_ = TensorShape();
    for (int d = 0; d < rank_; ++d) bshape_.push_back(1);
    for (int a : axes_) {
      TF_CHECK_ARG(s[a] != None, name_.c_str(),
                   "layer \"{}\" (RMSNormalization): axis {} of the input must be known, got "
                   "shape {}",
                   name_, a, shape_str(s));
      param.push_back(s[a]);
      bshape_[a] = s[a];
    }
    dims_ = param;
    scale_ = add_weight("scale", param, initializers::Ones(), true);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    bool ok = s.rank() == rank_;
    for (size_t i = 0; ok && i < axes_.size(); ++i)
      ok = s[axes_[i]] == dims_[static_cast<int>(i)] || s[axes_[i]] == None;
    if (!ok)
      incompatible(s, fmt::format("expected ndim={} and the normalised axes to match (the layer "
                                  "was built for input shape {})",
                                  rank_, shape_str(built_input_shape())));
  }
  Tensor call(const Tensor& x, bool) override {
    // The scale broadcasts over the normalised axes wherever they are (Keras multiplies the raw
    // scale, which lines up only when the axes are the trailing ones).
    const Tensor rrms = rsqrt(reduce_mean(square(x), axes_, true) + epsilon_);
    return x * rrms * reshape(scale_.value(), bshape_);
  }

 private:
  friend class layers::RMSNormalization;
  friend std::optional<layer_options::RMSNormalizationConfig> layer_options::rms_normalization(
      const LayerImpl&);
  std::vector<int> axes_arg_;
  double epsilon_;
  int rank_ = 0;
  std::vector<int> axes_;
  TensorShape dims_, bshape_;
  Variable scale_;
};

// ---- AlphaDropout ----
class AlphaDropoutImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  AlphaDropoutImpl(double rate, std::vector<int64_t> noise_shape, std::optional<int64_t> seed,
                   std::string name)
      : LayerImpl("AlphaDropout", "alpha_dropout", std::move(name)),
        rate_(rate),
        noise_shape_(std::move(noise_shape)),
        seed_(seed) {
    TF_CHECK_ARG(rate >= 0.0 && rate <= 1.0, "AlphaDropout",
                 "rate must be a float between 0 and 1, got {}", rate);
    for (int64_t d : noise_shape_)
      TF_CHECK_ARG(d >= 0, "AlphaDropout",
                   "noise_shape entries must be >= 0 (0 for the input's size), got {}", d);
  }

 protected:
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (noise_shape_.empty()) return;
    bool ok = static_cast<int>(noise_shape_.size()) == s.rank();
    for (int d = 0; ok && d < s.rank(); ++d)
      ok = noise_shape_[d] == 0 || noise_shape_[d] == 1 || s[d] == None || noise_shape_[d] == s[d];
    if (!ok)
      incompatible(s, fmt::format("noise_shape ({}) must have the input's rank and each entry 0, "
                                  "1 or the input's size",
                                  fmt::join(noise_shape_, ", ")));
  }
  Tensor call(const Tensor& x, bool training) override {
    if (!training || rate_ == 0.0) return x;
    std::optional<DeviceScope> scope;
    if (::tapeflow::detail::thread_context().device_stack.empty()) scope.emplace(x.placement());
    // SELU's constants (Klambauer et al. 2017).
    constexpr double alpha = 1.6732632423543772848170429916717;
    constexpr double selu_scale = 1.0507009873554804934193349852946;
    constexpr double alpha_p = -alpha * selu_scale;
    std::vector<int> shared;  // the axes where one draw serves the whole axis
    for (int d = 0; d < static_cast<int>(noise_shape_.size()); ++d)
      if (noise_shape_[d] == 1) shared.push_back(d);
    Tensor u;
    if (shared.empty()) {
      u = ::tapeflow::detail::random_uniform_like(x, 0.0, 1.0, x.dtype(), seed_);
    } else {
      // The draws' shape comes from x with the shared axes 1 (a sum the tapes do not record:
      // the noise is no function of x).
      ::tapeflow::detail::PauseTapes pause;
      u = ::tapeflow::detail::random_uniform_like(reduce_sum(x, shared, true), 0.0, 1.0, x.dtype(),
                                                  seed_);
    }
    const Tensor kept = cast(greater_equal(u, rate_), x.dtype());
    const double a = std::pow((1.0 - rate_) * (1.0 + rate_ * alpha_p * alpha_p), -0.5);
    const double b = -a * alpha_p * rate_;
    return (x * kept + (1.0 - kept) * alpha_p) * a + b;
  }

 private:
  friend std::optional<layer_options::AlphaDropoutConfig> layer_options::alpha_dropout(
      const LayerImpl&);
  double rate_;
  std::vector<int64_t> noise_shape_;
  std::optional<int64_t> seed_;
};

// ---- Lambda ----
class LambdaImpl final : public LayerImpl {
 public:
  LambdaImpl(layers::Lambda::Function fn, layers::Lambda::ShapeFunction shape_fn, std::string name)
      : LayerImpl("Lambda", "lambda", std::move(name)),
        fn_(std::move(fn)),
        shape_fn_(std::move(shape_fn)) {
    TF_CHECK_ARG(static_cast<bool>(fn_), "Lambda", "the function is empty");
  }

 protected:
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (shape_fn_) return shape_fn_(s);
    // Runs the function on zeros with each unknown dimension 1 and then 2, outside the tapes:
    // an output dimension that follows it is unknown too.
    ::tapeflow::detail::PauseTapes pause;
    auto probe = [&](int64_t fill) {
      TensorShape p = s;
      for (int d = 0; d < p.rank(); ++d)
        if (p[d] == None) p[d] = fill;
      return fn_(zeros(p, dtype_)).shape();
    };
    TensorShape a, b;
    try {
      a = probe(1);
      b = probe(2);
    } catch (const Error& e) {
      TF_THROW(InvalidArgumentError, name_.c_str(),
               "layer \"{}\" (Lambda): the output shape for input shape {} could not be found by "
               "running the function on zeros ({}); give an output_shape function",
               name_, shape_str(s), e.what());
    }
    if (a.rank() != b.rank()) return a;
    for (int d = 0; d < a.rank(); ++d)
      if (a[d] != b[d]) a[d] = None;
    return a;
  }
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool) override { return fn_(x); }

 private:
  layers::Lambda::Function fn_;
  layers::Lambda::ShapeFunction shape_fn_;
};

// ---- Adaptive pooling ----
class AdaptivePoolImpl final : public LayerImpl {
 public:
  AdaptivePoolImpl(const char* cls, bool max, std::vector<int64_t> sizes, std::string name,
                   const std::string& data_format = "")
      : LayerImpl(cls, to_snake_case(cls), std::move(name)),
        max_(max),
        sizes_(std::move(sizes)),
        format_(DataFormat::parse(cls, data_format)) {
    for (int64_t n : sizes_)
      TF_CHECK_ARG(n > 0, cls, "output_size must be positive, got {}", fmt::join(sizes_, ", "));
  }

 protected:
  int rank() const { return static_cast<int>(sizes_.size()) + 2; }
  std::string expectation() const {
    static const char* layouts[2][3] = {
        {"(batch, steps, channels)", "(batch, height, width, channels)",
         "(batch, depth, height, width, channels)"},
        {"(batch, channels, steps)", "(batch, channels, height, width)",
         "(batch, channels, depth, height, width)"}};
    return fmt::format("expected ndim={} {}", rank(),
                       layouts[format_.channels_first() ? 1 : 0][sizes_.size() - 1]);
  }
  // The input axis of spatial dimension i.
  int axis(size_t i) const { return static_cast<int>(i) + (format_.channels_first() ? 2 : 1); }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != rank()) incompatible(s, expectation());
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != rank()) incompatible(s, expectation());
    TensorShape o = s;
    for (size_t i = 0; i < sizes_.size(); ++i) o[axis(i)] = sizes_[i];
    return o;
  }
  // The (n, len) averaging weights of the bins of an axis of length len.
  static std::vector<double> bin_weights(int64_t len, int64_t n) {
    std::vector<double> w(static_cast<size_t>(n * len), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t start = (j * len) / n, end = ((j + 1) * len + n - 1) / n;
      for (int64_t l = start; l < end; ++l)
        w[static_cast<size_t>(j * len + l)] = 1.0 / static_cast<double>(end - start);
    }
    return w;
  }
  Tensor call(const Tensor& x, bool) override {
    // Pools one spatial axis at a time (the mean and the max over a box are the mean and max of
    // the per-axis ones): output i of an axis of length L covers [floor(i L / n),
    // ceil((i + 1) L / n)).
    Tensor y = x;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      const int axis = this->axis(i);
      const int64_t len = y.shape()[axis];
      TF_CHECK_ARG(len != None && len > 0, name_.c_str(),
                   "layer \"{}\" ({}) needs a known, non-zero size at axis {}, got input shape {}",
                   name_, class_name_, axis, shape_str(x.shape()));
      const int64_t n = sizes_[i];
      if (::tapeflow::detail::open_shapes()) {
        // In a trace for None dimensions: the bins as an (n, len) table made from the length
        // when the graph runs (averaging weights; for the maximum, where each bin holds).
        const Tensor w = ::tapeflow::detail::axis_table(
            y, axis, max_ ? "adaptive_max_bins" : "adaptive_average_bins", {static_cast<double>(n)},
            max_ ? bool_ : y.dtype(),
            [n, layer = name_, cls = class_name_](int64_t l) {
              TF_CHECK_ARG(l > 0, layer.c_str(), "layer \"{}\" ({}) needs a non-zero size, got {}",
                           layer, cls, l);
              return bin_weights(l, n);
            },
            [n](int64_t l) {
              return TensorShape({n, l});
            });
        if (!max_) {
          y = ::tapeflow::detail::matmul_along(w, y, axis);
          continue;
        }
        // The maximum: the axis moved last, (..., n, len) of the values in each bin and -inf
        // elsewhere, reduced over len, and moved back.
        std::vector<int> perm(static_cast<size_t>(y.rank()));
        for (int d = 0; d < y.rank(); ++d) perm[static_cast<size_t>(d)] = d;
        std::swap(perm[static_cast<size_t>(axis)], perm.back());
        const Tensor t = transpose(y, perm);
        const Tensor lowest = cast(Tensor(-std::numeric_limits<double>::infinity()), y.dtype());
        const Tensor in_bins = where(w, ::tapeflow::detail::insert_axes(t, {t.rank() - 1}), lowest);
        y = transpose(reduce_max(in_bins, -1), perm);
        continue;
      }
      std::vector<Tensor> parts;
      parts.reserve(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        const int64_t start = (j * len) / n;
        const int64_t end = ((j + 1) * len + n - 1) / n;
        std::vector<int64_t> begin(static_cast<size_t>(y.rank()), 0);
        std::vector<int64_t> size(static_cast<size_t>(y.rank()), -1);
        begin[axis] = start;
        size[axis] = end - start;
        const Tensor box = slice(y, begin, size);
        parts.push_back(max_ ? reduce_max(box, axis, true) : reduce_mean(box, axis, true));
      }
      y = parts.size() == 1 ? parts[0] : concat(parts, axis);
    }
    return y;
  }

 private:
  friend std::optional<layer_options::AdaptivePoolingConfig> layer_options::adaptive_pooling(
      const LayerImpl&);
  bool max_;
  std::vector<int64_t> sizes_;
  DataFormat format_;
};

// Integer ids as int64 (floating ids are cast; they must hold integers, as Keras').
Tensor as_int64(const Tensor& x) {
  return x.dtype() == int64 ? x : cast(x, int64);
}

// The (min, max) of an eager integer tensor, or nothing for a symbolic or empty one.
std::optional<std::pair<int64_t, int64_t>> eager_range(const Tensor& ids) {
  if (ids.is_symbolic() || ids.shape().num_elements() == 0) return std::nullopt;
  ::tapeflow::detail::PauseTapes pause;
  const std::vector<double> lo = ::tapeflow::detail::to_double_vector(reduce_min(ids));
  const std::vector<double> hi = ::tapeflow::detail::to_double_vector(reduce_max(ids));
  return std::make_pair(static_cast<int64_t>(lo[0]), static_cast<int64_t>(hi[0]));
}

}  // namespace

TensorShape encoded_shape(const TensorShape& s, const std::string& mode, int64_t depth) {
  if (mode == "int") return s;
  if (mode != "one_hot" && s.rank() == 1) return TensorShape({depth});
  return TensorShape({s.rank() == 0 ? None : s[0], depth});
}

void check_output_mode(const char* cls, const std::string& mode) {
  TF_CHECK_ARG(mode == "int" || mode == "one_hot" || mode == "multi_hot" || mode == "count", cls,
               "output_mode must be \"int\", \"one_hot\", \"multi_hot\" or \"count\", got \"{}\"",
               mode);
}

Tensor encode_categorical(const Tensor& ids, int64_t depth, const std::string& mode, DType dtype,
                          const Tensor& count_weights, const std::string& layer, const char* cls) {
  const TensorShape& s = ids.shape();
  if (mode == "one_hot") {
    Tensor v = ids;
    if (s.rank() == 2) {
      TF_CHECK_ARG(s[1] == 1 || s[1] == None, layer.c_str(),
                   "layer \"{}\" ({}) with output_mode \"one_hot\" takes (batch,) or (batch, 1) "
                   "ids, got shape {}",
                   layer, cls, shape_str(s));
      v = squeeze(ids, {1});
    } else {
      TF_CHECK_ARG(s.rank() == 1, layer.c_str(),
                   "layer \"{}\" ({}) with output_mode \"one_hot\" takes (batch,) or (batch, 1) "
                   "ids, got shape {}",
                   layer, cls, shape_str(s));
    }
    return cast(one_hot(v, depth), dtype);
  }
  TF_CHECK_ARG(s.rank() == 1 || s.rank() == 2, layer.c_str(),
               "layer \"{}\" ({}) with output_mode \"{}\" takes (batch, k) or (k,) ids, got "
               "shape {}",
               layer, cls, mode, shape_str(s));
  const int axis = s.rank() - 1;
  Tensor hot = one_hot(ids, depth);  // (..., k, depth)
  if (mode == "multi_hot") return cast(reduce_max(hot, axis), dtype);
  if (count_weights.defined()) {
    TF_CHECK_ARG(count_weights.shape() == s, layer.c_str(),
                 "layer \"{}\" ({}): count_weights must have the ids' shape {}, got {}", layer, cls,
                 shape_str(s), shape_str(count_weights.shape()));
    hot = cast(hot, count_weights.dtype()) * expand_dims(count_weights, -1);
  }
  return cast(reduce_sum(hot, axis), dtype);
}

namespace {

// ---- CategoryEncoding ----
class CategoryEncodingImpl final : public LayerImpl {
 public:
  CategoryEncodingImpl(int64_t num_tokens, std::string mode, std::string name)
      : LayerImpl("CategoryEncoding", "category_encoding", std::move(name)),
        num_tokens_(num_tokens),
        mode_(std::move(mode)) {
    TF_CHECK_ARG(num_tokens > 0, "CategoryEncoding", "num_tokens must be > 0, got {}", num_tokens);
    TF_CHECK_ARG(mode_ == "one_hot" || mode_ == "multi_hot" || mode_ == "count", "CategoryEncoding",
                 "output_mode must be \"one_hot\", \"multi_hot\" or \"count\", got \"{}\"", mode_);
  }
  Tensor encode_with(const Tensor& x, const Tensor& weights) {
    TF_CHECK_ARG(!weights.defined() || mode_ == "count", name_.c_str(),
                 "layer \"{}\" (CategoryEncoding): count_weights need output_mode \"count\", "
                 "got \"{}\"",
                 name_, mode_);
    const Tensor ids = as_int64(x);
    if (const auto r = eager_range(ids))
      TF_CHECK_ARG(r->first >= 0 && r->second < num_tokens_, name_.c_str(),
                   "layer \"{}\" (CategoryEncoding) has num_tokens {}: every id must be in [0, "
                   "{}), got ids from {} to {} (shape {})",
                   name_, num_tokens_, num_tokens_, r->first, r->second, shape_str(ids.shape()));
    return encode_categorical(ids, num_tokens_, mode_, dtype_, weights, name_, "CategoryEncoding");
  }

 protected:
  bool casts_all_inputs() const override { return false; }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    return encoded_shape(s, mode_, num_tokens_);
  }
  Tensor call(const Tensor& x, bool) override { return encode_with(x, Tensor()); }

 private:
  int64_t num_tokens_;
  std::string mode_;

 public:
  int64_t num_tokens() const { return num_tokens_; }
  const std::string& mode() const { return mode_; }
};

// Keras 3's approximate quantiles (discretization.py): the data (as float32) is reduced to a
// summary of about 1 / epsilon (value, weight) pairs, compressed, and the boundaries are the
// summary's 1 / num_bins, 2 / num_bins, ... quantiles, interpolated on the cumulative weights.
// For data of fewer than 1 / epsilon values this is numpy's quantile at position q n - 1 (and
// with fewer values than bins, the sorted values but the last).
struct Summary {
  std::vector<double> values, weights;  // float32 values, as Keras keeps them
};
// numpy.interp: linear in the points (xp increasing), clamped at the ends.
double interp(double x, const std::vector<double>& xp, const std::vector<double>& fp) {
  if (x <= xp.front()) return fp.front();
  if (x >= xp.back()) return fp.back();
  const size_t j = static_cast<size_t>(std::upper_bound(xp.begin(), xp.end(), x) - xp.begin()) - 1;
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  return fp[j] + slope * (x - xp[j]);
}
float f32(double v) {
  return static_cast<float>(v);
}
Summary compress(const Summary& s, double epsilon) {
  if (static_cast<double>(s.values.size()) * epsilon < 1.0) return s;
  // numpy.arange(0, 1, epsilon) has ceil(1 / epsilon) elements.
  const auto count = static_cast<size_t>(std::ceil(1.0 / epsilon));
  std::vector<double> cum(s.weights.size()), pct(s.weights.size());
  float acc = 0.0f;  // float32 cumsum, as numpy's on the float32 summary
  for (size_t i = 0; i < cum.size(); ++i) cum[i] = acc = f32(double(acc) + s.weights[i]);
  for (size_t i = 0; i < cum.size(); ++i) pct[i] = f32(cum[i] / cum.back());
  Summary out;
  double prev = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double p = epsilon + static_cast<double>(i) * epsilon;
    out.values.push_back(f32(interp(p, pct, s.values)));
    const double c = interp(p, pct, cum);
    out.weights.push_back(f32(c - prev));
    prev = c;
  }
  return out;
}
std::vector<double> quantile_boundaries(std::vector<double> data, int64_t num_bins,
                                        double epsilon) {
  for (double& d : data) d = f32(d);
  std::sort(data.begin(), data.end());
  // summarize(): every step-th value (step = n epsilon, at least 1) with weight step.
  const double n = static_cast<double>(data.size());
  const double step = std::max(n / (1.0 / epsilon), 1.0);
  const auto first = static_cast<size_t>(step - 1.0), stride = static_cast<size_t>(step);
  Summary s;
  for (size_t i = first; i < data.size(); i += stride) {
    s.values.push_back(data[i]);
    s.weights.push_back(f32(step));
  }
  s = compress(s, epsilon);  // merge_summaries with the empty summary
  s = compress(s, 1.0 / static_cast<double>(num_bins));
  s.values.pop_back();
  return s.values;
}

// ---- Discretization ----
class DiscretizationImpl final : public LayerImpl {
 public:
  DiscretizationImpl(std::vector<double> bounds, int64_t num_bins, double epsilon,
                     std::string name)
      : LayerImpl("Discretization", "discretization", std::move(name)),
        bounds_(std::move(bounds)),
        num_bins_(num_bins),
        epsilon_(epsilon) {
    check_bounds(bounds_);
    TF_CHECK_ARG(epsilon > 0.0 && epsilon < 1.0, "Discretization",
                 "epsilon must be in (0, 1), got {}", epsilon);
  }
  void adapt(const Tensor& data) {
    TF_CHECK_ARG(num_bins_ > 0, name_.c_str(),
                 "layer \"{}\" (Discretization) was given bin_boundaries: adapt() needs one made "
                 "with num_bins",
                 name_);
    std::vector<double> v = ::tapeflow::detail::to_double_vector(data);
    TF_CHECK_ARG(!v.empty(), name_.c_str(),
                 "layer \"{}\" (Discretization): adapt() got no data (shape {})", name_,
                 shape_str(data.shape()));
    for (double d : v)
      TF_CHECK_ARG(!std::isnan(d), name_.c_str(),
                   "layer \"{}\" (Discretization): adapt() data holds NaN", name_);
    std::vector<double> b = quantile_boundaries(std::move(v), num_bins_, epsilon_);
    std::lock_guard<std::mutex> lock(mu_);
    bounds_ = std::move(b);
  }
  std::vector<double> bounds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bounds_;
  }
  int64_t num_bins() const { return num_bins_; }
  double epsilon() const { return epsilon_; }

 protected:
  bool casts_all_inputs() const override { return false; }
  bool autocast() const override { return false; }
  Tensor call(const Tensor& x, bool) override {
    const std::vector<double> b = bounds();
    TF_CHECK_ARG(!b.empty() || num_bins_ <= 0, name_.c_str(),
                 "layer \"{}\" (Discretization) has no bin boundaries yet: call adapt() first",
                 name_);
    if (b.empty()) return zeros_like(cast(x, int64));
    // Compares in the input's floating dtype (TF's Bucketize), integers in float64.
    const DType dt = x.dtype() == float64 || x.dtype() == float32 ? x.dtype() : float64;
    const Tensor v = cast(x, dt);
    const Tensor bt = cast(convert_to_tensor(b, TensorShape({static_cast<int64_t>(b.size())})), dt);
    return reduce_sum(cast(greater_equal(expand_dims(v, -1), bt), int64), -1);
  }

 private:
  static void check_bounds(const std::vector<double>& b) {
    for (size_t i = 1; i < b.size(); ++i)
      TF_CHECK_ARG(b[i - 1] <= b[i], "Discretization",
                   "bin_boundaries must be sorted, got {} before {}", b[i - 1], b[i]);
  }
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  int64_t num_bins_;
  double epsilon_;
};

// ---- IntegerLookup ----
class IntegerLookupImpl final : public LayerImpl {
 public:
  explicit IntegerLookupImpl(layers::IntegerLookupOptions o)
      : LayerImpl("IntegerLookup", "integer_lookup", o.name), o_(std::move(o)) {
    const char* cls = "IntegerLookup";
    TF_CHECK_ARG(o_.num_oov_indices >= 0, cls, "num_oov_indices must be >= 0, got {}",
                 o_.num_oov_indices);
    check_output_mode(cls, o_.output_mode);
    TF_CHECK_ARG(!o_.invert || o_.output_mode == "int", cls,
                 "invert needs output_mode \"int\", got \"{}\"", o_.output_mode);
    TF_CHECK_ARG(o_.oov_method == "floormod" || o_.oov_method == "farmhash", cls,
                 "oov_method must be \"floormod\" or \"farmhash\", got \"{}\"", o_.oov_method);
    TF_CHECK_ARG(o_.salt.empty() || o_.oov_method == "farmhash", cls,
                 "`salt` can only be used when `oov_method='farmhash'`. Received: oov_method={}",
                 o_.oov_method);
    TF_CHECK_ARG(o_.salt.size() <= 2, cls, "salt must be one integer or two, got {} of them",
                 o_.salt.size());
    TF_CHECK_ARG(!o_.max_tokens || *o_.max_tokens > reserved(), cls,
                 "max_tokens ({}) must exceed the {} reserved indices (mask and OOV)",
                 o_.max_tokens.value_or(0), reserved());
    set_vocabulary(o_.vocabulary);
  }
  // Keras gives the mask token an index only with output_mode "int"; the encodings leave it out
  // (a masked token encodes to nothing).
  bool mask_indexed() const { return o_.mask_token && o_.output_mode == "int"; }
  int64_t reserved() const { return (mask_indexed() ? 1 : 0) + o_.num_oov_indices; }
  void set_vocabulary(const std::vector<int64_t>& vocab) {
    for (size_t i = 0; i < vocab.size(); ++i) {
      TF_CHECK_ARG(!o_.mask_token || vocab[i] != *o_.mask_token, name_.c_str(),
                   "layer \"{}\" (IntegerLookup): the vocabulary holds the mask token {}", name_,
                   *o_.mask_token);
      TF_CHECK_ARG(o_.num_oov_indices == 0 || vocab[i] != o_.oov_token, name_.c_str(),
                   "layer \"{}\" (IntegerLookup): the vocabulary holds the OOV token {}", name_,
                   o_.oov_token);
      for (size_t j = 0; j < i; ++j)
        TF_CHECK_ARG(vocab[j] != vocab[i], name_.c_str(),
                     "layer \"{}\" (IntegerLookup): the vocabulary holds {} twice", name_,
                     vocab[i]);
    }
    std::lock_guard<std::mutex> lock(mu_);
    vocab_ = vocab;
  }
  void adapt(const Tensor& data) {
    TF_CHECK_ARG(data.dtype() == int32 || data.dtype() == int64, name_.c_str(),
                 "layer \"{}\" (IntegerLookup): adapt() takes int32 or int64 data, got {}", name_,
                 dtype_name(data.dtype()));
    std::map<int64_t, int64_t> counts;
    for (double d : ::tapeflow::detail::to_double_vector(data)) {
      const auto t = static_cast<int64_t>(d);
      if ((o_.mask_token && t == *o_.mask_token) || (o_.num_oov_indices > 0 && t == o_.oov_token))
        continue;
      ++counts[t];
    }
    std::vector<std::pair<int64_t, int64_t>> order(counts.begin(), counts.end());
    // Most frequent first; ties: the larger token first (what Keras 3.15 gives).
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first > b.first;
    });
    std::vector<int64_t> vocab;
    const int64_t keep = o_.max_tokens ? *o_.max_tokens - reserved() : INT64_MAX;
    for (const auto& [token, n] : order) {
      if (static_cast<int64_t>(vocab.size()) >= keep) break;
      vocab.push_back(token);
    }
    set_vocabulary(vocab);
  }
  // The options with the vocabulary as it is now (given or adapted), as get_config writes them.
  layers::IntegerLookupOptions options() const {
    layers::IntegerLookupOptions o = o_;
    std::lock_guard<std::mutex> lock(mu_);
    o.vocabulary = vocab_;
    return o;
  }
  // The full index table: mask token ("int" mode), OOV token, vocabulary.
  std::vector<int64_t> table() const {
    std::vector<int64_t> t;
    if (mask_indexed()) t.push_back(*o_.mask_token);
    t.insert(t.end(), static_cast<size_t>(o_.num_oov_indices), o_.oov_token);
    std::lock_guard<std::mutex> lock(mu_);
    t.insert(t.end(), vocab_.begin(), vocab_.end());
    return t;
  }

 protected:
  bool casts_all_inputs() const override { return false; }
  bool autocast() const override { return false; }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (o_.output_mode == "int") return s;
    return encoded_shape(s, o_.output_mode, static_cast<int64_t>(table().size()));
  }
  Tensor call(const Tensor& x, bool) override {
    TF_CHECK_ARG(x.dtype() == int32 || x.dtype() == int64, name_.c_str(),
                 "layer \"{}\" (IntegerLookup) takes int32 or int64 tokens, got {}", name_,
                 dtype_name(x.dtype()));
    const std::vector<int64_t> t = table();
    const auto size = static_cast<int64_t>(t.size());
    TF_CHECK_ARG(size > reserved(), name_.c_str(),
                 "layer \"{}\" (IntegerLookup) has an empty vocabulary: give one or call adapt() "
                 "first",
                 name_);
    const Tensor tokens = as_int64(x);
    const Tensor table_t = convert_to_tensor(t, TensorShape({size}));
    if (o_.invert) {
      // Index -> token; indices outside the table give the OOV token (Keras).
      const Tensor in = logical_and(greater_equal(tokens, int64_t{0}), less(tokens, size));
      const Tensor safe = where(in, tokens, zeros_like(tokens));
      return where(in, gather(table_t, safe), fill_like_int(tokens, o_.oov_token));
    }
    // Token -> index: a comparison with every vocabulary entry (a composite that every device
    // and traced function runs; O(tokens x vocabulary)).
    const Tensor vocab_t = slice(table_t, {reserved()}, {size - reserved()});
    const Tensor eq = equal(expand_dims(tokens, -1), vocab_t);
    const Tensor found = reduce_any(eq, -1);
    const Tensor index = argmax(cast(eq, int32), -1) + reserved();
    // Without an OOV index an unknown token is an error in eager calls (Keras asserts); a traced
    // call, which cannot check values, gives it -1, which encodes to nothing.
    const int64_t oov_start = mask_indexed() ? 1 : 0;
    const int64_t oov_index = o_.num_oov_indices == 0 ? -1 : oov_start;
    if (o_.num_oov_indices == 0 && !tokens.is_symbolic()) {
      ::tapeflow::detail::PauseTapes pause;
      const bool all = ::tapeflow::detail::to_double_vector(
                           reduce_all(logical_or(found, mask_of(tokens))))[0] != 0.0;
      TF_CHECK_ARG(all, name_.c_str(),
                   "layer \"{}\" (IntegerLookup) has num_oov_indices 0: every token must be in "
                   "the vocabulary (tokens of shape {})",
                   name_, shape_str(tokens.shape()));
    }
    // Several OOV indices: Keras' default "floormod" or its "farmhash" spreads unknown tokens
    // over them.
    Tensor oov;
    if (o_.num_oov_indices <= 1)
      oov = fill_like_int(tokens, oov_index);
    else if (o_.oov_method == "farmhash")
      oov = hash_to_bins(tokens, o_.num_oov_indices, o_.salt) + oov_start;
    else
      oov = floormod(tokens, fill_like_int(tokens, o_.num_oov_indices)) + oov_start;
    Tensor ids = where(found, index, oov);
    if (o_.mask_token)
      ids = where(mask_of(tokens), fill_like_int(ids, mask_indexed() ? 0 : -1), ids);
    if (o_.output_mode == "int") return ids;
    return encode_categorical(ids, size, o_.output_mode, int64, Tensor(), name_, "IntegerLookup");
  }

 private:
  Tensor mask_of(const Tensor& tokens) const {
    if (!o_.mask_token) return cast(zeros_like(tokens), bool_);
    return equal(tokens, *o_.mask_token);
  }
  static Tensor fill_like_int(const Tensor& like, int64_t v) { return zeros_like(like) + v; }
  layers::IntegerLookupOptions o_;
  mutable std::mutex mu_;
  std::vector<int64_t> vocab_;
};

}  // namespace

std::optional<layer_options::CategoryEncodingConfig> layer_options::category_encoding(
    const LayerImpl& layer) {
  const auto* p = dynamic_cast<const CategoryEncodingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return CategoryEncodingConfig{p->num_tokens(), p->mode()};
}
std::optional<layers::IntegerLookupOptions> layer_options::integer_lookup(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const IntegerLookupImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->options();
}
std::optional<layer_options::DiscretizationConfig> layer_options::discretization(
    const LayerImpl& layer) {
  const auto* p = dynamic_cast<const DiscretizationImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return DiscretizationConfig{p->bounds(), p->num_bins(), p->epsilon()};
}
Layer layer_options::make_discretization(std::vector<double> bin_boundaries, int64_t num_bins,
                                         double epsilon, std::string name) {
  return Layer(std::make_shared<DiscretizationImpl>(std::move(bin_boundaries), num_bins, epsilon,
                                                    std::move(name)));
}

}  // namespace detail

namespace layers {
using detail::AdaptivePoolImpl;

RMSNormalization::RMSNormalization(int axis, double epsilon, std::string name)
    : RMSNormalization(std::vector<int>{axis}, epsilon, std::move(name)) {}
RMSNormalization::RMSNormalization(std::vector<int> axes, double epsilon, std::string name)
    : Layer(std::make_shared<detail::RMSNormImpl>(std::move(axes), epsilon, std::move(name))) {}
Variable RMSNormalization::scale() const {
  return impl().weight("scale");
}

AlphaDropout::AlphaDropout(double rate, std::vector<int64_t> noise_shape,
                           std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<detail::AlphaDropoutImpl>(rate, std::move(noise_shape), seed,
                                                       std::move(name))) {}

Lambda::Lambda(Function function, ShapeFunction output_shape, std::string name)
    : Layer(std::make_shared<detail::LambdaImpl>(std::move(function), std::move(output_shape),
                                                 std::move(name))) {}

AdaptiveAveragePooling1D::AdaptiveAveragePooling1D(int64_t n, FormatOptions o)
    : Layer(std::make_shared<AdaptivePoolImpl>("AdaptiveAveragePooling1D", false,
                                               std::vector<int64_t>{n}, std::move(o.name),
                                               o.data_format)) {}
AdaptiveMaxPooling1D::AdaptiveMaxPooling1D(int64_t n, FormatOptions o)
    : Layer(std::make_shared<AdaptivePoolImpl>("AdaptiveMaxPooling1D", true,
                                               std::vector<int64_t>{n}, std::move(o.name),
                                               o.data_format)) {}
AdaptiveAveragePooling2D::AdaptiveAveragePooling2D(Size2 n, FormatOptions o)
    : Layer(std::make_shared<AdaptivePoolImpl>("AdaptiveAveragePooling2D", false,
                                               std::vector<int64_t>{n.h, n.w}, std::move(o.name),
                                               o.data_format)) {}
AdaptiveMaxPooling2D::AdaptiveMaxPooling2D(Size2 n, FormatOptions o)
    : Layer(std::make_shared<AdaptivePoolImpl>("AdaptiveMaxPooling2D", true,
                                               std::vector<int64_t>{n.h, n.w}, std::move(o.name),
                                               o.data_format)) {}
AdaptiveAveragePooling3D::AdaptiveAveragePooling3D(Size3 n, FormatOptions o)
    : Layer(std::make_shared<AdaptivePoolImpl>("AdaptiveAveragePooling3D", false,
                                               std::vector<int64_t>{n.d, n.h, n.w},
                                               std::move(o.name), o.data_format)) {}
AdaptiveMaxPooling3D::AdaptiveMaxPooling3D(Size3 n, FormatOptions o)
    : Layer(std::make_shared<AdaptivePoolImpl>("AdaptiveMaxPooling3D", true,
                                               std::vector<int64_t>{n.d, n.h, n.w},
                                               std::move(o.name), o.data_format)) {}

CategoryEncoding::CategoryEncoding(int64_t num_tokens, std::string output_mode, std::string name)
    : Layer(std::make_shared<detail::CategoryEncodingImpl>(num_tokens, std::move(output_mode),
                                                           std::move(name))) {}
Tensor CategoryEncoding::operator()(const Tensor& ids, const Tensor& count_weights) const {
  auto& impl = static_cast<detail::CategoryEncodingImpl&>(this->impl());
  return impl.encode_with(ids, count_weights);
}

Discretization::Discretization(std::vector<double> bin_boundaries, std::string name)
    : Layer(std::make_shared<detail::DiscretizationImpl>(std::move(bin_boundaries), 0, 0.01,
                                                         std::move(name))) {}
Discretization Discretization::with_num_bins(int64_t num_bins, double epsilon,
                                             std::string name) {
  TF_CHECK_ARG(num_bins >= 2, "Discretization", "num_bins must be >= 2, got {}", num_bins);
  return Discretization(std::make_shared<detail::DiscretizationImpl>(
      std::vector<double>{}, num_bins, epsilon, std::move(name)));
}
void Discretization::adapt(const Tensor& data) {
  static_cast<detail::DiscretizationImpl&>(impl()).adapt(data);
}
std::vector<double> Discretization::bin_boundaries() const {
  return static_cast<const detail::DiscretizationImpl&>(impl()).bounds();
}

IntegerLookup::IntegerLookup(IntegerLookupOptions options)
    : Layer(std::make_shared<detail::IntegerLookupImpl>(std::move(options))) {}
void IntegerLookup::adapt(const Tensor& data) {
  static_cast<detail::IntegerLookupImpl&>(impl()).adapt(data);
}
std::vector<int64_t> IntegerLookup::get_vocabulary() const {
  return static_cast<const detail::IntegerLookupImpl&>(impl()).table();
}
int64_t IntegerLookup::vocabulary_size() const {
  return static_cast<int64_t>(get_vocabulary().size());
}

}  // namespace layers

namespace detail::layer_options {

std::optional<AdaptivePoolingConfig> adaptive_pooling(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const AdaptivePoolImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return AdaptivePoolingConfig{p->sizes_, p->format_.channels_first()};
}

std::optional<RMSNormalizationConfig> rms_normalization(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RMSNormImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return RMSNormalizationConfig{p->axes_arg_, p->epsilon_};
}
std::optional<AlphaDropoutConfig> alpha_dropout(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const AlphaDropoutImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return AlphaDropoutConfig{p->rate_, p->noise_shape_, p->seed_};
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
