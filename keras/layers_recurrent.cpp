// SimpleRNN, LSTM, GRU and Bidirectional (keras/layers_recurrent.h): one LayerImpl for the three
// cells, whose call runs the timesteps as ops (one loop node when traced, unless unrolled), and
// the wrapper that runs two of them.
#include "keras/layers_recurrent.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "keras/call_request.h"
#include "keras/functional.h"
#include "keras/layer_handle.h"
#include "keras/layers_rnn_cells.h"
#include "keras/rnn_state.h"
#include "keras/serialization_access_sequence.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/traced_loop.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::LayerImpl;

enum class Cell { simple, lstm, gru };

// Every option of the three layers (the options structs are the per-layer views of it).
struct RecurrentConfig {
  Cell cell = Cell::simple;
  int64_t units = 0;
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer, recurrent_initializer, bias_initializer;
  bool unit_forget_bias = true;
  Regularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;
  Constraint kernel_constraint, recurrent_constraint, bias_constraint;
  bool return_sequences = false;
  bool go_backwards = false;
  bool stateful = false;
  bool unroll = false;
  bool zero_output_for_mask = false;
  bool reset_after = true;
  double dropout = 0.0, recurrent_dropout = 0.0;
  std::optional<int64_t> seed;
  std::string name;
};

const char* class_of(Cell c) {
  return c == Cell::simple ? "SimpleRNN" : c == Cell::lstm ? "LSTM" : "GRU";
}
const char* generic_of(Cell c) {
  return c == Cell::simple ? "simple_rnn" : c == Cell::lstm ? "lstm" : "gru";
}
int64_t gates_of(Cell c) {
  return c == Cell::simple ? 1 : c == Cell::lstm ? 4 : 3;
}

Tensor activate(const activations::Activation& f, const Tensor& x) {
  return f ? f(x) : x;
}

// call_with_state's request to the layer it calls: the initial states going in, the final ones
// coming out. One per thread and call (replica threads call a layer at once), found by layer.
struct StateRequest {
  const LayerImpl* layer = nullptr;
  const std::vector<Tensor>* initial = nullptr;
  std::vector<Tensor> states;
  bool served = false;
};
using Requests = detail::CallRequests<StateRequest>;

// Reverses the time axis (1) of a (batch, timesteps, units) tensor.
Tensor reverse_time(const Tensor& y) {
  return reverse(y, {1});
}

class RecurrentImpl final : public LayerImpl {
 public:
  explicit RecurrentImpl(RecurrentConfig c)
      : LayerImpl(class_of(c.cell), generic_of(c.cell), c.name),
        c_(std::move(c)),
        activation_(activations::get(c_.activation)),
        recurrent_activation_(activations::get(c_.recurrent_activation)) {
    TF_CHECK_ARG(c_.units > 0, class_of(c_.cell), "units must be positive, got {}", c_.units);
    detail::check_rates(class_of(c_.cell), c_.dropout, c_.recurrent_dropout);
    if (!c_.kernel_initializer.defined()) c_.kernel_initializer = initializers::GlorotUniform();
    if (!c_.recurrent_initializer.defined()) c_.recurrent_initializer = initializers::Orthogonal();
    if (!c_.bias_initializer.defined()) c_.bias_initializer = initializers::Zeros();
  }
  const RecurrentConfig& config() const { return c_; }
  int num_states() const { return c_.cell == Cell::lstm ? 2 : 1; }

  // The output and the final states for `x` (batch, timesteps, features), from `initial`
  // (empty: zeros).
  // `mask` (batch, timesteps), undefined for none: masked steps keep the states and give the
  // previous output (zeros with zero_output_for_mask), as Keras' backend rnn.
  std::pair<Tensor, std::vector<Tensor>> run_sequence(const Tensor& x,
                                                      const std::vector<Tensor>& initial,
                                                      bool training, const Tensor& mask) const;
  // Keras: a mask passes on with return_sequences and ends here otherwise.
  bool supports_masking() const override { return true; }
  Tensor compute_mask(const Tensor&, const Tensor& mask) const override {
    return c_.return_sequences ? mask : Tensor();
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() == 3, name_.c_str(),
                 "layer \"{}\" ({}) needs inputs of shape (batch, timesteps, features), got "
                 "shape {}",
                 name_, class_name_, s.to_string());
    return c_.return_sequences ? TensorShape({s[0], s[1], c_.units})
                               : TensorShape({s[0], c_.units});
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 3 && s[2] != None, name_.c_str(),
                 "layer \"{}\" ({}) needs inputs of shape (batch, timesteps, features) with "
                 "known features, got shape {}",
                 name_, class_name_, s.to_string());
    features_ = s[2];
    const int64_t u = c_.units, k = gates_of(c_.cell);
    kernel_ = add_weight("kernel", TensorShape({features_, k * u}), c_.kernel_initializer, true,
                         c_.kernel_regularizer, c_.kernel_constraint);
    recurrent_ = add_weight("recurrent_kernel", TensorShape({u, k * u}), c_.recurrent_initializer,
                            true, c_.recurrent_regularizer, c_.recurrent_constraint);
    if (!c_.use_bias) return;
    Initializer init = c_.bias_initializer;
    if (c_.cell == Cell::lstm && c_.unit_forget_bias) {
      // Keras: the bias initializer for i, ones for f, the bias initializer for c and o.
      const Initializer b = c_.bias_initializer;
      init = Initializer("unit_forget_bias", [b, u](const TensorShape&, DType d) {
        return concat(
            {b(TensorShape({u}), d), ones(TensorShape({u}), d), b(TensorShape({2 * u}), d)}, 0);
      });
    }
    const TensorShape bshape =
        c_.cell == Cell::gru && c_.reset_after ? TensorShape({2, k * u}) : TensorShape({k * u});
    bias_ = add_weight("bias", bshape, init, true, c_.bias_regularizer, c_.bias_constraint);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, 3, features_);
  }
  Tensor call(const Tensor& x, bool training) override {
    StateRequest* request = Requests::take(this);
    static const std::vector<Tensor> kNone;
    const std::vector<Tensor>& given = request ? *request->initial : kNone;
    std::vector<Tensor> kept;
    if (c_.stateful)
      kept = states_.initial(
          *this, x, given,
          [this](int64_t batch) {
            return std::vector<Tensor>(static_cast<size_t>(num_states()),
                                       zeros(TensorShape({batch, c_.units}), compute_dtype_));
          },
          mirror_spec_);
    auto [output, states] = run_sequence(x, c_.stateful ? kept : given, training, call_mask());
    if (c_.stateful) states_.keep(states);
    if (request) request->states = std::move(states);
    return output;
  }

 public:
  bool stateful() const override { return c_.stateful; }
  void reset_states() override { reset_states_to({}); }
  void reset_states_to(const std::vector<Tensor>& values) {
    states_.reset(*this, c_.stateful, values, mirror_spec_);
  }
  std::vector<Variable> state_variables() const { return states_.variables(); }

 private:
  friend class layers::RecurrentLayer;
  std::vector<Tensor> checked_initial(const Tensor& x, const std::vector<Tensor>& initial) const;

  RecurrentConfig c_;
  activations::Activation activation_, recurrent_activation_;
  int64_t features_ = 0;
  Variable kernel_, recurrent_, bias_;  // set by build, read after built() (acquire)
  detail::RecurrentStates states_;      // stateful only
};

std::vector<Tensor> RecurrentImpl::checked_initial(const Tensor& x,
                                                   const std::vector<Tensor>& initial) const {
  if (initial.empty()) return {};
  TF_CHECK_ARG(static_cast<int>(initial.size()) == num_states(), name_.c_str(),
               "layer \"{}\" ({}) has {} state(s), got {} initial state tensor(s)", name_,
               class_name_, num_states(), initial.size());
  std::vector<Tensor> out;
  const int64_t batch = x.shape()[0];
  for (size_t i = 0; i < initial.size(); ++i) {
    const Tensor& s = initial[i];
    TF_CHECK_ARG(s.defined(), name_.c_str(),
                 "layer \"{}\" ({}): initial state {} is an undefined tensor", name_, class_name_,
                 i);
    const TensorShape& sh = s.shape();
    TF_CHECK_ARG(sh.rank() == 2 && (sh[1] == c_.units || sh[1] == None) &&
                     (sh[0] == batch || sh[0] == None || batch == None),
                 name_.c_str(),
                 "layer \"{}\" ({}): initial state {} must have shape (batch, units) = ({}, {}), "
                 "got {}",
                 name_, class_name_, i, batch == None ? std::string("None") : std::to_string(batch),
                 c_.units, sh.to_string());
    TF_CHECK_ARG(is_floating(s.dtype()), name_.c_str(),
                 "layer \"{}\" ({}): initial state {} must be floating, got dtype {}", name_,
                 class_name_, i, dtype_name(s.dtype()));
    out.push_back(s.dtype() == compute_dtype_ ? s : cast(s, compute_dtype_));
  }
  return out;
}

std::pair<Tensor, std::vector<Tensor>> RecurrentImpl::run_sequence(
    const Tensor& x, const std::vector<Tensor>& initial_state, bool training,
    const Tensor& mask) const {
  // Traced, the timesteps run as one loop node unless the layer asks to unroll them.
  const bool as_loop = !c_.unroll && ::tapeflow::detail::thread_context().trace != nullptr;
  const int64_t steps = x.shape()[1];
  TF_CHECK_ARG(steps != 0 && (steps != None || as_loop), name_.c_str(),
               "layer \"{}\" ({}) needs at least 1 timestep{}, got input shape {}", name_,
               class_name_, c_.unroll ? " and, with unroll, a known number of them" : "",
               x.shape().to_string());
  if (mask.defined())
    TF_CHECK_ARG(mask.rank() == 2, name_.c_str(),
                 "layer \"{}\" ({}) takes a mask of shape (batch, timesteps), got {} for an "
                 "input of shape {}",
                 name_, class_name_, mask.shape().to_string(), x.shape().to_string());
  const std::vector<Tensor> initial = checked_initial(x, initial_state);
  const int64_t u = c_.units;
  const int64_t k = gates_of(c_.cell);
  const bool gru_after = c_.cell == Cell::gru && c_.reset_after;

  // Dropout (training only), as Keras 3: masks drawn once per call and shared by every timestep;
  // one input mask for all gates, except that recurrent_dropout switches LSTM and GRU to Keras'
  // implementation 1, with one input mask and one recurrent mask per gate. A rate of 1 zeroes
  // everything in SimpleRNN but turns dropout off in LSTM and GRU, as Keras 3.
  const bool simple = c_.cell == Cell::simple;
  const double in_rate = simple ? c_.dropout : detail::gated_rate(c_.dropout);
  const double rec_rate = simple ? c_.recurrent_dropout : detail::gated_rate(c_.recurrent_dropout);
  const bool drop_in = training && in_rate > 0.0;
  const bool drop_rec = training && rec_rate > 0.0;
  // Any recurrent_dropout, 1 included, makes one input mask per gate (Keras switches to
  // implementation 1 on the rate, before its `< 1` test skips the recurrent masks).
  const int64_t n_in_masks = training && c_.recurrent_dropout > 0.0 && !simple ? k : 1;
  const int64_t n_masks = drop_rec && !simple ? k : 1;  // recurrent masks
  const Tensor kernel = kernel_.value();
  const Tensor rk = recurrent_.value();
  std::vector<Tensor> kernel_parts, rk_parts;  // per gate, when the masks are
  if (n_masks > 1 || n_in_masks > 1) {
    kernel_parts = split(kernel, static_cast<int>(k), 1);
    rk_parts = split(rk, static_cast<int>(k), 1);
  }

  // The input projection of every timestep at once: (batch, timesteps, k * units).
  Tensor xp;
  if (drop_in) {
    const Tensor ones_bf = ones_like(squeeze(slice(x, {0, 0, 0}, {-1, 1, -1}), {1}));
    std::vector<Tensor> parts;
    for (int64_t g = 0; g < n_in_masks; ++g) {
      const Tensor mask = expand_dims(detail::dropout_mask(ones_bf, in_rate, c_.seed), 1);
      parts.push_back(
          matmul(x * mask, n_in_masks > 1 ? kernel_parts[static_cast<size_t>(g)] : kernel));
    }
    xp = parts.size() == 1 ? parts[0] : concat(parts, -1);
  } else {
    xp = matmul(x, kernel);
  }
  Tensor recurrent_bias;  // GRU with reset_after only
  if (c_.use_bias) {
    Tensor b = bias_.value();
    if (gru_after) {
      std::vector<Tensor> rows = split(b, 2, 0);
      b = reshape(rows[0], TensorShape({k * u}));
      recurrent_bias = reshape(rows[1], TensorShape({k * u}));
    }
    xp = nn::bias_add(xp, b);
  }
  Tensor rk_zr, rk_h;  // GRU without reset_after: h multiplies [U_z U_r], r * h multiplies U_h
  if (c_.cell == Cell::gru && !c_.reset_after) {
    std::vector<Tensor> parts = split(rk, std::vector<int64_t>{2 * u, u}, 1);
    rk_zr = parts[0];
    rk_h = parts[1];
  }

  // The states: h, c (LSTM) and, with a mask, the output a masked step repeats. Undefined ones
  // stand for zeros: an unrolled first step skips their terms (same values).
  struct States {
    Tensor h, c, prev_output;
  };
  States init{initial.empty() ? Tensor() : initial[0], initial.size() > 1 ? initial[1] : Tensor(),
              Tensor()};
  std::vector<Tensor> rec_masks;  // drawn at the first step that has a state
  auto masked = [&](const Tensor& state, int64_t g) {
    if (!drop_rec) return state;
    if (rec_masks.empty())
      for (int64_t m = 0; m < n_masks; ++m)
        rec_masks.push_back(detail::dropout_mask(ones_like(state), rec_rate, c_.seed));
    return state * rec_masks[static_cast<size_t>(g)];
  };
  // h @ recurrent_kernel, each gate's block from its masked h when there are several masks.
  auto project = [&](const Tensor& state) {
    if (n_masks == 1) return matmul(masked(state, 0), rk);
    std::vector<Tensor> parts;
    for (int64_t g = 0; g < k; ++g)
      parts.push_back(matmul(masked(state, g), rk_parts[static_cast<size_t>(g)]));
    return concat(parts, 1);
  };
  const auto& act = activation_;
  const auto& ract = recurrent_activation_;
  // One timestep: its projected input xt (batch, k * units) and, with a mask, keep (batch, 1);
  // returns the states after it and its output.
  auto step = [&](const States& before, const Tensor& xt, const Tensor& keep) {
    States s = before;
    Tensor& h = s.h;
    Tensor& c = s.c;
    switch (c_.cell) {
      case Cell::simple:
        h = activate(act, h.defined() ? xt + project(h) : xt);
        break;
      case Cell::lstm:
        std::tie(h, c) = detail::lstm_gates(act, ract, h.defined() ? xt + project(h) : xt, c);
        break;
      case Cell::gru: {
        if (c_.reset_after) {
          Tensor rec = h.defined() ? project(h) : Tensor();
          if (recurrent_bias.defined()) rec = rec.defined() ? rec + recurrent_bias : recurrent_bias;
          h = detail::gru_gates_reset_after(act, ract, xt, rec, h);
          break;
        }
        Tensor rz, rr;
        if (h.defined() && n_masks == 1) {
          const std::vector<Tensor> rg = split(matmul(masked(h, 0), rk_zr), 2, 1);
          rz = rg[0];
          rr = rg[1];
        } else if (h.defined()) {
          rz = matmul(masked(h, 0), rk_parts[0]);
          rr = matmul(masked(h, 1), rk_parts[1]);
        }
        const Tensor h_in = h;
        h = detail::gru_gates_reset_before(
            act, ract, xt, rz, rr,
            [&](const Tensor& r) { return matmul(r * masked(h_in, n_masks > 1 ? 2 : 0), rk_h); },
            h);
        break;
      }
    }
    if (!keep.defined()) return std::make_pair(s, h);
    // Keras' masked step: the states stay (zeros before the first kept step), and the output
    // is the previous step's (or zeros with zero_output_for_mask).
    auto hold = [&](const Tensor& now, const Tensor& previous) {
      return where(keep, now, previous.defined() ? previous : zeros_like(now));
    };
    const Tensor out = hold(h, c_.zero_output_for_mask ? Tensor() : before.prev_output);
    h = hold(h, before.h);
    if (c.defined()) c = hold(c, before.c);
    s.prev_output = out;
    return std::make_pair(s, out);
  };
  auto finish = [&](const States& last, const Tensor& sequence) {
    std::vector<Tensor> states{last.h};
    if (c_.cell == Cell::lstm) states.push_back(last.c);
    const Tensor& last_output = mask.defined() ? last.prev_output : last.h;
    return std::make_pair(c_.return_sequences ? sequence : last_output, std::move(states));
  };

  if (as_loop) {
    // One node that runs `step` per timestep (jit/scan_loop.cpp), time-major. Its carries are
    // defined: zeros for the undefined states.
    const Tensor zero = zeros_like(squeeze(slice(xp, {0, 0, 0}, {-1, 1, u}), {1}));
    std::vector<Tensor> carries{init.h.defined() ? init.h : zero};
    if (c_.cell == Cell::lstm) carries.push_back(init.c.defined() ? init.c : zero);
    if (mask.defined()) carries.push_back(zero);
    if (drop_rec) masked(carries[0], 0);  // the recurrent masks, drawn before the loop
    std::vector<Tensor> elems{transpose(xp, {1, 0, 2})};
    if (mask.defined()) elems.push_back(expand_dims(transpose(mask, {1, 0}), 2));
    if (c_.go_backwards)
      for (Tensor& e : elems) e = reverse(e, {0});
    const size_t n_states = carries.size();
    const ::tapeflow::detail::OpsScanBody body = [&](const std::vector<Tensor>& in,
                                                     const std::vector<Tensor>& xs) {
      States s{in[0], c_.cell == Cell::lstm ? in[1] : Tensor(),
               mask.defined() ? in.back() : Tensor()};
      auto [next, out] = step(s, xs[0], mask.defined() ? xs[1] : Tensor());
      std::vector<Tensor> r{next.h};
      if (c_.cell == Cell::lstm) r.push_back(next.c);
      if (mask.defined()) r.push_back(next.prev_output);
      if (c_.return_sequences) r.push_back(out);
      return r;
    };
    if (auto r = ::tapeflow::detail::ops_scan(generic_of(c_.cell), body, carries, elems, false)) {
      States last{(*r)[0], c_.cell == Cell::lstm ? (*r)[1] : Tensor(),
                  mask.defined() ? (*r)[n_states - 1] : Tensor()};
      return finish(last, c_.return_sequences ? transpose((*r)[n_states], {1, 0, 2}) : Tensor());
    }
    TF_CHECK_ARG(steps != None, name_.c_str(),
                 "layer \"{}\" ({}) cannot run its timesteps as a loop and needs a known number "
                 "of them, got input shape {}",
                 name_, class_name_, x.shape().to_string());
  }

  std::vector<Tensor> inputs = split(xp, static_cast<int>(steps), 1);
  std::vector<Tensor> step_masks;  // (batch, 1) bool per timestep
  if (mask.defined()) step_masks = split(mask, static_cast<int>(steps), 1);
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<size_t>(steps));
  States s = init;
  for (int64_t n = 0; n < steps; ++n) {
    const int64_t t = c_.go_backwards ? steps - 1 - n : n;
    const Tensor xt = squeeze(inputs[static_cast<size_t>(t)], {1});
    auto [next, out] =
        step(s, xt, step_masks.empty() ? Tensor() : step_masks[static_cast<size_t>(t)]);
    s = std::move(next);
    outputs.push_back(std::move(out));
  }
  return finish(s, c_.return_sequences ? stack(outputs, 1) : Tensor());
}

// ---- Bidirectional ----
void check_merge_mode(const std::string& merge_mode) {
  TF_CHECK_ARG(
      merge_mode == "concat" || merge_mode == "sum" || merge_mode == "mul" || merge_mode == "ave",
      "Bidirectional",
      "merge_mode must be \"concat\", \"sum\", \"mul\" or \"ave\", got \"{}\" (Keras' "
      "None, two outputs, is not offered)",
      merge_mode);
}

// What Bidirectional reads of the layer it wraps: a SimpleRNN, LSTM or GRU here, or an RNN(cell)
// or ConvLSTM (keras/layers_rnn_cells.cpp).
using detail::layer_options::SequenceLayerInfo;
std::optional<SequenceLayerInfo> wrapped_info(const LayerImpl& l) {
  if (const auto* r = dynamic_cast<const RecurrentImpl*>(&l))
    return SequenceLayerInfo{r->config().return_sequences, r->config().go_backwards,
                             r->config().stateful, static_cast<size_t>(r->num_states())};
  return detail::layer_options::rnn_info(l);
}
SequenceLayerInfo info_of(const LayerImpl& l) {
  const auto info = wrapped_info(l);
  TF_CHECK_ARG(info.has_value(), "Bidirectional",
               "wraps a SimpleRNN, LSTM, GRU, RNN or ConvLSTM layer, got \"{}\" ({})", l.name(),
               l.class_name());
  return *info;
}
// Keras' copy of the wrapped layer: its config with another name (go_backwards flipped for the
// backward copy); the copies give zeros at masked steps when they return sequences.
std::shared_ptr<LayerImpl> copy_wrapped(const LayerImpl& l, const std::string& name, bool flip) {
  if (const auto* r = dynamic_cast<const RecurrentImpl*>(&l)) {
    RecurrentConfig c = r->config();
    c.name = name;
    if (flip) c.go_backwards = !c.go_backwards;
    c.zero_output_for_mask = c.return_sequences;
    return std::make_shared<RecurrentImpl>(std::move(c));
  }
  return detail::layer_options::rnn_copy(l, name, flip, info_of(l).return_sequences);
}
std::vector<Tensor> call_wrapped(const std::shared_ptr<LayerImpl>& l, const Tensor& x,
                                 const std::vector<Tensor>& initial, bool training,
                                 const Tensor& mask) {
  if (dynamic_cast<const RecurrentImpl*>(l.get()) != nullptr)
    return detail::call_with_state(l, x, initial, training, mask);
  return detail::layer_options::rnn_call_with_state(l, x, initial, training, mask);
}

class BidirectionalImpl final : public LayerImpl {
 public:
  BidirectionalImpl(const LayerImpl& layer, const std::string& merge_mode, std::string name)
      : LayerImpl("Bidirectional", "bidirectional", std::move(name)), merge_mode_(merge_mode) {
    check_merge_mode(merge_mode);
    (void)info_of(layer);
    const std::string base = layer.local_base_name();
    forward_ = copy_wrapped(layer, "forward_" + base, false);
    backward_ = copy_wrapped(layer, "backward_" + base, true);
    info_ = info_of(*forward_);
  }
  // Keras' from_config: the two layers as given (checked by make_bidirectional).
  BidirectionalImpl(std::shared_ptr<LayerImpl> forward, std::shared_ptr<LayerImpl> backward,
                    const std::string& merge_mode, std::string name)
      : LayerImpl("Bidirectional", "bidirectional", std::move(name)),
        merge_mode_(merge_mode),
        forward_(std::move(forward)),
        backward_(std::move(backward)),
        info_(info_of(*forward_)) {}
  const std::string& merge_mode() const { return merge_mode_; }
  std::vector<Layer> sublayers() const override { return {Layer(forward_), Layer(backward_)}; }
  const std::shared_ptr<LayerImpl>& forward() const { return forward_; }
  const std::shared_ptr<LayerImpl>& backward() const { return backward_; }
  bool supports_masking() const override { return true; }
  Tensor compute_mask(const Tensor&, const Tensor& mask) const override {
    return info_.return_sequences ? mask : Tensor();
  }

 protected:
  void build(const TensorShape& s) override {
    forward_->ensure_built(s);
    backward_->ensure_built(s);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TensorShape o = forward_->compute_output_shape(s);
    // Keras concatenates on the last axis, whatever the layer's data_format.
    if (merge_mode_ == "concat" && o[o.rank() - 1] != None) o[o.rank() - 1] *= 2;
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    forward_->validate_input(s);
  }
  Tensor call(const Tensor& x, bool training) override {
    StateRequest* request = Requests::take(this);
    std::vector<Tensor> fw_init, bw_init;
    if (request && !request->initial->empty()) {
      const auto& init = *request->initial;
      const size_t n = info_.num_states;
      TF_CHECK_ARG(init.size() == 2 * n, name_.c_str(),
                   "layer \"{}\" (Bidirectional) takes {} initial states (forward's, then "
                   "backward's), got {}",
                   name_, 2 * n, init.size());
      fw_init.assign(init.begin(), init.begin() + static_cast<std::ptrdiff_t>(n));
      bw_init.assign(init.begin() + static_cast<std::ptrdiff_t>(n), init.end());
    }
    const Tensor mask = call_mask();
    const std::vector<Tensor> fw = call_wrapped(forward_, x, fw_init, training, mask);
    const std::vector<Tensor> bw = call_wrapped(backward_, x, bw_init, training, mask);
    Tensor yb = bw[0];
    if (info_.return_sequences) yb = reverse_time(yb);
    if (request) {
      request->states.assign(fw.begin() + 1, fw.end());
      request->states.insert(request->states.end(), bw.begin() + 1, bw.end());
    }
    if (merge_mode_ == "concat") return concat({fw[0], yb}, -1);
    if (merge_mode_ == "sum") return fw[0] + yb;
    if (merge_mode_ == "mul") return fw[0] * yb;
    return (fw[0] + yb) * 0.5;
  }

 private:
  std::string merge_mode_;
  std::shared_ptr<LayerImpl> forward_, backward_;
  SequenceLayerInfo info_;
};

RecurrentConfig config_of(Cell cell, int64_t units, const layers::SimpleRNNOptions& o) {
  return RecurrentConfig{.cell = cell,
                         .units = units,
                         .activation = o.activation,
                         .use_bias = o.use_bias,
                         .kernel_initializer = o.kernel_initializer,
                         .recurrent_initializer = o.recurrent_initializer,
                         .bias_initializer = o.bias_initializer,
                         .kernel_regularizer = o.kernel_regularizer,
                         .recurrent_regularizer = o.recurrent_regularizer,
                         .bias_regularizer = o.bias_regularizer,
                         .kernel_constraint = o.kernel_constraint,
                         .recurrent_constraint = o.recurrent_constraint,
                         .bias_constraint = o.bias_constraint,
                         .return_sequences = o.return_sequences,
                         .go_backwards = o.go_backwards,
                         .stateful = o.stateful,
                         .unroll = o.unroll,
                         .zero_output_for_mask = o.zero_output_for_mask,
                         .dropout = o.dropout,
                         .recurrent_dropout = o.recurrent_dropout,
                         .seed = o.seed,
                         .name = o.name};
}
RecurrentConfig config_of(Cell cell, int64_t units, const layers::LSTMOptions& o) {
  return RecurrentConfig{.cell = cell,
                         .units = units,
                         .activation = o.activation,
                         .recurrent_activation = o.recurrent_activation,
                         .use_bias = o.use_bias,
                         .kernel_initializer = o.kernel_initializer,
                         .recurrent_initializer = o.recurrent_initializer,
                         .bias_initializer = o.bias_initializer,
                         .unit_forget_bias = o.unit_forget_bias,
                         .kernel_regularizer = o.kernel_regularizer,
                         .recurrent_regularizer = o.recurrent_regularizer,
                         .bias_regularizer = o.bias_regularizer,
                         .kernel_constraint = o.kernel_constraint,
                         .recurrent_constraint = o.recurrent_constraint,
                         .bias_constraint = o.bias_constraint,
                         .return_sequences = o.return_sequences,
                         .go_backwards = o.go_backwards,
                         .stateful = o.stateful,
                         .unroll = o.unroll,
                         .zero_output_for_mask = o.zero_output_for_mask,
                         .dropout = o.dropout,
                         .recurrent_dropout = o.recurrent_dropout,
                         .seed = o.seed,
                         .name = o.name};
}
RecurrentConfig config_of(Cell cell, int64_t units, const layers::GRUOptions& o) {
  return RecurrentConfig{.cell = cell,
                         .units = units,
                         .activation = o.activation,
                         .recurrent_activation = o.recurrent_activation,
                         .use_bias = o.use_bias,
                         .kernel_initializer = o.kernel_initializer,
                         .recurrent_initializer = o.recurrent_initializer,
                         .bias_initializer = o.bias_initializer,
                         .kernel_regularizer = o.kernel_regularizer,
                         .recurrent_regularizer = o.recurrent_regularizer,
                         .bias_regularizer = o.bias_regularizer,
                         .kernel_constraint = o.kernel_constraint,
                         .recurrent_constraint = o.recurrent_constraint,
                         .bias_constraint = o.bias_constraint,
                         .return_sequences = o.return_sequences,
                         .go_backwards = o.go_backwards,
                         .stateful = o.stateful,
                         .unroll = o.unroll,
                         .zero_output_for_mask = o.zero_output_for_mask,
                         .reset_after = o.reset_after,
                         .dropout = o.dropout,
                         .recurrent_dropout = o.recurrent_dropout,
                         .seed = o.seed,
                         .name = o.name};
}

template <class Options>
std::shared_ptr<RecurrentImpl> make_recurrent(Cell cell, int64_t units, const Options& o) {
  auto impl = std::make_shared<RecurrentImpl>(config_of(cell, units, o));
  if (!o.input_shape.empty()) impl->build_from_declared_shape(o.input_shape);
  return impl;
}

}  // namespace

namespace layers {

namespace {
RecurrentImpl& rnn(const Layer& l) {
  return impl_as<RecurrentImpl>(l, "RecurrentLayer");
}
}  // namespace

int64_t RecurrentLayer::units() const {
  return rnn(*this).config().units;
}
bool RecurrentLayer::return_sequences() const {
  return rnn(*this).config().return_sequences;
}
bool RecurrentLayer::go_backwards() const {
  return rnn(*this).config().go_backwards;
}
int RecurrentLayer::num_states() const {
  return rnn(*this).num_states();
}
Variable RecurrentLayer::kernel() const {
  return impl().weight("kernel");
}
Variable RecurrentLayer::recurrent_kernel() const {
  return impl().weight("recurrent_kernel");
}
Variable RecurrentLayer::bias() const {
  return impl().weight("bias");
}
bool RecurrentLayer::stateful() const {
  return rnn(*this).config().stateful;
}
std::vector<Variable> RecurrentLayer::states() const {
  return rnn(*this).state_variables();
}
void RecurrentLayer::reset_states(const std::vector<Tensor>& values) const {
  rnn(*this).reset_states_to(values);
}

std::vector<Tensor> RecurrentLayer::call_with_state(const Tensor& x,
                                                    const std::vector<Tensor>& initial_state,
                                                    bool training, const Tensor& mask) const {
  (void)rnn(*this);
  return detail::call_with_state(impl_, x, initial_state, training, mask);
}

}  // namespace layers

std::vector<Tensor> detail::call_with_state(const std::shared_ptr<LayerImpl>& impl, const Tensor& x,
                                            const std::vector<Tensor>& initial_state, bool training,
                                            const Tensor& mask) {
  StateRequest request{
      .layer = impl.get(), .initial = &initial_state, .states = {}, .served = false};
  Tensor output;
  {
    Requests::Scope scope(&request);
    output =
        mask.defined() ? impl->invoke_masked(x, mask, training).output : impl->invoke(x, training);
  }
  TF_CHECK_T(InternalError, request.served, impl->name().c_str(),
             "layer \"{}\" returned without serving its state request", impl->name());
  std::vector<Tensor> out{output};
  out.insert(out.end(), request.states.begin(), request.states.end());
  return out;
}

std::vector<KerasTensor> detail::call_with_state_symbolic(
    const Layer& layer, const KerasTensor& x, const std::vector<KerasTensor>& initial_state,
    bool return_state, std::optional<bool> training) {
  std::vector<KerasTensor> inputs{x};
  inputs.insert(inputs.end(), initial_state.begin(), initial_state.end());
  check_defined(layer, inputs);
  const std::shared_ptr<LayerImpl> impl = layer.impl_ptr();
  const std::string n = impl->name();
  // The states' sizes: (batch, units) each, the backward layer's after the forward's.
  const LayerImpl* inner = impl.get();
  int copies = 1;
  if (const auto* b = dynamic_cast<const BidirectionalImpl*>(inner)) {
    inner = b->forward().get();
    copies = 2;
  }
  const auto* r = dynamic_cast<const RecurrentImpl*>(inner);
  TF_CHECK_ARG(r != nullptr, n.c_str(),
               "layer \"{}\" ({}): in a functional model, initial states and returned states "
               "are taken by SimpleRNN, LSTM, GRU and a Bidirectional of one (call_with_state "
               "on tensors, in a subclassed model, takes the others)",
               n, impl->class_name());
  const int64_t units = r->config().units;
  const size_t num_states = static_cast<size_t>(r->num_states() * copies);
  const bool return_sequences = r->config().return_sequences;
  TF_CHECK_ARG(initial_state.empty() || initial_state.size() == num_states, n.c_str(),
               "layer \"{}\" ({}) has {} states, it was given {} initial states", n,
               impl->class_name(), num_states, initial_state.size());
  for (size_t i = 0; i < initial_state.size(); ++i) {
    const TensorShape& s = initial_state[i].shape();
    TF_CHECK_ARG(s.rank() == 2 && (s[1] == None || s[1] == units), n.c_str(),
                 "layer \"{}\" ({}): initial state {} must be (batch, {}), got shape {}", n,
                 impl->class_name(), i, units, s.to_string());
  }
  impl->ensure_built(x.shape());
  impl->validate_input(x.shape());
  auto how = std::make_shared<MultiCall>();
  how->kind = MultiCall::Kind::recurrent;
  how->return_state = return_state;
  how->shapes = [impl, units, num_states, return_state](const std::vector<TensorShape>& in) {
    std::vector<TensorShape> out{impl->compute_output_shape(in[0])};
    if (return_state)
      for (size_t i = 0; i < num_states; ++i) out.push_back(TensorShape({in[0][0], units}));
    return out;
  };
  how->run = [impl, return_state, return_sequences](const std::vector<Tensor>& in,
                                                    const std::vector<Tensor>& masks, bool train) {
    const std::vector<Tensor> initial(in.begin() + 1, in.end());
    std::vector<Tensor> r = call_with_state(impl, in[0], initial, train, masks[0]);
    // Keras' compute_mask: the input's mask for a sequence output, none for the states.
    std::vector<MaskedTensor> out{{r[0], return_sequences ? masks[0] : Tensor()}};
    if (return_state)
      for (size_t i = 1; i < r.size(); ++i) out.push_back({r[i], Tensor()});
    return out;
  };
  return call_multi(layer, inputs, std::move(how), training);
}

namespace layers {

std::vector<KerasTensor> RecurrentLayer::call_with_state(
    const KerasTensor& x, const std::vector<KerasTensor>& initial_state,
    std::optional<bool> training) const {
  return detail::call_with_state_symbolic(*this, x, initial_state, true, training);
}
KerasTensor RecurrentLayer::operator()(const KerasTensor& x,
                                       const std::vector<KerasTensor>& initial_state,
                                       std::optional<bool> training) const {
  if (initial_state.empty()) return Layer::operator()(x, training);
  return detail::call_with_state_symbolic(*this, x, initial_state, false, training)[0];
}
std::vector<KerasTensor> Bidirectional::call_with_state(
    const KerasTensor& x, const std::vector<KerasTensor>& initial_state,
    std::optional<bool> training) const {
  return detail::call_with_state_symbolic(*this, x, initial_state, true, training);
}
KerasTensor Bidirectional::operator()(const KerasTensor& x,
                                      const std::vector<KerasTensor>& initial_state,
                                      std::optional<bool> training) const {
  if (initial_state.empty()) return Layer::operator()(x, training);
  return detail::call_with_state_symbolic(*this, x, initial_state, false, training)[0];
}

SimpleRNN::SimpleRNN(int64_t units, SimpleRNNOptions options)
    : RecurrentLayer(make_recurrent(Cell::simple, units, options)) {}
LSTM::LSTM(int64_t units, LSTMOptions options)
    : RecurrentLayer(make_recurrent(Cell::lstm, units, options)) {}
GRU::GRU(int64_t units, GRUOptions options)
    : RecurrentLayer(make_recurrent(Cell::gru, units, options)) {}

namespace {
// Keras passes the wrapped layer's input_shape on: the wrapper builds at once.
void build_as_declared(Layer& wrapper, const Layer& layer) {
  if (const auto& declared = layer.impl().declared_input_shape()) {
    const std::vector<int64_t> dims = declared->dims();
    wrapper.impl().build_from_declared_shape(std::vector<int64_t>(dims.begin() + 1, dims.end()));
  }
}
}  // namespace

Bidirectional::Bidirectional(const RecurrentLayer& layer, std::string merge_mode, std::string name)
    : Layer(std::make_shared<BidirectionalImpl>(rnn(layer), merge_mode, std::move(name))) {
  build_as_declared(*this, layer);
}
Bidirectional::Bidirectional(const RNN& layer, std::string merge_mode, std::string name)
    : Layer(std::make_shared<BidirectionalImpl>(layer.impl(), merge_mode, std::move(name))) {
  build_as_declared(*this, layer);
}
Bidirectional::Bidirectional(const Layer& layer, const Layer& backward_layer,
                             std::string merge_mode, std::string name)
    : Layer([&] {
        TF_CHECK_ARG(layer.defined() && backward_layer.defined(), "Bidirectional",
                     "layer and backward_layer must be layers, got an empty handle");
        return detail::layer_options::make_bidirectional(layer, backward_layer, merge_mode, name)
            .impl_ptr();
      }()) {
  build_as_declared(*this, layer);
}
Layer Bidirectional::forward() const {
  return Layer(impl_as<BidirectionalImpl>(*this, "Bidirectional").forward());
}
Layer Bidirectional::backward() const {
  return Layer(impl_as<BidirectionalImpl>(*this, "Bidirectional").backward());
}
RecurrentLayer Bidirectional::forward_layer() const {
  const Layer f = forward();
  (void)rnn(f);  // a SimpleRNN, LSTM or GRU (else forward() has the RNN)
  return RecurrentLayer(f.impl_ptr());
}
RecurrentLayer Bidirectional::backward_layer() const {
  const Layer b = backward();
  (void)rnn(b);
  return RecurrentLayer(b.impl_ptr());
}
void Bidirectional::reset_state() const {
  impl_as<BidirectionalImpl>(*this, "Bidirectional").reset_states();
}
std::vector<Tensor> Bidirectional::call_with_state(const Tensor& x,
                                                   const std::vector<Tensor>& initial_state,
                                                   bool training, const Tensor& mask) const {
  (void)impl_as<BidirectionalImpl>(*this, "Bidirectional");
  return detail::call_with_state(impl_, x, initial_state, training, mask);
}

}  // namespace layers

namespace detail::layer_options {

std::optional<RecurrentConfig> recurrent(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RecurrentImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  const auto& c = p->config();
  return RecurrentConfig{.class_name = class_of(c.cell),
                         .units = c.units,
                         .activation = c.activation,
                         .recurrent_activation = c.recurrent_activation,
                         .use_bias = c.use_bias,
                         .kernel_initializer = c.kernel_initializer,
                         .recurrent_initializer = c.recurrent_initializer,
                         .bias_initializer = c.bias_initializer,
                         .unit_forget_bias = c.unit_forget_bias,
                         .kernel_regularizer = c.kernel_regularizer,
                         .recurrent_regularizer = c.recurrent_regularizer,
                         .bias_regularizer = c.bias_regularizer,
                         .kernel_constraint = c.kernel_constraint,
                         .recurrent_constraint = c.recurrent_constraint,
                         .bias_constraint = c.bias_constraint,
                         .return_sequences = c.return_sequences,
                         .go_backwards = c.go_backwards,
                         .stateful = c.stateful,
                         .unroll = c.unroll,
                         .zero_output_for_mask = c.zero_output_for_mask,
                         .reset_after = c.reset_after,
                         .dropout = c.dropout,
                         .recurrent_dropout = c.recurrent_dropout,
                         .seed = c.seed};
}

std::optional<BidirectionalConfig> bidirectional(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const BidirectionalImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return BidirectionalConfig{p->merge_mode(), Layer(p->forward()), Layer(p->backward())};
}

Layer make_bidirectional(const Layer& forward, const Layer& backward, const std::string& merge_mode,
                         const std::string& name) {
  const auto fi = wrapped_info(forward.impl());
  TF_CHECK_ARG(fi.has_value(), "Bidirectional",
               "wraps a SimpleRNN, LSTM, GRU, RNN or ConvLSTM layer, got \"{}\" ({})",
               forward.name(), forward.class_name());
  if (!backward.defined())
    return Layer(std::make_shared<BidirectionalImpl>(forward.impl(), merge_mode, name));
  check_merge_mode(merge_mode);
  const auto bi = wrapped_info(backward.impl());
  TF_CHECK_ARG(bi.has_value(), "Bidirectional",
               "takes a SimpleRNN, LSTM, GRU, RNN or ConvLSTM backward layer, got \"{}\" ({})",
               backward.name(), backward.class_name());
  auto units = [](const Layer& l) -> int64_t {
    const auto* r = dynamic_cast<const RecurrentImpl*>(&l.impl());
    return r ? r->config().units : 0;
  };
  TF_CHECK_ARG(forward.class_name() == backward.class_name() && units(forward) == units(backward) &&
                   fi->return_sequences == bi->return_sequences && fi->stateful == bi->stateful &&
                   fi->go_backwards != bi->go_backwards,
               "Bidirectional",
               "the backward layer \"{}\" ({}, units {}, return_sequences {}, stateful {}, "
               "go_backwards {}) must be of the forward layer \"{}\"'s class with its units, "
               "return_sequences and stateful ({}, {}, {}, {}) and the opposite go_backwards ({})",
               backward.name(), backward.class_name(), units(backward), bi->return_sequences,
               bi->stateful, bi->go_backwards, forward.name(), forward.class_name(), units(forward),
               fi->return_sequences, fi->stateful, fi->go_backwards);
  TF_CHECK_ARG(!forward.impl().built() && !backward.impl().built(), "Bidirectional",
               "wraps new layers only; layer \"{}\" or \"{}\" is already built", forward.name(),
               backward.name());
  return Layer(std::make_shared<BidirectionalImpl>(forward.impl_ptr(), backward.impl_ptr(),
                                                   merge_mode, name));
}

}  // namespace detail::layer_options

}  // namespace tapeflow::keras
