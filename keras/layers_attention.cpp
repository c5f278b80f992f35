// MultiHeadAttention, Attention and AdditiveAttention (keras/layers_attention.h): LayerImpls
// composed of einsum, matmul, softmax and where, plus the EinsumDense sub-layers of
// MultiHeadAttention. The extra inputs of a multi-input call reach the layer's call() (and its
// build) through a per-thread request, so the call itself goes through LayerImpl::invoke as
// every layer's does (build once, cast, record with the calling model).
#include "keras/layers_attention.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "keras/attention_projection.h"
#include "keras/call_request.h"
#include "keras/functional.h"
#include "keras/layer_handle.h"
#include "keras/serialization_access_sequence.h"
#include "ops/binary.h"
#include "ops/einsum.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::LayerImpl;

// ---- the per-thread request of a multi-input call ----

// What a multi-input call hands to the layer it invokes, and the scores it gets back. One per
// thread and call, found by layer (replica threads may call the same layer at once).
struct AttentionRequest {
  const LayerImpl* layer = nullptr;
  Tensor value, key;                   // undefined key: value
  TensorShape value_shape, key_shape;  // for the build (also without tensors: build())
  Tensor attention_mask, query_mask, value_mask, key_mask;
  bool use_causal_mask = false;
  bool want_scores = false;
  Tensor scores;  // out
  bool served = false;
};
using Requests = detail::CallRequests<AttentionRequest>;

// Invokes `layer` on `query` with the request's extra inputs; {output, scores}.
// A plain (self-attention) call given a mask (Layer::call_with_mask, or a model passing one
// on): Keras' layer(x, x) with x's mask, i.e. the mask as the query's and the value's.
AttentionRequest* self_attention_request(AttentionRequest* r, const Tensor& query,
                                         const Tensor& mask, AttentionRequest& local) {
  if (r != nullptr || !mask.defined()) return r;
  local.value = query;
  local.query_mask = mask;
  local.value_mask = mask;
  return &local;
}

layers::AttentionOutputs invoke_with(const std::shared_ptr<LayerImpl>& layer, const Tensor& query,
                                     AttentionRequest& request, bool training) {
  request.layer = layer.get();
  Tensor output;
  {
    Requests::Scope scope(&request);
    output = layer->invoke(query, training);
  }
  TF_CHECK_T(InternalError, request.served, layer->name().c_str(),
             "layer \"{}\" returned without serving its attention request", layer->name());
  return {output, request.scores};
}

// ---- shared pieces ----

std::string dims_str(const TensorShape& s) {
  return s.to_string();
}

// A mask as bool: bool as it is, numbers nonzero; InvalidArgumentError naming the layer for
// other dtypes.
Tensor bool_mask(const Tensor& m, const std::string& layer, const char* what) {
  if (m.dtype() == bool_) return m;
  TF_CHECK_ARG(is_floating(m.dtype()) || is_integer(m.dtype()), layer.c_str(),
               "layer \"{}\": {} must be bool or numeric, got dtype {}", layer, what,
               dtype_name(m.dtype()));
  return not_equal(m, Tensor(0));
}

// Requires a mask (`expanded`: `m` brought to the scores' rank) to broadcast to `target`
// without growing it (each dimension 1 or equal), as Keras' Softmax checks its mask.
void check_mask_shape(const Tensor& m, const TensorShape& expanded, const TensorShape& target,
                      const std::string& layer, const char* what) {
  bool ok = expanded.rank() == target.rank();
  for (int i = 0; ok && i < target.rank(); ++i) {
    const int64_t md = expanded[i], td = target[i];
    ok = md == None || td == None || md == 1 || md == td;
  }
  TF_CHECK_ARG(ok, layer.c_str(),
               "layer \"{}\": {} of shape {} does not broadcast to the attention shape {} (each "
               "dimension must be 1 or match)",
               layer, what, dims_str(m.shape()), dims_str(target));
}

// (1, T, S): true where the query position is at or after the key position.
Tensor causal_mask(int64_t t, int64_t s) {
  const Tensor rows = reshape(range(0.0, double(t), 1.0, int32), TensorShape({1, t, 1}));
  const Tensor cols = reshape(range(0.0, double(s), 1.0, int32), TensorShape({1, 1, s}));
  return greater_equal(rows, cols);
}

Tensor to_dtype(const Tensor& x, DType d) {
  return x.dtype() == d ? x : cast(x, d);
}

// The checks every attention layer makes of its query, value and key: defined, floating, of
// rank `rank` (3: (batch, sequence, features)), equal batch sizes, and value and key alike but
// for their last dimension.
void check_qkv(const Tensor& q, const Tensor& v, const Tensor& k, const std::string& layer,
               const std::string& cls, int rank = 3) {
  TF_CHECK_ARG(v.defined(), layer.c_str(), "layer \"{}\" ({}): the value is an undefined tensor",
               layer, cls);
  const char* names[] = {"query", "value", "key"};
  const Tensor* ts[] = {&q, &v, &k};
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = *ts[i];
    TF_CHECK_ARG(is_floating(t.dtype()), layer.c_str(),
                 "layer \"{}\" ({}): the {} must be floating, got dtype {}", layer, cls, names[i],
                 dtype_name(t.dtype()));
    TF_CHECK_ARG(t.shape().rank() == rank, layer.c_str(),
                 "layer \"{}\" ({}) needs a {} of rank {} (batch, ..., features), got shape {}",
                 layer, cls, names[i], rank, dims_str(t.shape()));
  }
  const TensorShape &qs = q.shape(), &vs = v.shape(), &ks = k.shape();
  auto same = [](int64_t a, int64_t b) { return a == None || b == None || a == b; };
  TF_CHECK_ARG(same(qs[0], vs[0]) && same(qs[0], ks[0]), layer.c_str(),
               "layer \"{}\" ({}): query, value and key must have the same batch size, got "
               "shapes {}, {} and {}",
               layer, cls, dims_str(qs), dims_str(vs), dims_str(ks));
  bool alike = true;
  for (int i = 1; i + 1 < rank; ++i) alike = alike && same(vs[i], ks[i]);
  TF_CHECK_ARG(alike, layer.c_str(),
               "layer \"{}\" ({}): value and key must have the same sequence length, got shapes "
               "{} and {}",
               layer, cls, dims_str(vs), dims_str(ks));
}

// ---- EinsumDense: the projections of MultiHeadAttention ----

// ---- MultiHeadAttention ----

class MultiHeadAttentionImpl final : public LayerImpl {
 public:
  // Keras: the output carries the query's mask.
  bool supports_masking() const override { return true; }
  MultiHeadAttentionImpl(int64_t num_heads, int64_t key_dim, layers::MultiHeadAttentionOptions o)
      : LayerImpl("MultiHeadAttention", "multi_head_attention", o.name),
        num_heads_(num_heads),
        key_dim_(key_dim),
        value_dim_(o.value_dim.value_or(key_dim)),
        o_(std::move(o)) {
    TF_CHECK_ARG(num_heads > 0, "MultiHeadAttention", "num_heads must be positive, got {}",
                 num_heads);
    TF_CHECK_ARG(key_dim > 0, "MultiHeadAttention", "key_dim must be positive, got {}", key_dim);
    TF_CHECK_ARG(value_dim_ > 0, "MultiHeadAttention", "value_dim must be positive, got {}",
                 value_dim_);
    TF_CHECK_ARG(o_.dropout >= 0.0 && o_.dropout < 1.0, "MultiHeadAttention",
                 "dropout must be in the range [0, 1), got {}", o_.dropout);
    for (int64_t d : o_.output_shape)
      TF_CHECK_ARG(d > 0, "MultiHeadAttention",
                   "output_shape must have positive dimensions, got {}",
                   TensorShape(o_.output_shape).to_string());
    if (!o_.kernel_initializer.defined()) o_.kernel_initializer = initializers::GlorotUniform();
    if (!o_.bias_initializer.defined()) o_.bias_initializer = initializers::Zeros();
    auto dense = [&](const char* n, int bound) {
      return std::make_shared<detail::AttentionProjection>(n, bound, std::vector<int64_t>{},
                                                           detail::projection_weights(o_));
    };
    query_ = dense("query", 1);
    key_ = dense("key", 1);
    value_ = dense("value", 1);
    output_ = dense("attention_output", 2);
    query_->set_out_dims({num_heads_, key_dim_});
    key_->set_out_dims({num_heads_, key_dim_});
    value_->set_out_dims({num_heads_, value_dim_});
  }
  std::vector<Layer> sublayers() const override {
    return {Layer(query_), Layer(key_), Layer(value_), Layer(output_)};
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() >= 3, name_.c_str(),
                 "layer \"{}\" (MultiHeadAttention) needs a query of shape (batch, ..., dim) of "
                 "rank 3 or more, got shape {}",
                 name_, dims_str(s));
    std::vector<int64_t> d = s.dims();
    d.pop_back();
    if (o_.output_shape.empty())
      d.push_back(s[s.rank() - 1]);
    else
      d.insert(d.end(), o_.output_shape.begin(), o_.output_shape.end());
    return TensorShape(d);
  }
  int64_t num_heads() const { return num_heads_; }
  int64_t key_dim() const { return key_dim_; }
  int64_t value_dim() const { return value_dim_; }
  const std::shared_ptr<detail::AttentionProjection>& query() const { return query_; }
  const std::shared_ptr<detail::AttentionProjection>& key() const { return key_; }
  const std::shared_ptr<detail::AttentionProjection>& value() const { return value_; }
  const std::shared_ptr<detail::AttentionProjection>& output() const { return output_; }
  const layers::MultiHeadAttentionOptions& options() const { return o_; }
  // The attention axes once built (of the input: the projection keeps axes 1 .. rank - 2).
  const std::vector<int>& built_axes() const { return axes_; }

 protected:
  void build(const TensorShape& qs) override {
    const AttentionRequest* r = Requests::peek(this);
    const TensorShape vs = r ? r->value_shape : qs;
    const TensorShape ks = r ? r->key_shape : vs;
    const char* names[] = {"query", "value", "key"};
    const TensorShape* shapes[] = {&qs, &vs, &ks};
    const int rank = qs.rank();
    for (int i = 0; i < 3; ++i)
      TF_CHECK_ARG(shapes[i]->rank() == rank && rank >= 3 && (*shapes[i])[rank - 1] != None,
                   name_.c_str(),
                   "layer \"{}\" (MultiHeadAttention) needs query, value and key of one rank "
                   "(3 or more: (batch, ..., features)) with known features, got {} shape {} "
                   "and query shape {}",
                   name_, names[i], dims_str(*shapes[i]), dims_str(qs));
    for (int i = 1; i + 1 < rank; ++i)
      TF_CHECK_ARG(vs[i] == ks[i], name_.c_str(),
                   "layer \"{}\" (MultiHeadAttention): all dimensions of value and key but the "
                   "last must be equal, got value shape {} and key shape {}",
                   name_, dims_str(vs), dims_str(ks));
    rank_ = rank;
    query_dim_ = qs[rank - 1];
    value_in_dim_ = vs[rank - 1];
    key_in_dim_ = ks[rank - 1];
    build_attention_equations();
    output_->set_out_dims(o_.output_shape.empty() ? std::vector<int64_t>{query_dim_}
                                                  : o_.output_shape);
    // Keras' order: query, key, value, then the output projection.
    query_->ensure_built(qs);
    key_->ensure_built(ks);
    value_->ensure_built(vs);
    std::vector<int64_t> od = qs.dims();
    od.back() = num_heads_;
    od.push_back(value_dim_);
    output_->ensure_built(TensorShape(od));
  }
  // The attention axes (of the projected (batch, ..., heads, head_dim) tensors) and the two
  // einsums over them, as Keras' _build_attention_equation: the key-query product into scores
  // (batch and other axes, heads, query attention axes, key attention axes) and the weighted
  // sum of the values back.
  void build_attention_equations() {
    const int r = rank_ + 1;  // projected rank
    axes_.clear();
    if (o_.attention_axes.empty())
      for (int i = 1; i < r - 2; ++i) axes_.push_back(i);
    for (int a : o_.attention_axes) {
      const int ax = a >= 0 ? a : (r - 1) + a;
      TF_CHECK_ARG(
          ax >= 1 && ax <= r - 3 && std::find(axes_.begin(), axes_.end(), ax) == axes_.end(),
          name_.c_str(),
          "layer \"{}\" (MultiHeadAttention): attention_axes must be distinct axes "
          "among 1 .. {} of inputs of rank {} (neither the batch nor the features), "
          "got {}",
          name_, rank_ - 2, rank_, a);
      axes_.push_back(ax);
    }
    auto in_axes = [&](int i) { return std::find(axes_.begin(), axes_.end(), i) != axes_.end(); };
    std::string target, source, product;
    char next = static_cast<char>('a' + r);
    for (int i = 0; i < r; ++i) {
      target += static_cast<char>('a' + i);
      source += in_axes(i) ? next++ : static_cast<char>('a' + i);
    }
    for (int i = 0; i < r - 1; ++i)
      if (!in_axes(i)) product += target[static_cast<size_t>(i)];
    for (int a : axes_) product += target[static_cast<size_t>(a)];
    for (int a : axes_) product += source[static_cast<size_t>(a)];
    dot_equation_ = source + "," + target + "->" + product;
    combine_equation_ = product + "," + source + "->" + target;
  }
  // The scores' shape for projected queries `q` and keys `k`.
  TensorShape scores_shape(const TensorShape& q, const TensorShape& k) const {
    const int r = rank_ + 1;
    std::vector<int64_t> d;
    auto in_axes = [&](int i) { return std::find(axes_.begin(), axes_.end(), i) != axes_.end(); };
    for (int i = 0; i < r - 1; ++i)
      if (!in_axes(i)) d.push_back(q[i]);
    for (int a : axes_) d.push_back(q[a]);
    for (int a : axes_) d.push_back(k[a]);
    return TensorShape(d);
  }
  bool casts_all_inputs() const override { return false; }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, rank_, query_dim_);
  }
  Tensor call(const Tensor& query, bool training) override;

 private:
  int64_t num_heads_, key_dim_, value_dim_;
  layers::MultiHeadAttentionOptions o_;
  std::shared_ptr<detail::AttentionProjection> query_, key_, value_, output_;
  // Set by build.
  int rank_ = 3;
  int64_t query_dim_ = 0, value_in_dim_ = 0, key_in_dim_ = 0;
  std::vector<int> axes_;
  std::string dot_equation_, combine_equation_;
};

Tensor MultiHeadAttentionImpl::call(const Tensor& query, bool training) {
  AttentionRequest local;
  AttentionRequest* r = self_attention_request(Requests::take(this), query, call_mask(), local);
  const std::string& n = name_;
  Tensor value = r ? r->value : query;
  Tensor key = r && r->key.defined() ? r->key : value;
  TF_CHECK_ARG(value.defined(), n.c_str(),
               "layer \"{}\" (MultiHeadAttention): the value is an undefined tensor", n);
  check_qkv(query, value, key, n, class_name_, rank_);
  TF_CHECK_ARG(
      value.shape()[rank_ - 1] == value_in_dim_ && key.shape()[rank_ - 1] == key_in_dim_, n.c_str(),
      "layer \"{}\" (MultiHeadAttention) was built for query, value and key features "
      "{}, {} and {}, got value shape {} and key shape {}",
      n, query_dim_, value_in_dim_, key_in_dim_, dims_str(value.shape()), dims_str(key.shape()));
  value = to_dtype(value, compute_dtype_);
  key = to_dtype(key, compute_dtype_);
  const int64_t b = query.shape()[0], t = query.shape()[1], s = value.shape()[1];

  // Keras' _compute_attention_mask: the inputs' masks and the causal mask, (batch, T, S), for
  // (batch, sequence, features) inputs; attention_mask and-ed in below.
  Tensor mask;
  auto merge = [&mask](const Tensor& m) { mask = mask.defined() ? logical_and(mask, m) : m; };
  if (r) {
    const bool extra = r->query_mask.defined() || r->value_mask.defined() ||
                       r->key_mask.defined() || r->use_causal_mask;
    TF_CHECK_ARG(!extra || rank_ == 3, n.c_str(),
                 "layer \"{}\" (MultiHeadAttention): query_mask, value_mask, key_mask and "
                 "use_causal_mask need (batch, sequence, features) inputs, got query shape {}; "
                 "pass an attention_mask",
                 n, dims_str(query.shape()));
    auto input_mask = [&](const Tensor& m, const char* what, int64_t len, int axis) {
      if (!m.defined()) return;
      const TensorShape& ms = m.shape();
      TF_CHECK_ARG(ms.rank() == 2 && (ms[0] == b || ms[0] == None || b == None) &&
                       (ms[1] == len || ms[1] == None || len == None),
                   n.c_str(),
                   "layer \"{}\" (MultiHeadAttention): {} must have shape (batch, {}) = ({}, "
                   "{}), got shape {}",
                   n, what, axis == -1 ? "T" : "S", b, len, dims_str(ms));
      merge(expand_dims(bool_mask(m, n, what), axis));
    };
    input_mask(r->query_mask, "query_mask", t, -1);
    input_mask(r->value_mask, "value_mask", s, -2);
    input_mask(r->key_mask, "key_mask", s, -2);
    if (r->use_causal_mask) {
      TF_CHECK_ARG(t != None && s != None, n.c_str(),
                   "layer \"{}\" (MultiHeadAttention): use_causal_mask needs known sequence "
                   "lengths, got query shape {} and value shape {}",
                   n, dims_str(query.shape()), dims_str(value.shape()));
      merge(causal_mask(t, s));
    }
  }

  const Tensor q = query_->invoke(query, training);  // (B, ..., N, key_dim)
  const Tensor k = key_->invoke(key, training);      // (B, ..., N, key_dim)
  const Tensor v = value_->invoke(value, training);  // (B, ..., N, value_dim)
  const TensorShape att = scores_shape(q.shape(), k.shape());
  // Masks get the scores' rank as Keras': new axes (the heads') inserted before the query's
  // attention axes; then each dimension must be 1 or the scores'.
  const int expand_at = -2 * static_cast<int>(axes_.size()) - 1;
  auto to_scores_rank = [&](Tensor m, const char* what) {
    TF_CHECK_ARG(m.shape().rank() <= att.rank(), n.c_str(),
                 "layer \"{}\" (MultiHeadAttention): {} of shape {} has more dimensions than the "
                 "attention scores {}",
                 n, what, dims_str(m.shape()), dims_str(att));
    while (m.shape().rank() < att.rank()) m = expand_dims(m, expand_at);
    return m;
  };
  if (mask.defined()) mask = to_scores_rank(mask, "the mask");
  if (r && r->attention_mask.defined()) {
    const Tensor am =
        to_scores_rank(bool_mask(r->attention_mask, n, "attention_mask"), "attention_mask");
    check_mask_shape(r->attention_mask, am.shape(), att, n, "attention_mask");
    mask = mask.defined() ? logical_and(mask, am) : am;
  }
  // Keras 3.15 converts its Python float 1 / sqrt(key_dim) to a float32 tensor before casting
  // it to the compute dtype, so float64 layers scale by the float32-rounded value; so do we.
  const double scale = double(static_cast<float>(1.0 / std::sqrt(double(key_dim_))));
  const bool want_scores = r && r->want_scores;
  Tensor out, scores;
  if (o_.dropout > 0.0 || want_scores || rank_ != 3) {
    // Keras' explicit path: the query scaled first, masked positions -1e9 (-3e4 in float16)
    // before the softmax and 0 after it, so a fully masked row attends to nothing.
    const Tensor qs = q * Tensor(scale);
    Tensor logits = einsum(dot_equation_, k, qs);
    if (mask.defined())
      logits = where(mask, logits, Tensor(compute_dtype_ == float16 ? -3e4 : -1e9));
    if (axes_.size() == 1) {
      scores = nn::softmax(logits, -1);
    } else {
      // A softmax over the key attention axes (the last ones), as Keras': exp(x - logsumexp).
      std::vector<int> last;
      for (size_t i = 0; i < axes_.size(); ++i)
        last.push_back(att.rank() - static_cast<int>(axes_.size()) + static_cast<int>(i));
      scores = exp(logits - reduce_logsumexp(logits, last, true));
    }
    if (mask.defined()) scores = where(mask, scores, Tensor(0.0));
    const Tensor p =
        training && o_.dropout > 0.0 ? nn::dropout(scores, o_.dropout, o_.seed) : scores;
    out = einsum(combine_equation_, p, v);  // (B, ..., N, value_dim)
  } else {
    // Keras' fused path (ops.dot_product_attention, (batch, T, dim) inputs): the logits cast
    // to float32 for float16 and bfloat16 (result_type(dtype, float32)), scaled after the
    // product, masked positions -0.7 * 3.38953e38, the softmax in that precision and cast back;
    // no zeroing after the softmax, so a fully masked row averages the values uniformly.
    const DType dt = q.dtype();
    const bool half = dt == float16 || dt == bfloat16;
    Tensor logits = einsum("abcd,aecd->acbe", q, k);
    if (half) logits = cast(logits, float32);
    logits = logits * Tensor(scale);
    if (mask.defined()) logits = where(mask, logits, Tensor(3.38953e38 * -0.7));
    Tensor probs = nn::softmax(logits, -1);
    if (half) probs = cast(probs, dt);
    out = einsum("acbe,aecd->abcd", probs, v);
  }
  if (r) r->scores = scores;
  return output_->invoke(out, training);
}

// ---- Attention and AdditiveAttention ----

enum class Score { dot, concat, additive };

class DotAttentionImpl final : public LayerImpl {
 public:
  // Keras: the output carries the query's mask.
  bool supports_masking() const override { return true; }
  DotAttentionImpl(Score score, bool use_scale, double dropout, std::optional<int64_t> seed,
                   std::string name)
      : LayerImpl(score == Score::additive ? "AdditiveAttention" : "Attention",
                  score == Score::additive ? "additive_attention" : "attention", std::move(name)),
        score_(score),
        use_scale_(use_scale),
        dropout_(dropout),
        seed_(seed) {
    TF_CHECK_ARG(dropout >= 0.0 && dropout < 1.0, class_name_.c_str(),
                 "dropout must be in the range [0, 1), got {}", dropout);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() == 3, name_.c_str(),
                 "layer \"{}\" ({}) needs a query of shape (batch, Tq, dim), got shape {}", name_,
                 class_name_, dims_str(s));
    const AttentionRequest* r = Requests::peek(this);
    TensorShape o = s;
    if (r && r->value_shape.rank() == 3) o[2] = r->value_shape[2];
    return o;
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 3 && s[2] != None, name_.c_str(),
                 "layer \"{}\" ({}) needs a query of shape (batch, Tq, dim) with known dim, got "
                 "shape {}",
                 name_, class_name_, dims_str(s));
    query_dim_ = s[2];
    if (score_ == Score::additive) {
      if (use_scale_)
        scale_ =
            add_weight("scale", TensorShape({query_dim_}), initializers::GlorotUniform(), true);
      return;
    }
    if (use_scale_) scale_ = add_weight("scale", TensorShape({}), initializers::Ones(), true);
    if (score_ == Score::concat)
      concat_ = add_weight("concat_score_weight", TensorShape({}), initializers::Ones(), true);
  }

 public:
  Score score() const { return score_; }
  bool use_scale() const { return use_scale_; }
  double dropout() const { return dropout_; }
  const std::optional<int64_t>& seed() const { return seed_; }

 protected:
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& query, bool training) override;

 private:
  Score score_;
  bool use_scale_;
  double dropout_;
  std::optional<int64_t> seed_;
  int64_t query_dim_ = 0;
  Variable scale_, concat_;
};

Tensor DotAttentionImpl::call(const Tensor& query, bool training) {
  AttentionRequest local;
  AttentionRequest* r = self_attention_request(Requests::take(this), query, call_mask(), local);
  const std::string& n = name_;
  Tensor value = r ? r->value : query;
  Tensor key = r && r->key.defined() ? r->key : value;
  TF_CHECK_ARG(value.defined(), n.c_str(), "layer \"{}\" ({}): the value is an undefined tensor", n,
               class_name_);
  check_qkv(query, value, key, n, class_name_);
  const int64_t dim = query.shape()[2];
  TF_CHECK_ARG(dim == key.shape()[2] || dim == None || key.shape()[2] == None, n.c_str(),
               "layer \"{}\" ({}): query and key must have the same last dimension, got query "
               "shape {} and key shape {}",
               n, class_name_, dims_str(query.shape()), dims_str(key.shape()));
  if (score_ == Score::additive && use_scale_)
    TF_CHECK_ARG(dim == query_dim_, n.c_str(),
                 "layer \"{}\" ({}) was built for query dim {}, got query shape {}", n, class_name_,
                 query_dim_, dims_str(query.shape()));
  value = to_dtype(value, compute_dtype_);
  key = to_dtype(key, compute_dtype_);
  const int64_t b = query.shape()[0], tq = query.shape()[1], tv = value.shape()[1];

  Tensor scores;  // (B, Tq, Tv)
  if (score_ == Score::dot) {
    scores = matmul(query, key, false, true);
    if (use_scale_) scores = scores * scale_.value();
  } else {
    const Tensor sum = expand_dims(query, -2) + expand_dims(key, -3);  // (B, Tq, Tv, dim)
    if (score_ == Score::additive) {
      scores = reduce_sum(use_scale_ ? scale_.value() * tanh(sum) : tanh(sum), -1);
    } else {
      const Tensor th = tanh(use_scale_ ? scale_.value() * sum : sum);
      scores = concat_.value() * reduce_sum(th, -1);
    }
  }

  // Keras: the value mask (and the causal mask) subtract 1e9 (65504 in float16) from the
  // scores they hide; a fully masked row thus keeps its softmax over the shifted scores.
  Tensor mask;
  Tensor q_mask;
  if (r) {
    auto checked = [&](const Tensor& m, const char* what, int64_t len) {
      const TensorShape& ms = m.shape();
      TF_CHECK_ARG(ms.rank() == 2 && (ms[0] == b || ms[0] == None || b == None) &&
                       (ms[1] == len || ms[1] == None || len == None),
                   n.c_str(), "layer \"{}\" ({}): {} must have shape ({}, {}), got shape {}", n,
                   class_name_, what, b, len, dims_str(ms));
      return bool_mask(m, n, what);
    };
    if (r->value_mask.defined()) mask = expand_dims(checked(r->value_mask, "value_mask", tv), -2);
    if (r->query_mask.defined()) q_mask = expand_dims(checked(r->query_mask, "query_mask", tq), -1);
    if (r->use_causal_mask) {
      TF_CHECK_ARG(tq != None && tv != None, n.c_str(),
                   "layer \"{}\" ({}): use_causal_mask needs known sequence lengths, got query "
                   "shape {} and value shape {}",
                   n, class_name_, dims_str(query.shape()), dims_str(value.shape()));
      const Tensor c = causal_mask(tq, tv);
      mask = mask.defined() ? logical_and(mask, c) : c;
    }
  }
  if (mask.defined())
    scores =
        where(mask, scores, scores - Tensor(compute_dtype_ == float16 ? 65504.0 : 1.0e9));
  const Tensor weights = nn::softmax(scores, -1);
  const Tensor p = training && dropout_ > 0.0 ? nn::dropout(weights, dropout_, seed_) : weights;
  Tensor out = matmul(p, value);
  if (q_mask.defined()) out = where(q_mask, out, Tensor(0.0));
  if (r) r->scores = weights;
  return out;
}

AttentionRequest mha_request(const Tensor& query, const Tensor& value,
                             const layers::MultiHeadAttentionCall& a, bool want_scores,
                             const std::string& layer) {
  TF_CHECK_ARG(query.defined() && value.defined(), layer.c_str(),
               "layer \"{}\" (MultiHeadAttention): the query and the value must be defined "
               "tensors",
               layer);
  AttentionRequest r;
  r.value = value;
  r.key = a.key;
  r.value_shape = value.shape();
  r.key_shape = a.key.defined() ? a.key.shape() : value.shape();
  r.attention_mask = a.attention_mask;
  r.query_mask = a.query_mask;
  r.value_mask = a.value_mask;
  // Keras 3.15 applies key_mask whether or not a separate key is given (the key is the value).
  r.key_mask = a.key_mask;
  r.use_causal_mask = a.use_causal_mask;
  r.want_scores = want_scores;
  return r;
}

AttentionRequest dot_request(const Tensor& query, const Tensor& value,
                             const layers::AttentionCall& a, bool want_scores,
                             const LayerImpl& layer) {
  TF_CHECK_ARG(query.defined() && value.defined(), layer.name().c_str(),
               "layer \"{}\" ({}): the query and the value must be defined tensors", layer.name(),
               layer.class_name());
  AttentionRequest r;
  r.value = value;
  r.key = a.key;
  r.value_shape = value.shape();
  r.key_shape = a.key.defined() ? a.key.shape() : value.shape();
  r.query_mask = a.query_mask;
  r.value_mask = a.value_mask;
  r.use_causal_mask = a.use_causal_mask;
  r.want_scores = want_scores;
  return r;
}

}  // namespace

namespace detail::layer_options {

std::optional<MultiHeadAttentionConfig> multi_head_attention(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const MultiHeadAttentionImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  MultiHeadAttentionConfig c{p->num_heads(), p->key_dim(), p->options(), {}};
  c.options.value_dim = p->value_dim();
  if (!c.options.attention_axes.empty()) {
    c.attention_axes = c.options.attention_axes;
  } else if (p->built()) {
    c.attention_axes = p->built_axes();
  }
  return c;
}
std::optional<AttentionConfig> attention(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const DotAttentionImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return AttentionConfig{p->score() == Score::additive, p->use_scale(),
                         p->score() == Score::concat ? "concat" : "dot", p->dropout(), p->seed()};
}

}  // namespace detail::layer_options

namespace layers {

// ---- MultiHeadAttention ----

MultiHeadAttention::MultiHeadAttention(int64_t num_heads, int64_t key_dim,
                                       MultiHeadAttentionOptions options)
    : Layer(std::make_shared<MultiHeadAttentionImpl>(num_heads, key_dim, std::move(options))) {}

namespace {
// Runs f() with the value's and key's shapes at hand for `layer` (its build and output shape
// read them from the request).
template <class F>
auto with_shapes(const LayerImpl* layer, const TensorShape& value_shape,
                 const TensorShape& key_shape, const F& f) {
  AttentionRequest r;
  r.layer = layer;
  r.value_shape = value_shape;
  r.key_shape = key_shape;
  Requests::Scope scope(&r);
  return f();
}
AttentionOutputs call_mha(const Layer& l, const Tensor& query, const Tensor& value,
                          const MultiHeadAttentionCall& args, bool want_scores) {
  auto& m = impl_as<MultiHeadAttentionImpl>(l, "MultiHeadAttention");
  AttentionRequest r = mha_request(query, value, args, want_scores, m.name());
  return invoke_with(l.impl_ptr(), query, r, args.training);
}
}  // namespace

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& value,
                                      const MultiHeadAttentionCall& args) const {
  return call_mha(*this, query, value, args, false).output;
}
AttentionOutputs MultiHeadAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                      const MultiHeadAttentionCall& args) const {
  return call_mha(*this, query, value, args, true);
}
void MultiHeadAttention::build(const TensorShape& query_shape, const TensorShape& value_shape,
                               const std::optional<TensorShape>& key_shape) const {
  auto& m = impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention");
  with_shapes(&m, value_shape, key_shape.value_or(value_shape),
              [&] { m.ensure_built(query_shape); });
}
int64_t MultiHeadAttention::num_heads() const {
  return impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").num_heads();
}
int64_t MultiHeadAttention::key_dim() const {
  return impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").key_dim();
}
int64_t MultiHeadAttention::value_dim() const {
  return impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").value_dim();
}
Layer MultiHeadAttention::query_dense() const {
  return Layer(impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").query());
}
Layer MultiHeadAttention::key_dense() const {
  return Layer(impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").key());
}
Layer MultiHeadAttention::value_dense() const {
  return Layer(impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").value());
}
Layer MultiHeadAttention::output_dense() const {
  return Layer(impl_as<MultiHeadAttentionImpl>(*this, "MultiHeadAttention").output());
}

// ---- Attention and AdditiveAttention ----

namespace {
Score parse_score_mode(const std::string& mode) {
  TF_CHECK_ARG(mode == "dot" || mode == "concat", "Attention",
               "score_mode must be \"dot\" or \"concat\", got \"{}\"", mode);
  return mode == "dot" ? Score::dot : Score::concat;
}
AttentionOutputs call_dot(const std::shared_ptr<LayerImpl>& impl, const Tensor& query,
                          const Tensor& value, const AttentionCall& args, bool want_scores) {
  AttentionRequest r = dot_request(query, value, args, want_scores, *impl);
  return invoke_with(impl, query, r, args.training);
}
}  // namespace

Attention::Attention(bool use_scale, std::string score_mode, double dropout)
    : Attention(AttentionOptions{
          .use_scale = use_scale, .score_mode = std::move(score_mode), .dropout = dropout}) {}
Attention::Attention(AttentionOptions o)
    : Layer(std::make_shared<DotAttentionImpl>(parse_score_mode(o.score_mode), o.use_scale,
                                               o.dropout, o.seed, o.name)) {}
Tensor Attention::operator()(const Tensor& query, const Tensor& value,
                             const AttentionCall& args) const {
  (void)impl_as<DotAttentionImpl>(*this, "Attention");
  return call_dot(impl_, query, value, args, false).output;
}
AttentionOutputs Attention::call_with_scores(const Tensor& query, const Tensor& value,
                                             const AttentionCall& args) const {
  (void)impl_as<DotAttentionImpl>(*this, "Attention");
  return call_dot(impl_, query, value, args, true);
}

AdditiveAttention::AdditiveAttention(bool use_scale, double dropout)
    : AdditiveAttention(AdditiveAttentionOptions{.use_scale = use_scale, .dropout = dropout}) {}
AdditiveAttention::AdditiveAttention(AdditiveAttentionOptions o)
    : Layer(std::make_shared<DotAttentionImpl>(Score::additive, o.use_scale, o.dropout, o.seed,
                                               o.name)) {}
Tensor AdditiveAttention::operator()(const Tensor& query, const Tensor& value,
                                     const AttentionCall& args) const {
  (void)impl_as<DotAttentionImpl>(*this, "AdditiveAttention");
  return call_dot(impl_, query, value, args, false).output;
}
AttentionOutputs AdditiveAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                     const AttentionCall& args) const {
  (void)impl_as<DotAttentionImpl>(*this, "AdditiveAttention");
  return call_dot(impl_, query, value, args, true);
}

#define TF_SYMBOLIC_ATTENTION(Class)                                                           \
  KerasTensor Class::operator()(const KerasTensor& query, const KerasTensor& value,            \
                                const SymbolicAttentionCall& args) const {                     \
    return detail::call_attention_symbolic(*this, query, value, args.key, args.attention_mask, \
                                           args.use_causal_mask, false, args.training)         \
        .front();                                                                              \
  }                                                                                            \
  std::vector<KerasTensor> Class::call_with_scores(                                            \
      const KerasTensor& query, const KerasTensor& value, const SymbolicAttentionCall& args)   \
      const {                                                                                  \
    return detail::call_attention_symbolic(*this, query, value, args.key, args.attention_mask, \
                                           args.use_causal_mask, true, args.training);         \
  }
TF_SYMBOLIC_ATTENTION(MultiHeadAttention)
TF_SYMBOLIC_ATTENTION(Attention)
TF_SYMBOLIC_ATTENTION(AdditiveAttention)
#undef TF_SYMBOLIC_ATTENTION

}  // namespace layers

std::vector<KerasTensor> detail::attention_symbolic(
    const Layer& layer, const KerasTensor& query, const KerasTensor& value, const KerasTensor& key,
    const KerasTensor& attention_mask, bool use_causal_mask, bool scores,
    std::optional<bool> training, AttentionHooks hooks) {
  std::vector<KerasTensor> inputs{query, value};
  if (key.defined()) inputs.push_back(key);
  if (attention_mask.defined()) inputs.push_back(attention_mask);
  check_defined(layer, inputs);
  const std::string n = layer.name();
  const TensorShape& qs = query.shape();
  if (scores && hooks.heads > 0)
    TF_CHECK_ARG(qs.rank() == 3, n.c_str(),
                 "layer \"{}\" ({}): the scores of a symbolic call are taken for inputs of shape "
                 "(batch, T, dim), got a query of shape {} (call_with_scores on tensors takes "
                 "any rank)",
                 n, layer.class_name(), dims_str(qs));
  hooks.build(qs, value.shape(), key.defined() ? key.shape() : value.shape());
  auto how = std::make_shared<MultiCall>();
  how->kind = MultiCall::Kind::attention;
  how->return_scores = scores;
  how->use_causal_mask = use_causal_mask;
  how->has_key = key.defined();
  how->has_attention_mask = attention_mask.defined();
  const bool has_key = key.defined(), has_mask = attention_mask.defined();
  auto h = std::make_shared<const AttentionHooks>(std::move(hooks));
  how->shapes = [h, scores, has_key](const std::vector<TensorShape>& in) {
    std::vector<TensorShape> out{h->output_shape(in[0], in[1], has_key ? in[2] : in[1])};
    if (scores && h->heads > 0)
      out.push_back(TensorShape({in[0][0], h->heads, in[0][1], in[1][1]}));
    else if (scores)
      out.push_back(TensorShape({in[0][0], in[0][1], in[1][1]}));
    return out;
  };
  how->run = [h, scores, use_causal_mask, has_key, has_mask](
                 const std::vector<Tensor>& in, const std::vector<Tensor>& masks, bool train) {
    // Keras reads the query's, value's and key's masks off the tensors.
    layers::MultiHeadAttentionCall a;
    if (has_key) a.key = in[2];
    if (has_mask) a.attention_mask = in[has_key ? 3 : 2];
    a.query_mask = masks[0];
    a.value_mask = masks[1];
    if (has_key) a.key_mask = masks[2];
    a.use_causal_mask = use_causal_mask;
    a.training = train;
    const layers::AttentionOutputs o = h->call(in[0], in[1], a, scores);
    // Keras: the output carries the query's mask; the scores none.
    std::vector<MaskedTensor> out{{o.output, masks[0]}};
    if (scores) out.push_back({o.scores, Tensor()});
    return out;
  };
  return call_multi(layer, inputs, std::move(how), training);
}

std::vector<KerasTensor> detail::call_attention_symbolic(
    const Layer& layer, const KerasTensor& query, const KerasTensor& value, const KerasTensor& key,
    const KerasTensor& attention_mask, bool use_causal_mask, bool scores,
    std::optional<bool> training) {
  const std::shared_ptr<LayerImpl> impl = layer.impl_ptr();
  const std::string n = impl->name();
  auto* mha = dynamic_cast<MultiHeadAttentionImpl*>(impl.get());
  auto* dot = dynamic_cast<DotAttentionImpl*>(impl.get());
  TF_CHECK_ARG(mha != nullptr || dot != nullptr, n.c_str(),
               "layer \"{}\" ({}) is not an attention layer taking a query and a value in a "
               "functional model (MultiHeadAttention, Attention, AdditiveAttention)",
               n, impl->class_name());
  AttentionHooks hooks;
  // Both classes build and give their output shape with the value's and key's shapes at hand.
  hooks.build = [impl](const TensorShape& qs, const TensorShape& vs, const TensorShape& ks) {
    layers::with_shapes(impl.get(), vs, ks, [&] { impl->ensure_built(qs); });
  };
  hooks.output_shape = [impl](const TensorShape& qs, const TensorShape& vs, const TensorShape& ks) {
    return layers::with_shapes(impl.get(), vs, ks, [&] { return impl->compute_output_shape(qs); });
  };
  if (mha != nullptr) {
    hooks.heads = mha->num_heads();
    hooks.call = [layer](const Tensor& q, const Tensor& v, const layers::MultiHeadAttentionCall& a,
                         bool scores) { return layers::call_mha(layer, q, v, a, scores); };
  } else {
    TF_CHECK_ARG(!attention_mask.defined(), n.c_str(),
                 "layer \"{}\" ({}) takes no attention_mask (Keras' Attention layers take the "
                 "inputs' masks and use_causal_mask)",
                 n, impl->class_name());
    const TensorShape& qs = query.shape();
    const TensorShape& vs = value.shape();
    const TensorShape ks = key.defined() ? key.shape() : vs;
    const char* names[] = {"query", "value", "key"};
    const TensorShape* shapes[] = {&qs, &vs, &ks};
    for (int i = 0; i < 3; ++i)
      TF_CHECK_ARG(shapes[i]->rank() == 3, n.c_str(),
                   "layer \"{}\" ({}) needs a {} of shape (batch, T, dim), got shape {}", n,
                   impl->class_name(), names[i], dims_str(*shapes[i]));
    TF_CHECK_ARG(vs[1] == None || ks[1] == None || vs[1] == ks[1], n.c_str(),
                 "layer \"{}\" ({}): the value and the key need one length, got shapes {} and {}",
                 n, impl->class_name(), dims_str(vs), dims_str(ks));
    hooks.call = [impl](const Tensor& q, const Tensor& v, const layers::MultiHeadAttentionCall& a,
                        bool scores) {
      layers::AttentionCall d{.key = a.key,
                              .query_mask = a.query_mask,
                              .value_mask = a.value_mask,
                              .use_causal_mask = a.use_causal_mask,
                              .training = a.training};
      return layers::call_dot(impl, q, v, d, scores);
    };
  }
  return attention_symbolic(layer, query, value, key, attention_mask, use_causal_mask, scores,
                            training, std::move(hooks));
}

}  // namespace tapeflow::keras
