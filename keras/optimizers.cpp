#include "keras/optimizers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "autograd/tape.h"
#include "autograd/training_ops.h"
#include "core/check.h"
#include "core/context.h"
#include "core/log.h"
#include "distribute/replica_context.h"
#include "keras/compile_access.h"
#include "keras/constraints.h"
#include "keras/mixed_precision.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::optimizers {

namespace {

// A constant learning rate is stored as float32: it must be one (1e39 became inf and the first
// step made the weights inf), finite and not negative.
void check_learning_rate(const char* op, double v) {
  TF_CHECK_ARG(v >= 0 && v <= std::numeric_limits<float>::max(), op,
               "learning_rate must be >= 0 and a finite float32, got {}", v);
}

// Keras' ops.cast(python_float, dtype): the float becomes a float32 tensor first, so a float64
// update sees float32(0.9), not 0.9 (Keras' Constant initializer rounds the same way). Python
// floats used directly in arithmetic with a tensor keep their double value (Tensor(x) here).
Tensor keras_cast(double v, DType d) {
  return cast(constant(Tensor(v), float32), d);
}
}  // namespace

namespace detail {

// Creating variables in the middle of a traced tf::function (slots built on the first traced
// step): the trace and the tapes pause, so the variables are made eagerly, as TF's init_scope.
class InitScope {
 public:
  InitScope() : saved_(std::exchange(tapeflow::detail::thread_context().trace, nullptr)) {}
  ~InitScope() { tapeflow::detail::thread_context().trace = saved_; }
  InitScope(const InitScope&) = delete;
  InitScope& operator=(const InitScope&) = delete;

 private:
  tapeflow::detail::TraceObserver* saved_;
  tapeflow::detail::PauseTapes pause_;
};

// "dense/kernel:0" -> "dense/kernel".
std::string base_name(const std::string& name) {
  const auto colon = name.rfind(':');
  if (colon == std::string::npos || colon + 1 == name.size()) return name;
  for (size_t i = colon + 1; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return name;
  return name.substr(0, colon);
}

struct OptimizerImpl {
  std::string name;
  OptimizerOptions options;
  std::optional<LearningRateSchedule> schedule;
  Variable lr_var;  // constant learning rates only
  Variable iterations;

  std::mutex mu;  // guards everything below
  // The slots of one variable. The optimizer does not keep the variable alive (a model
  // destroyed while the optimizer lives frees its weights): an entry whose owner expired is
  // dropped with its slots when the next variable gets slots.
  struct Entry {
    std::string prefix;                    // "dense/kernel"
    std::weak_ptr<Variable::State> owner;  // the variable these slots belong to
    std::vector<Variable> slots;
  };
  std::unordered_map<const void*, size_t> index;  // variable handle -> entries_
  std::vector<Entry> entries;
  std::set<std::string> prefixes;
  std::map<std::string, Tensor> deferred;  // by "<prefix>/<slot>" (older checkpoints)
  // By the variable the slots belong to, then slot name (checkpoints that key slots by the
  // variable's path in the checkpoint, tf::train::Checkpoint).
  struct Deferred {
    std::weak_ptr<Variable::State> owner;
    std::map<std::string, Tensor> slots;
  };
  std::unordered_map<const void*, Deferred> deferred_by_variable;

  // Whether `w` still refers to the live variable with this handle (an expired one's address
  // may since belong to another variable).
  static bool is_owner(const std::weak_ptr<Variable::State>& w, const Variable& var) {
    const auto alive = w.lock();
    return alive && static_cast<const void*>(alive.get()) == var.handle_id();
  }
  // Drops the entries (and deferred slot values) of variables that no longer exist. Caller
  // holds mu.
  void drop_expired() {
    for (auto it = deferred_by_variable.begin(); it != deferred_by_variable.end();)
      it = it->second.owner.expired() ? deferred_by_variable.erase(it) : std::next(it);
    const bool any = std::any_of(entries.begin(), entries.end(),
                                 [](const Entry& e) { return e.owner.expired(); });
    if (!any) return;
    std::vector<Entry> kept;
    index.clear();
    for (Entry& e : entries) {
      if (auto owner = e.owner.lock()) {
        index.emplace(owner.get(), kept.size());
        kept.push_back(std::move(e));
      } else {
        prefixes.erase(e.prefix);
      }
    }
    entries = std::move(kept);
  }

  virtual ~OptimizerImpl() = default;
  virtual std::vector<std::string> slot_names() const = 0;
  // The value every element of slot `s` starts from (Adagrad's and Ftrl's accumulators: not 0).
  virtual double slot_initial_value(size_t /*s*/) const { return 0.0; }
  // Whether slot `s` starts as a copy of its variable (ScheduleFreeAdamW's "momentum", z).
  virtual bool slot_copies_variable(size_t /*s*/) const { return false; }
  // The shape of slot `s` of a variable shaped `var` (the variable's, but Adafactor's factored
  // second moments).
  virtual TensorShape slot_shape(size_t /*s*/, const Variable& var) const { return var.shape(); }
  // The decoupled weight decay of `var` (Muon's differs by variable).
  virtual std::optional<double> weight_decay_for(const Variable& /*var*/) const {
    return options.weight_decay;
  }
  // Optimizer-level variables besides iterations and learning_rate, made by the constructor
  // (so mirrored under a strategy's scope and restored by name): Nadam's "u_product". They are
  // float64, which holds exactly the values of the dtype advance() computes them in.
  std::vector<std::pair<std::string, Variable>> step_variables;
  // Their new values for the update about to run, from the values read before it, `it`
  // (iterations before the update) and the dtype of the first variable updated (Keras keeps
  // them in the dtype of the first variable it was built with).
  virtual std::vector<Tensor> advance(const std::vector<Tensor>& /*old*/, const Tensor& /*it*/,
                                      DType /*first*/) const {
    return {};
  }
  // Scalars shared by every variable of one dtype and device (Adam's bias-corrected rate):
  // computed once per apply_gradients rather than once per variable.
  struct Scalars {
    Tensor lr;                  // the learning rate in the variables' dtype
    Tensor step;                // iterations + 1, same dtype
    Tensor alpha;               // optimizer-specific
    std::vector<Tensor> more;   // optimizer-specific
    std::vector<Tensor> state;  // advance()'s new values (float64)
  };
  virtual void prepare(Scalars&) const {}
  // One variable's update.
  virtual void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
                      const Scalars& k) const = 0;

  OptimizerImpl(std::string default_name, const LearningRate& lr, OptimizerOptions opts) {
    options = std::move(opts);
    name = options.name.empty() ? std::move(default_name) : options.name;
    const int clips = options.clipnorm.has_value() + options.clipvalue.has_value() +
                      options.global_clipnorm.has_value();
    TF_CHECK_ARG(clips <= 1, name.c_str(),
                 "only one of clipnorm, clipvalue and global_clipnorm can be set");
    // Keras' checks and messages.
    if (const auto& g = options.gradient_accumulation_steps)
      TF_CHECK_ARG(*g >= 2, name.c_str(),
                   "`gradient_accumulation_steps` must be an integer >= 2. Received: "
                   "gradient_accumulation_steps={}",
                   *g);
    if (options.use_ema) {
      TF_CHECK_ARG(options.ema_momentum >= 0 && options.ema_momentum <= 1, name.c_str(),
                   "`ema_momentum` must be in the range [0, 1]. Received: ema_momentum={}",
                   options.ema_momentum);
      if (const auto& f = options.ema_overwrite_frequency)
        TF_CHECK_ARG(*f >= 1, name.c_str(),
                     "`ema_overwrite_frequency` must be an integer >= 1 or None. Received: "
                     "ema_overwrite_frequency={}",
                     *f);
    }
    if (const auto& f = options.loss_scale_factor)
      TF_CHECK_ARG(std::isfinite(*f) && *f != 0, name.c_str(),
                   "loss_scale_factor must be a finite, non-zero number, got {}", *f);
    // Created where the optimizer is made: mirrored under a strategy's scope, as TF.
    iterations = Variable(constant(Tensor(int64_t{0}), int64), name + "/iterations", false);
    if (lr.is_schedule()) {
      schedule = lr.schedule();
    } else {
      check_learning_rate(name.c_str(), lr.value());
      lr_var = Variable(constant(Tensor(lr.value()), float32), name + "/learning_rate", false);
    }
  }

  // The float32 learning rate for the update about to run (`iterations_value`: the effective
  // count, see steps_taken).
  Tensor current_lr(const Tensor& iterations_value) const {
    if (schedule) return cast((*schedule)(iterations_value), float32);
    return lr_var.value();
  }
  // Keras' optimizer.iterations: the updates taken, `raw` (the calls counted by the iterations
  // variable) divided by gradient_accumulation_steps.
  Tensor steps_taken(const Tensor& raw) const {
    if (!options.gradient_accumulation_steps) return raw;
    return floordiv(raw, constant(Tensor(*options.gradient_accumulation_steps), int64));
  }
  // slot_names() and the slots of the base optimizer's options after them: "average"
  // (use_ema), "gradient_accumulator" (gradient_accumulation_steps), Keras' names.
  std::vector<std::string> all_slot_names() const {
    std::vector<std::string> n = slot_names();
    if (options.use_ema) n.emplace_back("average");
    if (options.gradient_accumulation_steps) n.emplace_back("gradient_accumulator");
    return n;
  }
  std::optional<size_t> average_slot() const {
    if (!options.use_ema) return std::nullopt;
    return slot_names().size();
  }
  std::optional<size_t> accumulator_slot() const {
    if (!options.gradient_accumulation_steps) return std::nullopt;
    return slot_names().size() + (options.use_ema ? 1 : 0);
  }

  // Makes the slots of `var` (caller holds mu): zeros shaped as var, on var's device, mirrored
  // over the same devices when var is mirrored.
  void build_one(const Variable& var) {
    if (auto it = index.find(var.handle_id());
        it != index.end() && is_owner(entries[it->second].owner, var))
      return;
    drop_expired();
    std::string prefix = base_name(var.name());
    if (prefixes.count(prefix)) {
      int k = 1;
      while (prefixes.count(fmt::format("{}_{}", prefix, k))) ++k;
      prefix = fmt::format("{}_{}", prefix, k);
    }
    // Every checkpoint value is found and checked before anything changes: a bad one raises
    // here again at the next call instead of being dropped (and the prefix taken) by this one.
    const std::vector<std::string> names = all_slot_names();
    const size_t own = slot_names().size();  // the rest: zeros shaped as the variable
    auto by_variable = deferred_by_variable.find(var.handle_id());
    if (by_variable != deferred_by_variable.end() && !is_owner(by_variable->second.owner, var))
      by_variable = deferred_by_variable.end();
    std::vector<std::optional<Tensor>> restored(names.size());
    for (size_t s = 0; s < names.size(); ++s) {
      const std::string key = prefix + "/" + names[s];
      if (by_variable != deferred_by_variable.end()) {
        if (auto it = by_variable->second.slots.find(names[s]);
            it != by_variable->second.slots.end())
          restored[s] = it->second;
      } else if (auto it = deferred.find(key); it != deferred.end()) {
        restored[s] = it->second;
      }
      if (!restored[s]) continue;
      const Tensor& t = *restored[s];
      const TensorShape want = s < own ? slot_shape(s, var) : var.shape();
      TF_CHECK_ARG(t.shape() == want && t.dtype() == var.dtype(), name.c_str(),
                   "the checkpoint value of slot '{}' has shape {} and dtype {}, the slot of "
                   "variable '{}' has shape {} and dtype {}",
                   key, t.shape().to_string(), dtype_name(t.dtype()), var.name(), want.to_string(),
                   dtype_name(var.dtype()));
    }
    Entry e;
    e.owner = var.weak_state();
    e.prefix = prefix;
    {
      InitScope init;
      tapeflow::detail::ReplicaComponentScope cross_replica(-1);
      std::vector<Device> devices;
      if (var.is_mirrored())
        for (const Variable& c : var.components()) devices.push_back(c.placement());
      tapeflow::detail::MirrorVariablesScope mirror(devices);
      DeviceScope place(var.is_mirrored() ? devices.front() : var.placement());
      for (size_t s = 0; s < names.size(); ++s)
        e.slots.emplace_back(
            restored[s] ? *restored[s]
            : s >= own  ? zeros(var.shape(), var.dtype())
            : slot_copies_variable(s)
                ? var.read_value()
                : fill(slot_shape(s, var), keras_cast(slot_initial_value(s), var.dtype())),
            name + "/" + prefix + "/" + names[s], false);
    }
    // The slots exist: now take the name and drop the values they consumed.
    prefixes.insert(prefix);
    for (size_t s = 0; s < names.size(); ++s) {
      if (by_variable != deferred_by_variable.end())
        by_variable->second.slots.erase(names[s]);
      else if (restored[s])
        deferred.erase(prefix + "/" + names[s]);
    }
    if (by_variable != deferred_by_variable.end() && by_variable->second.slots.empty())
      deferred_by_variable.erase(by_variable);
    index.emplace(var.handle_id(), entries.size());
    entries.push_back(std::move(e));
  }
};

}  // namespace detail

namespace {

using detail::OptimizerImpl;

// Keras 3's clip_by_norm: g * clipnorm / max(||g||, clipnorm), safe at ||g|| = 0.
Tensor clip_by_norm(const Tensor& g, double clipnorm) {
  Tensor l2sum = reduce_sum(square(g));
  Tensor pred = greater(l2sum, Tensor(0.0));
  Tensor safe = where(pred, l2sum, constant(Tensor(1.0), l2sum.dtype()));
  Tensor l2norm = where(pred, sqrt(safe), l2sum);
  return divide(multiply(g, Tensor(clipnorm)), maximum(l2norm, Tensor(clipnorm)));
}

// Keras 3's clip_by_global_norm; a NaN or infinite norm makes every gradient NaN.
void clip_by_global_norm(std::vector<Tensor>& grads, double clip) {
  DType acc = float32;
  for (const Tensor& g : grads)
    if (g.dtype() == float64) acc = float64;
  std::vector<Tensor> squares;
  for (const Tensor& g : grads) squares.push_back(cast(reduce_sum(square(g)), acc));
  Tensor norm = sqrt(reduce_sum(stack(squares)));
  Tensor finite = multiply(Tensor(clip), minimum(divide(Tensor(1.0), norm), Tensor(1.0 / clip)));
  Tensor scale = add(finite, subtract(norm, norm));
  for (Tensor& g : grads) g = multiply(g, cast(scale, g.dtype()));
}

std::string names_of(const std::vector<Variable>& vars) {
  std::vector<std::string> names;
  for (const Variable& v : vars) names.push_back(fmt::format("'{}'", v.name()));
  return fmt::format("[{}]", fmt::join(names, ", "));
}

OptimizerImpl& checked(const std::shared_ptr<OptimizerImpl>& p) {
  TF_CHECK_T(FailedPreconditionError, p != nullptr, "Optimizer",
             "the optimizer handle is empty (default-constructed)");
  return *p;
}

// ---- the four optimizers ----

struct SGDImpl final : OptimizerImpl {
  double momentum;
  bool nesterov;
  SGDImpl(const LearningRate& lr, double m, bool n, OptimizerOptions o)
      : OptimizerImpl("SGD", lr, std::move(o)), momentum(m), nesterov(n) {}
  std::vector<std::string> slot_names() const override {
    if (momentum != 0.0) return {"m"};
    return {};
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    const Tensor& lr = k.lr;
    if (momentum == 0.0) {
      var.assign_sub(multiply(g, lr));
      return;
    }
    Variable& m = slots[0];
    const Tensor mom = keras_cast(momentum, var.dtype());  // Keras: ops.cast(momentum, dtype)
    m.assign(subtract(multiply(m.value(), mom), multiply(g, lr)));
    if (nesterov)
      var.assign_add(subtract(multiply(m.value(), mom), multiply(g, lr)));
    else
      var.assign_add(m.value());
  }
};

struct AdamImpl final : OptimizerImpl {
  std::string class_name;  // "Adam" or "AdamW"
  double beta_1, beta_2, epsilon;
  bool amsgrad;
  AdamImpl(const char* cls, const LearningRate& lr, double b1, double b2, double eps, bool ams,
           OptimizerOptions o)
      : OptimizerImpl(cls, lr, std::move(o)),
        class_name(cls),
        beta_1(b1),
        beta_2(b2),
        epsilon(eps),
        amsgrad(ams) {
    TF_CHECK_ARG(epsilon >= 0, name.c_str(), "epsilon must be >= 0, got {}", epsilon);
    // beta = 1 divides by zero in the bias correction 1 - beta^t; a beta outside [0, 1) makes
    // the moving averages diverge.
    TF_CHECK_ARG(beta_1 >= 0 && beta_1 < 1, name.c_str(), "beta_1 must be in [0, 1), got {}",
                 beta_1);
    TF_CHECK_ARG(beta_2 >= 0 && beta_2 < 1, name.c_str(), "beta_2 must be in [0, 1), got {}",
                 beta_2);
  }
  std::vector<std::string> slot_names() const override {
    if (amsgrad) return {"m", "v", "vhat"};
    return {"m", "v"};
  }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    Tensor beta_1_power = pow(keras_cast(beta_1, d), k.step);
    Tensor beta_2_power = pow(keras_cast(beta_2, d), k.step);
    k.alpha = divide(multiply(k.lr, sqrt(subtract(Tensor(1.0), beta_2_power))),
                     subtract(Tensor(1.0), beta_1_power));
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    const Tensor& alpha = k.alpha;
    Variable& m = slots[0];
    Variable& v = slots[1];
    // One fused loop where it applies (TF's ResourceApplyAdam; bit-identical to the ops below).
    if (!amsgrad && tapeflow::detail::apply_adam(var, m, v, g, alpha, beta_1, beta_2, epsilon))
      return;
    m.assign_add(multiply(subtract(g, m.value()), Tensor(1.0 - beta_1)));
    v.assign_add(multiply(subtract(square(g), v.value()), Tensor(1.0 - beta_2)));
    Tensor v_now = v.value();
    if (amsgrad) {
      Variable& vhat = slots[2];
      vhat.assign(maximum(vhat.value(), v_now));
      v_now = vhat.value();
    }
    var.assign_sub(divide(multiply(m.value(), alpha), add(sqrt(v_now), Tensor(epsilon))));
  }
};

struct RMSpropImpl final : OptimizerImpl {
  double rho, momentum, epsilon;
  bool centered;
  RMSpropImpl(const LearningRate& lr, double r, double m, double eps, bool c, OptimizerOptions o)
      : OptimizerImpl("RMSprop", lr, std::move(o)), rho(r), momentum(m), epsilon(eps),
        centered(c) {
    TF_CHECK_ARG(rho >= 0 && rho < 1, name.c_str(), "rho must be in [0, 1), got {}", rho);
    TF_CHECK_ARG(momentum >= 0 && momentum <= 1, name.c_str(),
                 "momentum must be in [0, 1], got {}", momentum);
    TF_CHECK_ARG(epsilon >= 0, name.c_str(), "epsilon must be >= 0, got {}", epsilon);
  }
  std::vector<std::string> slot_names() const override {
    std::vector<std::string> s = {"velocity"};
    if (momentum > 0) s.push_back("momentum");
    if (centered) s.push_back("average_gradient");
    return s;
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    const Tensor& lr = k.lr;
    Variable& velocity = slots[0];
    velocity.assign(add(multiply(Tensor(rho), velocity.value()),
                        multiply(Tensor(1.0 - rho), square(g))));
    Tensor denominator;
    if (centered) {
      Variable& ag = slots[momentum > 0 ? 2 : 1];
      ag.assign(add(multiply(Tensor(rho), ag.value()), multiply(Tensor(1.0 - rho), g)));
      denominator = add(subtract(velocity.value(), square(ag.value())), Tensor(epsilon));
    } else {
      denominator = add(velocity.value(), Tensor(epsilon));
    }
    Tensor increment = divide(multiply(lr, g), sqrt(denominator));
    if (momentum > 0) {
      Variable& m = slots[1];
      m.assign(add(multiply(Tensor(momentum), m.value()), increment));
      var.assign_sub(m.value());
    } else {
      var.assign_sub(increment);
    }
  }
};

// The rest of Keras 3's optimizers. Each writes Keras' update op by op, in its order: a Python
// float in Keras becomes a weak scalar here (Tensor(x), taking the variable's dtype), and a
// hyperparameter Keras casts to the variable's dtype first is keras_cast(x, dtype), so that
// expressions such as 1 - beta_1 round as Keras rounds them in float32.

void check_range(const std::string& op, const char* what, double v, double lo, double hi,
                 bool lo_open, bool hi_open) {
  const bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  TF_CHECK_ARG(ok, op.c_str(), "{} must be in {}{}, {}{}, got {}", what, lo_open ? "(" : "[", lo,
               hi, hi_open ? ")" : "]", v);
}
void check_epsilon(const std::string& op, double epsilon) {
  TF_CHECK_ARG(epsilon >= 0 && std::isfinite(epsilon), op.c_str(),
               "epsilon must be finite and >= 0, got {}", epsilon);
}

// accumulator += g^2; var -= lr * g / sqrt(accumulator + epsilon). Slot "accumulator", starting
// at initial_accumulator_value.
struct AdagradImpl final : OptimizerImpl {
  double initial, epsilon;
  AdagradImpl(const LearningRate& lr, double init, double eps, OptimizerOptions o)
      : OptimizerImpl("Adagrad", lr, std::move(o)), initial(init), epsilon(eps) {
    TF_CHECK_ARG(initial >= 0 && std::isfinite(initial), name.c_str(),
                 "initial_accumulator_value must be finite and >= 0, got {}", initial);
    check_epsilon(name, epsilon);
  }
  std::vector<std::string> slot_names() const override { return {"accumulator"}; }
  double slot_initial_value(size_t) const override { return initial; }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& acc = slots[0];
    acc.assign_add(square(g));
    var.assign_sub(divide(multiply(k.lr, g), sqrt(add(acc.value(), Tensor(epsilon)))));
  }
};

// accumulated_grad = rho * ag + (1 - rho) * g^2;
// delta = -sqrt(accumulated_delta_var + eps) * g / sqrt(ag + eps);
// accumulated_delta_var = rho * adv + (1 - rho) * delta^2; var += lr * delta.
struct AdadeltaImpl final : OptimizerImpl {
  double rho, epsilon;
  AdadeltaImpl(const LearningRate& lr, double r, double eps, OptimizerOptions o)
      : OptimizerImpl("Adadelta", lr, std::move(o)), rho(r), epsilon(eps) {
    check_range(name, "rho", rho, 0, 1, false, false);
    check_epsilon(name, epsilon);
  }
  std::vector<std::string> slot_names() const override {
    return {"accumulated_grad", "accumulated_delta_var"};
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& ag = slots[0];
    Variable& adv = slots[1];
    auto rms = [&](const Tensor& x) { return sqrt(add(x, Tensor(epsilon))); };
    ag.assign(add(multiply(Tensor(rho), ag.value()), multiply(Tensor(1.0 - rho), square(g))));
    Tensor delta = negative(divide(multiply(rms(adv.value()), g), rms(ag.value())));
    adv.assign(add(multiply(Tensor(rho), adv.value()), multiply(Tensor(1.0 - rho), square(delta))));
    var.assign_add(multiply(k.lr, delta));
  }
};

// m += (g - m) * (1 - beta_1); u = max(beta_2 * u, |g|);
// var -= lr * m / ((1 - beta_1^t) * (u + epsilon)). Slots "momentum", "norm".
struct AdamaxImpl final : OptimizerImpl {
  double beta_1, beta_2, epsilon;
  AdamaxImpl(const LearningRate& lr, double b1, double b2, double eps, OptimizerOptions o)
      : OptimizerImpl("Adamax", lr, std::move(o)), beta_1(b1), beta_2(b2), epsilon(eps) {
    // beta_1 = 1 divides by zero in 1 - beta_1^t; beta_2 = 1 keeps the largest |g| seen.
    check_range(name, "beta_1", beta_1, 0, 1, false, true);
    check_range(name, "beta_2", beta_2, 0, 1, false, false);
    check_epsilon(name, epsilon);
  }
  std::vector<std::string> slot_names() const override { return {"momentum", "norm"}; }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    k.alpha = subtract(Tensor(1.0), pow(keras_cast(beta_1, d), k.step));  // 1 - beta_1^t
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& m = slots[0];
    Variable& u = slots[1];
    m.assign_add(multiply(subtract(g, m.value()), Tensor(1.0 - beta_1)));
    u.assign(maximum(multiply(Tensor(beta_2), u.value()), abs(g)));
    var.assign_sub(
        divide(multiply(k.lr, m.value()), multiply(k.alpha, add(u.value(), Tensor(epsilon)))));
  }
};

// Adam with Nesterov momentum and Dozat's momentum schedule u_t = beta_1 (1 - 0.5 * 0.96^t),
// whose running product is the optimizer variable "u_product". Slots "momentum", "velocity".
struct NadamImpl final : OptimizerImpl {
  double beta_1, beta_2, epsilon;
  NadamImpl(const LearningRate& lr, double b1, double b2, double eps, OptimizerOptions o)
      : OptimizerImpl("Nadam", lr, std::move(o)), beta_1(b1), beta_2(b2), epsilon(eps) {
    // beta_2 = 1 divides by zero in 1 - beta_2^t.
    check_range(name, "beta_1", beta_1, 0, 1, false, true);
    check_range(name, "beta_2", beta_2, 0, 1, false, true);
    check_epsilon(name, epsilon);
    step_variables.emplace_back(
        "u_product", Variable(constant(Tensor(1.0), float64), name + "/u_product", false));
  }
  std::vector<std::string> slot_names() const override { return {"momentum", "velocity"}; }
  // u_t in dtype d at the step `t` (a tensor of dtype d).
  Tensor u_at(const Tensor& t, DType d) const {
    return multiply(keras_cast(beta_1, d),
                    subtract(Tensor(1.0), multiply(Tensor(0.5), pow(keras_cast(0.96, d), t))));
  }
  std::vector<Tensor> advance(const std::vector<Tensor>& old, const Tensor& it,
                              DType d) const override {
    // u_product *= beta_1 * (1 - 0.5 * 0.96^(iterations + 1)), in that order, before the update.
    Tensor t = cast(add(it, constant(Tensor(int64_t{1}), int64)), d);
    // Here Keras writes ops.power(0.96, t): the float keeps its double value.
    Tensor factor = subtract(Tensor(1.0), multiply(Tensor(0.5), pow(Tensor(0.96), t)));
    return {cast(multiply(multiply(cast(old[0], d), Tensor(beta_1)), factor), float64)};
  }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    const Tensor u_t = u_at(k.step, d);
    const Tensor u_t_1 = u_at(add(k.step, Tensor(1.0)), d);
    const Tensor u_product_t = cast(k.state[0], d);
    const Tensor u_product_t_1 = multiply(u_product_t, u_t_1);
    const Tensor beta_2_power = pow(keras_cast(beta_2, d), k.step);
    const Tensor one = keras_cast(1.0, d);
    // The per-dtype factors of the update, each kept whole (Keras multiplies m by u_t_1 before
    // dividing by 1 - u_product_t_1; folding them into one factor would round differently).
    k.more = {u_t_1,
              subtract(one, u_product_t_1),
              subtract(one, u_t),
              subtract(one, u_product_t),
              subtract(one, beta_2_power),
              subtract(one, keras_cast(beta_1, d)),
              subtract(one, keras_cast(beta_2, d))};
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& m = slots[0];
    Variable& v = slots[1];
    const auto& c = k.more;
    m.assign_add(multiply(subtract(g, m.value()), c[5]));
    v.assign_add(multiply(subtract(square(g), v.value()), c[6]));
    Tensor m_hat = add(divide(multiply(c[0], m.value()), c[1]), divide(multiply(c[2], g), c[3]));
    Tensor v_hat = divide(v.value(), c[4]);
    var.assign_sub(divide(multiply(m_hat, k.lr), add(sqrt(v_hat), Tensor(epsilon))));
  }
};

// Follow The Regularized Leader (McMahan et al.), Keras 3's form: with p = -learning_rate_power,
// l2' = l2 + beta / (2 lr), g' = g + 2 * l2_shrinkage * var, n' = n + g^2:
// linear += g' - (n'^p - n^p) / lr * var; quadratic = n'^p / lr + 2 l2';
// var = (clip(linear, -l1, l1) - linear) / quadratic; n = n'. Slots "accumulator" (starting at
// initial_accumulator_value) and "linear".
struct FtrlImpl final : OptimizerImpl {
  double lr_power, initial, l1, l2, l2_shrinkage, beta;
  FtrlImpl(const LearningRate& lr, double power, double init, double l1_, double l2_, double shrink,
           double b, OptimizerOptions o)
      : OptimizerImpl("Ftrl", lr, std::move(o)),
        lr_power(power),
        initial(init),
        l1(l1_),
        l2(l2_),
        l2_shrinkage(shrink),
        beta(b) {
    auto nonnegative = [&](const char* what, double v) {
      TF_CHECK_ARG(v >= 0 && std::isfinite(v), name.c_str(), "{} must be finite and >= 0, got {}",
                   what, v);
    };
    nonnegative("initial_accumulator_value", initial);
    TF_CHECK_ARG(lr_power <= 0 && std::isfinite(lr_power), name.c_str(),
                 "learning_rate_power must be finite and <= 0, got {}", lr_power);
    nonnegative("l1_regularization_strength", l1);
    nonnegative("l2_regularization_strength", l2);
    nonnegative("l2_shrinkage_regularization_strength", l2_shrinkage);
    nonnegative("beta", beta);
    // The update divides by the learning rate.
    TF_CHECK_ARG(lr.is_schedule() || lr.value() > 0, name.c_str(),
                 "learning_rate must be > 0 (Ftrl divides by it), got {}", lr.value());
  }
  std::vector<std::string> slot_names() const override { return {"accumulator", "linear"}; }
  double slot_initial_value(size_t s) const override { return s == 0 ? initial : 0.0; }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& accum = slots[0];
    Variable& linear = slots[1];
    const Tensor& lr = k.lr;
    const Tensor l2_reg = add(Tensor(l2), divide(Tensor(beta), multiply(Tensor(2.0), lr)));
    const Tensor grad_to_use = add(g, multiply(Tensor(2 * l2_shrinkage), var.value()));
    const Tensor accum_before = accum.value();
    const Tensor new_accum = add(accum_before, square(g));
    const Tensor p = Tensor(-lr_power);
    const Tensor new_pow = pow(new_accum, p);
    linear.assign_add(subtract(
        grad_to_use, multiply(divide(subtract(new_pow, pow(accum_before, p)), lr), var.value())));
    const Tensor quadratic = add(divide(new_pow, lr), multiply(Tensor(2.0), l2_reg));
    const Tensor lin = linear.value();
    const Tensor clipped = clip_by_value(lin, Tensor(-l1), Tensor(l1));
    var.assign(divide(subtract(clipped, lin), quadratic));
    accum.assign(new_accum);
  }
};

// var -= lr * sign(m * beta_1 + g * (1 - beta_1)); m = m * beta_2 + g * (1 - beta_2).
// Slot "momentum".
struct LionImpl final : OptimizerImpl {
  double beta_1, beta_2;
  LionImpl(const LearningRate& lr, double b1, double b2, OptimizerOptions o)
      : OptimizerImpl("Lion", lr, std::move(o)), beta_1(b1), beta_2(b2) {
    // Keras' check for beta_1; beta_1 = 0 would make the update sign(g), ignoring momentum.
    check_range(name, "beta_1", beta_1, 0, 1, true, false);
    check_range(name, "beta_2", beta_2, 0, 1, false, false);
  }
  std::vector<std::string> slot_names() const override { return {"momentum"}; }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    const Tensor b1 = keras_cast(beta_1, d), b2 = keras_cast(beta_2, d);
    k.more = {b1, subtract(Tensor(1.0), b1), b2, subtract(Tensor(1.0), b2)};
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& m = slots[0];
    const auto& c = k.more;
    var.assign_sub(multiply(k.lr, sign(add(multiply(m.value(), c[0]), multiply(g, c[1])))));
    m.assign(add(multiply(m.value(), c[2]), multiply(g, c[3])));
  }
};

// Layer-wise adaptive moments: Adam's moments, the step scaled by ||var|| / ||update||.
struct LambImpl final : OptimizerImpl {
  double beta_1, beta_2, epsilon;
  LambImpl(const LearningRate& lr, double b1, double b2, double eps, OptimizerOptions o)
      : OptimizerImpl("Lamb", lr, std::move(o)), beta_1(b1), beta_2(b2), epsilon(eps) {
    // 1 - beta^t divides: beta = 1 divides by zero.
    check_range(name, "beta_1", beta_1, 0, 1, false, true);
    check_range(name, "beta_2", beta_2, 0, 1, false, true);
    check_epsilon(name, epsilon);
  }
  std::vector<std::string> slot_names() const override { return {"momentum", "velocity"}; }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    k.more = {subtract(Tensor(1.0), pow(keras_cast(beta_1, d), k.step)),
              subtract(Tensor(1.0), pow(keras_cast(beta_2, d), k.step))};
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& m = slots[0];
    Variable& v = slots[1];
    m.assign_add(multiply(subtract(g, m.value()), Tensor(1.0 - beta_1)));
    v.assign_add(multiply(subtract(square(g), v.value()), Tensor(1.0 - beta_2)));
    const Tensor m_hat = divide(m.value(), k.more[0]);
    const Tensor v_sqrt = add(sqrt(divide(v.value(), k.more[1])), Tensor(epsilon));
    const Tensor step = divide(m_hat, v_sqrt);
    const Tensor w_norm = sqrt(reduce_sum(square(var.value())));
    const Tensor g_norm = sqrt(reduce_sum(square(step)));
    const Tensor one = keras_cast(1.0, var.dtype());
    // Keras divides first and selects after: a zero g_norm's inf or NaN is never picked.
    const Tensor ratio =
        where(greater(w_norm, Tensor(0.0)),
              where(greater(g_norm, Tensor(0.0)), divide(w_norm, g_norm), one), one);
    var.assign_sub(multiply(multiply(ratio, k.lr), step));
  }
};

// Adafactor: factored second moments for matrices (and stacks of them), a relative step size
// and update clipping.
struct AdafactorImpl final : OptimizerImpl {
  double beta_2_decay, epsilon_1, epsilon_2, clip_threshold;
  bool relative_step;
  AdafactorImpl(const LearningRate& lr, double decay, double eps1, double eps2, double clip,
                bool relative, OptimizerOptions o)
      : OptimizerImpl("Adafactor", lr, std::move(o)),
        beta_2_decay(decay),
        epsilon_1(eps1),
        epsilon_2(eps2),
        clip_threshold(clip),
        relative_step(relative) {
    // beta_2_t = 1 - t^decay: a positive decay makes it negative after the first step.
    TF_CHECK_ARG(beta_2_decay <= 0 && std::isfinite(beta_2_decay), name.c_str(),
                 "beta_2_decay must be finite and <= 0, got {}", beta_2_decay);
    check_epsilon(name, epsilon_1);
    check_epsilon(name, epsilon_2);
    TF_CHECK_ARG(clip_threshold > 0 && std::isfinite(clip_threshold), name.c_str(),
                 "clip_threshold must be finite and > 0, got {}", clip_threshold);
  }
  std::vector<std::string> slot_names() const override { return {"r", "c", "velocity"}; }
  TensorShape slot_shape(size_t s, const Variable& variable) const override {
    const TensorShape var = variable.shape();
    if (s == 2) return var;
    if (var.rank() < 2) return TensorShape({});
    std::vector<int64_t> dims = var.dims();
    if (s == 1) dims[dims.size() - 2] = dims.back();  // c: var[:-2] + [n]
    dims.pop_back();                                  // r: var[:-1]
    return TensorShape(dims);
  }
  static Tensor rms(const Tensor& x) { return sqrt(reduce_mean(square(x))); }
  void prepare(Scalars& k) const override {
    const Tensor inv_sqrt_t = divide(Tensor(1.0), sqrt(k.step));
    Tensor lr = k.lr;
    if (!schedule && relative_step) lr = minimum(lr, inv_sqrt_t);
    k.alpha = minimum(lr, inv_sqrt_t);                                    // rho_t
    k.more = {subtract(Tensor(1.0), pow(k.step, Tensor(beta_2_decay)))};  // beta_2_t
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    const DType d = var.dtype();
    const Tensor& beta_2_t = k.more[0];
    const Tensor keep = subtract(Tensor(1.0), beta_2_t);
    const Tensor alpha_t = multiply(maximum(keras_cast(epsilon_2, d), rms(var.value())), k.alpha);
    const Tensor g2 = add(square(g), Tensor(epsilon_1));
    Variable& v = slots[2];
    if (var.shape().rank() >= 2) {
      Variable& r = slots[0];
      Variable& c = slots[1];
      r.assign(add(multiply(beta_2_t, r.value()), multiply(keep, reduce_mean(g2, {-1}))));
      c.assign(add(multiply(beta_2_t, c.value()), multiply(keep, reduce_mean(g2, {-2}))));
      const Tensor row = divide(r.value(), reduce_mean(r.value(), {-1}, true));
      v.assign(multiply(expand_dims(row, -1), expand_dims(c.value(), -2)));
    } else {
      v.assign(add(multiply(beta_2_t, v.value()), multiply(keep, g2)));
    }
    const Tensor u = divide(g, sqrt(v.value()));
    const Tensor u_hat =
        divide(u, maximum(keras_cast(1.0, d), divide(rms(u), Tensor(clip_threshold))));
    var.assign_sub(multiply(alpha_t, u_hat));
  }
};

// Schedule-free AdamW: the variable holds y, slot "momentum" z (starting as the variable), the
// averaged iterate x recovered from y and z.
struct ScheduleFreeAdamWImpl final : OptimizerImpl {
  double beta_1, beta_2, epsilon;
  int64_t warmup_steps;
  ScheduleFreeAdamWImpl(const LearningRate& lr, double b1, double b2, double eps, int64_t warmup,
                        OptimizerOptions o)
      : OptimizerImpl("ScheduleFreeAdamW", lr, std::move(o)),
        beta_1(b1),
        beta_2(b2),
        epsilon(eps),
        warmup_steps(warmup) {
    // x = (y - (1 - beta_1) z) / beta_1 divides by beta_1; 1 - beta_2^t divides too.
    check_range(name, "beta_1", beta_1, 0, 1, true, false);
    check_range(name, "beta_2", beta_2, 0, 1, false, true);
    check_epsilon(name, epsilon);
    TF_CHECK_ARG(warmup_steps >= 0, name.c_str(), "warmup_steps must be >= 0, got {}",
                 warmup_steps);
  }
  std::vector<std::string> slot_names() const override { return {"momentum", "velocity"}; }
  bool slot_copies_variable(size_t s) const override { return s == 0; }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    Tensor lr = k.lr;
    if (warmup_steps > 0)
      lr = multiply(lr, minimum(divide(k.step, keras_cast(static_cast<double>(warmup_steps), d)),
                                Tensor(1.0)));
    k.alpha = lr;
    const Tensor b2 = keras_cast(beta_2, d);
    k.more = {keras_cast(beta_1, d), b2, subtract(Tensor(1.0), pow(b2, k.step)),
              divide(Tensor(1.0), k.step)};
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    const DType d = var.dtype();
    const Tensor& b1 = k.more[0];
    const Tensor& b2 = k.more[1];
    const Tensor& weight = k.more[3];  // 1 / t
    Variable& z = slots[0];
    Variable& v = slots[1];
    v.assign_add(multiply(subtract(square(g), v.value()), subtract(Tensor(1.0), b2)));
    const Tensor denom = add(sqrt(divide(v.value(), k.more[2])), keras_cast(epsilon, d));
    const Tensor z_old = z.value(), y_old = var.value();
    const Tensor z_new = subtract(z_old, divide(multiply(k.alpha, g), denom));
    const Tensor one_minus_b1 = subtract(Tensor(1.0), b1);
    // x_t from y_t and z_t, the z before this step (the paper's; Keras 3.15 reads the updated
    // z here, see docs/keras_training.md).
    const Tensor x_old = divide(subtract(y_old, multiply(one_minus_b1, z_old)), b1);
    const Tensor x_new =
        add(multiply(subtract(Tensor(1.0), weight), x_old), multiply(weight, z_new));
    const Tensor y_new = add(multiply(one_minus_b1, z_new), multiply(b1, x_new));
    z.assign(z_new);
    var.assign(y_new);
  }
};

// Muon: momentum orthogonalized by Newton-Schulz for matrices, AdamW for everything else.
struct MuonImpl final : OptimizerImpl {
  MuonOptions m;
  std::vector<std::regex> excluded;
  MuonImpl(const LearningRate& lr, MuonOptions mo, OptimizerOptions o)
      : OptimizerImpl("Muon", lr, std::move(o)), m(std::move(mo)) {
    TF_CHECK_ARG(!options.weight_decay, name.c_str(),
                 "set Muon's weight decays in MuonOptions (weight_decay, adam_weight_decay), not "
                 "OptimizerOptions::weight_decay");
    check_range(name, "adam_beta_1", m.adam_beta_1, 0, 1, false, true);
    check_range(name, "adam_beta_2", m.adam_beta_2, 0, 1, false, true);
    check_range(name, "momentum", m.momentum, 0, 1, false, false);
    check_epsilon(name, m.epsilon);
    TF_CHECK_ARG(m.ns_steps >= 0, name.c_str(), "ns_steps must be >= 0, got {}", m.ns_steps);
    for (double v : {m.muon_a, m.muon_b, m.muon_c, m.adam_lr_ratio})
      TF_CHECK_ARG(std::isfinite(v), name.c_str(),
                   "muon_a, muon_b, muon_c and adam_lr_ratio must be finite, got {}", v);
    for (const auto& wd : {m.weight_decay, m.adam_weight_decay, m.rms_rate})
      TF_CHECK_ARG(!wd || std::isfinite(*wd), name.c_str(),
                   "weight_decay, adam_weight_decay and rms_rate must be finite, got {}", *wd);
    for (const std::string& k : m.exclude_layers) {
      try {
        excluded.emplace_back(k, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        TF_THROW(InvalidArgumentError, name.c_str(),
                 "exclude_layers entry \"{}\" is not a regular expression: {}", k, e.what());
      }
    }
  }
  // Keras' _should_use_adamw, on the variable's name. The regexes run once per name: slot
  // creation, weight decay and every update ask again.
  bool use_adamw(const Variable& var) const {
    if (var.shape().rank() != 2) return true;
    std::lock_guard<std::mutex> lock(adamw_mutex);
    auto [it, inserted] = adamw_by_name.try_emplace(var.name(), false);
    if (!inserted) return it->second;
    std::string lower = var.name();
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool adamw = m.exclude_embeddings && lower.find("embedding") != std::string::npos;
    for (const std::regex& r : excluded) adamw = adamw || std::regex_search(var.name(), r);
    return it->second = adamw;
  }
  mutable std::mutex adamw_mutex;
  mutable std::unordered_map<std::string, bool> adamw_by_name;
  std::vector<std::string> slot_names() const override { return {"momentum", "velocity"}; }
  TensorShape slot_shape(size_t s, const Variable& var) const override {
    return s == 1 && !use_adamw(var) ? TensorShape({}) : var.shape();
  }
  std::optional<double> weight_decay_for(const Variable& var) const override {
    return use_adamw(var) ? m.adam_weight_decay : m.weight_decay;
  }
  void prepare(Scalars& k) const override {
    const DType d = k.lr.dtype();
    // AdamW's rate: lr * adam_lr_ratio * sqrt(1 - beta_2^t) / (1 - beta_1^t).
    const Tensor lr = multiply(k.lr, Tensor(m.adam_lr_ratio));
    k.alpha =
        divide(multiply(lr, sqrt(subtract(Tensor(1.0), pow(keras_cast(m.adam_beta_2, d), k.step)))),
               subtract(Tensor(1.0), pow(keras_cast(m.adam_beta_1, d), k.step)));
  }
  // The quintic Newton-Schulz iteration of Keras' zeropower_via_newtonschulz5.
  Tensor orthogonalize(const Tensor& g) const {
    const bool tall = g.shape()[0] > g.shape()[1];
    Tensor x = tall ? transpose(g) : g;
    x = divide(x, add(sqrt(reduce_sum(square(x))), Tensor(1e-7)));
    for (int i = 0; i < m.ns_steps; ++i) {
      const Tensor a = matmul(x, x, false, true);
      const Tensor b = add(multiply(a, Tensor(m.muon_b)), matmul(multiply(a, Tensor(m.muon_c)), a));
      x = add(multiply(x, Tensor(m.muon_a)), matmul(b, x));
    }
    return tall ? transpose(x) : x;
  }
  void update(const Tensor& g, Variable& var, std::vector<Variable>& slots,
              const Scalars& k) const override {
    Variable& mom = slots[0];
    if (use_adamw(var)) {
      Variable& v = slots[1];
      mom.assign_add(multiply(subtract(g, mom.value()), Tensor(1.0 - m.adam_beta_1)));
      v.assign_add(multiply(subtract(square(g), v.value()), Tensor(1.0 - m.adam_beta_2)));
      var.assign_sub(
          divide(multiply(mom.value(), k.alpha), add(sqrt(v.value()), Tensor(m.epsilon))));
      return;
    }
    mom.assign_add(add(g, multiply(mom.value(), Tensor(m.momentum - 1.0))));
    const Tensor u = m.nesterov ? add(g, multiply(mom.value(), Tensor(m.momentum))) : mom.value();
    Tensor step = multiply(k.lr, orthogonalize(u));
    if (m.rms_rate) {
      const double rows = static_cast<double>(var.shape()[0]);
      const double cols = static_cast<double>(var.shape()[1]);
      // Keras: x * sqrt(max(rows, cols)) * rms_rate, the square root in float32.
      step = multiply(multiply(step, Tensor(static_cast<double>(
                                         std::sqrt(static_cast<float>(std::max(rows, cols)))))),
                      Tensor(*m.rms_rate));
    }
    var.assign_sub(step);
  }
};

}  // namespace

// ---- Optimizer ----

void Optimizer::build(const std::vector<Variable>& vars) {
  auto& impl = checked(impl_);
  std::lock_guard lock(impl.mu);
  for (const Variable& v : vars) impl.build_one(v);
}

void Optimizer::apply_gradients(const std::vector<Tensor>& grads_in,
                                const std::vector<Variable>& vars_in) {
  auto& impl = checked(impl_);
  if (loss_scale_) {
    mixed_precision::detail::apply_loss_scaled(Optimizer(impl_), *loss_scale_, grads_in, vars_in);
    return;
  }
  const char* op = impl.name.c_str();
  TF_CHECK_ARG(grads_in.size() == vars_in.size(), op,
               "apply_gradients got {} gradients for {} variables", grads_in.size(),
               vars_in.size());
  tapeflow::detail::PauseTapes pause;  // updates are state changes, never differentiated
  std::vector<Tensor> grads;
  std::vector<Variable> vars;
  std::vector<Variable> missing;
  for (size_t i = 0; i < grads_in.size(); ++i) {
    const Variable& v = vars_in[i];
    TF_CHECK_ARG(v.defined(), op, "variable {} of apply_gradients is an empty handle", i);
    if (!grads_in[i].defined()) {
      missing.push_back(v);
      continue;
    }
    const Tensor& g = grads_in[i];
    TF_CHECK_ARG(is_floating(v.dtype()), op,
                 "variable '{}' has dtype {}; optimizers update floating-point variables", v.name(),
                 dtype_name(v.dtype()));
    // Keras 3 casts each gradient to its variable's dtype (a float32 gradient of a float16 or
    // float64 variable); an integer or bool gradient is refused here (Keras would cast it too).
    TF_CHECK_ARG(g.shape() == v.shape() && is_floating(g.dtype()), op,
                 "the gradient of variable '{}' has shape {} and dtype {}, the variable has "
                 "shape {} and dtype {} (a gradient needs the variable's shape and a "
                 "floating-point dtype)",
                 v.name(), g.shape().to_string(), dtype_name(g.dtype()), v.shape().to_string(),
                 dtype_name(v.dtype()));
    grads.push_back(g.dtype() == v.dtype() ? g : cast(g, v.dtype()));
    vars.push_back(v);
  }
  TF_CHECK_ARG(!vars.empty() || vars_in.empty(), op,
               "No gradients provided for any variable: {}", names_of(vars_in));
  if (!missing.empty()) {
    // Once per list of variables, as Keras' warnings.warn shows one message once (an eager
    // step through a branch that skips some layers would repeat it at every step).
    static std::mutex warned_mu;
    static std::set<std::string> warned;
    const std::string names = names_of(missing);
    bool fresh = false;
    {
      std::lock_guard lock(warned_mu);
      fresh = warned.insert(names).second;
    }
    if (fresh)
      TF_LOG_WARN(
          "Gradients do not exist for variables {} when minimizing the loss. If you're using "
          "`model.compile()`, did you forget to provide a `loss` argument?",
          names);
  }
  if (vars.empty()) return;

  // Read before the all-reduce: a replica that increments a shared (non-mirrored) counter can
  // only do so after every replica has joined the all-reduce, hence after every read.
  Tensor it = impl.iterations.value();
  std::vector<Tensor> state_before;
  for (const auto& sv : impl.step_variables) state_before.push_back(sv.second.value());
  auto* ctx = distribute::get_replica_context();
  if (ctx != nullptr && ctx->num_replicas_in_sync() > 1) {
    // Every replica would apply its update to one shared copy: N updates instead of one.
    for (const Variable& v : vars)
      TF_CHECK_T(FailedPreconditionError, v.is_mirrored(), op,
                 "variable '{}' is not mirrored but is updated in replica {} of {}; create the "
                 "model's variables under strategy.scope()",
                 v.name(), ctx->replica_id_in_sync_group(), ctx->num_replicas_in_sync());
    grads = ctx->all_reduce(distribute::ReduceOp::SUM, grads);
  }

  const OptimizerOptions& o = impl.options;
  if (o.loss_scale_factor)  // Keras: g / loss_scale_factor
    for (Tensor& g : grads) g = divide(g, Tensor(*o.loss_scale_factor));

  std::vector<std::vector<Variable>> slots(vars.size());
  {
    std::lock_guard lock(impl.mu);
    for (size_t i = 0; i < vars.size(); ++i) {
      impl.build_one(vars[i]);
      slots[i] = impl.entries[impl.index.at(vars[i].handle_id())].slots;
    }
  }

  // Gradient accumulation (Keras' rule): this call updates when (calls + 1) % steps == 0, with
  // the mean of the gradients summed since the last update; the other calls only add theirs.
  // The update runs either way and is undone where the call does not update (a traced step
  // decides at run time, without a conditional node).
  const Tensor raw_it = it;
  it = impl.steps_taken(raw_it);
  // Where the base optimizer's slots sit after the class's own (each lookup builds the list of
  // slot names: done once per call, not per variable).
  const size_t n_own = impl.slot_names().size();
  const std::optional<size_t> acc = impl.accumulator_slot(), avg = impl.average_slot();
  Tensor is_update;
  std::vector<Tensor> accumulated;  // the accumulators' next values
  if (acc) {
    const int64_t steps = *o.gradient_accumulation_steps;
    is_update = equal(
        floormod(add(raw_it, constant(Tensor(int64_t{1}), int64)), constant(Tensor(steps), int64)),
        constant(Tensor(int64_t{0}), int64));
    for (size_t i = 0; i < vars.size(); ++i) {
      DeviceScope place(vars[i].placement());
      const Tensor sum = add(grads[i], slots[i][*acc].value());
      accumulated.push_back(where(is_update, zeros_like(sum), sum));
      grads[i] = divide(sum, Tensor(static_cast<double>(steps)));
    }
  }

  if (o.clipnorm && *o.clipnorm > 0)
    for (Tensor& g : grads) g = clip_by_norm(g, *o.clipnorm);
  else if (o.global_clipnorm && *o.global_clipnorm > 0)
    clip_by_global_norm(grads, *o.global_clipnorm);
  else if (o.clipvalue && *o.clipvalue > 0)
    for (Tensor& g : grads) g = clip_by_value(g, Tensor(-*o.clipvalue), Tensor(*o.clipvalue));

  Tensor lr32 = impl.current_lr(it);
  Tensor step64 = add(cast(it, float64), Tensor(1.0));
  std::vector<Tensor> state = impl.advance(state_before, it, vars.front().dtype());
  if (is_update.defined())
    for (size_t j = 0; j < state.size(); ++j)
      state[j] = where(is_update, state[j], state_before[j]);
  std::vector<std::pair<std::pair<DType, Device>, OptimizerImpl::Scalars>> cache;
  for (size_t i = 0; i < vars.size(); ++i) {
    Variable& var = vars[i];
    const Device dev = var.placement();
    DeviceScope place(dev);
    const auto key = std::make_pair(var.dtype(), dev);
    auto found = std::find_if(cache.begin(), cache.end(), [&](auto& e) { return e.first == key; });
    if (found == cache.end()) {
      OptimizerImpl::Scalars k;
      k.lr = cast(lr32, var.dtype());
      k.step = cast(step64, var.dtype());
      k.state = state;
      impl.prepare(k);
      cache.emplace_back(key, std::move(k));
      found = cache.end() - 1;
    }
    const OptimizerImpl::Scalars& k = found->second;
    std::vector<Tensor> before;  // with accumulation: the values a non-updating call keeps
    if (is_update.defined()) {
      before.push_back(var.value());
      for (size_t s = 0; s < n_own; ++s) before.push_back(slots[i][s].value());
    }
    if (const std::optional<double> wd = impl.weight_decay_for(var)) {
      bool excluded = false;
      for (const auto& s : o.exclude_from_weight_decay)
        if (var.name().find(s) != std::string::npos) excluded = true;
      // Keras: var -= var * tf.cast(weight_decay, dtype) * lr (the cast goes through float32).
      if (!excluded)
        var.assign(subtract(var.value(),
                            multiply(multiply(var.value(), keras_cast(*wd, var.dtype())), k.lr)));
    }
    impl.update(grads[i], var, slots[i], k);
    if (is_update.defined()) {
      var.assign(where(is_update, var.value(), before[0]));
      for (size_t s = 0; s < n_own; ++s)
        slots[i][s].assign(where(is_update, slots[i][s].value(), before[s + 1]));
      slots[i][*acc].assign(accumulated[i]);
    }
  }
  if (avg) {
    // Keras' moving average of the weights, at every call: momentum 0 at the first step (so
    // the average starts as the weights), and every ema_overwrite_frequency steps the weights
    // take their averages.
    const Tensor first = equal(it, constant(Tensor(int64_t{0}), int64));
    Tensor overwrite;
    if (o.ema_overwrite_frequency)
      overwrite = equal(floormod(add(it, constant(Tensor(int64_t{1}), int64)),
                                 constant(Tensor(*o.ema_overwrite_frequency), int64)),
                        constant(Tensor(int64_t{0}), int64));
    for (size_t i = 0; i < vars.size(); ++i) {
      Variable& var = vars[i];
      DeviceScope place(var.placement());
      const Tensor m =
          where(first, zeros({}, var.dtype()), keras_cast(o.ema_momentum, var.dtype()));
      Variable& average = slots[i][*avg];
      average.assign(add(multiply(m, average.value()),
                         multiply(subtract(constant(Tensor(1.0), var.dtype()), m), var.value())));
      if (overwrite.defined()) var.assign(where(overwrite, average.value(), var.value()));
    }
  }
  // Keras 3 projects a variable with a constraint once the updates are done.
  for (Variable& var : vars)
    if (const Constraint c = constraints::of(var); c.defined()) {
      DeviceScope place(var.placement());
      var.assign(c(var.value()));
    }
  // A variable shared by the replicas (not mirrored) is written by replica 0 alone; every
  // replica computed the same value from what it read before the all-reduce.
  auto writes = [&](const Variable& v) {
    return v.is_mirrored() || ctx == nullptr || ctx->replica_id_in_sync_group() == 0;
  };
  for (size_t i = 0; i < state.size(); ++i)
    if (writes(impl.step_variables[i].second)) impl.step_variables[i].second.assign(state[i]);
  if (writes(impl.iterations)) impl.iterations.assign_add(constant(Tensor(int64_t{1}), int64));
}

Tensor Optimizer::minimize(const std::function<Tensor()>& loss, const std::vector<Variable>& vars) {
  const auto& impl = checked(impl_);
  TF_CHECK_ARG(static_cast<bool>(loss), impl.name.c_str(), "minimize: the loss function is empty");
  GradientTape tape;
  Tensor value = loss();
  // A LossScaleOptimizer differentiates the scaled loss; its apply_gradients unscales.
  Tensor target = loss_scale_ && is_floating(value.dtype())
                      ? mixed_precision::detail::scaled_loss(*loss_scale_, value)
                      : value;
  target = scale_loss(target);  // apply_gradients divides by loss_scale_factor
  std::vector<Tensor> grads = tape.gradient(target, vars);
  apply_gradients(grads, vars);
  return value;
}

Tensor Optimizer::scale_loss(const Tensor& loss) const {
  const auto& f = checked(impl_).options.loss_scale_factor;
  return f ? multiply(loss, Tensor(*f)) : loss;
}

namespace {
// Each live variable that has an average slot, with that slot (use_ema).
std::vector<std::pair<Variable, Variable>> averaged(OptimizerImpl& impl) {
  std::vector<std::pair<Variable, Variable>> out;
  const auto avg = impl.average_slot();
  if (!avg) return out;
  std::lock_guard lock(impl.mu);
  for (const auto& e : impl.entries)
    if (auto owner = e.owner.lock()) out.emplace_back(Variable::from_state(owner), e.slots[*avg]);
  return out;
}
}  // namespace

void Optimizer::finalize_variable_values(const std::vector<Variable>& vars) const {
  auto& impl = checked(impl_);
  if (!impl.options.use_ema) return;
  tapeflow::detail::PauseTapes pause;
  // Variables the optimizer never updated have no average and keep their values (Keras
  // raises when the lists differ in length).
  std::unordered_set<const void*> wanted;
  for (const Variable& v : vars) wanted.insert(v.handle_id());
  for (auto [var, average] : averaged(impl))
    if (wanted.count(var.handle_id())) var.assign(average.value());
}

void Optimizer::swap_ema_weights() const {
  auto& impl = checked(impl_);
  TF_CHECK_T(FailedPreconditionError, impl.options.use_ema, impl.name.c_str(),
             "SwapEMAWeights must be used when `use_ema=True` is set on the optimizer. "
             "Received: use_ema=False");
  tapeflow::detail::PauseTapes pause;
  for (auto [var, average] : averaged(impl)) {
    const Tensor weights = var.value();
    var.assign(average.value());
    average.assign(weights);
  }
}

void Optimizer::copy_weights_to_ema() const {
  auto& impl = checked(impl_);
  TF_CHECK_T(FailedPreconditionError, impl.options.use_ema, impl.name.c_str(),
             "copy_weights_to_ema needs `use_ema=True` on the optimizer");
  tapeflow::detail::PauseTapes pause;
  for (auto [var, average] : averaged(impl)) average.assign(var.value());
}

Variable Optimizer::iterations() const { return checked(impl_).iterations; }

Tensor Optimizer::learning_rate() const {
  auto& impl = checked(impl_);
  tapeflow::detail::PauseTapes pause;
  return impl.current_lr(impl.steps_taken(impl.iterations.value()));
}

double Optimizer::current_learning_rate() const {
  auto& impl = checked(impl_);
  if (impl.schedule) return (*impl.schedule)(impl.iterations.value().item<int64_t>());
  return impl.lr_var.value().item<double>();
}

void Optimizer::set_learning_rate(double value) {
  auto& impl = checked(impl_);
  TF_CHECK_T(FailedPreconditionError, !impl.schedule, impl.name.c_str(),
             "the learning rate is a {} schedule; it cannot be set to a constant",
             impl.schedule ? impl.schedule->name() : "");
  check_learning_rate(impl.name.c_str(), value);
  impl.lr_var.assign(constant(Tensor(value), float32));
}

bool Optimizer::has_schedule() const { return checked(impl_).schedule.has_value(); }
std::string Optimizer::name() const { return checked(impl_).name; }

std::vector<std::pair<std::string, Variable>> Optimizer::tracked_variables() const {
  auto& impl = checked(impl_);
  std::vector<std::pair<std::string, Variable>> out;
  if (loss_scale_) out = mixed_precision::detail::loss_scale_variables(*loss_scale_);
  out.emplace_back("iterations", impl.iterations);
  if (!impl.schedule) out.emplace_back("learning_rate", impl.lr_var);
  for (const auto& sv : impl.step_variables) out.push_back(sv);
  std::lock_guard lock(impl.mu);
  const auto names = impl.all_slot_names();
  for (const auto& e : impl.entries) {
    if (e.owner.expired()) continue;  // dropped with the next variable that gets slots
    for (size_t s = 0; s < e.slots.size(); ++s)
      out.emplace_back(e.prefix + "/" + names[s], e.slots[s]);
  }
  return out;
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> out;
  for (auto& [name, v] : tracked_variables()) out.push_back(v);
  return out;
}

void Optimizer::restore_deferred(const std::vector<std::pair<std::string, Tensor>>& values) {
  auto& impl = checked(impl_);
  std::lock_guard lock(impl.mu);
  for (const auto& [name, t] : values) impl.deferred[name] = t;
}

void Optimizer::restore_deferred_slot(const Variable& var, const std::string& slot,
                                      const Tensor& value) {
  auto& impl = checked(impl_);
  std::lock_guard lock(impl.mu);
  auto& d = impl.deferred_by_variable[var.handle_id()];
  if (!OptimizerImpl::is_owner(d.owner, var)) d = {var.weak_state(), {}};  // a new variable
  d.slots[slot] = value;
}

std::vector<std::string> Optimizer::slot_names() const {
  return checked(impl_).all_slot_names();
}

TensorShape Optimizer::slot_shape(const std::string& slot, const Variable& var) const {
  const auto& impl = checked(impl_);
  const auto names = impl.all_slot_names();
  const auto it = std::find(names.begin(), names.end(), slot);
  TF_CHECK_ARG(it != names.end(), impl.name.c_str(), "optimizer \"{}\" keeps no slot \"{}\"",
               impl.name, slot);
  const size_t s = static_cast<size_t>(it - names.begin());
  return s < impl.slot_names().size() ? impl.slot_shape(s, var) : var.shape();
}

std::vector<std::pair<Variable, std::vector<Variable>>> Optimizer::slots() const {
  auto& impl = checked(impl_);
  std::lock_guard lock(impl.mu);
  std::vector<std::pair<Variable, std::vector<Variable>>> out;
  for (const auto& e : impl.entries)
    if (auto owner = e.owner.lock()) out.emplace_back(Variable::from_state(owner), e.slots);
  return out;
}

SGD::SGD(LearningRate learning_rate, double momentum, bool nesterov, OptimizerOptions options)
    : Optimizer(std::make_shared<SGDImpl>(learning_rate, momentum, nesterov, std::move(options))) {
  TF_CHECK_ARG(momentum >= 0 && momentum <= 1, "SGD", "momentum must be in [0, 1], got {}",
               momentum);
}

Adam::Adam(LearningRate learning_rate, double beta_1, double beta_2, double epsilon, bool amsgrad,
           OptimizerOptions options)
    : Optimizer(std::make_shared<AdamImpl>("Adam", learning_rate, beta_1, beta_2, epsilon, amsgrad,
                                           std::move(options))) {}

static OptimizerOptions with_decay(OptimizerOptions o, double wd) {
  TF_CHECK_ARG(wd >= 0, "AdamW", "weight_decay must be >= 0, got {}", wd);
  o.weight_decay = wd;
  return o;
}

AdamW::AdamW(LearningRate learning_rate, double weight_decay, double beta_1, double beta_2,
             double epsilon, bool amsgrad, OptimizerOptions options)
    : Optimizer(std::make_shared<AdamImpl>("AdamW", learning_rate, beta_1, beta_2, epsilon,
                                           amsgrad, with_decay(std::move(options), weight_decay))) {}

RMSprop::RMSprop(LearningRate learning_rate, double rho, double momentum, double epsilon,
                 bool centered, OptimizerOptions options)
    : Optimizer(std::make_shared<RMSpropImpl>(learning_rate, rho, momentum, epsilon, centered,
                                              std::move(options))) {}

Adagrad::Adagrad(LearningRate learning_rate, double initial_accumulator_value, double epsilon,
                 OptimizerOptions options)
    : Optimizer(std::make_shared<AdagradImpl>(learning_rate, initial_accumulator_value, epsilon,
                                              std::move(options))) {}

Adadelta::Adadelta(LearningRate learning_rate, double rho, double epsilon, OptimizerOptions options)
    : Optimizer(std::make_shared<AdadeltaImpl>(learning_rate, rho, epsilon, std::move(options))) {}

Adamax::Adamax(LearningRate learning_rate, double beta_1, double beta_2, double epsilon,
               OptimizerOptions options)
    : Optimizer(std::make_shared<AdamaxImpl>(learning_rate, beta_1, beta_2, epsilon,
                                             std::move(options))) {}

Nadam::Nadam(LearningRate learning_rate, double beta_1, double beta_2, double epsilon,
             OptimizerOptions options)
    : Optimizer(std::make_shared<NadamImpl>(learning_rate, beta_1, beta_2, epsilon,
                                            std::move(options))) {}

Ftrl::Ftrl(LearningRate learning_rate, double learning_rate_power, double initial_accumulator_value,
           double l1_regularization_strength, double l2_regularization_strength,
           double l2_shrinkage_regularization_strength, double beta, OptimizerOptions options)
    : Optimizer(std::make_shared<FtrlImpl>(
          learning_rate, learning_rate_power, initial_accumulator_value, l1_regularization_strength,
          l2_regularization_strength, l2_shrinkage_regularization_strength, beta,
          std::move(options))) {}

Lion::Lion(LearningRate learning_rate, double beta_1, double beta_2, OptimizerOptions options)
    : Optimizer(std::make_shared<LionImpl>(learning_rate, beta_1, beta_2, std::move(options))) {}

ScheduleFreeAdamW::ScheduleFreeAdamW(LearningRate learning_rate, double beta_1, double beta_2,
                                     double epsilon, int64_t warmup_steps, OptimizerOptions options)
    : Optimizer(std::make_shared<ScheduleFreeAdamWImpl>(learning_rate, beta_1, beta_2, epsilon,
                                                        warmup_steps, std::move(options))) {}

Muon::Muon(LearningRate learning_rate, MuonOptions muon, OptimizerOptions options)
    : Optimizer(std::make_shared<MuonImpl>(learning_rate, std::move(muon), std::move(options))) {}

Lamb::Lamb(LearningRate learning_rate, double beta_1, double beta_2, double epsilon,
           OptimizerOptions options)
    : Optimizer(
          std::make_shared<LambImpl>(learning_rate, beta_1, beta_2, epsilon, std::move(options))) {}

Adafactor::Adafactor(LearningRate learning_rate, double beta_2_decay, double epsilon_1,
                     double epsilon_2, double clip_threshold, bool relative_step,
                     OptimizerOptions options)
    : Optimizer(std::make_shared<AdafactorImpl>(learning_rate, beta_2_decay, epsilon_1, epsilon_2,
                                                clip_threshold, relative_step,
                                                std::move(options))) {}

Optimizer get(const std::string& identifier) {
  std::string id = identifier;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (id == "sgd") return SGD();
  if (id == "adam") return Adam();
  if (id == "adamw") return AdamW();
  if (id == "rmsprop") return RMSprop();
  if (id == "adagrad") return Adagrad();
  if (id == "adadelta") return Adadelta();
  if (id == "adamax") return Adamax();
  if (id == "nadam") return Nadam();
  if (id == "ftrl") return Ftrl();
  if (id == "lion") return Lion();
  if (id == "lamb") return Lamb();
  if (id == "muon") return Muon();
  if (id == "schedulefreeadamw") return ScheduleFreeAdamW();
  if (id == "adafactor") return Adafactor();
  TF_THROW(InvalidArgumentError, "optimizers.get",
           "unknown optimizer '{}' (known: sgd, adam, adamw, rmsprop, adagrad, adadelta, adamax, "
           "nadam, ftrl, lion, lamb, adafactor, muon, schedulefreeadamw)",
           identifier);
}

}  // namespace tapeflow::keras::optimizers

namespace tapeflow::keras::detail::compile_access {

std::optional<OptimizerConfig> optimizer_config(const optimizers::Optimizer& optimizer) {
  if (!optimizer.defined()) return std::nullopt;
  // handle_id() is the OptimizerImpl the handle holds.
  const auto* impl = static_cast<const optimizers::detail::OptimizerImpl*>(optimizer.handle_id());
  OptimizerConfig c;
  c.name = impl->name;
  c.options = impl->options;
  c.schedule = impl->schedule;
  using namespace optimizers;  // NOLINT: the Impl classes of this file
  if (const auto* o = dynamic_cast<const SGDImpl*>(impl)) {
    c.class_name = "SGD";
    c.momentum = o->momentum;
    c.nesterov = o->nesterov;
  } else if (const auto* o = dynamic_cast<const AdamImpl*>(impl)) {
    c.class_name = o->class_name;
    c.beta_1 = o->beta_1;
    c.beta_2 = o->beta_2;
    c.epsilon = o->epsilon;
    c.amsgrad = o->amsgrad;
    // AdamW's weight_decay is an option like any optimizer's (with_decay).
  } else if (const auto* o = dynamic_cast<const RMSpropImpl*>(impl)) {
    c.class_name = "RMSprop";
    c.rho = o->rho;
    c.momentum = o->momentum;
    c.epsilon = o->epsilon;
    c.centered = o->centered;
  } else if (const auto* o = dynamic_cast<const AdagradImpl*>(impl)) {
    c.class_name = "Adagrad";
    c.initial_accumulator_value = o->initial;
    c.epsilon = o->epsilon;
  } else if (const auto* o = dynamic_cast<const AdadeltaImpl*>(impl)) {
    c.class_name = "Adadelta";
    c.rho = o->rho;
    c.epsilon = o->epsilon;
  } else if (const auto* o = dynamic_cast<const AdamaxImpl*>(impl)) {
    c.class_name = "Adamax";
    c.beta_1 = o->beta_1;
    c.beta_2 = o->beta_2;
    c.epsilon = o->epsilon;
  } else if (const auto* o = dynamic_cast<const NadamImpl*>(impl)) {
    c.class_name = "Nadam";
    c.beta_1 = o->beta_1;
    c.beta_2 = o->beta_2;
    c.epsilon = o->epsilon;
  } else if (const auto* o = dynamic_cast<const FtrlImpl*>(impl)) {
    c.class_name = "Ftrl";
    c.learning_rate_power = o->lr_power;
    c.initial_accumulator_value = o->initial;
    c.l1 = o->l1;
    c.l2 = o->l2;
    c.l2_shrinkage = o->l2_shrinkage;
    c.beta = o->beta;
  } else if (const auto* o = dynamic_cast<const LionImpl*>(impl)) {
    c.class_name = "Lion";
    c.beta_1 = o->beta_1;
    c.beta_2 = o->beta_2;
  } else if (const auto* o = dynamic_cast<const LambImpl*>(impl)) {
    c.class_name = "Lamb";
    c.beta_1 = o->beta_1;
    c.beta_2 = o->beta_2;
    c.epsilon = o->epsilon;
  } else if (const auto* o = dynamic_cast<const ScheduleFreeAdamWImpl*>(impl)) {
    c.class_name = "ScheduleFreeAdamW";
    c.beta_1 = o->beta_1;
    c.beta_2 = o->beta_2;
    c.epsilon = o->epsilon;
    c.warmup_steps = o->warmup_steps;
  } else if (const auto* o = dynamic_cast<const MuonImpl*>(impl)) {
    c.class_name = "Muon";
    c.muon = o->m;
  } else if (const auto* o = dynamic_cast<const AdafactorImpl*>(impl)) {
    c.class_name = "Adafactor";
    c.beta_2_decay = o->beta_2_decay;
    c.epsilon_1 = o->epsilon_1;
    c.epsilon_2 = o->epsilon_2;
    c.clip_threshold = o->clip_threshold;
    c.relative_step = o->relative_step;
  } else {
    return std::nullopt;
  }
  return c;
}

}  // namespace tapeflow::keras::detail::compile_access
