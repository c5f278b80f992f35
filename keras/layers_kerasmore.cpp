// Conv1DTranspose, GroupQueryAttention and SpectralNormalization (keras/layers_kerasmore.h):
// LayerImpls composed of conv2d_transpose, einsum, softmax, where and variable assignments.
// GroupQueryAttention's extra call inputs reach its call() through a per-thread request, as
// MultiHeadAttention's do (keras/call_request.h).
#include "keras/layers_kerasmore.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/error.h"
#include "keras/attention_projection.h"
#include "keras/call_request.h"
#include "keras/data_format.h"
#include "keras/functional.h"
#include "keras/layer_handle.h"
#include "keras/serialization_access_conv.h"
#include "keras/serialization_access_sequence.h"
#include "ops/binary.h"
#include "ops/einsum.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_more.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::DataFormat;
using detail::LayerImpl;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// ---- Conv1DTranspose ----

class Conv1DTransposeImpl final : public LayerImpl {
 public:
  Conv1DTransposeImpl(int64_t filters, int kernel, const layers::Conv1DTransposeOptions& o)
      : LayerImpl("Conv1DTranspose", "conv1d_transpose", o.name),
        filters_(filters),
        kernel_(kernel),
        stride_(o.strides),
        dilation_(o.dilation_rate),
        output_padding_(o.output_padding),
        activation_name_(o.activation),
        activation_(activations::get(o.activation)),
        use_bias_(o.use_bias),
        kernel_init_(o.kernel_initializer.defined() ? o.kernel_initializer
                                                    : initializers::GlorotUniform()),
        bias_init_(o.bias_initializer.defined() ? o.bias_initializer : initializers::Zeros()),
        kernel_reg_(o.kernel_regularizer),
        bias_reg_(o.bias_regularizer),
        kernel_con_(o.kernel_constraint),
        bias_con_(o.bias_constraint) {
    const char* cls = "Conv1DTranspose";
    TF_CHECK_ARG(filters > 0, cls, "filters must be positive, got {}", filters);
    TF_CHECK_ARG(kernel > 0, cls, "kernel_size must be positive, got {}", kernel);
    TF_CHECK_ARG(o.strides > 0, cls, "strides must be positive, got {}", o.strides);
    TF_CHECK_ARG(o.dilation_rate > 0, cls, "dilation_rate must be positive, got {}",
                 o.dilation_rate);
    const std::string p = lower(o.padding);
    TF_CHECK_ARG(p == "valid" || p == "same", cls,
                 "padding must be \"valid\" or \"same\", got \"{}\"", o.padding);
    same_ = p == "same";
    format_ = DataFormat::parse(cls, o.data_format);
    TF_CHECK_ARG(o.strides == 1 || o.dilation_rate == 1, cls,
                 "strides > 1 together with dilation_rate > 1 is not supported, got strides={}, "
                 "dilation_rate={}",
                 o.strides, o.dilation_rate);
    if (output_padding_)
      TF_CHECK_ARG(*output_padding_ >= 0 && *output_padding_ < o.strides, cls,
                   "output_padding {} must be non-negative and less than strides {}",
                   *output_padding_, o.strides);
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 3) incompatible(input, format_.expected_ndim(1));
    const TensorShape s = format_.to_last(input);
    return format_.to_first(TensorShape({s[0], out_length(s[1]), filters_}));
  }

 protected:
  void build(const TensorShape& input) override {
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s.rank() == 3 && s[2] != None, name_.c_str(),
                 "layer \"{}\" (Conv1DTranspose) needs inputs {} of rank 3 with a known channel "
                 "dimension, got shape {}",
                 name_, format_.layout(1), input.to_string());
    channels_ = s[2];
    kernel_var_ = add_weight("kernel", TensorShape({kernel_, filters_, channels_}), kernel_init_,
                             true, kernel_reg_, kernel_con_);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({filters_}), bias_init_, true, bias_reg_, bias_con_);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, 3, channels_, format_.channels_first());
  }
  Tensor call(const Tensor& input, bool) override {
    const Tensor x = format_.to_last(input);
    const TensorShape& s = x.shape();
    Tensor y;
    if (s[1] == 0) {
      // No steps: nothing reaches the output (Keras gives the bias at each of its
      // out_length(0) positions); zeros of that shape that follow the batch.
      y = reduce_sum(x, {1, 2}, true) * zeros(TensorShape({1, out_length(0), filters_}), x.dtype());
    } else {
      // A conv2d_transpose over (batch, 1, steps, channels) with a (1, k, filters, channels)
      // kernel; the op sizes the steps (Keras' length, from output_padding), so that a graph
      // traced for None dimensions serves every length.
      const TensorShape out({s[0], 1, None, filters_});
      const Tensor k = expand_dims(kernel_var_.value(), 0);
      y = squeeze(tapeflow::detail::conv2d_transpose(
                      expand_dims(x, 1), k, out, {1, stride_}, same_ ? "SAME" : "VALID",
                      {1, dilation_}, "NHWC",
                      output_padding_ ? std::optional(std::array<int, 2>{0, *output_padding_})
                                      : std::nullopt),
                  {1});
    }
    if (use_bias_) y = nn::bias_add(y, bias_.value());
    // The activation sees the output in the layer's format, as Keras' (softmax's axis -1).
    y = format_.to_first(y);
    return activation_ ? activation_(y) : y;
  }

 private:
  // Keras' deconv_output_length.
  int64_t out_length(int64_t in) const {
    return tapeflow::detail::transposed_length(in, kernel_, stride_, dilation_, same_,
                                               output_padding_);
  }

  friend std::optional<detail::layer_options::ConvConfig> detail::layer_options::conv1d_transpose(
      const LayerImpl&);
  int64_t filters_;
  int kernel_, stride_, dilation_;
  std::optional<int> output_padding_;
  bool same_ = false;
  DataFormat format_;
  std::string activation_name_;  // as given, for get_config (keras/serialization.h)
  activations::Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
  Regularizer kernel_reg_, bias_reg_;
  Constraint kernel_con_, bias_con_;
  int64_t channels_ = 0;
  Variable kernel_var_, bias_;
};

// ---- GroupQueryAttention ----

struct GqaRequest {
  const LayerImpl* layer = nullptr;
  Tensor value, key;
  TensorShape value_shape, key_shape;
  Tensor attention_mask, query_mask, value_mask, key_mask;
  bool use_causal_mask = false;
  bool want_scores = false;
  Tensor scores;  // out
  bool served = false;
};
using GqaRequests = detail::CallRequests<GqaRequest>;

Tensor bool_mask(const Tensor& m, const std::string& layer, const char* what) {
  if (m.dtype() == bool_) return m;
  TF_CHECK_ARG(is_floating(m.dtype()) || is_integer(m.dtype()), layer.c_str(),
               "layer \"{}\" (GroupQueryAttention): {} must be bool or numeric, got dtype {}",
               layer, what, dtype_name(m.dtype()));
  return not_equal(m, Tensor(0));
}

class GroupQueryAttentionImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }
  GroupQueryAttentionImpl(int64_t head_dim, int64_t nq, int64_t nkv,
                          layers::GroupQueryAttentionOptions o)
      : LayerImpl("GroupedQueryAttention", "grouped_query_attention", o.name),
        head_dim_(head_dim),
        nq_(nq),
        nkv_(nkv),
        o_(std::move(o)) {
    const char* cls = "GroupQueryAttention";
    TF_CHECK_ARG(head_dim > 0, cls, "head_dim must be positive, got {}", head_dim);
    TF_CHECK_ARG(nq > 0 && nkv > 0, cls,
                 "num_query_heads and num_key_value_heads must be positive, got {} and {}", nq,
                 nkv);
    TF_CHECK_ARG(nq % nkv == 0, cls,
                 "num_query_heads must be divisible by num_key_value_heads, got "
                 "num_query_heads={}, num_key_value_heads={}",
                 nq, nkv);
    TF_CHECK_ARG(o_.dropout >= 0.0 && o_.dropout < 1.0, cls,
                 "dropout must be in the range [0, 1), got {}", o_.dropout);
    TF_CHECK_ARG(!o_.sliding_window || *o_.sliding_window > 0, cls,
                 "sliding_window must be unset or a positive integer, got {}",
                 o_.sliding_window.value_or(0));
    if (!o_.kernel_initializer.defined()) o_.kernel_initializer = initializers::GlorotUniform();
    if (!o_.bias_initializer.defined()) o_.bias_initializer = initializers::Zeros();
    query_ = std::make_shared<detail::AttentionProjection>(
        "query", 1, std::vector<int64_t>{nq, head_dim}, detail::projection_weights(o_));
    key_ = std::make_shared<detail::AttentionProjection>(
        "key", 1, std::vector<int64_t>{nkv, head_dim}, detail::projection_weights(o_));
    value_ = std::make_shared<detail::AttentionProjection>(
        "value", 1, std::vector<int64_t>{nkv, head_dim}, detail::projection_weights(o_));
    if (o_.use_gate)
      gate_ = std::make_shared<detail::AttentionProjection>(
          "gate", 1, std::vector<int64_t>{nq, head_dim}, detail::projection_weights(o_));
    output_ = std::make_shared<detail::AttentionProjection>(
        "attention_output", 2, std::vector<int64_t>{}, detail::projection_weights(o_));
  }
  std::vector<Layer> sublayers() const override {
    if (gate_) return {Layer(query_), Layer(key_), Layer(gate_), Layer(value_), Layer(output_)};
    return {Layer(query_), Layer(key_), Layer(value_), Layer(output_)};
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() == 3, name_.c_str(),
                 "layer \"{}\" (GroupQueryAttention) needs a query of shape (batch, T, dim), got "
                 "shape {}",
                 name_, s.to_string());
    return s;
  }
  const std::shared_ptr<detail::AttentionProjection>& query() const { return query_; }
  const std::shared_ptr<detail::AttentionProjection>& key() const { return key_; }
  const std::shared_ptr<detail::AttentionProjection>& value() const { return value_; }
  const std::shared_ptr<detail::AttentionProjection>& output() const { return output_; }
  const std::shared_ptr<detail::AttentionProjection>& gate() const { return gate_; }

 protected:
  void build(const TensorShape& qs) override {
    const GqaRequest* r = GqaRequests::peek(this);
    const TensorShape vs = r ? r->value_shape : qs;
    const TensorShape ks = r ? r->key_shape : vs;
    const char* names[] = {"query", "value", "key"};
    const TensorShape* shapes[] = {&qs, &vs, &ks};
    for (int i = 0; i < 3; ++i)
      TF_CHECK_ARG(shapes[i]->rank() == 3 && (*shapes[i])[2] != None, name_.c_str(),
                   "layer \"{}\" (GroupQueryAttention) needs query, value and key of shape "
                   "(batch, sequence, features) with known features, got {} shape {}",
                   name_, names[i], shapes[i]->to_string());
    query_dim_ = qs[2];
    value_in_dim_ = vs[2];
    key_in_dim_ = ks[2];
    output_->set_out_dims({query_dim_});
    // Keras' order: query, key, the gate, value, then the output projection.
    query_->ensure_built(qs);
    key_->ensure_built(ks);
    if (gate_) gate_->ensure_built(qs);
    value_->ensure_built(vs);
    output_->ensure_built(TensorShape({None, None, nq_, head_dim_}));
  }
  bool casts_all_inputs() const override { return false; }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, 3, query_dim_);
  }
  Tensor call(const Tensor& query, bool training) override;

 private:
  // (B, S, nkv, H) -> (B, S, nq, H), each head repeated nq / nkv times in place (Keras'
  // ops.repeat along axis 2).
  Tensor repeat_heads(const Tensor& x) const {
    if (nq_ == nkv_) return x;
    std::vector<double> idx;
    for (int64_t h = 0; h < nq_; ++h) idx.push_back(double(h / (nq_ / nkv_)));
    return gather(x, ::tapeflow::detail::from_doubles(idx, TensorShape({nq_}), int32), 2);
  }

  friend std::optional<detail::layer_options::GroupQueryAttentionConfig>
  detail::layer_options::group_query_attention(const LayerImpl&);
  int64_t head_dim_, nq_, nkv_;
  layers::GroupQueryAttentionOptions o_;
  std::shared_ptr<detail::AttentionProjection> query_, key_, value_, output_, gate_;
  int64_t query_dim_ = 0, value_in_dim_ = 0, key_in_dim_ = 0;
};

Tensor GroupQueryAttentionImpl::call(const Tensor& query, bool training) {
  GqaRequest local;
  GqaRequest* r = GqaRequests::take(this);
  const std::string& n = name_;
  if (r == nullptr && call_mask().defined()) {
    // A plain call with a mask: Keras' layer(x, x) with x's mask as the query's and value's.
    local.value = query;
    local.query_mask = call_mask();
    local.value_mask = call_mask();
    r = &local;
  }
  Tensor value = r ? r->value : query;
  Tensor key = r && r->key.defined() ? r->key : value;
  const char* what[] = {"query", "value", "key"};
  const Tensor* ts[] = {&query, &value, &key};
  for (int i = 0; i < 3; ++i) {
    TF_CHECK_ARG(ts[i]->defined(), n.c_str(),
                 "layer \"{}\" (GroupQueryAttention): the {} is an undefined tensor", n, what[i]);
    TF_CHECK_ARG(is_floating(ts[i]->dtype()), n.c_str(),
                 "layer \"{}\" (GroupQueryAttention): the {} must be floating, got dtype {}", n,
                 what[i], dtype_name(ts[i]->dtype()));
    TF_CHECK_ARG(ts[i]->shape().rank() == 3, n.c_str(),
                 "layer \"{}\" (GroupQueryAttention) needs a {} of rank 3 (batch, sequence, "
                 "features), got shape {}",
                 n, what[i], ts[i]->shape().to_string());
  }
  const TensorShape &qsh = query.shape(), &vsh = value.shape(), &ksh = key.shape();
  auto same = [](int64_t a, int64_t b) { return a == None || b == None || a == b; };
  TF_CHECK_ARG(same(qsh[0], vsh[0]) && same(qsh[0], ksh[0]) && same(vsh[1], ksh[1]), n.c_str(),
               "layer \"{}\" (GroupQueryAttention): query, value and key must have one batch "
               "size and value and key one sequence length, got shapes {}, {} and {}",
               n, qsh.to_string(), vsh.to_string(), ksh.to_string());
  TF_CHECK_ARG(vsh[2] == value_in_dim_ && ksh[2] == key_in_dim_, n.c_str(),
               "layer \"{}\" (GroupQueryAttention) was built for value and key features {} and "
               "{}, got value shape {} and key shape {}",
               n, value_in_dim_, key_in_dim_, vsh.to_string(), ksh.to_string());
  value = value.dtype() == compute_dtype_ ? value : cast(value, compute_dtype_);
  key = key.dtype() == compute_dtype_ ? key : cast(key, compute_dtype_);
  const int64_t b = qsh[0], t = qsh[1], s = vsh[1];

  // Keras' _compute_attention_mask: (batch, T, S) from the inputs' masks, the causal mask and
  // the sliding window, then the attention_mask.
  Tensor mask;
  auto merge = [&mask](const Tensor& m) { mask = mask.defined() ? logical_and(mask, m) : m; };
  // (1, T, 1) row and (1, 1, S) column positions, for the causal mask and the window.
  auto positions = [&](const char* what) {
    TF_CHECK_ARG(t != None && s != None, n.c_str(),
                 "layer \"{}\" (GroupQueryAttention): {} needs known sequence lengths, got "
                 "query shape {} and value shape {}",
                 n, what, qsh.to_string(), vsh.to_string());
    return std::pair{reshape(range(0.0, double(t), 1.0, int32), TensorShape({1, t, 1})),
                     reshape(range(0.0, double(s), 1.0, int32), TensorShape({1, 1, s}))};
  };
  if (r) {
    auto input_mask = [&](const Tensor& m, const char* w, int64_t len, int axis) {
      if (!m.defined()) return;
      const TensorShape& ms = m.shape();
      TF_CHECK_ARG(ms.rank() == 2 && same(ms[0], b) && same(ms[1], len), n.c_str(),
                   "layer \"{}\" (GroupQueryAttention): {} must have shape (batch, {}) = ({}, "
                   "{}), got shape {}",
                   n, w, axis == -1 ? "T" : "S", b, len, ms.to_string());
      merge(expand_dims(bool_mask(m, n, w), axis));
    };
    input_mask(r->query_mask, "query_mask", t, -1);
    input_mask(r->value_mask, "value_mask", s, -2);
    input_mask(r->key_mask, "key_mask", s, -2);
    if (r->use_causal_mask) {
      const auto [rows, cols] = positions("use_causal_mask");
      merge(greater_equal(rows, cols));
    }
  }
  if (o_.sliding_window) {
    const auto [rows, cols] = positions("sliding_window");
    merge(less(abs(rows - cols), Tensor(static_cast<int32_t>(*o_.sliding_window))));
  }
  if (r && r->attention_mask.defined()) {
    // (batch, T, S) or, one per query head, (batch, num_query_heads, T, S); a rank-4 mask
    // meets the other masks with their heads' axis inserted (Keras 3.15 would align their
    // batch axis with the heads' axis instead, right only for a batch of 1).
    const Tensor& am = r->attention_mask;
    const TensorShape& as = am.shape();
    bool ok = as.rank() >= 1 && as.rank() <= 4;
    const std::vector<int64_t> want =
        as.rank() == 4 ? std::vector<int64_t>{b, nq_, t, s} : std::vector<int64_t>{b, t, s};
    for (int i = 0; ok && i < as.rank(); ++i) {
      const int64_t d = as[as.rank() - 1 - i], w = want[want.size() - 1 - i];
      ok = d == None || w == None || d == 1 || d == w;
    }
    TF_CHECK_ARG(ok, n.c_str(),
                 "layer \"{}\" (GroupQueryAttention): attention_mask of shape {} does not "
                 "broadcast to (batch, T, S) = ({}, {}, {}) nor to (batch, num_query_heads, T, "
                 "S) = ({}, {}, {}, {})",
                 n, as.to_string(), b, t, s, b, nq_, t, s);
    if (as.rank() == 4 && mask.defined()) mask = expand_dims(mask, -3);
    merge(bool_mask(am, n, "attention_mask"));
  }

  // Keras calls the gate on the query before the projections.
  const Tensor gate = gate_ ? sigmoid(gate_->invoke(query, training)) : Tensor();  // (B, T, nq, H)
  const Tensor q = query_->invoke(query, training);                // (B, T, nq, H)
  const Tensor k = repeat_heads(key_->invoke(key, training));      // (B, S, nq, H)
  const Tensor v = repeat_heads(value_->invoke(value, training));  // (B, S, nq, H)
  // (B, T, S) -> (B, 1, T, S): the heads' axis.
  while (mask.defined() && mask.shape().rank() < 4) mask = expand_dims(mask, -3);
  // Keras scales by 1 / sqrt(head_dim) converted to the compute dtype from a Python float.
  const double scale = 1.0 / std::sqrt(double(head_dim_));
  const bool want_scores = r && r->want_scores;
  Tensor out, scores;
  if (o_.dropout > 0.0 || want_scores) {
    // Keras' explicit path: the query scaled first, masked logits -1e9 (-3e4 in float16)
    // before the softmax and zero after it.
    Tensor logits = einsum("bquh,bkuh->buqk", q * Tensor(scale), k);
    if (mask.defined())
      logits = where(mask, logits, Tensor(compute_dtype_ == float16 ? -3e4 : -1e9));
    scores = nn::softmax(logits, -1);
    if (mask.defined()) scores = where(mask, scores, Tensor(0.0));
    const Tensor p =
        training && o_.dropout > 0.0 ? nn::dropout(scores, o_.dropout, o_.seed) : scores;
    out = einsum("buqk,bkuh->bquh", p, v);
  } else {
    // Keras' fused path (ops.dot_product_attention): half precisions computed in float32,
    // scaled after the product, masked logits -0.7 * float32 max, no zeroing afterwards.
    const DType dt = q.dtype();
    const bool half = dt == float16 || dt == bfloat16;
    Tensor logits = einsum("bquh,bkuh->buqk", q, k);
    if (half) logits = cast(logits, float32);
    logits = logits * Tensor(scale);
    if (mask.defined()) logits = where(mask, logits, Tensor(3.38953e38 * -0.7));
    Tensor probs = nn::softmax(logits, -1);
    if (half) probs = cast(probs, dt);
    out = einsum("buqk,bkuh->bquh", probs, v);
  }
  if (r) r->scores = scores;
  return output_->invoke(gate.defined() ? out * gate : out, training);
}

layers::AttentionOutputs call_gqa(const Layer& l, const Tensor& query, const Tensor& value,
                                  const layers::MultiHeadAttentionCall& a, bool want_scores) {
  auto& g = impl_as<GroupQueryAttentionImpl>(l, "GroupQueryAttention");
  TF_CHECK_ARG(query.defined() && value.defined(), g.name().c_str(),
               "layer \"{}\" (GroupQueryAttention): the query and the value must be defined "
               "tensors",
               g.name());
  GqaRequest r;
  r.layer = &g;
  r.value = value;
  r.key = a.key;
  r.value_shape = value.shape();
  r.key_shape = a.key.defined() ? a.key.shape() : value.shape();
  r.attention_mask = a.attention_mask;
  r.query_mask = a.query_mask;
  r.value_mask = a.value_mask;
  r.key_mask = a.key_mask;
  r.use_causal_mask = a.use_causal_mask;
  r.want_scores = want_scores;
  Tensor output;
  {
    GqaRequests::Scope scope(&r);
    output = l.impl_ptr()->invoke(query, a.training);
  }
  TF_CHECK_T(InternalError, r.served, g.name().c_str(),
             "layer \"{}\" returned without serving its attention request", g.name());
  return {output, r.scores};
}

// ---- SpectralNormalization ----

class SpectralNormalizationImpl final : public LayerImpl {
 public:
  SpectralNormalizationImpl(Layer inner, int power_iterations, std::string name)
      : LayerImpl("SpectralNormalization", "spectral_normalization", std::move(name)),
        inner_(std::move(inner)),
        iterations_(power_iterations) {
    TF_CHECK_ARG(inner_.defined(), "SpectralNormalization",
                 "needs a layer to wrap, got an empty Layer handle");
    TF_CHECK_ARG(power_iterations > 0, "SpectralNormalization",
                 "power_iterations must be positive, got {}", power_iterations);
  }
  std::vector<Layer> sublayers() const override { return {inner_}; }
  const Layer& inner() const { return inner_; }
  // Keras 3's order: the wrapped kernel first (Keras tracks it as the wrapper's own weight,
  // self.kernel), then vector_u, then the wrapped layer's other weights: [kernel, vector_u,
  // bias] for a Dense. Checkpoint names keep the kernel under the wrapped layer.
  void collect(std::vector<std::pair<Variable, bool>>& out, bool parent_trainable,
               std::vector<const void*>& seen) const override {
    if (kernel_.defined() && built() &&
        std::find(seen.begin(), seen.end(), kernel_.handle_id()) == seen.end()) {
      seen.push_back(kernel_.handle_id());
      out.emplace_back(kernel_, parent_trainable && trainable() && inner_.impl().trainable() &&
                                    kernel_.trainable());
    }
    LayerImpl::collect(out, parent_trainable, seen);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    return inner_.impl().compute_output_shape(s);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() >= 1 && s[s.rank() - 1] != None, name_.c_str(),
                 "layer \"{}\" (SpectralNormalization) needs inputs with a known last dimension, "
                 "got shape {}",
                 name_, s.to_string());
    inner_.impl().ensure_built(s);
    for (const char* want : {"kernel", "embeddings"}) {
      for (const detail::Weight& w : inner_.impl().own_weights())
        if (w.name == want) {
          kernel_ = w.variable;
          break;
        }
      if (kernel_.defined()) break;
    }
    TF_CHECK_ARG(kernel_.defined(), name_.c_str(),
                 "layer \"{}\" (SpectralNormalization): the wrapped layer \"{}\" ({}) has no "
                 "weight \"kernel\" nor \"embeddings\" (built for input shape {})",
                 name_, inner_.name(), inner_.impl().class_name(), s.to_string());
    const TensorShape& ks = kernel_.shape();
    TF_CHECK_ARG(ks.rank() >= 1, name_.c_str(),
                 "layer \"{}\" (SpectralNormalization): the wrapped kernel must have rank >= 1, "
                 "got shape {}",
                 name_, ks.to_string());
    vector_u_ = add_weight("vector_u", TensorShape({1, ks[ks.rank() - 1]}),
                           initializers::TruncatedNormal(0.0, 0.02), false);
  }
  bool casts_all_inputs() const override { return false; }  // the wrapped layer decides
  Tensor call(const Tensor& x, bool training) override {
    if (training) normalize_kernel();
    Tensor y = inner_.impl().invoke(x, training);
    // Keras casts the output to the input's dtype, also integer ids into an Embedding (whose
    // float output would then be truncated); only floating inputs set the dtype here.
    return y.dtype() == x.dtype() || !is_floating(x.dtype()) ? y : cast(y, x.dtype());
  }

 private:
  // One training step's power iteration; assigns vector_u and kernel / sigma (both unchanged
  // for an all-zero kernel, as Keras' cond).
  void normalize_kernel() {
    const TensorShape& ks = kernel_.shape();
    const int64_t last = ks[ks.rank() - 1];
    // The raw float32 values, not the autocast reads of a mixed policy: the power iteration and
    // the assignments run in the variables' dtype (Keras casts to them).
    const Tensor kernel = stop_gradient(kernel_.read_value());
    const Tensor w = reshape(kernel, TensorShape({-1, last}));
    const Tensor u0 = stop_gradient(vector_u_.read_value());
    // Keras' ops.normalize(axis=None): x * min(rsqrt(sum(x^2)), 1e7), epsilon 1e-14 on the sum.
    auto l2n = [](const Tensor& a) { return linalg::l2_normalize(a, {0, 1}, 1e-14); };
    Tensor u = u0, v;
    for (int i = 0; i < iterations_; ++i) {
      v = l2n(matmul(u, w, false, true));
      u = l2n(matmul(v, w));
    }
    const Tensor sigma = matmul(matmul(v, w), u, false, true);  // (1, 1)
    const Tensor scaled = reshape(kernel / sigma, ks);
    const Tensor zero = reduce_all(equal(kernel, zeros_like(kernel)));
    vector_u_.assign(where(zero, u0, cast(u, vector_u_.dtype())));
    kernel_.assign(where(zero, kernel, cast(scaled, kernel_.dtype())));
  }

  friend std::optional<detail::layer_options::SpectralNormalizationConfig>
  detail::layer_options::spectral_normalization(const LayerImpl&);
  Layer inner_;
  int iterations_;
  Variable kernel_, vector_u_;
};

}  // namespace

namespace layers {

Conv1DTranspose::Conv1DTranspose(int64_t filters, int kernel_size, Conv1DTransposeOptions options) {
  auto impl = std::make_shared<Conv1DTransposeImpl>(filters, kernel_size, options);
  impl_ = impl;
  if (!options.input_shape.empty()) impl->build_from_declared_shape(options.input_shape);
}
Variable Conv1DTranspose::kernel() const {
  return impl().weight("kernel");
}
Variable Conv1DTranspose::bias() const {
  return impl().weight("bias");
}

GroupQueryAttention::GroupQueryAttention(int64_t head_dim, int64_t num_query_heads,
                                         int64_t num_key_value_heads,
                                         GroupQueryAttentionOptions options)
    : Layer(std::make_shared<GroupQueryAttentionImpl>(head_dim, num_query_heads,
                                                      num_key_value_heads, std::move(options))) {}
Tensor GroupQueryAttention::operator()(const Tensor& query, const Tensor& value,
                                       const MultiHeadAttentionCall& args) const {
  return call_gqa(*this, query, value, args, false).output;
}
AttentionOutputs GroupQueryAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                       const MultiHeadAttentionCall& args) const {
  return call_gqa(*this, query, value, args, true);
}
void GroupQueryAttention::build(const TensorShape& query_shape, const TensorShape& value_shape,
                                const std::optional<TensorShape>& key_shape) const {
  auto& g = impl_as<GroupQueryAttentionImpl>(*this, "GroupQueryAttention");
  GqaRequest r;
  r.layer = &g;
  r.value_shape = value_shape;
  r.key_shape = key_shape.value_or(value_shape);
  GqaRequests::Scope scope(&r);
  g.ensure_built(query_shape);
}
KerasTensor GroupQueryAttention::operator()(const KerasTensor& query, const KerasTensor& value,
                                            const SymbolicAttentionCall& args) const {
  return detail::call_gqa_symbolic(*this, query, value, args.key, args.attention_mask,
                                   args.use_causal_mask, false, args.training)
      .front();
}
std::vector<KerasTensor> GroupQueryAttention::call_with_scores(
    const KerasTensor& query, const KerasTensor& value, const SymbolicAttentionCall& args) const {
  return detail::call_gqa_symbolic(*this, query, value, args.key, args.attention_mask,
                                   args.use_causal_mask, true, args.training);
}
Layer GroupQueryAttention::query_dense() const {
  return Layer(impl_as<GroupQueryAttentionImpl>(*this, "GroupQueryAttention").query());
}
Layer GroupQueryAttention::key_dense() const {
  return Layer(impl_as<GroupQueryAttentionImpl>(*this, "GroupQueryAttention").key());
}
Layer GroupQueryAttention::value_dense() const {
  return Layer(impl_as<GroupQueryAttentionImpl>(*this, "GroupQueryAttention").value());
}
Layer GroupQueryAttention::gate_dense() const {
  const auto& gate = impl_as<GroupQueryAttentionImpl>(*this, "GroupQueryAttention").gate();
  return gate ? Layer(gate) : Layer();
}
Layer GroupQueryAttention::output_dense() const {
  return Layer(impl_as<GroupQueryAttentionImpl>(*this, "GroupQueryAttention").output());
}

SpectralNormalization::SpectralNormalization(Layer layer, int power_iterations, std::string name)
    : Layer(std::make_shared<SpectralNormalizationImpl>(std::move(layer), power_iterations,
                                                        std::move(name))) {}
Layer SpectralNormalization::layer() const {
  return impl_as<SpectralNormalizationImpl>(*this, "SpectralNormalization").inner();
}
Variable SpectralNormalization::vector_u() const {
  return impl().weight("vector_u");
}

}  // namespace layers

namespace detail::layer_options {

std::optional<SpectralNormalizationConfig> spectral_normalization(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const SpectralNormalizationImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  SpectralNormalizationConfig c;
  c.layer = p->inner_;
  c.power_iterations = p->iterations_;
  if (p->built()) {
    c.kernel = p->kernel_;
    c.vector_u = p->vector_u_;
  }
  return c;
}

std::optional<GroupQueryAttentionConfig> group_query_attention(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const GroupQueryAttentionImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return GroupQueryAttentionConfig{p->head_dim_, p->nq_, p->nkv_, p->o_};
}

std::optional<ConvConfig> conv1d_transpose(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Conv1DTransposeImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  ConvConfig c;
  c.filters = p->filters_;
  c.kernel_size = {p->kernel_};
  c.strides = {p->stride_};
  c.dilation_rate = {p->dilation_};
  if (p->output_padding_) c.output_padding = std::vector<int>{*p->output_padding_};
  c.padding = p->same_ ? "same" : "valid";
  c.channels_first = p->format_.channels_first();
  c.activation = p->activation_name_;
  c.use_bias = p->use_bias_;
  c.kernel_initializer = p->kernel_init_;
  c.bias_initializer = p->bias_init_;
  c.kernel_regularizer = p->kernel_reg_;
  c.bias_regularizer = p->bias_reg_;
  c.kernel_constraint = p->kernel_con_;
  c.bias_constraint = p->bias_con_;
  return c;
}

}  // namespace detail::layer_options

std::vector<KerasTensor> detail::call_gqa_symbolic(const Layer& layer, const KerasTensor& query,
                                                   const KerasTensor& value, const KerasTensor& key,
                                                   const KerasTensor& attention_mask,
                                                   bool use_causal_mask, bool scores,
                                                   std::optional<bool> training) {
  auto& g = impl_as<GroupQueryAttentionImpl>(layer, "GroupQueryAttention");
  const std::shared_ptr<LayerImpl> impl = layer.impl_ptr();
  AttentionHooks hooks;
  hooks.heads = layer_options::group_query_attention(g)->num_query_heads;
  hooks.build = [impl](const TensorShape& qs, const TensorShape& vs, const TensorShape& ks) {
    GqaRequest r;
    r.layer = impl.get();
    r.value_shape = vs;
    r.key_shape = ks;
    GqaRequests::Scope scope(&r);
    impl->ensure_built(qs);
  };
  hooks.output_shape = [impl](const TensorShape& qs, const TensorShape&, const TensorShape&) {
    return impl->compute_output_shape(qs);
  };
  hooks.call = [layer](const Tensor& q, const Tensor& v, const layers::MultiHeadAttentionCall& a,
                       bool want_scores) { return call_gqa(layer, q, v, a, want_scores); };
  return attention_symbolic(layer, query, value, key, attention_mask, use_causal_mask, scores,
                            training, std::move(hooks));
}

}  // namespace tapeflow::keras
