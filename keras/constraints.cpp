#include "keras/constraints.h"

#include <cctype>
#include <cmath>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {

Tensor Constraint::operator()(const Tensor& weight) const {
  TF_CHECK_T(FailedPreconditionError, defined(), "Constraint", "the constraint is empty");
  Tensor out = fn_(weight);
  TF_CHECK_ARG(out.defined() && out.shape() == weight.shape(), name_.c_str(),
               "constraint \"{}\" must keep the weight's shape {}, got {}", name_,
               weight.shape().to_string(),
               out.defined() ? out.shape().to_string() : std::string("an undefined tensor"));
  return out.dtype() == weight.dtype() ? out : cast(out, weight.dtype());
}

namespace constraints {

namespace {

constexpr double kEpsilon = 1e-7;  // Keras' backend.epsilon()

Constraint::Config with_axis(std::vector<std::pair<std::string, double>> numbers,
                             std::vector<int> axis) {
  Constraint::Config c;
  c.numbers = std::move(numbers);
  c.axis = std::move(axis);
  c.has_axis = true;
  return c;
}

// sqrt(sum(w^2, axis, keepdims)), naming the constraint on a bad axis.
Tensor norms(const char* name, const Tensor& w, const std::vector<int>& axis) {
  return detail::naming_errors(name, [&] { return sqrt(reduce_sum(square(w), axis, true)); });
}

void check_axis(const char* name, const std::vector<int>& axis) {
  TF_CHECK_ARG(!axis.empty(), name, "axis must name at least one axis");
}

struct Entry {
  std::weak_ptr<Variable::State> owner;
  Constraint constraint;
};
std::mutex g_mu;
std::unordered_map<const void*, Entry>& registry() {
  static auto* r = new std::unordered_map<const void*, Entry>();
  return *r;
}

}  // namespace

Constraint MaxNorm(double max_value, std::vector<int> axis) {
  const char* name = "MaxNorm";
  TF_CHECK_ARG(max_value >= 0 && std::isfinite(max_value), name,
               "max_value must be finite and >= 0, got {}", max_value);
  check_axis(name, axis);
  return Constraint(name, with_axis({{"max_value", max_value}}, axis),
                    [max_value, axis, name](const Tensor& w) {
                      const Tensor n = norms(name, w, axis);
                      const Tensor desired = clip_by_value(n, Tensor(0.0), Tensor(max_value));
                      return w * (desired / (n + kEpsilon));
                    });
}

Constraint MinMaxNorm(double min_value, double max_value, double rate, std::vector<int> axis) {
  const char* name = "MinMaxNorm";
  TF_CHECK_ARG(std::isfinite(min_value) && std::isfinite(max_value) && min_value >= 0 &&
                   min_value <= max_value,
               name, "needs finite 0 <= min_value <= max_value, got {} and {}", min_value,
               max_value);
  TF_CHECK_ARG(rate >= 0 && rate <= 1, name, "rate must be in [0, 1], got {}", rate);
  check_axis(name, axis);
  return Constraint(
      name, with_axis({{"min_value", min_value}, {"max_value", max_value}, {"rate", rate}}, axis),
      [min_value, max_value, rate, axis, name](const Tensor& w) {
        const Tensor n = norms(name, w, axis);
        const Tensor desired =
            clip_by_value(n, Tensor(min_value), Tensor(max_value)) * rate + n * (1.0 - rate);
        return w * (desired / (n + kEpsilon));
      });
}

Constraint NonNeg() {
  return Constraint("NonNeg", Constraint::Config{}, [](const Tensor& w) {
    return w * cast(greater_equal(w, Tensor(0.0)), w.dtype());
  });
}

Constraint UnitNorm(std::vector<int> axis) {
  const char* name = "UnitNorm";
  check_axis(name, axis);
  return Constraint(name, with_axis({}, axis), [axis, name](const Tensor& w) {
    return w / (norms(name, w, axis) + kEpsilon);
  });
}

Constraint get(const std::string& identifier) {
  std::string id;
  for (char c : identifier)
    if (c != '_') id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (id.empty()) return {};
  if (id == "maxnorm") return MaxNorm();
  if (id == "minmaxnorm") return MinMaxNorm();
  if (id == "nonneg") return NonNeg();
  if (id == "unitnorm") return UnitNorm();
  TF_THROW(InvalidArgumentError, "constraints.get",
           "unknown constraint '{}' (known: max_norm, min_max_norm, non_neg, unit_norm)",
           identifier);
}

Constraint of(const Variable& v) {
  if (!v.defined()) return {};
  std::lock_guard lock(g_mu);
  auto& r = registry();
  const auto it = r.find(v.handle_id());
  if (it == r.end()) return {};
  const auto alive = it->second.owner.lock();
  if (!alive || static_cast<const void*>(alive.get()) != v.handle_id()) {
    r.erase(it);  // a variable that died, whose address another one now has
    return {};
  }
  return it->second.constraint;
}

void attach(const Variable& v, const Constraint& c) {
  TF_CHECK_ARG(v.defined(), "constraints.attach", "the variable is an empty handle");
  std::lock_guard lock(g_mu);
  auto& r = registry();
  // Entries of variables that died go first (a long run makes and drops many layers).
  for (auto it = r.begin(); it != r.end();)
    it = it->second.owner.expired() ? r.erase(it) : std::next(it);
  if (!c.defined()) {
    r.erase(v.handle_id());
    return;
  }
  r.insert_or_assign(v.handle_id(), Entry{v.weak_state(), c});
}

}  // namespace constraints

}  // namespace tapeflow::keras
