#include "ops/array_more.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/allocator.h"
#include "core/check.h"
#include "core/context.h"
#include "core/error.h"
#include "core/hash.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/indexing.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/random_draws.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/sort.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

void check_defined(const char* op, const Tensor& t, const char* what) {
  TF_CHECK_ARG(t.defined(), op, "{} is an undefined tensor (TF's None)", what);
}

}  // namespace

std::vector<Tensor> unstack(const Tensor& x, std::optional<int64_t> num, int axis) {
  const char* op = "unstack";
  check_defined(op, x, "the value");
  TF_CHECK_ARG(x.rank() >= 1, op, "cannot unstack a scalar (shape {})", x.shape().to_string());
  const int a = detail::normalize_axis(op, axis, x.shape());
  const int64_t n = x.shape()[a];
  TF_CHECK_ARG(n != None || num.has_value(), op, "dimension {} of shape {} is unknown: give num", a,
               x.shape().to_string());
  TF_CHECK_ARG(!num || n == None || *num == n, op,
               "num = {} does not match dimension {} of shape {}", num.value_or(0), a,
               x.shape().to_string());
  const int64_t count = n == None ? *num : n;
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(count));
  if (n != None && count > 0) {
    // One split: its gradient concatenates the pieces' (one slice each would pad each to x).
    for (const Tensor& piece : split(x, std::vector<int64_t>(static_cast<size_t>(count), 1), a))
      out.push_back(squeeze(piece, {a}));
    return out;
  }
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
    begin[static_cast<size_t>(a)] = i;
    size[static_cast<size_t>(a)] = 1;
    out.push_back(squeeze(slice(x, begin, size), {a}));
  }
  return out;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shift, const std::vector<int>& axis) {
  const char* op = "roll";
  check_defined(op, x, "the input");
  TF_CHECK_ARG(shift.size() == axis.size(), op,
               "shift and axis must have the same length, got {} and {}", shift.size(),
               axis.size());
  const TensorShape& s = x.shape();
  std::vector<int64_t> total(static_cast<size_t>(s.rank()), 0);
  for (size_t i = 0; i < axis.size(); ++i) {
    TF_CHECK_ARG(axis[i] >= -s.rank() && axis[i] < s.rank(), op,
                 "axis {} is out of range for an input of shape {}", axis[i], s.to_string());
    total[static_cast<size_t>(axis[i] < 0 ? axis[i] + s.rank() : axis[i])] += shift[i];
  }
  Tensor y = x;
  for (int a = 0; a < s.rank(); ++a) {
    if (total[static_cast<size_t>(a)] == 0) continue;
    const int64_t n = s[a];
    TF_CHECK_ARG(n != None, op, "dimension {} of shape {} must be known to roll along it", a,
                 s.to_string());
    if (n == 0) continue;
    const int64_t k = ((total[static_cast<size_t>(a)] % n) + n) % n;
    if (k == 0) continue;
    // Output position j takes input (j - k) mod n: the last k elements, then the first n - k.
    std::vector<int64_t> b0(static_cast<size_t>(s.rank()), 0), z0(b0.size(), -1);
    std::vector<int64_t> b1 = b0, z1 = z0;
    b0[static_cast<size_t>(a)] = n - k;
    z0[static_cast<size_t>(a)] = k;
    z1[static_cast<size_t>(a)] = n - k;
    y = concat({slice(y, b0, z0), slice(y, b1, z1)}, a);
  }
  return y;
}

Tensor roll(const Tensor& x, int64_t shift, int axis) {
  return roll(x, std::vector<int64_t>{shift}, std::vector<int>{axis});
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& xs, const std::string& indexing) {
  const char* op = "meshgrid";
  TF_CHECK_ARG(indexing == "xy" || indexing == "ij", op,
               "indexing must be \"xy\" or \"ij\", got \"{}\"", indexing);
  const size_t n = xs.size();
  std::vector<Tensor> flat(n);
  std::vector<int64_t> out_shape(n);
  for (size_t i = 0; i < n; ++i) {
    check_defined(op, xs[i], "an input");
    TF_CHECK_ARG(xs[i].dtype() == xs[0].dtype(), op,
                 "all inputs must share a dtype, got {} (input 0) and {} (input {})",
                 dtype_name(xs[0].dtype()), dtype_name(xs[i].dtype()), i);
    flat[i] = reshape(xs[i], TensorShape{-1});
    out_shape[i] = flat[i].shape()[0];
    TF_CHECK_ARG(out_shape[i] != None, op, "input {} of shape {} must have a known size", i,
                 xs[i].shape().to_string());
  }
  const bool xy = indexing == "xy" && n >= 2;
  if (xy) std::swap(out_shape[0], out_shape[1]);
  std::vector<Tensor> out(n);
  for (size_t i = 0; i < n; ++i) {
    size_t pos = i;
    if (xy && i < 2) pos = 1 - i;
    std::vector<int64_t> shape(n, 1);
    shape[pos] = out_shape[pos];
    out[i] = broadcast_to(reshape(flat[i], TensorShape(shape)), TensorShape(out_shape));
  }
  return out;
}

Tensor sequence_mask(const Tensor& lengths, std::optional<int64_t> maxlen, DType dtype) {
  const char* op = "sequence_mask";
  check_defined(op, lengths, "lengths");
  detail::check_int_tensor(op, lengths, "lengths");
  int64_t m = 0;
  if (maxlen) {
    TF_CHECK_ARG(*maxlen >= 0, op, "maxlen must be non-negative, got {}", *maxlen);
    m = *maxlen;
  } else {
    TF_CHECK_ARG(!lengths.is_symbolic(), op,
                 "without maxlen the result's shape depends on max(lengths), which a traced "
                 "function does not have: give maxlen");
    for (int64_t v : detail::host_ints(op, lengths, "lengths")) m = std::max(m, v);
  }
  return detail::naming_errors(op, [&] {
    const Tensor row = range(0.0, static_cast<double>(m), 1.0, lengths.dtype());
    const Tensor mask = less(row, expand_dims(lengths, -1));
    return dtype == bool_ ? mask : cast(mask, dtype);
  });
}

Tensor reverse_sequence(const Tensor& x, const Tensor& seq_lengths, int seq_axis, int batch_axis) {
  const char* op = "reverse_sequence";
  check_defined(op, x, "the input");
  check_defined(op, seq_lengths, "seq_lengths");
  detail::check_int_tensor(op, seq_lengths, "seq_lengths");
  const TensorShape& s = x.shape();
  TF_CHECK_ARG(s.rank() >= 2, op, "the input must have rank at least 2, got shape {}",
               s.to_string());
  const int sa = detail::normalize_axis(op, seq_axis, s);
  const int ba = detail::normalize_axis(op, batch_axis, s);
  TF_CHECK_ARG(sa != ba, op, "seq_axis and batch_axis must differ, both are {}", sa);
  TF_CHECK_ARG(seq_lengths.rank() == 1 && seq_lengths.shape()[0] == s[ba], op,
               "seq_lengths of shape {} must be a vector as long as dimension {} (batch_axis) "
               "of the input of shape {}",
               seq_lengths.shape().to_string(), ba, s.to_string());
  const int64_t t = s[sa];
  TF_CHECK_ARG(t != None, op, "dimension {} (seq_axis) of shape {} must be known", sa,
               s.to_string());
  if (!seq_lengths.is_symbolic())
    for (int64_t v : detail::host_ints(op, seq_lengths, "seq_lengths"))
      TF_CHECK_ARG(v >= 0 && v <= t, op,
                   "seq_lengths holds {}, outside [0, {}] (dimension {} of the input of shape {})",
                   v, t, sa, s.to_string());
  // Move batch then seq to the front, gather each batch row's positions, move them back.
  std::vector<int> perm = {ba, sa};
  for (int i = 0; i < s.rank(); ++i)
    if (i != ba && i != sa) perm.push_back(i);
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int>(i);
  const Tensor xt = transpose(x, perm);
  // (B, 1), clamped to [0, T]: a traced call has not checked the lengths, and an index past the
  // sequence would make the gather fail (or read zeros on a GPU).
  const Tensor len = expand_dims(
      clip_by_value(cast(seq_lengths, int64), Tensor(int64_t{0}), Tensor(int64_t{t})), 1);
  const Tensor j = expand_dims(range(0.0, static_cast<double>(t), 1.0, int64), 0);  // (1, T)
  const Tensor src = where(less(j, len), len - j - Tensor(int64_t{1}), j);
  const Tensor idx = expand_dims(src, -1);  // (B, T, 1)
  return transpose(gather_nd(xt, idx, 1), inv);
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats, std::optional<int> axis) {
  const char* op = "repeat";
  check_defined(op, x, "the input");
  Tensor v = x;
  int a = 0;
  if (!axis) {
    v = reshape(x, TensorShape{-1});
  } else if (x.rank() == 0) {
    // TF reads a scalar as a vector of one along axis 0 (or -1).
    TF_CHECK_ARG(*axis == 0 || *axis == -1, op, "axis {} given for a scalar input", *axis);
    v = reshape(x, TensorShape{1});
  } else {
    a = detail::normalize_axis(op, *axis, x.shape());
  }
  const int64_t n = v.shape()[a];
  TF_CHECK_ARG(n != None, op, "dimension {} of shape {} must be known", a, v.shape().to_string());
  for (int64_t r : repeats) TF_CHECK_ARG(r >= 0, op, "repeats must be non-negative, got {}", r);
  if (repeats.size() == 1 && detail::open_shapes() && v.is_symbolic() && repeats[0] > 0) {
    // A trace for None dimensions (the axis may be one): each slice tiled along a new axis
    // after it, the two axes then merged, with sizes read when the graph runs (an index table
    // would hold the traced length).
    std::vector<int64_t> multiples(static_cast<size_t>(v.rank() + 1), 1);
    multiples[static_cast<size_t>(a + 1)] = repeats[0];
    std::vector<int> groups(static_cast<size_t>(v.rank()), 1);
    groups[static_cast<size_t>(a)] = 2;
    return detail::merge_axes(tile(detail::insert_axes(v, {a + 1}), multiples), groups);
  }
  TF_CHECK_ARG(repeats.size() == 1 || static_cast<int64_t>(repeats.size()) == n, op,
               "repeats has {} entries but dimension {} of shape {} has {} (give 1 or {})",
               repeats.size(), a, v.shape().to_string(), n, n);
  // The index table has one int64 per output slice: refused up front when it cannot fit in the
  // host's memory (a std::vector would throw std::bad_alloc).
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = repeats[repeats.size() == 1 ? 0 : size_t(i)];
    TF_CHECK_T(ResourceExhaustedError,
               r <= static_cast<int64_t>(detail::host_memory_bytes() / sizeof(int64_t)) - total, op,
               "{} repeats of the {} slices along axis {} of shape {} need an index table "
               "larger than this machine's memory",
               repeats.size() == 1 ? fmt::format("{}", r) : std::string("the"), n, a,
               v.shape().to_string());
    total += r;
  }
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(total));
  // One gather along the axis (also for a single count): it keeps the other dimensions open,
  // so a traced function serves every batch size with one graph.
  for (int64_t i = 0; i < n; ++i)
    idx.insert(idx.end(), static_cast<size_t>(repeats[repeats.size() == 1 ? 0 : size_t(i)]), i);
  return gather(v, constant(idx, {static_cast<int64_t>(idx.size())}), a);
}

Tensor repeat(const Tensor& x, int64_t repeats, std::optional<int> axis) {
  return repeat(x, std::vector<int64_t>{repeats}, axis);
}

Tensor repeat(const Tensor& x, const Tensor& repeats, std::optional<int> axis) {
  const char* op = "repeat";
  check_defined(op, repeats, "repeats");
  detail::check_int_tensor(op, repeats, "repeats");
  TF_CHECK_ARG(repeats.rank() <= 1, op, "repeats must be a scalar or a vector, got shape {}",
               repeats.shape().to_string());
  return repeat(x, detail::host_ints(op, repeats, "repeats"), axis);
}

Tensor where(const Tensor& cond) {
  const char* op = "where";
  check_defined(op, cond, "the condition");
  TF_CHECK_ARG(!cond.is_symbolic(), op,
               "the one-argument form's result shape depends on the condition's values, which a "
               "traced function does not have: use tf::where(cond, x, y) inside tf::function");
  const TensorShape& s = cond.shape();
  const std::vector<bool> nz =
      (cond.dtype() == bool_ ? cond : not_equal(cond, zeros_like(cond))).numpy<bool>();
  std::vector<int64_t> coords;
  int64_t count = 0;
  for (size_t f = 0; f < nz.size(); ++f) {
    if (!nz[f]) continue;
    ++count;
    int64_t rem = static_cast<int64_t>(f);
    std::vector<int64_t> c(static_cast<size_t>(s.rank()));
    for (int d = s.rank() - 1; d >= 0; --d) {
      c[static_cast<size_t>(d)] = rem % s[d];
      rem /= s[d];
    }
    coords.insert(coords.end(), c.begin(), c.end());
  }
  return constant(coords, {count, static_cast<int64_t>(s.rank())});
}

namespace random {

namespace {

void check_categorical_args(const char* op, const Tensor& logits, int64_t num_samples,
                            DType dtype) {
  check_defined(op, logits, "logits");
  TF_CHECK_ARG(is_floating(logits.dtype()), op, "logits must be floating, got {}",
               dtype_name(logits.dtype()));
  TF_CHECK_ARG(logits.rank() == 2, op, "logits must be (batch, classes), got shape {}",
               logits.shape().to_string());
  TF_CHECK_ARG(logits.shape()[1] != 0, op, "logits of shape {} have no class to draw from",
               logits.shape().to_string());
  TF_CHECK_ARG(num_samples >= 0, op, "num_samples must be non-negative, got {}", num_samples);
  TF_CHECK_ARG(dtype == int32 || dtype == int64, op, "dtype must be int32 or int64, got {}",
               dtype_name(dtype));
}

// The inverse CDF in float64: u * total, u uniform in [0, 1), looked up in each row's running
// sum of exp(logits - max) (the first class whose running sum exceeds it), so memory grows with
// batch x (classes + samples), not with their product. A row whose logits are all -inf (nothing
// to draw) gives num_classes, as TF's out-of-range marker.
Tensor categorical_samples(const Tensor& logits, int64_t num_samples, DType dtype,
                           detail::RandomDraws& draws) {
  const int64_t classes = logits.shape()[1];
  const Tensor x = cast(logits, float64);
  const Tensor top = reduce_max(x, std::vector<int>{1}, true);
  const Tensor p = exp(x - where(equal(top, top - top), top, zeros_like(top)));
  const Tensor running = cumsum(p, 1);
  const Tensor total = slice(running, {0, classes - 1}, {-1, 1});  // (batch, 1)
  const Tensor u = draws.uniform_like(tile(total, {1, num_samples}), 0.0, 1.0, float64);
  const Tensor drawn = searchsorted(running, u * total, "right", int64);
  // u * total may round up to total itself: that draw is the last class with any mass.
  const Tensor last = cast(argmax(reverse(cast(greater(p, 0.0), int32), {1}), 1), int64);
  const Tensor last_class = expand_dims(int64_t{classes - 1} - last, 1);
  const Tensor fixed = where(
      logical_and(greater_equal(drawn, int64_t{classes}), greater(total, 0.0)), last_class, drawn);
  return cast(fixed, dtype);
}

void check_truncated_normal_args(const char* op, const TensorShape& shape, double mean,
                                 double stddev, DType dtype) {
  TF_CHECK_ARG(is_floating(dtype), op,
               "dtype must be float16, bfloat16, float32 or float64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  TF_CHECK_ARG(stddev >= 0 && std::isfinite(stddev) && std::isfinite(mean), op,
               "needs a finite mean and a finite, non-negative stddev, got {} and {}", mean,
               stddev);
}

// Drawn in float64 and rounded once at the end, so the bound test is exact for every dtype.
// Traced: 17 draws (16 redraw rounds), then clipped to the bounds.
Tensor truncated_normal_samples(const TensorShape& shape, double mean, double stddev, DType dtype,
                                detail::RandomDraws& draws) {
  Tensor z;
  const bool traced = detail::rejection_rounds(17, [&](int pass) {
    const Tensor fresh = draws.normal(shape, 0.0, 1.0, float64);
    z = pass == 0 ? fresh : where(greater(abs(z), 2.0), fresh, z);
    return less_equal(abs(z), 2.0);
  });
  if (traced) z = clip_by_value(z, Tensor(-2.0), Tensor(2.0));
  return cast(z * stddev + mean, dtype);
}

}  // namespace

Tensor categorical(const Tensor& logits, int64_t num_samples, DType dtype,
                   std::optional<int64_t> seed) {
  const char* op = "categorical";
  check_categorical_args(op, logits, num_samples, dtype);
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateful(seed);
    return categorical_samples(logits, num_samples, dtype, draws);
  });
}

Tensor stateless_categorical(const Tensor& logits, int64_t num_samples, std::array<int64_t, 2> seed,
                             DType dtype) {
  const char* op = "stateless_categorical";
  check_categorical_args(op, logits, num_samples, dtype);
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateless(seed);
    return categorical_samples(logits, num_samples, dtype, draws);
  });
}

Tensor truncated_normal(const TensorShape& shape, double mean, double stddev, DType dtype,
                        std::optional<int64_t> seed) {
  const char* op = "truncated_normal";
  check_truncated_normal_args(op, shape, mean, stddev, dtype);
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateful(seed);
    return truncated_normal_samples(shape, mean, stddev, dtype, draws);
  });
}

Tensor stateless_truncated_normal(const TensorShape& shape, std::array<int64_t, 2> seed,
                                  double mean, double stddev, DType dtype) {
  const char* op = "stateless_truncated_normal";
  check_truncated_normal_args(op, shape, mean, stddev, dtype);
  return detail::naming_errors(op, [&] {
    detail::RandomDraws draws = detail::RandomDraws::stateless(seed);
    return truncated_normal_samples(shape, mean, stddev, dtype, draws);
  });
}

Tensor shuffle(const Tensor& value, std::optional<int64_t> seed) {
  const char* op = "shuffle";
  check_defined(op, value, "the value");
  TF_CHECK_ARG(value.rank() >= 1, op, "the value must have rank at least 1, got a scalar");
  // The permutation is the stable argsort of one float64 key per row. The keys take their shape
  // from the value's first column, so that a traced function with an unknown first dimension
  // serves every size with one graph (random_uniform_like reads it when the graph runs).
  // Rows of no elements (an inner dimension of 0): every order is the same.
  for (int d = 1; d < value.rank(); ++d)
    if (value.shape()[d] == 0) return value;
  std::vector<int64_t> begin(static_cast<size_t>(value.rank()), 0), size(begin.size(), 1);
  size[0] = -1;
  const Tensor column = reshape(slice(value, begin, size), TensorShape{-1});
  const Tensor keys = detail::random_uniform_like(column, 0.0, 1.0, float64, seed);
  return gather(value, argsort(keys, 0, "ASCENDING", true), 0);
}

Tensor stateless_uniform(const TensorShape& shape, std::array<int64_t, 2> seed, double minval,
                         double maxval, DType dtype) {
  const char* op = "stateless_random_uniform";
  // No `executions` counter: every run (eager or replayed) uses exactly this seed pair.
  const prims::RandomUniform prim =
      detail::uniform_primitive(op, shape, minval, maxval, dtype, static_cast<uint64_t>(seed[0]),
                                static_cast<uint64_t>(seed[1]));
  return detail::naming_errors(op,
                               [&] { return detail::dispatch(prim, std::span<const Tensor>{}); });
}

Tensor stateless_normal(const TensorShape& shape, std::array<int64_t, 2> seed, double mean,
                        double stddev, DType dtype) {
  const char* op = "stateless_random_normal";
  TF_CHECK_ARG(is_floating(dtype), op,
               "dtype must be float16, bfloat16, float32 or float64, got {}", dtype_name(dtype));
  TF_CHECK_ARG(shape.is_fully_defined(), op, "shape {} has an unknown dimension",
               shape.to_string());
  TF_CHECK_ARG(stddev >= 0 && std::isfinite(mean) && std::isfinite(stddev), op,
               "needs a finite mean and a finite, non-negative stddev, got {} and {}", mean,
               stddev);
  prims::RandomNormal prim(shape, dtype, mean, stddev, static_cast<uint64_t>(seed[0]),
                           static_cast<uint64_t>(seed[1]));
  return detail::naming_errors(op,
                               [&] { return detail::dispatch(prim, std::span<const Tensor>{}); });
}

std::array<int64_t, 2> fold_in(std::array<int64_t, 2> seed, int64_t data) {
  // Philox keys of the pair's stream continued at a position made from data: distinct data give
  // unrelated pairs, and the first key stays, so the result is again a valid pair.
  const uint64_t k2 = detail::continue_random_stream(
      static_cast<uint64_t>(seed[1]),
      detail::splitmix64_mix(static_cast<uint64_t>(data) ^ 0x6A09E667F3BCC909ull) | 1);
  return {static_cast<int64_t>(detail::splitmix64_mix(static_cast<uint64_t>(seed[0]) ^ k2)),
          static_cast<int64_t>(k2)};
}

std::vector<std::array<int64_t, 2>> split(std::array<int64_t, 2> seed, int num) {
  TF_CHECK_ARG(num >= 0, "split", "num must be non-negative, got {}", num);
  std::vector<std::array<int64_t, 2>> out;
  out.reserve(static_cast<size_t>(num));
  for (int i = 0; i < num; ++i) out.push_back(fold_in(seed, -1 - static_cast<int64_t>(i)));
  return out;
}

}  // namespace random

}  // namespace tapeflow
