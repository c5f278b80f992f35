// Keras 3's EinsumDense and Identity (keras/layers_core.h). EinsumDense works out its kernel
// and bias shapes from the equation at the build, as Keras' _analyze_einsum_string, and calls
// tf::einsum (a composite of transposes, reshapes and batched matmuls, differentiable).
#include "keras/layers_core.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

#include "core/check.h"
#include "keras/embedding_lookup.h"
#include "keras/initializers.h"
#include "keras/layer_handle.h"
#include "ops/binary.h"
#include "ops/einsum.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::LayerImpl;
using layers::EinsumDenseOptions;

// The equation's parts: input letters, kernel letters, output letters, and where "..." is.
struct Equation {
  std::string input, kernel, output;
  enum class Elided { kNone, kLeft, kRight } elided = Elided::kNone;
};

bool letters(const std::string& s, size_t min = 1) {
  return s.size() >= min &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalpha(c) != 0; });
}

Equation parse_equation(const std::string& equation) {
  auto bad = [&] {
    TF_THROW(InvalidArgumentError, "EinsumDense",
             "invalid equation \"{}\": equations must be in the form [X],[Y]->[Z], "
             "...[X],[Y]->...[Z] or [X]...,[Y]->[Z]... (letters only, X of at least two letters "
             "in the last form)",
             equation);
  };
  const size_t comma = equation.find(','), arrow = equation.find("->");
  if (comma == std::string::npos || arrow == std::string::npos || arrow < comma) bad();
  std::string in = equation.substr(0, comma);
  Equation e;
  e.kernel = equation.substr(comma + 1, arrow - comma - 1);
  std::string out = equation.substr(arrow + 2);
  const std::string dots = "...";
  auto starts = [&](const std::string& s) { return s.rfind(dots, 0) == 0; };
  auto ends = [&](const std::string& s) {
    return s.size() >= 3 && s.compare(s.size() - 3, 3, dots) == 0;
  };
  if (starts(in) && starts(out)) {
    e.elided = Equation::Elided::kLeft;
    e.input = in.substr(3);
    e.output = out.substr(3);
  } else if (ends(in) && ends(out)) {
    e.elided = Equation::Elided::kRight;
    e.input = in.substr(0, in.size() - 3);
    e.output = out.substr(0, out.size() - 3);
  } else {
    e.input = in;
    e.output = out;
  }
  if (!letters(e.input, e.elided == Equation::Elided::kRight ? 2 : 1) || !letters(e.kernel) ||
      !letters(e.output))
    bad();
  return e;
}

class EinsumDenseImpl final : public LayerImpl {
 public:
  EinsumDenseImpl(std::string equation, std::vector<int64_t> output_shape, EinsumDenseOptions o)
      : LayerImpl("EinsumDense", "einsum_dense", o.name),
        equation_(std::move(equation)),
        parts_(parse_equation(equation_)),
        partial_(std::move(output_shape)),
        activation_(activations::get(o.activation)),
        kernel_init_(o.kernel_initializer.defined() ? o.kernel_initializer
                                                    : initializers::GlorotUniform()),
        bias_init_(o.bias_initializer.defined() ? o.bias_initializer : initializers::Zeros()),
        options_(std::move(o)) {
    const char* cls = "EinsumDense";
    for (int64_t d : partial_)
      TF_CHECK_ARG(d > 0 || d == None, cls,
                   "output_shape must hold positive sizes or tf::None, got {}",
                   fmt::join(partial_, ", "));
    const size_t want = parts_.output.size() - (left() ? 0 : 1);
    TF_CHECK_ARG(partial_.size() == want, cls,
                 "output_shape must have one entry per output axis of \"{}\" besides the batch "
                 "and the elided axes ({}), got {} ({})",
                 equation_, want, partial_.size(), fmt::join(partial_, ", "));
    for (char c : options_.bias_axes)
      TF_CHECK_ARG(parts_.output.find(c) != std::string::npos, cls,
                   "bias axis '{}' is not part of the output \"{}\" of the equation \"{}\"", c,
                   parts_.output, equation_);
    for (char c : parts_.output)
      TF_CHECK_ARG(
          parts_.input.find(c) != std::string::npos || parts_.kernel.find(c) != std::string::npos,
          cls, "output axis '{}' of \"{}\" is in neither the input nor the kernel", c, equation_);
    for (char c : parts_.kernel)
      TF_CHECK_ARG(
          parts_.input.find(c) != std::string::npos || parts_.output.find(c) != std::string::npos,
          cls,
          "kernel axis '{}' of \"{}\" is in neither the input nor the output: the kernel must be "
          "fully specified",
          c, equation_);
  }
  const std::string& equation() const { return equation_; }
  const std::vector<int64_t>& partial() const { return partial_; }

 protected:
  void build(const TensorShape& s) override {
    const Shapes sh = shapes(s, true);
    in_rank_ = s.rank();
    // Keras 3.15 gives a VarianceScaling kernel initializer the kernel's input and output axes.
    const Initializer init = detail::with_fans(kernel_init_, sh.fan_in, sh.fan_out);
    kernel_ = add_weight("kernel", sh.kernel, init, true, options_.kernel_regularizer,
                         options_.kernel_constraint);
    if (!options_.bias_axes.empty())
      bias_ = add_weight("bias", sh.bias, bias_init_, true, options_.bias_regularizer,
                         options_.bias_constraint);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    return shapes(s, false).output;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (!built()) return;
    if (s.rank() != in_rank_)
      incompatible(s, fmt::format("expected ndim={}, found ndim={} (the layer was built for "
                                  "input shape {})",
                                  in_rank_, s.rank(), built_input_shape().to_string()));
    // The sizes the kernel took from the input must stay.
    const TensorShape built_shape = built_input_shape();
    const int elided = static_cast<int>(s.rank()) - static_cast<int>(parts_.input.size());
    for (size_t i = 0; i < parts_.input.size(); ++i) {
      const int axis = static_cast<int>(i) + (left() ? elided : 0);
      if (parts_.kernel.find(parts_.input[i]) == std::string::npos) continue;
      if (s[axis] != None && built_shape[axis] != None && s[axis] != built_shape[axis])
        incompatible(s, fmt::format("expected axis {} of input shape to have value {} (the "
                                    "layer was built for input shape {})",
                                    axis, built_shape[axis], built_shape.to_string()));
    }
  }
  Tensor call(const Tensor& x, bool) override {
    Tensor y = einsum(equation_, x, kernel_.value());
    if (bias_.defined()) y = add(y, bias_.value());
    return activation_ ? activation_(y) : y;
  }

 private:
  friend std::optional<detail::layer_options::EinsumDenseConfig>
  detail::layer_options::einsum_dense(const LayerImpl&);

  bool left() const { return parts_.elided == Equation::Elided::kLeft; }

  struct Shapes {
    TensorShape kernel, bias, output;
    int64_t fan_in = 1, fan_out = 1;
  };
  // Keras' _analyze_split_string for input shape `s` (batch first). `for_build`: the kernel and
  // bias sizes must be known.
  Shapes shapes(const TensorShape& s, bool for_build) const {
    const std::string who = fmt::format("layer \"{}\" (EinsumDense)", name_);
    const int rank = static_cast<int>(s.rank());
    const int elided = rank - static_cast<int>(parts_.input.size());
    TF_CHECK_ARG(elided >= 0 && (elided == 0 || parts_.elided != Equation::Elided::kNone),
                 name_.c_str(), "{} with equation \"{}\" needs inputs of rank {}{}, got shape {}",
                 who, equation_, parts_.input.size(),
                 parts_.elided == Equation::Elided::kNone ? "" : " or more", s.to_string());
    // The full output: batch, [left elided], output_shape, [right elided]; an output letter's
    // position in it, and an input letter's position in the input.
    std::vector<int64_t> out;
    std::map<char, int> in_pos, out_pos;
    // Leading elided axes shift the letters' positions, in the input and in the output alike.
    const int offset = left() ? elided : 0;
    for (size_t i = 0; i < parts_.input.size(); ++i)
      in_pos[parts_.input[i]] = static_cast<int>(i) + offset;
    if (left())  // the batch is the first elided axis (none on inputs of the letters' rank)
      for (int i = 0; i < elided; ++i) out.push_back(s[i]);
    else
      out.push_back(s[0]);
    out.insert(out.end(), partial_.begin(), partial_.end());
    if (parts_.elided == Equation::Elided::kRight)
      for (int i = rank - elided; i < rank; ++i) out.push_back(s[i]);
    for (size_t i = 0; i < parts_.output.size(); ++i)
      out_pos[parts_.output[i]] = static_cast<int>(i) + offset;
    // Shared input/output letters: the sizes must agree; a None in output_shape takes the
    // input's (Keras leaves it unknown).
    for (const auto& [c, ip] : in_pos) {
      auto it = out_pos.find(c);
      if (it == out_pos.end()) continue;
      int64_t& o = out[static_cast<size_t>(it->second)];
      const int64_t i = s[ip];
      TF_CHECK_ARG(o == None || i == None || o == i, name_.c_str(),
                   "{}: input shape and output shape do not match at shared dimension '{}': the "
                   "input (shape {}) has {}, output_shape says {}",
                   who, c, s.to_string(), i, o);
      if (o == None) o = i;
    }
    Shapes r;
    r.output = TensorShape(out);
    if (!for_build) return r;
    std::vector<int64_t> kernel;
    for (size_t k = 0; k < parts_.kernel.size(); ++k) {
      const char c = parts_.kernel[k];
      auto o = out_pos.find(c);
      const bool from_output = o != out_pos.end();
      const int64_t d = from_output ? out[static_cast<size_t>(o->second)] : s[in_pos.at(c)];
      TF_CHECK_ARG(d != None, name_.c_str(),
                   "{}: the size of kernel axis '{}' is unknown (input shape {}, output_shape "
                   "({})): give it in output_shape or the input shape",
                   who, c, s.to_string(), fmt::join(partial_, ", "));
      kernel.push_back(d);
      (from_output ? r.fan_out : r.fan_in) *= d;
    }
    r.kernel = TensorShape(kernel);
    if (!options_.bias_axes.empty()) {
      size_t first = parts_.output.size();
      for (char c : options_.bias_axes) first = std::min(first, parts_.output.find(c));
      std::vector<int64_t> bias;
      for (size_t i = first; i < parts_.output.size(); ++i) {
        const char c = parts_.output[i];
        if (options_.bias_axes.find(c) == std::string::npos) {
          bias.push_back(1);
          continue;
        }
        const int64_t d = out[static_cast<size_t>(out_pos.at(c))];
        TF_CHECK_ARG(d != None, name_.c_str(),
                     "{}: the size of bias axis '{}' is unknown (input shape {}): give it in "
                     "output_shape",
                     who, c, s.to_string());
        bias.push_back(d);
      }
      if (parts_.elided == Equation::Elided::kRight)
        for (int i = 0; i < elided; ++i) bias.push_back(1);
      r.bias = TensorShape(bias);
    }
    return r;
  }

  std::string equation_;
  Equation parts_;
  std::vector<int64_t> partial_;
  activations::Activation activation_;
  Initializer kernel_init_, bias_init_;
  EinsumDenseOptions options_;  // as given, for get_config
  int64_t in_rank_ = 0;
  Variable kernel_, bias_;  // set by build, read after built() (acquire)
};

class IdentityImpl final : public LayerImpl {
 public:
  explicit IdentityImpl(std::string name) : LayerImpl("Identity", "identity", std::move(name)) {}
  bool supports_masking() const override { return true; }

 protected:
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool) override { return x; }
};

class ReversibleEmbeddingImpl final : public LayerImpl {
 public:
  ReversibleEmbeddingImpl(int64_t input_dim, int64_t output_dim,
                          layers::ReversibleEmbeddingOptions o)
      : LayerImpl("ReversibleEmbedding", "reversible_embedding", o.name),
        input_dim_(input_dim),
        output_dim_(output_dim),
        o_(std::move(o)) {
    TF_CHECK_ARG(input_dim > 0 && output_dim > 0, "ReversibleEmbedding",
                 "input_dim and output_dim must be positive, got input_dim={}, output_dim={}",
                 input_dim, output_dim);
    TF_CHECK_ARG(!o_.logit_soft_cap || *o_.logit_soft_cap > 0, "ReversibleEmbedding",
                 "logit_soft_cap must be positive (or unset), got {}",
                 o_.logit_soft_cap.value_or(0.0));
    TF_CHECK_ARG(!o_.reverse_dtype || is_floating(*o_.reverse_dtype), "ReversibleEmbedding",
                 "reverse_dtype must be a floating dtype, got {}",
                 dtype_name(o_.reverse_dtype.value_or(float32)));
    init_ = o_.embeddings_initializer.defined() ? o_.embeddings_initializer
                                                : initializers::RandomUniform(-0.05, 0.05);
  }
  // Keras: looks up in the variable dtype under a mixed policy, then casts the output.
  bool autocast() const override { return false; }
  bool supports_masking() const override { return o_.mask_zero; }
  Tensor compute_mask(const Tensor& x, const Tensor&) const override {
    if (!o_.mask_zero) return Tensor();
    return not_equal(x, zeros_like(x));
  }
  int64_t input_dim() const { return input_dim_; }
  int64_t output_dim() const { return output_dim_; }
  const layers::ReversibleEmbeddingOptions& options() const { return o_; }

  Tensor reverse(const Tensor& hidden) {
    const std::string n = name();
    TF_CHECK_ARG(
        hidden.defined() && is_floating(hidden.dtype()), n.c_str(),
        "layer \"{}\" (ReversibleEmbedding) reverses floating hidden states, got {}", n,
        hidden.defined() ? std::string(dtype_name(hidden.dtype())) : "an undefined tensor");
    TF_CHECK_ARG(hidden.shape().rank() >= 1 && hidden.shape()[-1] == output_dim_, n.c_str(),
                 "layer \"{}\" (ReversibleEmbedding) reverses hidden states (..., {}), got shape "
                 "{}",
                 n, output_dim_, hidden.shape().to_string());
    if (!built()) ensure_built(TensorShape{None});
    Tensor kernel = o_.tie_weights ? transpose(table_.value()) : reverse_.value();
    Tensor h = hidden;
    if (o_.reverse_dtype) {
      h = h.dtype() == *o_.reverse_dtype ? h : cast(h, *o_.reverse_dtype);
      kernel = kernel.dtype() == *o_.reverse_dtype ? kernel : cast(kernel, *o_.reverse_dtype);
    } else if (kernel.dtype() != h.dtype()) {
      kernel = cast(kernel, h.dtype());
    }
    Tensor logits = linalg::tensordot(h, kernel, 1);
    if (o_.logit_soft_cap) {
      const double cap = *o_.logit_soft_cap;
      logits = multiply(tanh(multiply(logits, Tensor(1.0 / cap))), Tensor(cap));
    }
    return logits;
  }
  Variable table() const { return table_; }
  Variable reverse_table() const { return reverse_; }

 protected:
  void build(const TensorShape&) override {
    table_ = add_weight("embeddings", TensorShape({input_dim_, output_dim_}), init_, true,
                        o_.embeddings_regularizer, o_.embeddings_constraint);
    if (!o_.tie_weights)
      reverse_ = add_weight("reverse_embeddings", TensorShape({output_dim_, input_dim_}), init_,
                            true, Regularizer());
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TensorShape o = s;
    o.push_back(output_dim_);
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() >= TensorShape::kMaxRank)
      incompatible(s, fmt::format("expected ndim < {}", TensorShape::kMaxRank));
  }
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool) override {
    return detail::embedding_lookup(table_.value(), x, name_, "ReversibleEmbedding", input_dim_);
  }

 private:
  int64_t input_dim_, output_dim_;
  layers::ReversibleEmbeddingOptions o_;
  Initializer init_;
  Variable table_, reverse_;  // set by build, read after built() (acquire)
};

}  // namespace

namespace layers {

EinsumDense::EinsumDense(std::string equation, std::vector<int64_t> output_shape,
                         EinsumDenseOptions options) {
  auto input_shape = options.input_shape;
  auto impl = std::make_shared<EinsumDenseImpl>(std::move(equation), std::move(output_shape),
                                                std::move(options));
  impl_ = impl;
  if (!input_shape.empty()) impl->build_from_declared_shape(input_shape);
}
EinsumDense::EinsumDense(std::string equation, int64_t output_shape, EinsumDenseOptions options)
    : EinsumDense(std::move(equation), std::vector<int64_t>{output_shape}, std::move(options)) {}
const std::string& EinsumDense::equation() const {
  return impl_as<EinsumDenseImpl>(*this, "EinsumDense").equation();
}
const std::vector<int64_t>& EinsumDense::partial_output_shape() const {
  return impl_as<EinsumDenseImpl>(*this, "EinsumDense").partial();
}
Variable EinsumDense::kernel() const {
  return impl().weight("kernel");
}
Variable EinsumDense::bias() const {
  return impl().weight("bias");
}

Identity::Identity(std::string name) : Layer(std::make_shared<IdentityImpl>(std::move(name))) {}

ReversibleEmbedding::ReversibleEmbedding(int64_t input_dim, int64_t output_dim,
                                         ReversibleEmbeddingOptions options) {
  auto input_shape = options.input_shape;
  auto impl = std::make_shared<ReversibleEmbeddingImpl>(input_dim, output_dim, std::move(options));
  impl_ = impl;
  if (!input_shape.empty()) impl->build_from_declared_shape(input_shape);
}
Tensor ReversibleEmbedding::reverse(const Tensor& hidden) const {
  return impl_as<ReversibleEmbeddingImpl>(*this, "ReversibleEmbedding").reverse(hidden);
}
Variable ReversibleEmbedding::embeddings() const {
  return impl().weight("embeddings");
}
Variable ReversibleEmbedding::reverse_embeddings() const {
  const auto& r = impl_as<ReversibleEmbeddingImpl>(*this, "ReversibleEmbedding");
  TF_CHECK_T(FailedPreconditionError, !r.options().tie_weights, "ReversibleEmbedding",
             "layer \"{}\" ties its weights: the reverse projection is the transposed "
             "embeddings, no weight of its own",
             r.name());
  return impl().weight("reverse_embeddings");
}

}  // namespace layers

namespace detail::layer_options {
std::optional<EinsumDenseConfig> einsum_dense(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const EinsumDenseImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return EinsumDenseConfig{p->equation_, p->partial_, p->options_};
}
std::optional<ReversibleEmbeddingConfig> reversible_embedding(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ReversibleEmbeddingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return ReversibleEmbeddingConfig{p->input_dim(), p->output_dim(), p->options()};
}
bool identity(const LayerImpl& layer) {
  return dynamic_cast<const IdentityImpl*>(&layer) != nullptr;
}
}  // namespace detail::layer_options

}  // namespace tapeflow::keras
