// RNN cells, the RNN layer and ConvLSTM (keras/layers_rnn_cells.h). A cell is a custom layer (a
// Model subclass); RNN calls it once per timestep through LayerImpl::invoke, handing it the
// states through a per-thread request (keras/call_request.h), so the cell builds, tracks and
// casts as any layer call does.
#include "keras/layers_rnn_cells.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "keras/call_request.h"
#include "keras/data_format.h"
#include "keras/rnn_state.h"
#include "keras/serialization_access_sequence.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/conv3d.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/scan.h"
#include "ops/traced_loop.h"
#include "ops/unary.h"

namespace tapeflow::keras {

// ---- the gate math shared with keras/layers_recurrent.cpp ----
namespace detail {
namespace {
Tensor activate(const ActivationFn& f, const Tensor& x) {
  return f ? f(x) : x;
}
}  // namespace

std::pair<Tensor, Tensor> lstm_gates(const ActivationFn& act, const ActivationFn& ract,
                                     const Tensor& z, const Tensor& c_prev, int axis) {
  const std::vector<Tensor> g = split(z, 4, axis < 0 ? z.rank() + axis : axis);
  const Tensor i = activate(ract, g[0]), f = activate(ract, g[1]), o = activate(ract, g[3]);
  const Tensor ig = i * activate(act, g[2]);
  Tensor c = c_prev.defined() ? f * c_prev + ig : ig;
  Tensor h = o * activate(act, c);
  return {std::move(h), std::move(c)};
}

Tensor gru_gates_reset_after(const ActivationFn& act, const ActivationFn& ract, const Tensor& xp,
                             const Tensor& hp, const Tensor& h_prev) {
  const std::vector<Tensor> xg = split(xp, 3, xp.rank() - 1);
  Tensor z, hh;
  if (hp.defined()) {
    const std::vector<Tensor> rg = split(hp, 3, hp.rank() - 1);
    z = activate(ract, xg[0] + rg[0]);
    const Tensor r = activate(ract, xg[1] + rg[1]);
    hh = activate(act, xg[2] + r * rg[2]);
  } else {
    z = activate(ract, xg[0]);
    hh = activate(act, xg[2]);
  }
  return h_prev.defined() ? z * h_prev + (1.0 - z) * hh : (1.0 - z) * hh;
}

Tensor gru_gates_reset_before(const ActivationFn& act, const ActivationFn& ract, const Tensor& xp,
                              const Tensor& rz, const Tensor& rr,
                              const std::function<Tensor(const Tensor&)>& reset_h,
                              const Tensor& h_prev) {
  const std::vector<Tensor> xg = split(xp, 3, xp.rank() - 1);
  if (!h_prev.defined()) {
    const Tensor z = activate(ract, xg[0]);
    return (1.0 - z) * activate(act, xg[2]);
  }
  const Tensor z = activate(ract, xg[0] + rz);
  const Tensor r = activate(ract, xg[1] + rr);
  const Tensor hh = activate(act, xg[2] + reset_h(r));
  return z * h_prev + (1.0 - z) * hh;
}

// ---- the per-step request: the states going into a cell call and coming out ----
namespace {
struct CellRequest {
  const LayerImpl* layer = nullptr;
  const std::vector<Tensor>* states = nullptr;
  std::vector<Tensor> new_states;
  bool served = false;
};
using CellRequests = CallRequests<CellRequest>;

// call_with_state's request to an RNN layer.
struct SequenceRequest {
  const LayerImpl* layer = nullptr;
  const std::vector<Tensor>* initial = nullptr;
  std::vector<Tensor> states;
  bool served = false;
};
using SequenceRequests = CallRequests<SequenceRequest>;

// The dropout masks of one RNN call (Keras caches them in the cell and the RNN resets them per
// call; here they live in the call, per thread, since replica threads share the cell).
struct DropoutFrame {
  struct Entry {
    const LayerImpl* cell;
    int slot;
    std::vector<Tensor> masks;
  };
  std::vector<Entry> entries;
};
std::vector<DropoutFrame*>& dropout_frames() {
  thread_local std::vector<DropoutFrame*> frames;
  return frames;
}
class DropoutScope {
 public:
  DropoutScope() { dropout_frames().push_back(&frame_); }
  ~DropoutScope() { dropout_frames().pop_back(); }
  DropoutScope(const DropoutScope&) = delete;
  DropoutScope& operator=(const DropoutScope&) = delete;

 private:
  DropoutFrame frame_;
};

// x @ kernel with dropout masks on x: none, one for every gate, or one per gate (the kernel's
// column blocks).
Tensor masked_matmul(const Tensor& x, const Tensor& kernel, const std::vector<Tensor>& masks) {
  if (masks.empty()) return matmul(x, kernel);
  if (masks.size() == 1) return matmul(x * masks[0], kernel);
  const std::vector<Tensor> blocks = split(kernel, static_cast<int>(masks.size()), 1);
  std::vector<Tensor> parts;
  for (size_t g = 0; g < masks.size(); ++g) parts.push_back(matmul(x * masks[g], blocks[g]));
  return concat(parts, -1);
}

}  // namespace

void check_rates(const char* cls, double dropout, double recurrent_dropout) {
  TF_CHECK_ARG(
      dropout >= 0.0 && dropout <= 1.0 && recurrent_dropout >= 0.0 && recurrent_dropout <= 1.0, cls,
      "dropout and recurrent_dropout must be in the range [0, 1], got {} and {}", dropout,
      recurrent_dropout);
}

Tensor dropout_mask(const Tensor& ones, double rate, std::optional<int64_t> seed) {
  return rate >= 1.0 ? zeros_like(ones) : nn::dropout(ones, rate, seed);
}

namespace {

// Calls `cell` (as a layer: build, tracking, casts) on one step with `states`.
std::pair<Tensor, std::vector<Tensor>> cell_step(LayerImpl& cell, const Tensor& x,
                                                 const std::vector<Tensor>& states, bool training) {
  CellRequest request{.layer = &cell, .states = &states, .new_states = {}, .served = false};
  Tensor y;
  {
    CellRequests::Scope scope(&request);
    y = cell.invoke(x, training);
  }
  TF_CHECK_T(InternalError, request.served, cell.name().c_str(),
             "cell \"{}\" returned without serving its state request", cell.name());
  return {y, std::move(request.new_states)};
}

std::string dims_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Keras' bias initializer with unit_forget_bias: ones for the forget gate (the second quarter).
Initializer forget_bias_initializer(const Initializer& b, int64_t units) {
  return Initializer("unit_forget_bias", [b, units](const TensorShape&, DType d) {
    return concat(
        {b(TensorShape({units}), d), ones(TensorShape({units}), d), b(TensorShape({2 * units}), d)},
        0);
  });
}

Initializer or_default(const Initializer& i, Initializer fallback) {
  return i.defined() ? i : std::move(fallback);
}

}  // namespace
}  // namespace detail

namespace layers {

// ---- RNNCell ----
std::vector<Tensor> RNNCell::get_initial_state(int64_t batch_size) const {
  TF_CHECK_ARG(batch_size != None && batch_size >= 0, name().c_str(),
               "cell \"{}\" ({}) makes zero initial states for a known batch size, got {}", name(),
               class_name(), batch_size == None ? std::string("None") : std::to_string(batch_size));
  std::vector<Tensor> out;
  for (int64_t n : state_size())
    out.push_back(zeros(TensorShape({batch_size, n}), impl().compute_dtype()));
  return out;
}

TensorShape RNNCell::step_output_shape(const TensorShape& s) const {
  return TensorShape({s.rank() > 0 ? s[0] : None, output_size()});
}

std::vector<Tensor> RNNCell::dropout_masks(const Tensor& like, double rate, int count, int slot,
                                           std::optional<int64_t> seed) const {
  const detail::LayerImpl* me = &impl();
  detail::DropoutFrame* frame =
      detail::dropout_frames().empty() ? nullptr : detail::dropout_frames().back();
  if (frame != nullptr)
    for (const auto& e : frame->entries)
      if (e.cell == me && e.slot == slot) return e.masks;
  std::vector<Tensor> masks;
  const Tensor ones = ones_like(like);
  for (int i = 0; i < count; ++i) masks.push_back(detail::dropout_mask(ones, rate, seed));
  if (frame != nullptr) frame->entries.push_back({me, slot, masks});
  return masks;
}

std::pair<Tensor, std::vector<Tensor>> RNNCell::operator()(const Tensor& x,
                                                           const std::vector<Tensor>& states,
                                                           bool training) const {
  return detail::cell_step(impl(), x, states, training);
}

Tensor RNNCell::call(const Tensor& x, bool training) {
  detail::CellRequest* request = detail::CellRequests::take(&impl());
  std::vector<Tensor> states;
  if (request != nullptr) states = *request->states;
  const size_t n = state_size().size();
  if (states.empty()) {
    TF_CHECK_ARG(x.rank() >= 1, name().c_str(), "cell \"{}\" ({}) needs a batch axis, got {}",
                 name(), class_name(), x.shape().to_string());
    states = get_initial_state(x.shape()[0]);
    // A call outside an RNN (the build's shape probe runs on zeros of the variable dtype, with
    // no autocasting): the zero states follow the input's dtype.
    for (Tensor& s : states)
      if (s.dtype() != x.dtype() && is_floating(x.dtype())) s = cast(s, x.dtype());
  }
  TF_CHECK_ARG(states.size() == n, name().c_str(),
               "cell \"{}\" ({}) has {} state(s) (state_size {}), got {}", name(), class_name(), n,
               detail::dims_string(state_size()), states.size());
  auto [y, new_states] = call(x, states, training);
  TF_CHECK_ARG(y.defined() && new_states.size() == n, name().c_str(),
               "cell \"{}\" ({}) must return an output and {} new state(s), returned {}", name(),
               class_name(), n, new_states.size());
  if (request != nullptr) request->new_states = std::move(new_states);
  return y;
}

namespace {
void check_units(const char* cls, int64_t units) {
  TF_CHECK_ARG(units > 0, cls, "units must be positive, got {}", units);
}
// A cell's own weight by name. Not LayerImpl::weight: a cell's first calls (the build's probe
// and the first step) run before it counts as built. Not a member either: the object that runs
// the call may be a copy made before the build (RNN keeps one).
Tensor read(const Layer& l, const char* weight) {
  for (const detail::Weight& w : l.impl().own_weights())
    if (w.name == weight) return w.variable.value();
  TF_THROW(InternalError, l.impl().name().c_str(), "cell \"{}\" has no weight '{}' yet",
           l.impl().name(), weight);
}
void check_step_input(const Layer& l, const TensorShape& s) {
  TF_CHECK_ARG(s.rank() == 2 && s[1] != None, l.impl().name().c_str(),
               "cell \"{}\" ({}) takes steps of shape (batch, features) with known features, "
               "got {}",
               l.impl().name(), l.impl().class_name(), s.to_string());
}
// Keras' cells' masks: with recurrent_dropout, one per gate for the inputs and for the state
// (implementation 1); with dropout alone, one input mask for every gate.
std::pair<std::vector<Tensor>, std::vector<Tensor>> cell_masks(const RNNCell& cell, const Tensor& x,
                                                               const Tensor& h, double dropout,
                                                               double recurrent_dropout, int gates,
                                                               std::optional<int64_t> seed,
                                                               bool training) {
  std::vector<Tensor> dm, rm;
  if (!training) return {dm, rm};
  // The mask count follows the given rate (1 included, Keras' implementation switch); whether a
  // mask applies follows the gated rate (none at 1).
  const int count = recurrent_dropout > 0.0 ? gates : 1;
  dropout = detail::gated_rate(dropout);
  recurrent_dropout = detail::gated_rate(recurrent_dropout);
  if (dropout > 0.0) dm = cell.dropout_masks(x, dropout, count, 0, seed);
  if (recurrent_dropout > 0.0) rm = cell.dropout_masks(h, recurrent_dropout, count, 1, seed);
  return {dm, rm};
}
}  // namespace

// ---- SimpleRNNCell ----
SimpleRNNCell::SimpleRNNCell(int64_t units, SimpleRNNCellOptions options)
    : RNNCell(options.name), units_(units), o_(std::move(options)) {
  check_units("SimpleRNNCell", units);
  detail::check_rates("SimpleRNNCell", o_.dropout, o_.recurrent_dropout);
  act_ = activations::get(o_.activation);
}

void SimpleRNNCell::build(const TensorShape& s) {
  check_step_input(*this, s);
  add_weight("kernel", TensorShape({s[1], units_}),
             detail::or_default(o_.kernel_initializer, initializers::GlorotUniform()), true,
             o_.kernel_regularizer, o_.kernel_constraint);
  add_weight("recurrent_kernel", TensorShape({units_, units_}),
             detail::or_default(o_.recurrent_initializer, initializers::Orthogonal()), true,
             o_.recurrent_regularizer, o_.recurrent_constraint);
  if (o_.use_bias)
    add_weight("bias", TensorShape({units_}),
               detail::or_default(o_.bias_initializer, initializers::Zeros()), true,
               o_.bias_regularizer, o_.bias_constraint);
  Model::build(s);
}

std::pair<Tensor, std::vector<Tensor>> SimpleRNNCell::call(const Tensor& x,
                                                           const std::vector<Tensor>& states,
                                                           bool training) {
  check_step_input(*this, x.shape());
  std::vector<Tensor> dm, rm;
  if (training && o_.dropout > 0.0) dm = dropout_masks(x, o_.dropout, 1, 0, o_.seed);
  if (training && o_.recurrent_dropout > 0.0)
    rm = dropout_masks(states[0], o_.recurrent_dropout, 1, 1, o_.seed);
  Tensor xp = detail::masked_matmul(x, read(*this, "kernel"), dm);
  if (o_.use_bias) xp = nn::bias_add(xp, read(*this, "bias"));
  Tensor h = xp + detail::masked_matmul(states[0], read(*this, "recurrent_kernel"), rm);
  if (act_) h = act_(h);
  return {h, {h}};
}

// ---- LSTMCell ----
LSTMCell::LSTMCell(int64_t units, LSTMCellOptions options)
    : RNNCell(options.name), units_(units), o_(std::move(options)) {
  check_units("LSTMCell", units);
  detail::check_rates("LSTMCell", o_.dropout, o_.recurrent_dropout);
  act_ = activations::get(o_.activation);
  ract_ = activations::get(o_.recurrent_activation);
}

void LSTMCell::build(const TensorShape& s) {
  check_step_input(*this, s);
  add_weight("kernel", TensorShape({s[1], 4 * units_}),
             detail::or_default(o_.kernel_initializer, initializers::GlorotUniform()), true,
             o_.kernel_regularizer, o_.kernel_constraint);
  add_weight("recurrent_kernel", TensorShape({units_, 4 * units_}),
             detail::or_default(o_.recurrent_initializer, initializers::Orthogonal()), true,
             o_.recurrent_regularizer, o_.recurrent_constraint);
  if (o_.use_bias) {
    Initializer b = detail::or_default(o_.bias_initializer, initializers::Zeros());
    if (o_.unit_forget_bias) b = detail::forget_bias_initializer(b, units_);
    add_weight("bias", TensorShape({4 * units_}), b, true, o_.bias_regularizer, o_.bias_constraint);
  }
  Model::build(s);
}

std::pair<Tensor, std::vector<Tensor>> LSTMCell::call(const Tensor& x,
                                                      const std::vector<Tensor>& states,
                                                      bool training) {
  check_step_input(*this, x.shape());
  auto [dm, rm] =
      cell_masks(*this, x, states[0], o_.dropout, o_.recurrent_dropout, 4, o_.seed, training);
  Tensor z = detail::masked_matmul(x, read(*this, "kernel"), dm);
  if (o_.use_bias) z = nn::bias_add(z, read(*this, "bias"));
  z = z + detail::masked_matmul(states[0], read(*this, "recurrent_kernel"), rm);
  auto [h, c] = detail::lstm_gates(act_, ract_, z, states[1]);
  return {h, {h, c}};
}

// ---- GRUCell ----
GRUCell::GRUCell(int64_t units, GRUCellOptions options)
    : RNNCell(options.name), units_(units), o_(std::move(options)) {
  check_units("GRUCell", units);
  detail::check_rates("GRUCell", o_.dropout, o_.recurrent_dropout);
  act_ = activations::get(o_.activation);
  ract_ = activations::get(o_.recurrent_activation);
}

void GRUCell::build(const TensorShape& s) {
  check_step_input(*this, s);
  add_weight("kernel", TensorShape({s[1], 3 * units_}),
             detail::or_default(o_.kernel_initializer, initializers::GlorotUniform()), true,
             o_.kernel_regularizer, o_.kernel_constraint);
  add_weight("recurrent_kernel", TensorShape({units_, 3 * units_}),
             detail::or_default(o_.recurrent_initializer, initializers::Orthogonal()), true,
             o_.recurrent_regularizer, o_.recurrent_constraint);
  if (o_.use_bias)
    add_weight("bias", o_.reset_after ? TensorShape({2, 3 * units_}) : TensorShape({3 * units_}),
               detail::or_default(o_.bias_initializer, initializers::Zeros()), true,
               o_.bias_regularizer, o_.bias_constraint);
  Model::build(s);
}

std::pair<Tensor, std::vector<Tensor>> GRUCell::call(const Tensor& x,
                                                     const std::vector<Tensor>& states,
                                                     bool training) {
  check_step_input(*this, x.shape());
  const auto& act = act_;
  const auto& ract = ract_;
  const Tensor& h = states[0];
  auto [dm, rm] = cell_masks(*this, x, h, o_.dropout, o_.recurrent_dropout, 3, o_.seed, training);
  const Tensor rk = read(*this, "recurrent_kernel");
  Tensor xp = detail::masked_matmul(x, read(*this, "kernel"), dm);
  Tensor out;
  if (o_.reset_after) {
    Tensor hp = detail::masked_matmul(h, rk, rm);
    if (o_.use_bias) {
      const std::vector<Tensor> rows = split(read(*this, "bias"), 2, 0);
      xp = nn::bias_add(xp, reshape(rows[0], TensorShape({3 * units_})));
      hp = nn::bias_add(hp, reshape(rows[1], TensorShape({3 * units_})));
    }
    out = detail::gru_gates_reset_after(act, ract, xp, hp, h);
  } else {
    // h U_z and h U_r, then (r h) U_h, each from its gate's masked state.
    if (o_.use_bias) xp = nn::bias_add(xp, read(*this, "bias"));
    const std::vector<Tensor> u = split(rk, 3, 1);
    auto state = [&](size_t g) { return rm.empty() ? h : h * rm[rm.size() == 1 ? 0 : g]; };
    const Tensor rz = matmul(state(0), u[0]), rr = matmul(state(1), u[1]);
    const Tensor hh = state(2);
    out = detail::gru_gates_reset_before(
        act, ract, xp, rz, rr, [&](const Tensor& r) { return matmul(r * hh, u[2]); }, h);
  }
  return {out, {out}};
}

// ---- StackedRNNCells ----
StackedRNNCells::StackedRNNCells(std::vector<std::shared_ptr<RNNCell>> cells, std::string name)
    : RNNCell(std::move(name)), cells_(std::move(cells)) {
  TF_CHECK_ARG(!cells_.empty(), "StackedRNNCells", "needs at least one cell, got none");
  for (const auto& c : cells_) {
    TF_CHECK_ARG(c != nullptr, "StackedRNNCells", "got a null cell");
    track(Layer(*c));
  }
}

std::vector<int64_t> StackedRNNCells::state_size() const {
  std::vector<int64_t> out;
  for (const auto& c : cells_)
    for (int64_t n : c->state_size()) out.push_back(n);
  return out;
}

int64_t StackedRNNCells::output_size() const {
  return cells_.back()->output_size();
}

std::vector<Tensor> StackedRNNCells::get_initial_state(int64_t batch_size) const {
  std::vector<Tensor> out;
  for (const auto& c : cells_)
    for (Tensor& t : c->get_initial_state(batch_size)) out.push_back(std::move(t));
  return out;
}

TensorShape StackedRNNCells::step_output_shape(const TensorShape& s) const {
  TensorShape cur = s;
  for (const auto& c : cells_) cur = c->step_output_shape(cur);
  return cur;
}

std::pair<Tensor, std::vector<Tensor>> StackedRNNCells::call(const Tensor& x,
                                                             const std::vector<Tensor>& states,
                                                             bool training) {
  std::vector<Tensor> new_states;
  Tensor h = x;
  size_t at = 0;
  for (const auto& c : cells_) {
    const size_t n = c->state_size().size();
    const std::vector<Tensor> mine(states.begin() + static_cast<std::ptrdiff_t>(at),
                                   states.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    auto [y, s] = (*c)(h, mine, training);
    h = y;
    for (Tensor& t : s) new_states.push_back(std::move(t));
  }
  return {h, std::move(new_states)};
}

}  // namespace layers

// ---- the RNN layer ----
namespace {

using detail::LayerImpl;

// `one` (one sample: batch 1) broadcast to x's batch through zeros of `dtype` read from x when
// the graph runs: no constant holds the batch size, so one trace serves every one.
Tensor with_batch_of(const Tensor& one, const Tensor& x, DType dtype) {
  std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), 1);
  size[0] = -1;
  std::vector<int64_t> dims(static_cast<size_t>(one.rank()), 1);
  dims[0] = -1;
  return one + reshape(zeros_like(slice(x, begin, size), dtype), TensorShape(dims));
}

class RNNImpl final : public LayerImpl {
 public:
  // `input_rank` 0: any rank from 3 (RNN); else exactly that rank (ConvLSTM).
  RNNImpl(std::shared_ptr<layers::RNNCell> cell, layers::RNNOptions o, const char* cls,
          const char* generic, int input_rank)
      : LayerImpl(cls, generic, o.name),
        cell_(std::move(cell)),
        o_(std::move(o)),
        input_rank_(input_rank) {
    TF_CHECK_ARG(cell_ != nullptr, cls, "needs a cell, got a null one");
  }
  layers::RNNCell& cell() const { return *cell_; }
  const std::shared_ptr<layers::RNNCell>& cell_ptr() const { return cell_; }
  const layers::RNNOptions& options() const { return o_; }
  std::vector<Layer> sublayers() const override { return {Layer(*cell_)}; }
  bool supports_masking() const override { return true; }
  Tensor compute_mask(const Tensor&, const Tensor& mask) const override {
    return o_.return_sequences ? mask : Tensor();
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    check_rank(s);
    TensorShape out = cell_->step_output_shape(step_shape(s));
    if (!o_.return_sequences) return out;
    std::vector<int64_t> dims = out.dims();
    dims.insert(dims.begin() + 1, s[1]);
    return TensorShape(dims);
  }

 protected:
  void build(const TensorShape& s) override {
    check_rank(s);
    cell_->impl().ensure_built(step_shape(s));
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    check_rank(s);
    // The cell's weights fix the dimensions of a step after the batch.
    const TensorShape b = built_input_shape();
    if (b.rank() != s.rank()) return;
    for (int i = 2; i < s.rank(); ++i)
      if (b[i] != None && s[i] != None && b[i] != s[i])
        incompatible(s, "a step of shape " + step_shape(b).to_string() + " (the build's)");
  }
  Tensor call(const Tensor& x, bool training) override {
    detail::SequenceRequest* request = detail::SequenceRequests::take(this);
    static const std::vector<Tensor> kNone;
    const std::vector<Tensor>& given = request ? *request->initial : kNone;
    std::vector<Tensor> kept;
    if (o_.stateful)
      kept = states_.initial(
          *this, x, given, [this](int64_t batch) { return cell_->get_initial_state(batch); },
          mirror_spec_);
    auto [output, states] = run_sequence(x, o_.stateful ? kept : given, training);
    if (o_.stateful) states_.keep(states);
    if (request) request->states = std::move(states);
    return output;
  }

 public:
  bool stateful() const override { return o_.stateful || LayerImpl::stateful(); }
  void reset_states() override {
    reset_states_to({});
    LayerImpl::reset_states();  // a cell holding stateful layers of its own
  }
  void reset_states_to(const std::vector<Tensor>& values) {
    states_.reset(*this, o_.stateful, values, mirror_spec_);
  }
  std::vector<Variable> state_variables() const { return states_.variables(); }

 private:
  void check_rank(const TensorShape& s) const {
    const bool ok = input_rank_ == 0 ? s.rank() >= 3 : s.rank() == input_rank_;
    TF_CHECK_ARG(ok, name_.c_str(),
                 "layer \"{}\" ({}) needs inputs of shape (batch, timesteps, {}), got shape {}",
                 name_, class_name_,
                 input_rank_ == 0
                     ? std::string("features...")
                     : (input_rank_ == 4   ? std::string("width, channels")
                        : input_rank_ == 5 ? std::string("rows, cols, channels")
                                           : std::string("depth, rows, cols, channels")),
                 s.to_string());
  }
  static TensorShape step_shape(const TensorShape& s) {
    std::vector<int64_t> dims = s.dims();
    dims.erase(dims.begin() + 1);
    return TensorShape(dims);
  }
  std::vector<Tensor> checked_initial(const Tensor& x, const std::vector<Tensor>& initial) const;
  std::pair<Tensor, std::vector<Tensor>> run_sequence(const Tensor& x,
                                                      const std::vector<Tensor>& initial,
                                                      bool training) const;

  std::shared_ptr<layers::RNNCell> cell_;
  layers::RNNOptions o_;
  int input_rank_;
  detail::RecurrentStates states_;  // stateful only
};

std::vector<Tensor> RNNImpl::checked_initial(const Tensor& x,
                                             const std::vector<Tensor>& initial) const {
  const int64_t batch = x.shape()[0];
  if (initial.empty()) {
    if (batch != None && ::tapeflow::detail::thread_context().trace == nullptr)
      return cell_->get_initial_state(batch);
    // In a trace: the cell's states for one sequence, given the input's batch.
    std::vector<Tensor> out;
    for (const Tensor& s : cell_->get_initial_state(1))
      out.push_back(with_batch_of(s, x, x.dtype()));
    return out;
  }
  const std::vector<int64_t> sizes = cell_->state_size();
  TF_CHECK_ARG(initial.size() == sizes.size(), name_.c_str(),
               "layer \"{}\" ({}): its cell has {} state(s) (state_size {}), got {} initial "
               "state tensor(s)",
               name_, class_name_, sizes.size(), detail::dims_string(sizes), initial.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < initial.size(); ++i) {
    const Tensor& s = initial[i];
    TF_CHECK_ARG(s.defined(), name_.c_str(),
                 "layer \"{}\" ({}): initial state {} is an undefined tensor", name_, class_name_,
                 i);
    const TensorShape& sh = s.shape();
    TF_CHECK_ARG(sh.rank() >= 2 && (sh[sh.rank() - 1] == sizes[i] || sh[sh.rank() - 1] == None) &&
                     (sh[0] == batch || sh[0] == None || batch == None),
                 name_.c_str(),
                 "layer \"{}\" ({}): initial state {} must have batch {} and last dimension {}, "
                 "got shape {}",
                 name_, class_name_, i, batch == None ? std::string("None") : std::to_string(batch),
                 sizes[i], sh.to_string());
    TF_CHECK_ARG(is_floating(s.dtype()), name_.c_str(),
                 "layer \"{}\" ({}): initial state {} must be floating, got dtype {}", name_,
                 class_name_, i, dtype_name(s.dtype()));
    out.push_back(s.dtype() == compute_dtype_ ? s : cast(s, compute_dtype_));
  }
  return out;
}

std::pair<Tensor, std::vector<Tensor>> RNNImpl::run_sequence(const Tensor& x,
                                                             const std::vector<Tensor>& initial,
                                                             bool training) const {
  // Traced, the timesteps after the first run as one loop node unless the layer unrolls them.
  const bool as_loop = !o_.unroll && ::tapeflow::detail::thread_context().trace != nullptr;
  const int64_t steps = x.shape()[1];
  TF_CHECK_ARG(steps != 0 && (steps != None || as_loop), name_.c_str(),
               "layer \"{}\" ({}) needs at least 1 timestep{}, got input shape {}", name_,
               class_name_, o_.unroll ? " and, with unroll, a known number of them" : "",
               x.shape().to_string());
  const Tensor mask = call_mask();
  if (mask.defined())
    TF_CHECK_ARG(mask.rank() == 2, name_.c_str(),
                 "layer \"{}\" ({}) takes a mask of shape (batch, timesteps), got {} for an "
                 "input of shape {}",
                 name_, class_name_, mask.shape().to_string(), x.shape().to_string());
  const std::vector<Tensor> initial_states = checked_initial(x, initial);
  const detail::DropoutScope dropout_scope;  // the cells' dropout masks of this call
  LayerImpl& cell = cell_->impl();
  // One timestep: the states after it and its output. With a mask (keep: (batch, 1) bool),
  // Keras' masked step: the states stay, the output is the previous step's (zeros before the
  // first kept step, or always with zero_output_for_mask).
  auto step = [&](const std::vector<Tensor>& states, const Tensor& prev_output, const Tensor& xt,
                  const Tensor& keep_t) {
    auto [out, next] = detail::cell_step(cell, xt, states, training);
    if (!keep_t.defined()) return std::make_pair(out, std::move(next));
    auto hold = [&](const Tensor& now, const Tensor& before) {
      Tensor keep = keep_t;
      if (now.rank() > 2) {  // (batch, 1, ..., 1) against ConvLSTM's states
        std::vector<int64_t> dims(static_cast<size_t>(now.rank()), 1);
        dims[0] = -1;
        keep = reshape(keep, TensorShape(dims));
      }
      return where(keep, now, before.defined() ? before : zeros_like(now));
    };
    for (size_t i = 0; i < next.size(); ++i) next[i] = hold(next[i], states[i]);
    return std::make_pair(hold(out, o_.zero_output_for_mask ? Tensor() : prev_output),
                          std::move(next));
  };

  if (as_loop) {
    // One node that runs the step per timestep (jit/scan_loop.cpp), time-major. The first
    // timestep's call runs once before it, its results unused (the loop runs that step again):
    // it draws the cells' dropout masks, which every step then reuses, and does what a first
    // call does.
    const Tensor xs = o_.go_backwards ? reverse(x, {1}) : x;
    const Tensor ms = mask.defined() && o_.go_backwards ? reverse(mask, {1}) : mask;
    std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
    size[1] = 1;
    const Tensor x0 = squeeze(slice(xs, begin, size), {1});
    const Tensor out0 = step(initial_states, Tensor(), x0, Tensor()).first;
    // The output a masked step repeats starts as zeros of the output's shape.
    std::vector<int64_t> sample = out0.shape().dims();
    sample[0] = 1;
    const Tensor zero_output =
        with_batch_of(zeros(TensorShape(sample), out0.dtype()), x, out0.dtype());
    std::vector<int> perm(static_cast<size_t>(x.rank()));
    for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int>(d);
    std::swap(perm[0], perm[1]);
    std::vector<Tensor> elems{transpose(xs, perm)};
    if (ms.defined()) elems.push_back(expand_dims(transpose(ms, {1, 0}), 2));
    // Carries: the states, then the last output (the one a masked step repeats).
    std::vector<Tensor> carries = initial_states;
    carries.push_back(zero_output);
    const size_t n_states = initial_states.size();
    const ::tapeflow::detail::OpsScanBody body = [&](const std::vector<Tensor>& in,
                                                     const std::vector<Tensor>& xt) {
      const std::vector<Tensor> states(in.begin(), in.begin() + static_cast<long>(n_states));
      auto [out, next] = step(states, in.back(), xt[0], ms.defined() ? xt[1] : Tensor());
      next.push_back(out);
      if (o_.return_sequences) next.push_back(out);
      return next;
    };
    if (auto r = ::tapeflow::detail::ops_scan("rnn", body, carries, elems, false)) {
      std::vector<Tensor> states(r->begin(), r->begin() + static_cast<long>(n_states));
      if (!o_.return_sequences) return {(*r)[n_states], std::move(states)};
      return {transpose((*r)[n_states + 1], perm), std::move(states)};
    }
    TF_CHECK_ARG(steps != None, name_.c_str(),
                 "layer \"{}\" ({}) cannot run its timesteps as a loop (its cell holds random "
                 "ops or assignments) and needs a known number of them, got input shape {}",
                 name_, class_name_, x.shape().to_string());
  }

  std::vector<Tensor> step_masks;  // (batch, 1) bool per timestep
  if (mask.defined()) step_masks = split(mask, static_cast<int>(steps), 1);
  const std::vector<Tensor> inputs = split(x, static_cast<int>(steps), 1);
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<size_t>(steps));
  std::vector<Tensor> states = initial_states;
  Tensor prev_output;  // the output a masked step repeats (undefined: zeros)
  for (int64_t n = 0; n < steps; ++n) {
    const int64_t t = o_.go_backwards ? steps - 1 - n : n;
    auto [out, next] = step(states, prev_output, squeeze(inputs[static_cast<size_t>(t)], {1}),
                            step_masks.empty() ? Tensor() : step_masks[static_cast<size_t>(t)]);
    states = std::move(next);
    prev_output = out;
    outputs.push_back(std::move(out));
  }
  return {o_.return_sequences ? stack(outputs, 1) : outputs.back(), std::move(states)};
}

RNNImpl& rnn_of(const Layer& l) {
  auto* p = dynamic_cast<RNNImpl*>(&l.impl());
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "RNN",
             "this RNN handle refers to layer \"{}\" ({}), which is not an RNN", l.impl().name(),
             l.impl().class_name());
  return *p;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

std::optional<detail::layer_options::RNNConfig> detail::layer_options::rnn(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RNNImpl*>(&layer);
  if (p == nullptr || p->class_name() != "RNN") return std::nullopt;  // not a ConvLSTM
  return RNNConfig{p->options(), p->cell_ptr()};
}

namespace layers {

RNN::RNN(std::shared_ptr<RNNCell> cell, RNNOptions options)
    : Layer(std::make_shared<RNNImpl>(std::move(cell), std::move(options), "RNN", "rnn", 0)) {
  const auto& shape = rnn_of(*this).options().input_shape;
  if (!shape.empty()) impl().build_from_declared_shape(shape);
}
RNNCell& RNN::cell() const {
  return rnn_of(*this).cell();
}
bool RNN::return_sequences() const {
  return rnn_of(*this).options().return_sequences;
}
bool RNN::go_backwards() const {
  return rnn_of(*this).options().go_backwards;
}
bool RNN::stateful() const {
  return rnn_of(*this).options().stateful;
}
std::vector<Variable> RNN::states() const {
  return rnn_of(*this).state_variables();
}
void RNN::reset_states(const std::vector<Tensor>& values) const {
  rnn_of(*this).reset_states_to(values);
}

std::vector<Tensor> RNN::call_with_state(const Tensor& x, const std::vector<Tensor>& initial_state,
                                         bool training, const Tensor& mask) const {
  return call_with_state_of(impl_, x, initial_state, training, mask);
}

std::vector<Tensor> RNN::call_with_state_of(const std::shared_ptr<detail::LayerImpl>& layer,
                                            const Tensor& x,
                                            const std::vector<Tensor>& initial_state, bool training,
                                            const Tensor& mask) {
  RNNImpl& impl = rnn_of(Layer(layer));
  detail::SequenceRequest request{
      .layer = &impl, .initial = &initial_state, .states = {}, .served = false};
  Tensor output;
  {
    detail::SequenceRequests::Scope scope(&request);
    output =
        mask.defined() ? impl.invoke_masked(x, mask, training).output : impl.invoke(x, training);
  }
  TF_CHECK_T(InternalError, request.served, impl.name().c_str(),
             "layer \"{}\" returned without serving its state request", impl.name());
  std::vector<Tensor> out{output};
  out.insert(out.end(), request.states.begin(), request.states.end());
  return out;
}

// ---- ConvLSTM ----
namespace {

// Keras' ConvLSTMCell for `rank` spatial dimensions, channels_last or channels_first (steps
// (channels, spatial...), run with the convolutions' channels-first data_formats).
class ConvLSTMCell final : public RNNCell {
 public:
  ConvLSTMCell(int rank, int64_t filters, std::vector<int64_t> kernel_size,
               const ConvLSTMOptions& o)
      : RNNCell(""),
        rank_(rank),
        filters_(filters),
        o_(o),
        first_(detail::DataFormat::parse(("ConvLSTM" + std::to_string(rank) + "D").c_str(),
                                         o.data_format)
                   .channels_first()) {
    const std::string cls = "ConvLSTM" + std::to_string(rank) + "D";
    TF_CHECK_ARG(filters > 0, cls.c_str(), "filters must be positive, got {}", filters);
    kernel_ = expand(cls, "kernel_size", kernel_size);
    std::vector<int64_t> s(o.strides.begin(), o.strides.end()),
        d(o.dilation_rate.begin(), o.dilation_rate.end());
    strides_ = expand(cls, "strides", s);
    dilation_ = expand(cls, "dilation_rate", d);
    padding_ = upper(o.padding);
    TF_CHECK_ARG(padding_ == "SAME" || padding_ == "VALID", cls.c_str(),
                 "padding must be \"valid\" or \"same\", got \"{}\"", o.padding);
    const bool strided =
        std::any_of(strides_.begin(), strides_.end(), [](int64_t v) { return v > 1; });
    const bool dilated =
        std::any_of(dilation_.begin(), dilation_.end(), [](int64_t v) { return v > 1; });
    TF_CHECK_ARG(!(strided && dilated), cls.c_str(),
                 "strides > 1 together with dilation_rate > 1 are not supported (as Keras), got "
                 "strides {} and dilation_rate {}",
                 detail::dims_string(strides_), detail::dims_string(dilation_));
    act_ = activations::get(o.activation);
    ract_ = activations::get(o.recurrent_activation);
    detail::check_rates(cls.c_str(), o.dropout, o.recurrent_dropout);
  }
  std::vector<int64_t> state_size() const override { return {filters_, filters_}; }
  int64_t output_size() const override { return filters_; }
  using RNNCell::call;

  TensorShape step_output_shape(const TensorShape& s) const override {
    std::vector<int64_t> dims{s[0]};
    if (first_) dims.push_back(filters_);
    for (int i = 0; i < rank_; ++i) {
      const int64_t in = s[i + spatial0()];
      const auto k = static_cast<size_t>(i);
      if (in == None) {
        dims.push_back(None);
      } else if (padding_ == "SAME") {
        dims.push_back((in + strides_[k] - 1) / strides_[k]);
      } else {
        const int64_t span = dilation_[k] * (kernel_[k] - 1) + 1;
        dims.push_back(in >= span ? (in - span) / strides_[k] + 1 : 0);
      }
    }
    if (!first_) dims.push_back(filters_);
    return TensorShape(dims);
  }
  std::vector<Tensor> get_initial_state(int64_t batch_size) const override {
    TF_CHECK_ARG(batch_size != None, name().c_str(),
                 "cell \"{}\" makes zero initial states for a known batch size, got None", name());
    std::vector<int64_t> dims = out_dims_;
    dims[0] = batch_size;
    return {zeros(TensorShape(dims), impl().compute_dtype()),
            zeros(TensorShape(dims), impl().compute_dtype())};
  }

  void build(const TensorShape& s) override {
    const std::string cls = "ConvLSTM" + std::to_string(rank_) + "D";
    TF_CHECK_ARG(s.rank() == rank_ + 2 && s[channel_axis()] != None, cls.c_str(),
                 "needs steps of rank {} with known channels ({}), got {}", rank_ + 2,
                 first_ ? "channels_first: axis 1" : "the last axis", s.to_string());
    out_dims_ = step_output_shape(s).dims();
    for (int i = spatial0(); i < spatial0() + rank_; ++i)
      TF_CHECK_ARG(
          out_dims_[static_cast<size_t>(i)] != None && out_dims_[static_cast<size_t>(i)] > 0,
          cls.c_str(),
          "needs known spatial dimensions that fit the kernel: step input {} gives "
          "output {}",
          s.to_string(), TensorShape(out_dims_).to_string());
    std::vector<int64_t> k = kernel_, rk = kernel_;
    k.push_back(s[channel_axis()]);
    k.push_back(4 * filters_);
    rk.push_back(filters_);
    rk.push_back(4 * filters_);
    add_weight("kernel", TensorShape(k),
               detail::or_default(o_.kernel_initializer, initializers::GlorotUniform()), true,
               o_.kernel_regularizer, o_.kernel_constraint);
    add_weight("recurrent_kernel", TensorShape(rk),
               detail::or_default(o_.recurrent_initializer, initializers::Orthogonal()), true,
               o_.recurrent_regularizer, o_.recurrent_constraint);
    if (o_.use_bias) {
      Initializer b = detail::or_default(o_.bias_initializer, initializers::Zeros());
      if (o_.unit_forget_bias) b = detail::forget_bias_initializer(b, filters_);
      add_weight("bias", TensorShape({4 * filters_}), b, true, o_.bias_regularizer,
                 o_.bias_constraint);
    }
    Model::build(s);
  }

  std::pair<Tensor, std::vector<Tensor>> call(const Tensor& x, const std::vector<Tensor>& states,
                                              bool training) override {
    // Keras' ConvLSTMCell: with dropout, one mask per gate for the inputs and for the state.
    std::vector<Tensor> dm, rm;
    const double rate = detail::gated_rate(o_.dropout);
    const double recurrent_rate = detail::gated_rate(o_.recurrent_dropout);
    if (training && rate > 0.0) dm = dropout_masks(x, rate, 4, 0, o_.seed);
    if (training && recurrent_rate > 0.0)
      rm = dropout_masks(states[0], recurrent_rate, 4, 1, o_.seed);
    const std::vector<int64_t> one(static_cast<size_t>(rank_), 1);
    Tensor z = masked_conv(x, read(*this, "kernel"), dm, strides_, padding_, dilation_);
    if (o_.use_bias) z = nn::bias_add(z, read(*this, "bias"), first_ ? "NCHW" : "NHWC");
    z = z + masked_conv(states[0], read(*this, "recurrent_kernel"), rm, one, "SAME", one);
    auto [h, c] = detail::lstm_gates(act_, ract_, z, states[1], first_ ? 1 : -1);
    return {h, {h, c}};
  }

 private:
  std::vector<int64_t> expand(const std::string& cls, const char* what,
                              const std::vector<int64_t>& v) const {
    TF_CHECK_ARG(v.size() == 1 || v.size() == static_cast<size_t>(rank_), cls.c_str(),
                 "{} must have 1 or {} values, got {}", what, rank_, detail::dims_string(v));
    for (int64_t e : v)
      TF_CHECK_ARG(e >= 1, cls.c_str(), "{} must be positive, got {}", what,
                   detail::dims_string(v));
    return v.size() == 1 ? std::vector<int64_t>(static_cast<size_t>(rank_), v[0]) : v;
  }
  // conv(x, w), or with masks the per-gate convolutions of the masked x (w's output blocks).
  Tensor masked_conv(const Tensor& x, const Tensor& w, const std::vector<Tensor>& masks,
                     const std::vector<int64_t>& strides, const std::string& padding,
                     const std::vector<int64_t>& dilation) const {
    if (masks.empty()) return conv(x, w, strides, padding, dilation);
    const std::vector<Tensor> blocks = split(w, static_cast<int>(masks.size()), w.rank() - 1);
    std::vector<Tensor> parts;
    for (size_t g = 0; g < masks.size(); ++g)
      parts.push_back(conv(x * masks[g], blocks[g], strides, padding, dilation));
    return concat(parts, channel_axis());
  }
  Tensor conv(const Tensor& x, const Tensor& w, const std::vector<int64_t>& strides,
              const std::string& padding, const std::vector<int64_t>& dilation) const {
    std::vector<int> s(strides.begin(), strides.end()), d(dilation.begin(), dilation.end());
    if (rank_ == 2) return nn::conv2d(x, w, s, padding, d, first_ ? "NCHW" : "NHWC");
    if (rank_ == 3) return nn::conv3d(x, w, s, padding, d, first_ ? "NCDHW" : "NDHWC");
    // 1-D: a conv2d over rows of height 1 ((batch, 1, steps, channels), or (batch, channels, 1,
    // steps) channels_first).
    const int h = first_ ? 2 : 1;
    const Tensor y = nn::conv2d(expand_dims(x, h), expand_dims(w, 0), {1, s[0]}, padding, {1, d[0]},
                                first_ ? "NCHW" : "NHWC");
    return squeeze(y, {h});
  }
  // The axes of a step (batch, spatial..., channels) or, channels_first, (batch, channels,
  // spatial...).
  int channel_axis() const { return first_ ? 1 : rank_ + 1; }
  int spatial0() const { return first_ ? 2 : 1; }

  friend std::optional<detail::layer_options::ConvLSTMConfig> detail::layer_options::conv_lstm(
      const LayerImpl&);
  int rank_;
  int64_t filters_;
  ConvLSTMOptions o_;
  bool first_;  // channels_first
  std::vector<int64_t> kernel_, strides_, dilation_;
  std::string padding_;
  activations::Activation act_, ract_;
  std::vector<int64_t> out_dims_;  // the states' shape (batch first), set by build
};

std::shared_ptr<detail::LayerImpl> make_conv_lstm(int rank, int64_t filters,
                                                  std::vector<int64_t> kernel_size,
                                                  const ConvLSTMOptions& o) {
  TF_CHECK_ARG(rank >= 1 && rank <= 3, "ConvLSTM", "rank must be 1, 2 or 3, got {}", rank);
  static const char* const kClass[] = {"ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"};
  static const char* const kGeneric[] = {"conv_lstm1d", "conv_lstm2d", "conv_lstm3d"};
  auto cell = std::make_shared<ConvLSTMCell>(rank, filters, std::move(kernel_size), o);
  RNNOptions ro{.return_sequences = o.return_sequences,
                .go_backwards = o.go_backwards,
                .stateful = o.stateful,
                .zero_output_for_mask = o.zero_output_for_mask,
                .input_shape = o.input_shape,
                .name = o.name};
  auto impl = std::make_shared<RNNImpl>(cell, std::move(ro), kClass[rank - 1], kGeneric[rank - 1],
                                        rank + 3);
  if (!o.input_shape.empty()) impl->build_from_declared_shape(o.input_shape);
  return impl;
}

}  // namespace

}  // namespace layers

std::optional<detail::layer_options::SequenceLayerInfo> detail::layer_options::rnn_info(
    const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RNNImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  const auto& o = p->options();
  return SequenceLayerInfo{o.return_sequences, o.go_backwards, o.stateful,
                           p->cell().state_size().size()};
}

std::vector<Tensor> detail::layer_options::rnn_call_with_state(
    const std::shared_ptr<LayerImpl>& layer, const Tensor& x,
    const std::vector<Tensor>& initial_state, bool training, const Tensor& mask) {
  return layers::RNN::call_with_state_of(layer, x, initial_state, training, mask);
}

std::shared_ptr<LayerImpl> detail::layer_options::rnn_copy(const LayerImpl& layer,
                                                           const std::string& name,
                                                           bool flip_go_backwards,
                                                           bool zero_output_for_mask) {
  const Layer original(std::const_pointer_cast<LayerImpl>(layer.shared_from_this()));
  saving::Config config = saving::get_config(original);
  config["name"] = name;
  if (flip_go_backwards) config["go_backwards"] = !config["go_backwards"].get<bool>();
  config["zero_output_for_mask"] = zero_output_for_mask;
  const Layer copy = saving::from_config(layer.class_name(), config);
  TF_CHECK_T(InternalError, rnn_info(copy.impl()).has_value(), "Bidirectional",
             "the copy of \"{}\" is a {}", layer.name(), copy.class_name());
  return copy.impl_ptr();
}

std::optional<detail::layer_options::ConvLSTMConfig> detail::layer_options::conv_lstm(
    const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RNNImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  const auto* cell = dynamic_cast<const layers::ConvLSTMCell*>(p->cell_ptr().get());
  if (cell == nullptr) return std::nullopt;
  ConvLSTMConfig c{cell->rank_,     cell->filters_, cell->kernel_, cell->strides_,
                   cell->dilation_, cell->o_,       p->cell_ptr()};
  c.options.data_format = cell->first_ ? "channels_first" : "channels_last";  // resolved
  return c;
}

namespace layers {

ConvLSTM::ConvLSTM(int rank, int64_t filters, std::vector<int64_t> kernel_size,
                   ConvLSTMOptions options)
    : RNN(make_conv_lstm(rank, filters, std::move(kernel_size), options)) {}

}  // namespace layers
}  // namespace tapeflow::keras
