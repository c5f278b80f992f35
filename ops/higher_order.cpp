#include "ops/higher_order.h"

#include <string>

#include "core/check.h"
#include "core/context.h"
#include "core/device.h"
#include "ops/array_more.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/traced_loop.h"

namespace tapeflow::detail {

namespace {

bool tracing() {
  return thread_context().trace != nullptr;
}

void check_elems(const char* op, const Tensor& elems, const char* what) {
  TF_CHECK_ARG(elems.defined(), op, "{} is undefined", what);
  TF_CHECK_ARG(elems.rank() >= 1, op,
               "{} must be 1+ dimensional (fn gets its slices along the first dimension), got a "
               "scalar {}",
               what, dtype_name(elems.dtype()));
}

// The first-dimension slices of elems (rank >= 1, checked).
std::vector<Tensor> elements_of(const char* op, const Tensor& elems, const char* what) {
  check_elems(op, elems, what);
  return unstack(elems);
}

Tensor moved_like(const Tensor& t, const Tensor& like) {
  return t.placement() == like.placement() ? t : copy_to(t, like.placement());
}

// Traced without an initializer: the first element (the last with reverse), as a slice and as
// a (1, ...) block, and the others; n must be known.
struct FirstAndRest {
  Tensor first, block, rest;
};
FirstAndRest split_first(const Tensor& elems, bool reverse) {
  const int64_t n = elems.shape()[0];
  std::vector<Tensor> parts = reverse ? split(elems, std::vector<int64_t>{n - 1, 1}, 0)
                                      : split(elems, std::vector<int64_t>{1, n - 1}, 0);
  FirstAndRest r;
  r.block = reverse ? parts[1] : parts[0];
  r.rest = reverse ? parts[0] : parts[1];
  r.first = squeeze(r.block, {0});
  return r;
}

TensorShape with_leading(int64_t n, const TensorShape& s) {
  std::vector<int64_t> dims{n};
  for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
  return TensorShape(dims);
}

// An empty output of (0, ...) `shape`, on elems' device.
Tensor empty_stack(const TensorShape& shape, DType dtype, const Tensor& like) {
  DeviceScope scope(like.placement());
  return zeros(with_leading(0, shape), dtype);
}

// i: the element, or -1 for fn traced once for every element.
void check_result(const char* op, const Tensor& r, const TensorMeta& want, int64_t i,
                  const std::string& what, const char* why) {
  const std::string where =
      i >= 0 ? fmt::format("for element {}", i) : std::string("(traced for every element)");
  TF_CHECK_ARG(r.defined(), op, "fn returned an undefined tensor {}", where);
  TF_CHECK_ARG(r.dtype() == want.dtype, op, "fn returned {} {} {}, but {} is {}{}", what,
               dtype_name(r.dtype()), where, what, dtype_name(want.dtype), why);
  TF_CHECK_ARG(r.shape() == want.shape, op,
               "fn returned {} of shape {} {}, but of shape {} {}: every step must give the "
               "same shape",
               what, r.shape().to_string(), where, want.shape.to_string(),
               i >= 0 ? "before" : "on entry");
}

}  // namespace

std::vector<Tensor> map_fn_impl(const MapFn& fn, const std::vector<Tensor>& elems,
                                const std::vector<TensorSpec>& sig, bool single_output) {
  const char* op = "map_fn";
  TF_CHECK_ARG(!elems.empty(), op, "elems is empty: give at least one tensor");
  for (size_t k = 0; k < elems.size(); ++k) {
    const std::string what = elems.size() == 1 ? "elems" : fmt::format("elems[{}]", k);
    check_elems(op, elems[k], what.c_str());
    const int64_t d = elems[k].shape()[0], d0 = elems[0].shape()[0];
    TF_CHECK_ARG(d == d0 || d == None || d0 == None, op,
                 "the elems have different first dimensions: {} has shape {} and elems[0] {}", what,
                 elems[k].shape().to_string(), elems[0].shape().to_string());
  }
  auto output_dtype = [&](size_t j) { return j < sig.size() ? sig[j].dtype : elems[0].dtype(); };
  // The results' types, from the first element's (or the traced) results.
  std::vector<TensorMeta> want;
  auto check = [&](const std::vector<Tensor>& r, int64_t i) {
    if (want.empty()) {
      TF_CHECK_ARG(!r.empty(), op, "fn returned no tensors");
      TF_CHECK_ARG(sig.empty() || sig.size() == r.size(), op,
                   "fn returned {} tensors but fn_output_signature has {} specs", r.size(),
                   sig.size());
      for (size_t j = 0; j < r.size(); ++j) {
        TF_CHECK_ARG(r[j].defined(), op, "fn returned an undefined tensor for element 0");
        want.push_back({r[j].shape(), output_dtype(j)});
        if (j < sig.size())
          TF_CHECK_ARG(sig[j].is_compatible_with(r[j].shape()), op,
                       "fn returned shape {} {}, which does not match fn_output_signature's {}",
                       r[j].shape().to_string(),
                       i >= 0 ? fmt::format("for element {}", i) : "(traced)",
                       sig[j].shape.to_string());
      }
    }
    TF_CHECK_ARG(r.size() == want.size(), op,
                 "fn returned {} tensors for element {} but {} for element 0", r.size(), i,
                 want.size());
    for (size_t j = 0; j < r.size(); ++j) {
      const std::string what =
          single_output ? std::string("a result") : fmt::format("result {}", j);
      check_result(op, r[j], want[j], i, what,
                   j < sig.size() ? " (fn_output_signature's)"
                                  : " (elems' dtype: give fn_output_signature for another)");
    }
  };

  if (tracing()) {
    // One loop node that runs fn's trace for every element.
    const OpsScanBody body = [&](const std::vector<Tensor>&, const std::vector<Tensor>& x) {
      std::vector<Tensor> r = fn(x);
      check(r, -1);
      return r;
    };
    if (auto r = ops_scan(op, body, {}, elems, false)) return *r;
    want.clear();
  }

  std::vector<std::vector<Tensor>> slices;
  for (size_t k = 0; k < elems.size(); ++k) {
    const std::string what = elems.size() == 1 ? "elems" : fmt::format("elems[{}]", k);
    slices.push_back(elements_of(op, elems[k], what.c_str()));
  }
  const int64_t n = elems[0].shape()[0];
  auto element = [&](int64_t i) {
    std::vector<Tensor> x;
    for (const auto& sl : slices) x.push_back(sl[static_cast<size_t>(i)]);
    return x;
  };

  if (n == 0) {
    bool known = !sig.empty();
    for (const TensorSpec& sp : sig) known &= sp.shape.is_fully_defined();
    std::vector<TensorMeta> metas;
    if (known) {
      for (const TensorSpec& sp : sig) metas.push_back({sp.shape, sp.dtype});
    } else {
      // fn runs once on zeros of an element's shape to learn its results' shapes.
      std::vector<Tensor> probe;
      {
        DeviceScope scope(elems[0].placement());
        for (const Tensor& e : elems) {
          std::vector<int64_t> dims;
          for (int d = 1; d < e.rank(); ++d) dims.push_back(e.shape()[d]);
          probe.push_back(zeros(TensorShape(dims), e.dtype()));
        }
      }
      PauseTapes pause;
      const std::vector<Tensor> r = fn(probe);
      for (size_t j = 0; j < r.size(); ++j) metas.push_back({r[j].shape(), output_dtype(j)});
    }
    std::vector<Tensor> out;
    for (const TensorMeta& m : metas) out.push_back(empty_stack(m.shape, m.dtype, elems[0]));
    return out;
  }

  std::vector<std::vector<Tensor>> results;  // [output][element]
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Tensor> r = fn(element(i));
    check(r, i);
    results.resize(r.size());
    for (size_t j = 0; j < r.size(); ++j) results[j].push_back(std::move(r[j]));
  }
  std::vector<Tensor> out;
  for (const auto& r : results) out.push_back(stack(r, 0));
  return out;
}

namespace {

// fold and scan inside a trace: one loop node, fn traced once (nullopt: the caller unrolls).
// The accumulator starts at the initializer, else at the first element (the last with
// reverse; n must then be known). Returns the final accumulator and, for scan, the stacked ones.
std::optional<std::pair<Tensor, Tensor>> traced_fold(const char* op, const FoldFn& fn,
                                                     const Tensor& elems,
                                                     const std::optional<Tensor>& initializer,
                                                     bool reverse, bool stacked) {
  if (!tracing()) return std::nullopt;
  const int64_t n = elems.shape()[0];
  if (!initializer && n == None) return std::nullopt;
  TF_CHECK_ARG(initializer.has_value() || n > 0, op,
               "elems of shape {} has no elements and no initializer is given",
               elems.shape().to_string());
  if (initializer) TF_CHECK_ARG(initializer->defined(), op, "the initializer is undefined");
  FirstAndRest parts;
  if (!initializer) parts = split_first(elems, reverse);
  const Tensor init = initializer ? *initializer : parts.first;
  const TensorMeta want{init.shape(), init.dtype()};
  const OpsScanBody body = [&](const std::vector<Tensor>& acc, const std::vector<Tensor>& x) {
    Tensor next = fn(acc[0], x[0]);
    check_result(op, next, want, -1, "the accumulator", " (the initial accumulator's)");
    return stacked ? std::vector<Tensor>{next, next} : std::vector<Tensor>{next};
  };
  auto r = ops_scan(op, body, {init}, {initializer ? elems : parts.rest}, reverse);
  if (!r) return std::nullopt;
  Tensor all;
  if (stacked) {
    all = (*r)[1];
    if (!initializer)
      all = reverse ? concat({all, moved_like(parts.block, all)}, 0)
                    : concat({moved_like(parts.block, all), all}, 0);
  }
  return std::make_pair((*r)[0], all);
}

}  // namespace

Tensor fold_impl(const char* op, const FoldFn& fn, const Tensor& elems,
                 const std::optional<Tensor>& initializer, bool reverse) {
  check_elems(op, elems, "elems");
  if (auto r = traced_fold(op, fn, elems, initializer, reverse, false)) return r->first;
  std::vector<Tensor> xs = elements_of(op, elems, "elems");
  const int64_t n = static_cast<int64_t>(xs.size());
  TF_CHECK_ARG(initializer.has_value() || n > 0, op,
               "elems of shape {} has no elements and no initializer is given",
               elems.shape().to_string());
  int64_t i = reverse ? n - 1 : 0;
  const int64_t step = reverse ? -1 : 1;
  Tensor acc;
  if (initializer) {
    TF_CHECK_ARG(initializer->defined(), op, "the initializer is undefined");
    acc = *initializer;
  } else {
    acc = xs[static_cast<size_t>(i)];
    i += step;
  }
  const TensorMeta want{acc.shape(), acc.dtype()};
  for (; i >= 0 && i < n; i += step) {
    acc = fn(acc, xs[static_cast<size_t>(i)]);
    check_result(op, acc, want, i, "the accumulator", " (the initial accumulator's)");
  }
  return acc;
}

Tensor scan_impl(const FoldFn& fn, const Tensor& elems, const std::optional<Tensor>& initializer,
                 bool reverse) {
  const char* op = "scan";
  check_elems(op, elems, "elems");
  if (auto r = traced_fold(op, fn, elems, initializer, reverse, true)) return r->second;
  std::vector<Tensor> xs = elements_of(op, elems, "elems");
  const int64_t n = static_cast<int64_t>(xs.size());
  TF_CHECK_ARG(initializer.has_value() || n > 0, op,
               "elems of shape {} has no elements and no initializer is given",
               elems.shape().to_string());
  if (initializer) TF_CHECK_ARG(initializer->defined(), op, "the initializer is undefined");
  if (n == 0) return empty_stack(initializer->shape(), initializer->dtype(), elems);
  std::vector<Tensor> out(static_cast<size_t>(n));
  int64_t i = reverse ? n - 1 : 0;
  const int64_t step = reverse ? -1 : 1;
  Tensor acc;
  if (initializer) {
    acc = *initializer;
  } else {
    acc = xs[static_cast<size_t>(i)];
    out[static_cast<size_t>(i)] = acc;
    i += step;
  }
  const TensorMeta want{acc.shape(), acc.dtype()};
  for (; i >= 0 && i < n; i += step) {
    acc = fn(acc, xs[static_cast<size_t>(i)]);
    check_result(op, acc, want, i, "the accumulator", " (the initial accumulator's)");
    out[static_cast<size_t>(i)] = acc;
  }
  return stack(out, 0);
}

}  // namespace tapeflow::detail
