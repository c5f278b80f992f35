// The layers of keras/layers_misc.h. Each is a LayerImpl (state, build, call) behind its handle,
// composed of existing ops, so CPU and CUDA both run it and the tape differentiates it.
#include "keras/layers_misc.h"

#include <algorithm>
#include <cmath>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/error.h"
#include "keras/data_format.h"
#include "keras/layer_handle.h"
#include "keras/serialization_access_conv.h"
#include "keras/serialization_access_sequence.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::DataFormat;
using detail::LayerImpl;
using layers::Sides1D;
using layers::Sides2D;

std::string shape_str(const TensorShape& s) {
  return s.to_string();
}
std::string sides_str(const Sides1D& s) {
  return fmt::format("({}, {})", s.begin, s.end);
}
std::string sides_str(const Sides2D& s) {
  return fmt::format("({}, {})", sides_str(s.height), sides_str(s.width));
}

// ---- ZeroPadding1D/2D and Cropping1D/2D ----
// One class for the four: `rank` 3 (steps at axis 1) or 4 (height and width at axes 1 and 2;
// 2 and 3 with channels_first).
class PadCropImpl final : public LayerImpl {
 public:
  PadCropImpl(const char* cls, const char* generic, bool crop, std::vector<Sides1D> sides,
              std::string name, const std::string& data_format = "")
      : LayerImpl(cls, generic, std::move(name)),
        crop_(crop),
        sides_(std::move(sides)),
        format_(DataFormat::parse(cls, data_format)) {
    for (const Sides1D& s : sides_)
      TF_CHECK_ARG(s.begin >= 0 && s.end >= 0, cls, "`{}` cannot be negative, got {}",
                   crop ? "cropping" : "padding", arg_str());
  }

 protected:
  int rank() const { return static_cast<int>(sides_.size()) + 2; }
  std::string arg_str() const {
    return sides_.size() == 1 ? sides_str(sides_[0]) : sides_str(Sides2D(sides_[0], sides_[1]));
  }
  void build(const TensorShape& s) override { (void)compute_output_shape(s); }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != rank()) incompatible(s, expectation());
    TensorShape o = s;
    for (size_t i = 0; i < sides_.size(); ++i) {
      const int a = axis(i);
      if (s[a] == None) continue;
      const int64_t total = sides_[i].begin + sides_[i].end;
      if (crop_) {
        // Keras' ValueError: the cropping must leave at least one step (row, column).
        TF_CHECK_ARG(s[a] > total, name_.c_str(),
                     "layer \"{}\" ({}): the cropping {} must be smaller than the input's {} "
                     "(axis {} of input shape {} has size {})",
                     name_, class_name_, arg_str(), rank() == 3 ? "length" : "height and width", a,
                     shape_str(s), s[a]);
        o[a] = s[a] - total;
      } else {
        o[a] = s[a] + total;
      }
    }
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != rank()) incompatible(s, expectation());
  }
  bool casts_all_inputs() const override { return false; }  // Keras keeps the dtype
  Tensor call(const Tensor& x, bool) override {
    (void)compute_output_shape(x.shape());  // checks the rank and what the cropping leaves
    if (!crop_) {
      std::vector<std::pair<int64_t, int64_t>> p(static_cast<size_t>(rank()), {0, 0});
      for (size_t i = 0; i < sides_.size(); ++i) p[axis(i)] = {sides_[i].begin, sides_[i].end};
      return pad(x, p);
    }
    // From each end, whatever the length (a graph traced for None dimensions serves them all).
    std::vector<int64_t> begin(static_cast<size_t>(rank()), 0),
        trim(static_cast<size_t>(rank()), 0);
    for (size_t i = 0; i < sides_.size(); ++i) {
      begin[axis(i)] = sides_[i].begin;
      trim[axis(i)] = sides_[i].end;
    }
    return tapeflow::detail::crop(class_name_.c_str(), x, begin, trim);
  }

 private:
  // The input axis of spatial dimension i.
  int axis(size_t i) const { return static_cast<int>(i) + (format_.channels_first() ? 2 : 1); }
  std::string expectation() const { return format_.expected_ndim(rank() - 2); }
  friend std::optional<detail::layer_options::PadCropConfig> detail::layer_options::pad_crop(
      const LayerImpl&);
  bool crop_;
  std::vector<Sides1D> sides_;
  DataFormat format_;
};

// ---- LeakyReLU and ELU ----
class LeakyReLUImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  LeakyReLUImpl(double slope, std::string name)
      : LayerImpl("LeakyReLU", "leaky_re_lu", std::move(name)), slope_(slope) {
    TF_CHECK_ARG(slope >= 0.0 && std::isfinite(slope), "LeakyReLU",
                 "negative_slope must be finite and >= 0, got {}", slope);
  }

 protected:
  Tensor call(const Tensor& x, bool) override { return nn::leaky_relu(x, slope_); }

 private:
  friend std::optional<double> detail::layer_options::leaky_relu_slope(const LayerImpl&);
  double slope_;
};

class ELUImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  ELUImpl(double alpha, std::string name)
      : LayerImpl("ELU", "elu", std::move(name)), alpha_(alpha) {
    TF_CHECK_ARG(std::isfinite(alpha), "ELU", "alpha must be finite, got {}", alpha);
  }

 protected:
  // Keras' TF backend: elu(x), and where(x > 0, elu(x), alpha * elu(x)) for alpha != 1 (so the
  // gradient at 0 is alpha).
  Tensor call(const Tensor& x, bool) override {
    const Tensor e = nn::elu(x);
    if (alpha_ == 1.0) return e;
    return where(greater(x, zeros_like(x)), e, e * alpha_);
  }

 private:
  friend std::optional<double> detail::layer_options::elu_alpha(const LayerImpl&);
  double alpha_;
};

// ---- PReLU ----
class PReLUImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  explicit PReLUImpl(layers::PReLUOptions o)
      : LayerImpl("PReLU", "p_re_lu", o.name),
        init_(o.alpha_initializer.defined() ? o.alpha_initializer : initializers::Zeros()),
        reg_(o.alpha_regularizer),
        con_(o.alpha_constraint),
        shared_(std::move(o.shared_axes)) {}

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() >= 2, name_.c_str(),
                 "layer \"{}\" (PReLU) needs inputs with a batch dimension and at least one "
                 "more, got shape {}",
                 name_, shape_str(s));
    TensorShape a;
    for (int i = 1; i < s.rank(); ++i) a.push_back(s[i]);
    for (int ax : shared_) {
      TF_CHECK_ARG(ax >= 1 && ax < s.rank(), name_.c_str(),
                   "layer \"{}\" (PReLU): shared axis {} is out of range for inputs of shape {} "
                   "(axes are 1-based, after the batch)",
                   name_, ax, shape_str(s));
      a[ax - 1] = 1;
    }
    TF_CHECK_ARG(a.is_fully_defined(), name_.c_str(),
                 "layer \"{}\" (PReLU): alpha has the input's shape without the batch, which "
                 "must be known outside shared_axes, got input shape {}",
                 name_, shape_str(s));
    alpha_shape_ = a;
    alpha_ = add_weight("alpha", a, init_, true, reg_, con_);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    bool ok = s.rank() == alpha_shape_.rank() + 1;
    for (int i = 1; ok && i < s.rank(); ++i)
      ok = alpha_shape_[i - 1] == 1 || s[i] == None || s[i] == alpha_shape_[i - 1];
    if (!ok)
      incompatible(s, fmt::format("expected ndim={} and the sizes of alpha {} outside the "
                                  "shared axes (the layer was built for input shape {})",
                                  alpha_shape_.rank() + 1, shape_str(alpha_shape_),
                                  shape_str(built_input_shape())));
  }
  // Keras: relu(x) - alpha * relu(-x).
  Tensor call(const Tensor& x, bool) override {
    return nn::relu(x) - alpha_.value() * nn::relu(-x);
  }

 private:
  friend std::optional<detail::layer_options::PReLUConfig> detail::layer_options::prelu(
      const LayerImpl&);
  Initializer init_;
  Regularizer reg_;
  Constraint con_;
  std::vector<int> shared_;
  TensorShape alpha_shape_;
  Variable alpha_;
};

// ---- Permute, RepeatVector, UpSampling1D ----
class PermuteImpl final : public LayerImpl {
 public:
  PermuteImpl(std::vector<int> dims, std::string name)
      : LayerImpl("Permute", "permute", std::move(name)), dims_(std::move(dims)) {
    std::vector<int> sorted = dims_;
    std::sort(sorted.begin(), sorted.end());
    bool ok = !dims_.empty();
    for (size_t i = 0; i < sorted.size(); ++i) ok = ok && sorted[i] == static_cast<int>(i) + 1;
    TF_CHECK_ARG(ok, "Permute",
                 "dims must hold each of 1, ..., n once (the axes after the batch, 1-based), got "
                 "({})",
                 fmt::join(dims_, ", "));
  }

 protected:
  int rank() const { return static_cast<int>(dims_.size()) + 1; }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != rank()) incompatible(s, fmt::format("expected ndim={}", rank()));
    TensorShape o({s[0]});
    for (int d : dims_) o.push_back(s[d]);
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != rank()) incompatible(s, fmt::format("expected ndim={}", rank()));
  }
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool) override {
    std::vector<int> perm{0};
    perm.insert(perm.end(), dims_.begin(), dims_.end());
    return transpose(x, perm);
  }

 private:
  friend std::optional<std::vector<int>> detail::layer_options::permute_dims(const LayerImpl&);
  std::vector<int> dims_;
};

// Repeats axis `axis` - 1 of x `n` times along a new axis `axis`, by broadcasting against ones
// (a graph traced for a None batch then serves every batch size; a gather would fix it).
Tensor repeat_after(const Tensor& x, int axis, int64_t n) {
  TensorShape ones_shape;
  for (int i = 0; i <= x.rank(); ++i) ones_shape.push_back(i == axis ? n : 1);
  return expand_dims(x, axis) * ones(ones_shape, x.dtype());
}

class RepeatVectorImpl final : public LayerImpl {
 public:
  RepeatVectorImpl(int64_t n, std::string name)
      : LayerImpl("RepeatVector", "repeat_vector", std::move(name)), n_(n) {
    TF_CHECK_ARG(n > 0, "RepeatVector", "n must be positive, got {}", n);
  }

 protected:
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 2) incompatible(s, "expected ndim=2 (batch, features)");
    return TensorShape({s[0], n_, s[1]});
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 2) incompatible(s, "expected ndim=2 (batch, features)");
  }
  Tensor call(const Tensor& x, bool) override { return repeat_after(x, 1, n_); }

 private:
  friend std::optional<int64_t> detail::layer_options::repeat_vector_n(const LayerImpl&);
  int64_t n_;
};

class UpSampling1DImpl final : public LayerImpl {
 public:
  UpSampling1DImpl(int64_t size, std::string name)
      : LayerImpl("UpSampling1D", "up_sampling1d", std::move(name)), size_(size) {
    TF_CHECK_ARG(size > 0, "UpSampling1D", "size must be positive, got {}", size);
  }

 protected:
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 3) incompatible(s, "expected ndim=3 (batch, steps, channels)");
    TensorShape o = s;
    if (o[1] != None) o[1] *= size_;
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 3) incompatible(s, "expected ndim=3 (batch, steps, channels)");
  }
  // (b, t, c) -> (b, t, size, c) -> (b, t * size, c): each step repeated in place (the sizes
  // follow x when a graph traced for None dimensions runs).
  Tensor call(const Tensor& x, bool) override {
    return tapeflow::detail::merge_axes(repeat_after(x, 2, size_), {1, 2, 1});
  }

 private:
  friend std::optional<int64_t> detail::layer_options::up_sampling1d(const LayerImpl&);
  int64_t size_;
};

// ---- noise layers ----
// Random tensors follow the seed rules of ops/random.h: as Dropout, a new draw per call (and per
// replay of a traced function), reproducible after tf::random::set_seed.
class NoiseImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  enum class Kind { kSpatial1D, kSpatial2D, kSpatial3D, kGaussianNoise, kGaussianDropout };
  NoiseImpl(Kind kind, double amount, std::optional<int64_t> seed, std::string name,
            const std::string& data_format = "")
      : LayerImpl(class_of(kind), generic_of(kind), std::move(name)),
        kind_(kind),
        amount_(amount),
        seed_(seed),
        format_(DataFormat::parse(class_of(kind), data_format)) {
    if (kind == Kind::kGaussianNoise) {
      TF_CHECK_ARG(amount >= 0.0 && amount <= 1.0, class_name_.c_str(),
                   "stddev must be a float between 0 and 1, got {}", amount);
    } else {
      TF_CHECK_ARG(amount >= 0.0 && amount < 1.0, class_name_.c_str(),
                   "rate must be in the range [0, 1), got {}", amount);
    }
  }

 protected:
  int rank() const { return kind_ == Kind::kSpatial1D ? 3 : kind_ == Kind::kSpatial3D ? 5 : 4; }
  bool spatial() const {
    return kind_ == Kind::kSpatial1D || kind_ == Kind::kSpatial2D || kind_ == Kind::kSpatial3D;
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (spatial() && s.rank() != rank()) incompatible(s, expectation());
    return s;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (spatial() && s.rank() != rank()) incompatible(s, expectation());
  }
  Tensor call(const Tensor& x, bool training) override {
    if (!training || amount_ == 0.0) return x;
    // The draws go where x lives unless a DeviceScope says otherwise (as tf::nn::dropout).
    std::optional<DeviceScope> scope;
    if (::tapeflow::detail::thread_context().device_stack.empty()) scope.emplace(x.placement());
    if (kind_ == Kind::kGaussianNoise)
      return x + ::tapeflow::detail::random_normal_like(x, 0.0, amount_, x.dtype(), seed_);
    if (kind_ == Kind::kGaussianDropout) {
      const double stddev = std::sqrt(amount_ / (1.0 - amount_));
      return x * ::tapeflow::detail::random_normal_like(x, 1.0, stddev, x.dtype(), seed_);
    }
    // One uniform per example and channel: the mask's shape is x's with the spatial axes 1
    // (axes 1 to rank - 2, or 2 to rank - 1 with channels_first).
    std::vector<int> spatial_axes;
    for (int a = 1; a < rank() - 1; ++a)
      spatial_axes.push_back(format_.channels_first() ? a + 1 : a);
    Tensor u;
    if (::tapeflow::detail::open_shapes()) {
      // The shape of the mask is read from a (b, 1, [1,] c) tensor when the graph runs (a sum
      // the tapes do not record: the mask is no function of x).
      ::tapeflow::detail::PauseTapes pause;
      u = ::tapeflow::detail::random_uniform_like(reduce_sum(x, spatial_axes, true), 0.0, 1.0,
                                                  x.dtype(), seed_);
    } else {
      TensorShape ms = x.shape();
      for (int a : spatial_axes) ms[a] = 1;
      u = random::uniform(ms, 0.0, 1.0, x.dtype(), seed_);
    }
    const Tensor keep = cast(greater_equal(u, amount_), x.dtype()) * (1.0 / (1.0 - amount_));
    return x * keep;
  }

 private:
  static const char* class_of(Kind k) {
    switch (k) {
      case Kind::kSpatial1D:
        return "SpatialDropout1D";
      case Kind::kSpatial2D:
        return "SpatialDropout2D";
      case Kind::kSpatial3D:
        return "SpatialDropout3D";
      case Kind::kGaussianNoise:
        return "GaussianNoise";
      case Kind::kGaussianDropout:
        return "GaussianDropout";
    }
    return "";
  }
  static const char* generic_of(Kind k) {
    switch (k) {
      case Kind::kSpatial1D:
        return "spatial_dropout1d";
      case Kind::kSpatial2D:
        return "spatial_dropout2d";
      case Kind::kSpatial3D:
        return "spatial_dropout3d";
      case Kind::kGaussianNoise:
        return "gaussian_noise";
      case Kind::kGaussianDropout:
        return "gaussian_dropout";
    }
    return "";
  }
  std::string expectation() const { return format_.expected_ndim(rank() - 2); }
  friend std::optional<detail::layer_options::NoiseConfig> detail::layer_options::noise(
      const LayerImpl&);
  Kind kind_;
  double amount_;
  std::optional<int64_t> seed_;
  DataFormat format_;
};

// ---- ActivityRegularization ----
class ActivityRegularizationImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  ActivityRegularizationImpl(double l1, double l2, std::string name)
      : LayerImpl("ActivityRegularization", "activity_regularization", std::move(name)),
        l1_(l1),
        l2_(l2) {
    TF_CHECK_ARG(std::isfinite(l1) && std::isfinite(l2) && l1 >= 0.0 && l2 >= 0.0,
                 "ActivityRegularization", "l1 and l2 must be finite and >= 0, got l1={}, l2={}",
                 l1, l2);
  }

 protected:
  // Keras 3's activity regularizer: L1L2(l1, l2)(y), divided by the batch size (divide_no_nan:
  // an empty batch adds 0), at every call.
  Tensor call(const Tensor& x, bool) override {
    Tensor loss = zeros(TensorShape{}, x.dtype());
    if (l1_ != 0.0) loss = loss + reduce_sum(abs(x)) * l1_;
    if (l2_ != 0.0) loss = loss + reduce_sum(square(x)) * l2_;
    if (x.rank() > 0) {
      const Tensor n = ::tapeflow::detail::element_count(x, {0}, x.dtype());
      loss = loss / maximum(n, ones_like(n));
    }
    add_loss(loss);
    return x;
  }

 private:
  friend std::optional<std::array<double, 2>> detail::layer_options::activity_regularization(
      const LayerImpl&);
  double l1_, l2_;
};

// ---- GroupNormalization ----
class GroupNormImpl final : public LayerImpl {
 public:
  explicit GroupNormImpl(layers::GroupNormalizationOptions o)
      : LayerImpl("GroupNormalization", "group_normalization", o.name), o_(std::move(o)) {
    TF_CHECK_ARG(o_.groups > 0 || o_.groups == -1, "GroupNormalization",
                 "groups must be a positive integer (or -1 for instance normalization), got {}",
                 o_.groups);
    TF_CHECK_ARG(o_.epsilon > 0.0 && std::isfinite(o_.epsilon), "GroupNormalization",
                 "epsilon must be positive and finite, got {}", o_.epsilon);
  }

 protected:
  void build(const TensorShape& s) override {
    const int r = s.rank();
    TF_CHECK_ARG(r >= 2 && o_.axis >= -r && o_.axis < r && o_.axis != 0 && o_.axis != -r,
                 name_.c_str(),
                 "layer \"{}\" (GroupNormalization): axis {} is out of range (or the batch) for "
                 "inputs of shape {}",
                 name_, o_.axis, shape_str(s));
    rank_ = r;
    axis_ = o_.axis < 0 ? o_.axis + r : o_.axis;
    channels_ = s[axis_];
    TF_CHECK_ARG(channels_ != None, name_.c_str(),
                 "layer \"{}\" (GroupNormalization): axis {} of the input must be known, got "
                 "shape {}",
                 name_, o_.axis, shape_str(s));
    groups_ = o_.groups == -1 ? channels_ : o_.groups;
    TF_CHECK_ARG(groups_ <= channels_, name_.c_str(),
                 "layer \"{}\" (GroupNormalization): the number of groups ({}) cannot be more "
                 "than the number of channels ({}) of input shape {}",
                 name_, groups_, channels_, shape_str(s));
    TF_CHECK_ARG(channels_ % groups_ == 0, name_.c_str(),
                 "layer \"{}\" (GroupNormalization): the number of channels ({}) of input shape "
                 "{} must be a multiple of the number of groups ({})",
                 name_, channels_, shape_str(s), groups_);
    const TensorShape c({channels_});
    auto pick = [](const Initializer& i, Initializer d) { return i.defined() ? i : d; };
    if (o_.scale)
      gamma_ = add_weight("gamma", c, pick(o_.gamma_initializer, initializers::Ones()), true,
                          o_.gamma_regularizer, o_.gamma_constraint);
    if (o_.center)
      beta_ = add_weight("beta", c, pick(o_.beta_initializer, initializers::Zeros()), true,
                         o_.beta_regularizer, o_.beta_constraint);
  }
  // Keras: autocast = False, so gamma and beta are read in float32 under a mixed policy.
  bool autocast() const override { return false; }
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != rank_ || (s[axis_] != channels_ && s[axis_] != None))
      incompatible(s, fmt::format("expected ndim={} and axis {} of input shape to have value {} "
                                  "(the layer was built for input shape {})",
                                  rank_, axis_, channels_, shape_str(built_input_shape())));
  }
  // Keras: reshape the channels into (groups, channels / groups), moments over every axis but
  // the batch and the group, x * inv + (beta - mean * inv) with inv = gamma * rsqrt(var + eps).
  Tensor call(const Tensor& x, bool) override {
    const int64_t per_group = channels_ / groups_;
    TensorShape bshape;  // the broadcast shape of gamma and beta
    for (int i = 0; i < rank_; ++i) {
      if (i == axis_) {
        bshape.push_back(groups_);
        bshape.push_back(per_group);
        continue;
      }
      bshape.push_back(1);
    }
    // The channels split into (groups, channels / groups); the other sizes follow x when a
    // graph traced for None dimensions runs.
    const Tensor grouped = tapeflow::detail::split_axis(x, axis_, {groups_, per_group});
    // As Keras: float16 and bfloat16 are normalised in float32 (a squared deviation above
    // about 256 overflows float16) and the result cast back.
    const DType dt = x.dtype();
    const bool half = dt == float16 || dt == bfloat16;
    const Tensor xg = half ? cast(grouped, float32) : grouped;
    const auto weight = [&](const Variable& v) {
      const Tensor w = reshape(v.value(), bshape);
      return w.dtype() == xg.dtype() ? w : cast(w, xg.dtype());
    };
    std::vector<int> axes;
    for (int i = 1; i <= rank_; ++i)
      if (i != axis_) axes.push_back(i);
    const Tensor mean = reduce_mean(xg, axes, true);
    const Tensor var = reduce_mean(square(xg - stop_gradient(mean)), axes, true);
    Tensor inv = rsqrt(var + o_.epsilon);
    if (o_.scale) inv = inv * weight(gamma_);
    Tensor shift = -(mean * inv);
    if (o_.center) shift = shift + weight(beta_);
    const Tensor y = tapeflow::detail::reshape_like(xg * inv + shift, x);
    return half ? cast(y, dt) : y;
  }

 private:
  friend class layers::GroupNormalization;
  friend std::optional<layers::GroupNormalizationOptions>
  detail::layer_options::group_normalization(const LayerImpl&);
  layers::GroupNormalizationOptions o_;
  int rank_ = 0, axis_ = 0;
  int64_t channels_ = 0, groups_ = 0;
  Variable gamma_, beta_;
};

// ---- UnitNormalization ----
class UnitNormImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  UnitNormImpl(std::vector<int> axis, std::string name)
      : LayerImpl("UnitNormalization", "unit_normalization", std::move(name)),
        axis_(std::move(axis)) {
    TF_CHECK_ARG(!axis_.empty(), "UnitNormalization", "axis must name at least one axis");
  }

 protected:
  TensorShape compute_output_shape(const TensorShape& s) const override {
    for (int a : axis_)
      TF_CHECK_ARG(a >= -s.rank() && a < s.rank(), name_.c_str(),
                   "layer \"{}\" (UnitNormalization): axis {} is out of bounds for input shape "
                   "{}, got axis=({})",
                   name_, a, shape_str(s), fmt::join(axis_, ", "));
    return s;
  }
  void build(const TensorShape& s) override { (void)compute_output_shape(s); }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    (void)compute_output_shape(s);
  }
  // Keras' normalize(order=2, epsilon=1e-12): x * min(rsqrt(sum x^2), 1 / epsilon).
  Tensor call(const Tensor& x, bool) override {
    const Tensor ss = reduce_sum(square(x), axis_, true);
    const Tensor inv = minimum(rsqrt(ss), constant(Tensor(1e12), x.dtype()));
    return x * inv;
  }

 private:
  friend std::optional<std::vector<int>> detail::layer_options::unit_normalization_axis(
      const LayerImpl&);
  std::vector<int> axis_;
};

// ---- TimeDistributed ----
class TimeDistributedImpl final : public LayerImpl {
 public:
  TimeDistributedImpl(Layer inner, std::string name)
      : LayerImpl("TimeDistributed", "time_distributed", std::move(name)),
        inner_(std::move(inner)) {
    TF_CHECK_ARG(inner_.defined(), "TimeDistributed",
                 "needs a layer to wrap, got an empty Layer handle");
  }
  std::vector<Layer> sublayers() const override { return {inner_}; }
  const Layer& inner() const { return inner_; }

 protected:
  // (batch, steps, rest...) -> (batch, rest...) for the wrapped layer.
  TensorShape child_shape(const TensorShape& s) const {
    TF_CHECK_ARG(s.rank() >= 3, name_.c_str(),
                 "layer \"{}\" (TimeDistributed) needs inputs (batch, steps, ...) of rank >= 3, "
                 "got shape {}",
                 name_, shape_str(s));
    TensorShape c({s[0] == None || s[1] == None ? None : s[0] * s[1]});
    for (int i = 2; i < s.rank(); ++i) c.push_back(s[i]);
    return c;
  }
  void build(const TensorShape& s) override {
    inner_.impl().ensure_built(detail::with_unknown_batch(child_shape(s)));
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    const TensorShape c = inner_.impl().compute_output_shape(child_shape(s));
    TensorShape o({s[0], s[1]});
    for (int i = 1; i < c.rank(); ++i) o.push_back(c[i]);
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() < 3) incompatible(s, "expected min_ndim=3 (batch, steps, ...)");
    inner_.impl().validate_input(child_shape(s));
  }
  bool casts_all_inputs() const override { return false; }  // the wrapped layer decides
  // Keras 3.15: the mask passes on unchanged, and a wrapped layer that supports masking gets
  // each step's share of it ((batch, steps, ...) folded as the input is).
  bool supports_masking() const override { return true; }
  Tensor call(const Tensor& x, bool training) override {
    // (batch, steps, ...) folded into (batch * steps, ...) and back; the sizes follow x when a
    // graph traced for None dimensions runs.
    const auto fold = [](const Tensor& t) {
      std::vector<int> groups(static_cast<size_t>(t.rank() - 1), 1);
      groups[0] = 2;
      return tapeflow::detail::merge_axes(t, groups);
    };
    const Tensor mask = call_mask();
    if (mask.defined())
      TF_CHECK_ARG(mask.rank() >= 2, name_.c_str(),
                   "layer \"{}\" (TimeDistributed): the mask must be at least 2-D (batch, "
                   "timesteps), got shape {}",
                   name_, shape_str(mask.shape()));
    Tensor y;
    if (mask.defined() && mask.rank() >= 3 && inner_.supports_masking()) {
      y = inner_.impl().invoke_masked(fold(x), fold(mask), training).output;
    } else {
      y = inner_.impl().invoke(fold(x), training);
    }
    std::vector<std::pair<int, int>> parts{{0, 0}, {0, 1}};
    for (int i = 1; i < y.rank(); ++i) parts.emplace_back(1, i);
    return tapeflow::detail::reshape_from(y, {x, y}, parts);
  }

 private:
  Layer inner_;
};

}  // namespace

std::optional<Layer> detail::layer_options::time_distributed_layer(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const TimeDistributedImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->inner();
}

namespace layers {

ZeroPadding1D::ZeroPadding1D(Sides1D padding, FormatOptions o)
    : Layer(std::make_shared<PadCropImpl>("ZeroPadding1D", "zero_padding1d", false,
                                          std::vector<Sides1D>{padding}, std::move(o.name),
                                          o.data_format)) {}
ZeroPadding2D::ZeroPadding2D(Sides2D padding, FormatOptions o)
    : Layer(std::make_shared<PadCropImpl>("ZeroPadding2D", "zero_padding2d", false,
                                          std::vector<Sides1D>{padding.height, padding.width},
                                          std::move(o.name), o.data_format)) {}
Cropping1D::Cropping1D(Sides1D cropping, std::string name)
    : Layer(std::make_shared<PadCropImpl>("Cropping1D", "cropping1d", true,
                                          std::vector<Sides1D>{cropping}, std::move(name))) {}
Cropping2D::Cropping2D(Sides2D cropping, FormatOptions o)
    : Layer(std::make_shared<PadCropImpl>("Cropping2D", "cropping2d", true,
                                          std::vector<Sides1D>{cropping.height, cropping.width},
                                          std::move(o.name), o.data_format)) {}

LeakyReLU::LeakyReLU(double negative_slope, std::string name)
    : Layer(std::make_shared<LeakyReLUImpl>(negative_slope, std::move(name))) {}
ELU::ELU(double alpha, std::string name)
    : Layer(std::make_shared<ELUImpl>(alpha, std::move(name))) {}
PReLU::PReLU(PReLUOptions options) : Layer(std::make_shared<PReLUImpl>(std::move(options))) {}
Variable PReLU::alpha() const {
  return impl().weight("alpha");
}

Permute::Permute(std::vector<int> dims, std::string name)
    : Layer(std::make_shared<PermuteImpl>(std::move(dims), std::move(name))) {}
RepeatVector::RepeatVector(int64_t n, std::string name)
    : Layer(std::make_shared<RepeatVectorImpl>(n, std::move(name))) {}
UpSampling1D::UpSampling1D(int64_t size, std::string name)
    : Layer(std::make_shared<UpSampling1DImpl>(size, std::move(name))) {}

SpatialDropout1D::SpatialDropout1D(double rate, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<NoiseImpl>(NoiseImpl::Kind::kSpatial1D, rate, seed, std::move(name))) {
}
SpatialDropout2D::SpatialDropout2D(double rate, SpatialDropoutOptions o)
    : Layer(std::make_shared<NoiseImpl>(NoiseImpl::Kind::kSpatial2D, rate, o.seed,
                                        std::move(o.name), o.data_format)) {}
SpatialDropout3D::SpatialDropout3D(double rate, SpatialDropoutOptions o)
    : Layer(std::make_shared<NoiseImpl>(NoiseImpl::Kind::kSpatial3D, rate, o.seed,
                                        std::move(o.name), o.data_format)) {}
GaussianNoise::GaussianNoise(double stddev, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<NoiseImpl>(NoiseImpl::Kind::kGaussianNoise, stddev, seed,
                                        std::move(name))) {}
GaussianDropout::GaussianDropout(double rate, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<NoiseImpl>(NoiseImpl::Kind::kGaussianDropout, rate, seed,
                                        std::move(name))) {}
ActivityRegularization::ActivityRegularization(double l1, double l2, std::string name)
    : Layer(std::make_shared<ActivityRegularizationImpl>(l1, l2, std::move(name))) {}

GroupNormalization::GroupNormalization(GroupNormalizationOptions options)
    : Layer(std::make_shared<GroupNormImpl>(std::move(options))) {}
Variable GroupNormalization::gamma() const {
  return impl().weight("gamma");
}
Variable GroupNormalization::beta() const {
  return impl().weight("beta");
}
UnitNormalization::UnitNormalization(std::vector<int> axis, std::string name)
    : Layer(std::make_shared<UnitNormImpl>(std::move(axis), std::move(name))) {}

TimeDistributed::TimeDistributed(Layer layer, std::string name)
    : Layer(std::make_shared<TimeDistributedImpl>(std::move(layer), std::move(name))) {}
Layer TimeDistributed::layer() const {
  return impl_as<TimeDistributedImpl>(*this, "TimeDistributed").inner();
}

}  // namespace layers

namespace detail::layer_options {

std::optional<PadCropConfig> pad_crop(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const PadCropImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  PadCropConfig out;
  for (const Sides1D& s : p->sides_) out.sides.push_back({s.begin, s.end});
  out.channels_first = p->format_.channels_first();
  return out;
}
std::optional<double> leaky_relu_slope(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const LeakyReLUImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->slope_;
}
std::optional<double> elu_alpha(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ELUImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->alpha_;
}
std::optional<PReLUConfig> prelu(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const PReLUImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return PReLUConfig{p->init_, p->reg_, p->shared_, p->con_};
}
std::optional<std::vector<int>> permute_dims(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const PermuteImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->dims_;
}
std::optional<int64_t> repeat_vector_n(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RepeatVectorImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->n_;
}
std::optional<int64_t> up_sampling1d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const UpSampling1DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->size_;
}
std::optional<NoiseConfig> noise(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const NoiseImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return NoiseConfig{p->amount_, p->seed_, p->format_.channels_first()};
}
std::optional<std::array<double, 2>> activity_regularization(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ActivityRegularizationImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return std::array<double, 2>{p->l1_, p->l2_};
}
std::optional<layers::GroupNormalizationOptions> group_normalization(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const GroupNormImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->o_;
}
std::optional<std::vector<int>> unit_normalization_axis(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const UnitNormImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->axis_;
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
