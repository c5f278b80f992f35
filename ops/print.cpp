// tf::print: the Print primitive (a host op with side effects, kept in traced graphs) and the text
// of TF's tf.print, which is TF's C++ Tensor::SummarizeValue(summarize, print_v2=true): nested
// brackets, elements separated by one space, "..." in place of the middle of any dimension longer
// than 2 * summarize, floats as TF's StrCat writes them ("%.6g", or "%.9g" when six digits do not
// round-trip; "%.15g"/"%.17g" for doubles), bools as 1 and 0.
#include "ops/print.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/print.h"
#include "ops/dispatch.h"

namespace tapeflow {

namespace {

std::mutex& print_mutex() {
  static std::mutex mu;
  return mu;
}
std::ostream* g_print_stream = nullptr;  // guarded by print_mutex(); null means std::cerr

// TF's FloatToBuffer/DoubleToBuffer: digits10 significant digits, or max_digits10 when those do
// not read back as the same value.
template <class F>
std::string fp_text(F value) {
  if (std::isnan(value)) return std::signbit(value) ? "-nan" : "nan";
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%.*g", std::numeric_limits<F>::digits10,
                        static_cast<double>(value));
  F parsed{};
  auto r = std::from_chars(buf, buf + n, parsed);
  if (r.ec != std::errc{} || r.ptr != buf + n || parsed != value)
    n = std::snprintf(buf, sizeof buf, "%.*g", std::numeric_limits<F>::max_digits10,
                      static_cast<double>(value));
  return std::string(buf, static_cast<size_t>(n));
}

std::string element_text(const void* data, DType dt, int64_t i) {
  switch (dt.id) {
    case DTypeId::Float16:
      return fp_text(static_cast<float>(static_cast<const half_t*>(data)[i]));
    case DTypeId::BFloat16:
      return fp_text(static_cast<float>(static_cast<const bfloat16_t*>(data)[i]));
    case DTypeId::Float32: return fp_text(static_cast<const float*>(data)[i]);
    case DTypeId::Float64: return fp_text(static_cast<const double*>(data)[i]);
    case DTypeId::Int32: return std::to_string(static_cast<const int32_t*>(data)[i]);
    case DTypeId::Int64: return std::to_string(static_cast<const int64_t*>(data)[i]);
    case DTypeId::UInt8: return std::to_string(static_cast<const uint8_t*>(data)[i]);
    case DTypeId::Bool: return static_cast<const uint8_t*>(data)[i] ? "1" : "0";
  }
  return {};
}

// TF's PrintDimSpacing.
void dim_spacing(int dim, int num_dims, std::string& out) {
  if (dim == num_dims - 1) {
    out += ' ';
    return;
  }
  out.append(static_cast<size_t>(num_dims - dim - 1), '\n');
  out.append(static_cast<size_t>(dim + 1), ' ');
}

// TF's PrintOneDimV2.
void print_dim(const TensorShape& shape, int dim, int64_t at_ends, const void* data, DType dt,
               int64_t index, std::string& out) {
  const int num_dims = shape.rank();
  if (dim == num_dims) {
    out += element_text(data, dt, index);
    return;
  }
  out += '[';
  const int64_t count = shape[dim];
  const int64_t start_of_end = std::max(at_ends, count - at_ends);
  int64_t per_iter = 1;
  for (int d = dim + 1; d < num_dims; ++d) per_iter *= shape[d];
  for (int64_t i = 0; i < at_ends && i < count; ++i) {
    if (i > 0) dim_spacing(dim, num_dims, out);
    print_dim(shape, dim + 1, at_ends, data, dt, index + per_iter * i, out);
  }
  if (count > 2 * at_ends) {
    dim_spacing(dim, num_dims, out);
    out += "...";
  }
  for (int64_t i = start_of_end; i < count; ++i) {
    dim_spacing(dim, num_dims, out);
    print_dim(shape, dim + 1, at_ends, data, dt, index + per_iter * i, out);
  }
  out += ']';
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

namespace detail {

void set_print_stream(std::ostream* os) {
  std::lock_guard<std::mutex> lock(print_mutex());
  g_print_stream = os;
}

std::string print_v2_text(const Tensor& t, int summarize) {
  const int64_t n = t.num_elements();
  const int64_t limit = summarize < 0 ? n : std::min<int64_t>(summarize, n);
  const HostBytes hb = host_bytes(t);
  std::string out;
  if (t.rank() == 0) {
    for (int64_t i = 0; i < limit; ++i) {
      if (i > 0) out += ' ';
      out += element_text(hb.data, t.dtype(), i);
    }
    if (n > limit) out += "...";
    return out;
  }
  print_dim(t.shape(), 0, limit, hb.data, t.dtype(), 0, out);
  return out;
}

std::string print_v2_elements(const Tensor& t, const std::vector<int64_t>& flat) {
  const HostBytes hb = host_bytes(t);
  std::string out = "[";
  for (size_t i = 0; i < flat.size(); ++i) {
    TF_ASSERT(flat[i] >= 0 && flat[i] < t.num_elements());
    if (i > 0) out += ' ';
    out += element_text(hb.data, t.dtype(), flat[i]);
  }
  return out + "]";
}

}  // namespace detail

void print_args(const std::vector<PrintArg>& args) {
  prims::Print prim;
  std::vector<Tensor> tensors;
  for (const PrintArg& a : args) {
    if (const auto* s = std::get_if<std::string>(&a)) {
      prim.pieces.emplace_back(*s);
      continue;
    }
    const Tensor& t = std::get<Tensor>(a);
    if (!t.defined()) {
      prim.pieces.emplace_back(std::string("None"));  // Python's str(None)
    } else if (t.is_weak() && !t.is_symbolic() && t.rank() == 0) {
      // A C++ scalar stands for a Python scalar, which tf.print writes with str().
      prim.pieces.emplace_back(detail::numpy_str(t));
    } else {
      prim.pieces.emplace_back(std::monostate{});
      tensors.push_back(t);
    }
  }
  detail::dispatch_multi(prim, tensors);
}

namespace prims {

void Print::eval_cpu(std::span<const Tensor> inputs, std::span<Tensor>) const {
  std::string line;
  size_t k = 0;
  bool first = true;
  for (const auto& p : pieces) {
    if (!first) line += ' ';
    first = false;
    if (const auto* s = std::get_if<std::string>(&p)) {
      line += *s;
    } else {
      TF_ASSERT(k < inputs.size());
      line += detail::print_v2_text(inputs[k++]);
    }
  }
  line += '\n';
  std::lock_guard<std::mutex> lock(print_mutex());
  std::ostream& os = g_print_stream ? *g_print_stream : std::cerr;
  os << line;
  os.flush();
}

// Host code either way: the text is read back through detail::host_bytes.
void Print::eval_cuda(std::span<const Tensor> inputs, std::span<Tensor> outputs) const {
  eval_cpu(inputs, outputs);
}

std::string Print::attributes() const {
  std::string out = "pieces=[";
  bool first = true;
  for (const auto& p : pieces) {
    if (!first) out += ", ";
    first = false;
    if (const auto* s = std::get_if<std::string>(&p))
      out += quoted(*s);
    else
      out += "<tensor>";
  }
  return out + "]";
}

}  // namespace prims

}  // namespace tapeflow
