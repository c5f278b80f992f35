// Keras' merge layers (keras/layers_merge.h): the list call, Keras' shape checks and the merges.
#include "keras/layers_merge.h"

#include <algorithm>
#include <functional>

#include "core/check.h"
#include "keras/serialization_access.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {

namespace detail {

std::string MergeImpl::shapes_text(const std::vector<TensorShape>& shapes) {
  std::string s = "[";
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i].to_string();
  return s + "]";
}

void MergeImpl::require_count(const std::vector<TensorShape>& shapes, size_t at_least,
                              size_t at_most) const {
  const std::string n = name();
  if (at_least == at_most)
    TF_CHECK_ARG(shapes.size() == at_least, n.c_str(),
                 "A `{}` layer should be called on exactly {} inputs. Received: input_shape={} "
                 "(layer \"{}\")",
                 class_name(), at_least, shapes_text(shapes), n);
  TF_CHECK_ARG(shapes.size() >= at_least, n.c_str(),
               "A merge layer should be called on a list of at least {} input. Received {} "
               "inputs. Full input_shape received: {} (layer \"{}\", {})",
               at_least, shapes.size(), shapes_text(shapes), n, class_name());
}

TensorShape MergeImpl::merged_shape(const std::vector<TensorShape>& shapes) const {
  const std::string n = name();
  require_count(shapes, 1, 0);
  // The batch sizes that are known must agree.
  int64_t batch = None;
  for (const TensorShape& s : shapes) {
    TF_CHECK_ARG(s.rank() >= 1, n.c_str(),
                 "layer \"{}\" ({}) needs inputs with a batch dimension, got shapes {}", n,
                 class_name(), shapes_text(shapes));
    if (s[0] == None) continue;
    TF_CHECK_ARG(batch == None || batch == s[0], n.c_str(),
                 "Cannot merge tensors with different batch sizes. Received tensors with "
                 "shapes {} (layer \"{}\", {})",
                 shapes_text(shapes), n, class_name());
    batch = s[0];
  }
  // The other dimensions broadcast from the right (an input of lower rank gets size-1 axes
  // after its batch axis); Keras compares them pairwise.
  auto tail = [](const TensorShape& s) {
    std::vector<int64_t> d;
    for (int i = 1; i < s.rank(); ++i) d.push_back(s[i]);
    return d;
  };
  std::vector<int64_t> out = tail(shapes[0]);
  for (size_t k = 1; k < shapes.size(); ++k) {
    const std::vector<int64_t> b = tail(shapes[k]);
    const std::vector<int64_t> a = out;
    const std::vector<int64_t>& longer = a.size() >= b.size() ? a : b;
    const std::vector<int64_t>& shorter = a.size() >= b.size() ? b : a;
    std::vector<int64_t> r(longer.begin(), longer.end() - static_cast<long>(shorter.size()));
    for (size_t i = 0; i < shorter.size(); ++i) {
      const int64_t x = longer[longer.size() - shorter.size() + i], y = shorter[i];
      if (x == None || y == None)
        r.push_back(None);
      else if (x == 1)
        r.push_back(y);
      else if (y == 1 || x == y)
        r.push_back(x);
      else
        TF_THROW(InvalidArgumentError, n.c_str(),
                 "Inputs have incompatible shapes. Received shapes {} and {} (layer \"{}\", {})",
                 TensorShape(a).to_string(), TensorShape(b).to_string(), n, class_name());
    }
    out = std::move(r);
  }
  out.insert(out.begin(), batch);
  return TensorShape(out);
}

DType MergeImpl::merged_dtype(const std::vector<DType>& dtypes) const {
  if (dtypes.empty()) return compute_dtype_;
  return is_floating(dtypes[0]) ? compute_dtype_ : dtypes[0];
}

Tensor MergeImpl::run(const Tensor& x, bool) {
  const std::string n = name();
  TF_THROW(InvalidArgumentError, n.c_str(),
           "A merge layer should be called on a list of inputs. Received: inputs of shape {} "
           "(not a list of tensors) (layer \"{}\", {})",
           x.shape().to_string(), n, class_name());
}

std::vector<Tensor> MergeImpl::prepare(const std::vector<Tensor>& inputs) {
  const std::string n = name();
  std::vector<TensorShape> shapes;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TF_CHECK_ARG(inputs[i].defined(), n.c_str(),
                 "input {} of layer \"{}\" is an undefined tensor (TF's None)", i, n);
    // Keras' autocast: floating inputs compute in the layer's dtype.
    xs.push_back(is_floating(inputs[i].dtype()) && inputs[i].dtype() != compute_dtype_
                     ? cast(inputs[i], compute_dtype_)
                     : inputs[i]);
    shapes.push_back(xs.back().shape());
  }
  const TensorShape out = merged_shape(shapes);
  mark_built(shapes[0], out);
  return xs;
}

Tensor MergeImpl::invoke_list(const std::vector<Tensor>& inputs) {
  try {
    const std::vector<Tensor> xs = prepare(inputs);
    CallFrame frame(this);
    return merge(xs);
  } catch (const Error& e) {
    rethrow_from_call(e, inputs);
  }
}

MaskedTensor MergeImpl::invoke_masked_list(const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& masks) {
  TF_CHECK_ARG(masks.size() == inputs.size(), name().c_str(),
               "got {} masks for {} inputs (layer \"{}\")", masks.size(), inputs.size(), name());
  if (std::none_of(masks.begin(), masks.end(), [](const Tensor& m) { return m.defined(); }))
    return {invoke_list(inputs), Tensor()};
  std::vector<Tensor> bool_masks;
  for (const Tensor& m : masks)
    bool_masks.push_back(!m.defined() || m.dtype() == bool_ ? m : not_equal(m, Tensor(0.0)));
  try {
    const std::vector<Tensor> xs = prepare(inputs);
    CallFrame frame(this);
    Tensor out = merge_masked(xs, bool_masks);
    return {std::move(out), merged_mask(xs, bool_masks)};
  } catch (const Error& e) {
    rethrow_from_call(e, inputs);
  }
}

Tensor MergeImpl::merged_mask(const std::vector<Tensor>& /*inputs*/,
                              const std::vector<Tensor>& masks) const {
  Tensor m;
  for (const Tensor& mi : masks) {
    if (!mi.defined()) return Tensor();
    m = m.defined() ? logical_or(m, mi) : mi;
  }
  return m;
}

namespace {

// The elementwise merges: `op` folds the inputs left to right, `finish` (if any) ends it.
class ElementwiseImpl final : public MergeImpl {
 public:
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  ElementwiseImpl(std::string class_name, std::string name, Op op, size_t exactly = 0,
                  bool average = false)
      : MergeImpl(class_name, to_snake_case(class_name), std::move(name)),
        op_(std::move(op)),
        exactly_(exactly),
        average_(average),
        rule_(class_name == "Multiply"                             ? MaskRule::kMultiply
              : class_name == "Maximum" || class_name == "Minimum" ? MaskRule::kMinMax
                                                                   : MaskRule::kPlain) {}

  TensorShape merged_shape(const std::vector<TensorShape>& shapes) const override {
    if (exactly_ > 0) require_count(shapes, exactly_, exactly_);
    return MergeImpl::merged_shape(shapes);
  }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override {
    int max_rank = 0;
    for (const Tensor& x : inputs) max_rank = std::max(max_rank, x.rank());
    // Lower-rank inputs get size-1 axes after the batch axis (Keras' reshape for broadcasting).
    auto expanded = [&](Tensor x) {
      while (x.rank() < max_rank) x = expand_dims(x, 1);
      return x;
    };
    Tensor acc = expanded(inputs[0]);
    for (size_t i = 1; i < inputs.size(); ++i) acc = op_(acc, expanded(inputs[i]));
    if (average_) acc = divide(acc, cast(Tensor(static_cast<double>(inputs.size())), acc.dtype()));
    return acc;
  }

  // Keras 3.15's masked Multiply (masked entries count as 1, and the output is 0 where no input
  // is kept, when every input has a mask) and Maximum / Minimum (a masked entry takes the other
  // operand's value); Add, Subtract and Average ignore the masks.
  Tensor merge_masked(const std::vector<Tensor>& inputs,
                      const std::vector<Tensor>& masks) const override {
    if (rule_ == MaskRule::kPlain) return merge(inputs);
    int max_rank = 0;
    for (const Tensor& x : inputs) max_rank = std::max(max_rank, x.rank());
    auto expanded = [&](Tensor x) {
      while (x.rank() < max_rank) x = expand_dims(x, 1);
      return x;
    };
    // A [batch, steps] mask against [batch, steps, features] values.
    auto feature_mask = [](const Tensor& m) { return m.defined() ? expand_dims(m, -1) : m; };
    Tensor out, out_mask;
    if (rule_ == MaskRule::kMultiply) {
      const bool all_masked =
          std::all_of(masks.begin(), masks.end(), [](const Tensor& m) { return m.defined(); });
      for (size_t i = 0; i < inputs.size(); ++i) {
        Tensor x = expanded(inputs[i]);
        const Tensor m = feature_mask(masks[i]);
        if (m.defined()) {
          x = where(m, x, cast(Tensor(1.0), x.dtype()));
          if (all_masked) out_mask = out_mask.defined() ? logical_or(out_mask, m) : m;
        }
        out = out.defined() ? multiply(out, x) : x;
      }
      if (all_masked) out = where(out_mask, out, zeros_like(out));
      return out;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor x = expanded(inputs[i]);
      const Tensor m = feature_mask(masks[i]);
      if (i == 0) {
        out = x;
        out_mask = m;
        continue;
      }
      if (m.defined()) x = where(m, x, out);
      if (out_mask.defined()) out = where(out_mask, out, x);
      out_mask = m.defined() && out_mask.defined() ? logical_or(out_mask, m) : Tensor();
      out = op_(out, x);
    }
    return out;
  }

 private:
  enum class MaskRule { kPlain, kMultiply, kMinMax };
  Op op_;
  size_t exactly_;
  bool average_;
  MaskRule rule_;
};

class ConcatenateImpl final : public MergeImpl {
 public:
  ConcatenateImpl(int axis, std::string name)
      : MergeImpl("Concatenate", "concatenate", std::move(name)), axis_(axis) {}

  TensorShape merged_shape(const std::vector<TensorShape>& shapes) const override {
    const std::string n = name();
    TF_CHECK_ARG(!shapes.empty(), n.c_str(),
                 "A `Concatenate` layer should be called on a list of at least 1 input. "
                 "Received: input_shape=[] (layer \"{}\")",
                 n);
    const int rank = shapes[0].rank();
    auto mismatch = [&] {
      TF_THROW(InvalidArgumentError, n.c_str(),
               "A `Concatenate` layer requires inputs with matching shapes except for the "
               "concatenation axis. Received: input_shape={} (layer \"{}\", axis {})",
               shapes_text(shapes), n, axis_);
    };
    for (const TensorShape& s : shapes)
      if (s.rank() != rank) mismatch();
    TF_CHECK_ARG(axis_ >= -rank && axis_ < rank && rank > 0, n.c_str(),
                 "Concatenate: axis {} is out of range for inputs of rank {} (layer \"{}\")", axis_,
                 rank, n);
    const int axis = axis_ < 0 ? axis_ + rank : axis_;
    TensorShape out = shapes[0];
    for (int d = 0; d < rank; ++d) {
      if (d == axis) {
        int64_t total = 0;
        for (const TensorShape& s : shapes)
          total = (total == None || s[d] == None) ? None : total + s[d];
        out[d] = total;
        continue;
      }
      for (const TensorShape& s : shapes) {
        if (s[d] == None) continue;
        if (out[d] == None)
          out[d] = s[d];
        else if (out[d] != s[d])
          mismatch();
      }
    }
    return out;
  }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override {
    return concat(inputs, axis_ < 0 ? axis_ + inputs[0].rank() : axis_);
  }
  // Keras 3.15's Concatenate.compute_mask: an unmasked input counts as kept everywhere, each
  // mask is broadcast over its input's last axis, the masks are concatenated along the axis and
  // reduced with any over the last one.
  Tensor merged_mask(const std::vector<Tensor>& inputs,
                     const std::vector<Tensor>& masks) const override {
    std::vector<Tensor> full;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      const Tensor& m = masks[i];
      if (!m.defined())
        full.push_back(ones_like(x, bool_));
      else if (m.rank() < x.rank())
        full.push_back(logical_or(expand_dims(m, -1), zeros_like(x, bool_)));
      else
        full.push_back(m);
    }
    const int rank = inputs[0].rank();
    return reduce_any(concat(full, axis_ < 0 ? axis_ + rank : axis_), -1);
  }

 private:
  friend std::optional<int> layer_options::concatenate_axis(const LayerImpl&);
  int axis_;
};

class DotImpl final : public MergeImpl {
 public:
  // Keras' Dot gives no mask.
  Tensor merged_mask(const std::vector<Tensor>&, const std::vector<Tensor>&) const override {
    return Tensor();
  }

  DotImpl(std::pair<int, int> axes, bool normalize, std::string name)
      : MergeImpl("Dot", "dot", std::move(name)), axes_(axes), normalize_(normalize) {}

  TensorShape merged_shape(const std::vector<TensorShape>& shapes) const override {
    const std::string n = name();
    TF_CHECK_ARG(shapes.size() == 2, n.c_str(),
                 "A `Dot` layer should be called on a list of 2 inputs. Received: input_shape={} "
                 "(layer \"{}\")",
                 shapes_text(shapes), n);
    const TensorShape &a = shapes[0], &b = shapes[1];
    TF_CHECK_ARG(a.rank() >= 2 && b.rank() >= 2, n.c_str(),
                 "Cannot do batch_dot on inputs with rank < 2. Received inputs with shapes {} and "
                 "{} (layer \"{}\")",
                 a.to_string(), b.to_string(), n);
    TF_CHECK_ARG(a[0] == None || b[0] == None || a[0] == b[0], n.c_str(),
                 "Cannot do batch_dot on inputs with different batch sizes. Received inputs with "
                 "shapes {} and {} (layer \"{}\")",
                 a.to_string(), b.to_string(), n);
    const auto [ax, bx] = resolved(a.rank(), b.rank());
    TF_CHECK_ARG(ax >= 1 && ax < a.rank() && bx >= 1 && bx < b.rank(), n.c_str(),
                 "Dot: axes ({}, {}) are out of range for inputs of shapes {} and {} (the batch "
                 "axis 0 cannot be contracted) (layer \"{}\")",
                 axes_.first, axes_.second, a.to_string(), b.to_string(), n);
    TF_CHECK_ARG(a[ax] == None || b[bx] == None || a[ax] == b[bx], n.c_str(),
                 "Incompatible input shapes: axis values {} (at axis {}) != {} (at axis {}). Full "
                 "input shapes: {}, {} (layer \"{}\")",
                 a[ax], ax, b[bx], bx, a.to_string(), b.to_string(), n);
    std::vector<int64_t> out{a[0] != None ? a[0] : b[0]};
    for (int i = 1; i < a.rank(); ++i)
      if (i != ax) out.push_back(a[i]);
    for (int i = 1; i < b.rank(); ++i)
      if (i != bx) out.push_back(b[i]);
    if (out.size() == 1) out.push_back(1);
    return TensorShape(out);
  }

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override {
    Tensor x = inputs[0], y = inputs[1];
    const auto [ax, bx] = resolved(x.rank(), y.rank());
    if (normalize_) {
      // Keras' normalize: x * min(rsqrt(sum x^2), 1e7), i.e. epsilon 1e-14 on the sum.
      x = linalg::l2_normalize(x, ax, 1e-14);
      y = linalg::l2_normalize(y, bx, 1e-14);
    }
    const std::string n = name();
    // Batched matmul: x as (batch, rest_x, k), y as (batch, k, rest_y).
    auto rest = [&](const Tensor& t, int axis) {
      std::vector<int64_t> dims;
      for (int i = 1; i < t.rank(); ++i)
        if (i != axis) dims.push_back(t.shape()[i]);
      return dims;
    };
    const std::vector<int64_t> rx = rest(x, ax), ry = rest(y, bx);
    auto product = [&](const std::vector<int64_t>& d) {
      int64_t p = 1;
      for (int64_t v : d) {
        TF_CHECK_ARG(v != None, n.c_str(),
                     "Dot needs the non-batch dimensions of its inputs, got shapes {} and {} "
                     "(layer \"{}\")",
                     inputs[0].shape().to_string(), inputs[1].shape().to_string(), n);
        p *= v;
      }
      return p;
    };
    const int64_t k = x.shape()[ax];
    std::vector<int> px{0}, py{0, bx};
    for (int i = 1; i < x.rank(); ++i)
      if (i != ax) px.push_back(i);
    px.push_back(ax);
    for (int i = 1; i < y.rank(); ++i)
      if (i != bx) py.push_back(i);
    const Tensor x3 = reshape(transpose(x, px), TensorShape({-1, product(rx), k}));
    const Tensor y3 = reshape(transpose(y, py), TensorShape({-1, k, product(ry)}));
    std::vector<int64_t> out{-1};
    out.insert(out.end(), rx.begin(), rx.end());
    out.insert(out.end(), ry.begin(), ry.end());
    if (out.size() == 1) out.push_back(1);
    return reshape(matmul(x3, y3), TensorShape(out));
  }

 private:
  std::pair<int, int> resolved(int rank_a, int rank_b) const {
    int a = axes_.first, b = axes_.second;
    if (a < 0) a += rank_a;
    if (b < 0) b += rank_b;
    return {a, b};
  }
  // Keras 3's ops.normalize(x, axis) with its default epsilon (backend.epsilon(), 1e-7):
  // x * min(rsqrt(sum(x^2)), 1 / epsilon) along `axis`.
  friend std::optional<layer_options::DotConfig> layer_options::dot(const LayerImpl&);
  std::pair<int, int> axes_;
  bool normalize_;
};

}  // namespace
}  // namespace detail

namespace layers {

Merge::Merge(std::shared_ptr<detail::MergeImpl> impl) : Layer(std::move(impl)) {}

Tensor Merge::operator()(const std::vector<Tensor>& inputs) const {
  return dynamic_cast<detail::MergeImpl&>(impl()).invoke_list(inputs);
}

KerasTensor Merge::operator()(const std::vector<KerasTensor>& inputs) const {
  return detail::call_symbolic(*this, inputs, true, std::nullopt);
}

namespace {
std::shared_ptr<detail::MergeImpl> elementwise(const char* cls, std::string name,
                                               detail::ElementwiseImpl::Op op, size_t exactly = 0,
                                               bool average = false) {
  return std::make_shared<detail::ElementwiseImpl>(cls, std::move(name), std::move(op), exactly,
                                                   average);
}
}  // namespace

Add::Add(std::string name)
    : Merge(elementwise("Add", std::move(name),
                        [](const Tensor& a, const Tensor& b) { return add(a, b); })) {}
Subtract::Subtract(std::string name)
    : Merge(elementwise(
          "Subtract", std::move(name),
          [](const Tensor& a, const Tensor& b) { return subtract(a, b); }, 2)) {}
Multiply::Multiply(std::string name)
    : Merge(elementwise("Multiply", std::move(name),
                        [](const Tensor& a, const Tensor& b) { return multiply(a, b); })) {}
Average::Average(std::string name)
    : Merge(elementwise(
          "Average", std::move(name), [](const Tensor& a, const Tensor& b) { return add(a, b); }, 0,
          true)) {}
Maximum::Maximum(std::string name)
    : Merge(elementwise("Maximum", std::move(name),
                        [](const Tensor& a, const Tensor& b) { return maximum(a, b); })) {}
Minimum::Minimum(std::string name)
    : Merge(elementwise("Minimum", std::move(name),
                        [](const Tensor& a, const Tensor& b) { return minimum(a, b); })) {}
Concatenate::Concatenate(int axis, std::string name)
    : Merge(std::make_shared<detail::ConcatenateImpl>(axis, std::move(name))) {}
Dot::Dot(int axes, bool normalize, std::string name)
    : Dot({axes, axes}, normalize, std::move(name)) {}
Dot::Dot(std::pair<int, int> axes, bool normalize, std::string name)
    : Merge(std::make_shared<detail::DotImpl>(axes, normalize, std::move(name))) {}

}  // namespace layers

std::optional<int> detail::layer_options::concatenate_axis(const detail::LayerImpl& layer) {
  const auto* p = dynamic_cast<const detail::ConcatenateImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->axis_;
}
std::optional<detail::layer_options::DotConfig> detail::layer_options::dot(
    const detail::LayerImpl& layer) {
  const auto* p = dynamic_cast<const detail::DotImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return DotConfig{p->axes_, p->normalize_};
}

}  // namespace tapeflow::keras
