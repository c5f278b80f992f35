// Printing tensors as TF2 does: print(t) shows numpy's str() of the value inside a tf.Tensor(...)
// frame, and a Variable shows numpy's repr(). This file reproduces numpy 1.24's arrayprint rules
// with the default options (precision=8, threshold=1000, edgeitems=3, linewidth=75,
// floatmode='maxprec', sign='-', no legacy mode): FloatingFormat, IntegerFormat, BoolFormat,
// _leading_trailing (summarisation) and _formatArray (layout and line wrapping). Floats are
// formatted from the element's own type: the shortest digits that round-trip through it (numpy's
// Dragon4 in unique mode), capped at 8 digits after the point by exact rounding of the binary value.
#include "core/print.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace tapeflow {
namespace detail {

namespace {

constexpr int kPrecision = 8;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 75;

// ---------------------------------------------------------------------------------------------
// Decimal digits of finite non-negative values
// ---------------------------------------------------------------------------------------------

// value = digits[0] . digits[1..] x 10^exp
struct Decimal {
  std::string digits;  // "0" for zero
  int exp = 0;
};

void strip_trailing_zeros(Decimal& d) {
  while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
}

// Parses "d.ddde+XX" / "de-XX" (no sign), as printf("%e") and to_chars(scientific) write it.
Decimal parse_scientific(std::string_view s) {
  Decimal d;
  const size_t e = s.find('e');
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') d.digits += s[i];
  size_t p = e + 1;
  if (p < s.size() && s[p] == '+') ++p;
  std::from_chars(s.data() + p, s.data() + s.size(), d.exp);
  return d;
}

// The exact binary value rounded (half to even, as Dragon4 does) to `frac` digits after the
// first significant one. glibc's printf is exact.
Decimal exact_scientific(double a, int frac) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.*e", frac, a);
  return parse_scientific(std::string_view(buf, static_cast<size_t>(n)));
}

// Shortest digits that identify a float16 value among float16 values (closest such string).
Decimal shortest_half(double a) {
  const half_t h(static_cast<float>(a));
  const uint16_t bits = static_cast<uint16_t>(h.bits & 0x7fffu);
  const double lo = half_t::to_float(static_cast<uint16_t>(bits - 1));
  // Above the largest finite half (65504) values round to infinity from 65520 up.
  const double hi = bits == 0x7bffu ? 65536.0 : half_t::to_float(static_cast<uint16_t>(bits + 1));
  const double lo_mid = (lo + a) / 2, hi_mid = (a + hi) / 2;  // exact in double
  const bool even = (bits & 1u) == 0;
  auto round_trips = [&](double x) {
    return (x > lo_mid && x < hi_mid) || (even && (x == lo_mid || x == hi_mid));
  };
  for (int p = 0; p < 17; ++p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", p, a);
    const double x = std::strtod(buf, nullptr);
    if (round_trips(x)) {
      Decimal d = parse_scientific(buf);
      strip_trailing_zeros(d);
      return d;
    }
    // The nearest (p+1)-digit decimal may fall outside while its neighbour on the other side of
    // `a` falls inside (the gap below a power of two is half the gap above).
    Decimal d = parse_scientific(buf);
    long long m = std::strtoll(d.digits.c_str(), nullptr, 10);
    m += x < a ? 1 : -1;
    char nb[64];
    std::snprintf(nb, sizeof nb, "%llde%d", m, d.exp - p);
    if (m > 0 && round_trips(std::strtod(nb, nullptr))) {
      Decimal r;
      r.digits = std::to_string(m);
      r.exp = d.exp - p + static_cast<int>(r.digits.size()) - 1;
      strip_trailing_zeros(r);
      return r;
    }
  }
  return exact_scientific(a, 16);  // not reached for finite halves
}

// Shortest round-trip digits of |v| in the element type `id` (float16, float32 or float64).
Decimal shortest(double a, DTypeId id) {
  if (a == 0) return Decimal{"0", 0};
  char buf[64];
  std::to_chars_result r;
  if (id == DTypeId::Float64) {
    r = std::to_chars(buf, buf + sizeof buf, a, std::chars_format::scientific);
  } else if (id == DTypeId::Float32) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(a), std::chars_format::scientific);
  } else {
    return shortest_half(a);
  }
  Decimal d = parse_scientific(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  strip_trailing_zeros(d);
  return d;
}

// Integer and fraction parts of a positional rendering of d (no sign).
void positional_parts(const Decimal& d, std::string& ip, std::string& fp) {
  const int n = static_cast<int>(d.digits.size());
  if (d.exp >= 0) {
    if (n <= d.exp + 1) {
      ip = d.digits + std::string(static_cast<size_t>(d.exp + 1 - n), '0');
      fp.clear();
    } else {
      ip = d.digits.substr(0, static_cast<size_t>(d.exp + 1));
      fp = d.digits.substr(static_cast<size_t>(d.exp + 1));
    }
  } else {
    ip = "0";
    fp = std::string(static_cast<size_t>(-d.exp - 1), '0') + d.digits;
  }
  if (d.digits == "0") fp.clear();
}

// Positional digits as numpy's array formatter makes them (unique, precision 8, trim '.'):
// shortest digits, or the value rounded to 8 fractional digits with trailing zeros removed.
// With `to_units` (numpy's min_digits=0, used when printing but not when measuring) digits are
// generated at least down to the units digit, so an integral value shows its exact digits
// (float16 12048 prints "12048." where the shortest digits would be "12050.").
void array_positional(double v, DTypeId id, bool to_units, std::string& ip, std::string& fp) {
  const double a = std::fabs(v);
  positional_parts(shortest(a, id), ip, fp);
  if (to_units && fp.empty()) {
    // Shortest digits without a fraction imply an integral value (every smaller integer is
    // representable in the element type), so these are its exact digits.
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.0f", a);
    ip = buf;
  } else if (static_cast<int>(fp.size()) > kPrecision) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", kPrecision, a);
    std::string_view s(buf);
    const size_t dot = s.find('.');
    ip = std::string(s.substr(0, dot));
    fp = std::string(s.substr(dot + 1));
    while (!fp.empty() && fp.back() == '0') fp.pop_back();
  }
  if (std::signbit(v)) ip = "-" + ip;
}

// Scientific digits (unique): shortest, capped at `precision` digits after the first by rounding,
// extended with the value's exact digits up to `min_digits`.
Decimal array_scientific_digits(double a, DTypeId id, int precision, int min_digits) {
  Decimal d = shortest(a, id);
  const int sf = static_cast<int>(d.digits.size()) - 1;
  if (sf > precision) {
    d = exact_scientific(a, precision);
    if (min_digits < precision) strip_trailing_zeros(d);
  } else if (sf < min_digits) {
    d = exact_scientific(a, min_digits);
  }
  return d;
}

std::string exponent_text(int exp, int min_digits) {
  std::string s = exp < 0 ? "e-" : "e+";
  std::string digits = std::to_string(exp < 0 ? -exp : exp);
  if (static_cast<int>(digits.size()) < min_digits)
    digits.insert(0, static_cast<size_t>(min_digits) - digits.size(), '0');
  return s + digits;
}

std::string mantissa_text(const Decimal& d, bool keep_point) {
  std::string s(1, d.digits[0]);
  if (d.digits.size() > 1) {
    s += '.';
    s += d.digits.substr(1);
  } else if (keep_point) {
    s += '.';
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Scalars (numpy's scalar str/repr, also used for 0-d arrays)
// ---------------------------------------------------------------------------------------------

std::string float_scalar_text(double v, DTypeId id) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const double a = std::fabs(v);
  const long double la = a;
  std::string out = std::signbit(v) ? "-" : "";
  const Decimal d = shortest(a, id);
  if (a == 0 || (la >= 1.e-4L && la < 1.e16L)) {
    std::string ip, fp;
    positional_parts(d, ip, fp);
    out += ip + "." + (fp.empty() ? "0" : fp);
  } else {
    out += mantissa_text(d, false) + exponent_text(d.exp, 2);
  }
  return out;
}

// ml_dtypes' bfloat16 repr: C++ stream output of the float value (NaN without a sign).
std::string bfloat16_text(float f) {
  std::ostringstream os;
  os << (std::isnan(f) ? std::fabs(f) : f);
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Element formatters (numpy's FloatingFormat, IntegerFormat, BoolFormat)
// ---------------------------------------------------------------------------------------------

class FloatFormat {
 public:
  FloatFormat(const std::vector<double>& data, DTypeId id) : id_(id) {
    std::vector<double> finite;
    finite.reserve(data.size());
    for (double v : data)
      if (std::isfinite(v)) finite.push_back(v);

    double max_val = 0, min_val = 0;
    bool any_nonzero = false;
    for (double v : finite) {
      const double a = std::fabs(v);
      if (a == 0) continue;
      if (!any_nonzero) {
        max_val = min_val = a;
        any_nonzero = true;
      } else {
        max_val = std::max(max_val, a);
        min_val = std::min(min_val, a);
      }
    }
    if (any_nonzero) {
      // numpy divides in the element type (a float16 ratio may overflow to inf).
      double ratio;
      if (id == DTypeId::Float64) {
        ratio = max_val / min_val;
      } else if (id == DTypeId::Float32) {
        ratio = static_cast<double>(static_cast<float>(max_val) / static_cast<float>(min_val));
      } else {
        ratio = static_cast<float>(
            half_t(static_cast<float>(max_val) / static_cast<float>(min_val)));
      }
      exp_format_ = max_val >= 1.e8 || min_val < 0.0001 || ratio > 1000.;
    }

    if (finite.empty()) {
      pad_left_ = pad_right_ = 0;
      exp_size_ = -1;
    } else if (exp_format_) {
      int max_frac = 0, max_int = 0, max_exp = 0;
      for (double v : finite) {
        const Decimal d = array_scientific_digits(std::fabs(v), id, kPrecision, 0);
        max_frac = std::max(max_frac, static_cast<int>(d.digits.size()) - 1);
        max_int = std::max(max_int, std::signbit(v) ? 2 : 1);
        max_exp = std::max(max_exp, static_cast<int>(exponent_text(d.exp, 2).size()) - 1);
      }
      exp_size_ = max_exp - 1;
      precision_ = max_frac;
      pad_left_ = max_int;
      pad_right_ = exp_size_ + 2 + precision_;
    } else {
      size_t max_int = 0, max_frac = 0;
      for (double v : finite) {
        std::string ip, fp;
        array_positional(v, id, /*to_units=*/false, ip, fp);
        max_int = std::max(max_int, ip.size());
        max_frac = std::max(max_frac, fp.size());
      }
      pad_left_ = static_cast<int>(max_int);
      pad_right_ = static_cast<int>(max_frac);
    }

    if (finite.size() != data.size()) {
      bool neginf = false;
      for (double v : data)
        if (std::isinf(v) && v < 0) neginf = true;
      const int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + (neginf ? 1 : 0) - offset});
    }
  }

  std::string operator()(double v) const {
    if (!std::isfinite(v)) {
      const std::string ret = std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf");
      const int pad = pad_left_ + pad_right_ + 1 - static_cast<int>(ret.size());
      return std::string(static_cast<size_t>(std::max(pad, 0)), ' ') + ret;
    }
    if (exp_format_) {
      const Decimal d = array_scientific_digits(std::fabs(v), id_, precision_, precision_);
      std::string s = std::signbit(v) ? "-" : "";
      s += mantissa_text(d, true) + exponent_text(d.exp, exp_size_);
      const int lead = 1 + (std::signbit(v) ? 1 : 0);
      if (pad_left_ > lead) s.insert(0, static_cast<size_t>(pad_left_ - lead), ' ');
      return s;
    }
    std::string ip, fp;
    array_positional(v, id_, /*to_units=*/true, ip, fp);
    std::string s;
    if (pad_left_ > static_cast<int>(ip.size()))
      s.append(static_cast<size_t>(pad_left_) - ip.size(), ' ');
    s += ip + "." + fp;
    if (pad_right_ > static_cast<int>(fp.size()))
      s.append(static_cast<size_t>(pad_right_) - fp.size(), ' ');
    return s;
  }

 private:
  DTypeId id_;
  bool exp_format_ = false;
  int pad_left_ = 0, pad_right_ = 0;
  int precision_ = kPrecision;
  int exp_size_ = -1;
};

// ---------------------------------------------------------------------------------------------
// Reading elements
// ---------------------------------------------------------------------------------------------

template <class T>
T load(const void* data, int64_t i) {
  return static_cast<const T*>(data)[i];
}

double load_double(const void* data, DType dt, int64_t i) {
  double v = 0;
  TF_DISPATCH_ALL_TYPES(dt, v = static_cast<double>(static_cast<compute_t<T>>(load<T>(data, i))))
  return v;
}

int64_t load_int(const void* data, DType dt, int64_t i) {
  switch (dt.id) {
    case DTypeId::Int32: return load<int32_t>(data, i);
    case DTypeId::Int64: return load<int64_t>(data, i);
    case DTypeId::UInt8: return load<uint8_t>(data, i);
    case DTypeId::Bool: return load<uint8_t>(data, i) != 0;
    default: return static_cast<int64_t>(load_double(data, dt, i));
  }
}

std::string scalar_text(const void* data, DType dt, int64_t i) {
  switch (dt.id) {
    case DTypeId::Float16:
    case DTypeId::Float32:
    case DTypeId::Float64: return float_scalar_text(load_double(data, dt, i), dt.id);
    case DTypeId::BFloat16: return bfloat16_text(static_cast<float>(load<bfloat16_t>(data, i)));
    case DTypeId::Bool: return load<uint8_t>(data, i) ? "True" : "False";
    default: return std::to_string(load_int(data, dt, i));
  }
}

// Flat indices of the elements numpy shows, in row-major order (_leading_trailing).
void shown_indices(const TensorShape& shape, bool summarise, int axis, int64_t base,
                   std::vector<int64_t>& out) {
  if (axis == shape.rank()) {
    out.push_back(base);
    return;
  }
  const int64_t n = shape[axis];
  int64_t stride = 1;
  for (int a = axis + 1; a < shape.rank(); ++a) stride *= shape[a];
  auto visit = [&](int64_t i) { shown_indices(shape, summarise, axis + 1, base + i * stride, out); };
  if (summarise && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) visit(i);
    for (int64_t i = n - kEdgeItems; i < n; ++i) visit(i);
  } else {
    for (int64_t i = 0; i < n; ++i) visit(i);
  }
}

// The formatted text of every shown element, in order.
std::vector<std::string> format_elements(const void* data, DType dt,
                                         const std::vector<int64_t>& idx) {
  std::vector<std::string> words;
  words.reserve(idx.size());
  switch (dt.id) {
    case DTypeId::Float16:
    case DTypeId::Float32:
    case DTypeId::Float64: {
      std::vector<double> vals;
      vals.reserve(idx.size());
      for (int64_t i : idx) vals.push_back(load_double(data, dt, i));
      const FloatFormat fmt(vals, dt.id);
      for (double v : vals) words.push_back(fmt(v));
      break;
    }
    case DTypeId::BFloat16:
      for (int64_t i : idx) words.push_back(bfloat16_text(static_cast<float>(load<bfloat16_t>(data, i))));
      break;
    case DTypeId::Bool:
      for (int64_t i : idx) words.push_back(load<uint8_t>(data, i) ? " True" : "False");
      break;
    default: {
      std::vector<std::string> s;
      s.reserve(idx.size());
      int64_t lo = 0, hi = 0;
      bool first = true;
      for (int64_t i : idx) {
        const int64_t v = load_int(data, dt, i);
        if (first || v < lo) lo = v;
        if (first || v > hi) hi = v;
        first = false;
        s.push_back(std::to_string(v));
      }
      const size_t width = std::max(std::to_string(lo).size(), std::to_string(hi).size());
      for (auto& w : s) words.push_back(std::string(width - std::min(width, w.size()), ' ') + w);
      break;
    }
  }
  return words;
}

// ---------------------------------------------------------------------------------------------
// Layout (numpy's _formatArray with _extendLine, legacy off)
// ---------------------------------------------------------------------------------------------

std::string rstrip(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && std::isspace(static_cast<unsigned char>(s[n - 1]))) --n;
  return std::string(s.substr(0, n));
}

class Layout {
 public:
  Layout(const TensorShape& shape, const std::vector<std::string>& words, std::string sep,
         bool summarise)
      : shape_(shape), words_(words), sep_(std::move(sep)), summarise_(summarise) {}

  std::string format(int axis, const std::string& hanging, int width) {
    const int axes_left = shape_.rank() - axis;
    if (axes_left == 0) return words_[pos_++];
    const std::string next_hanging = hanging + ' ';
    const int next_width = width - 1;
    const int64_t len = shape_[axis];
    const bool show_summary = summarise_ && 2 * kEdgeItems < len;
    const int64_t leading = show_summary ? kEdgeItems : 0;
    const int64_t trailing = show_summary ? kEdgeItems : len;

    std::string s;
    if (axes_left == 1) {
      const int elem_width =
          width - std::max(static_cast<int>(rstrip(sep_).size()), 1);  // len(']')
      std::string line = hanging;
      for (int64_t i = 0; i < leading; ++i) {
        extend(s, line, format(axis + 1, next_hanging, next_width), elem_width, hanging);
        line += sep_;
      }
      if (show_summary) {
        extend(s, line, "...", elem_width, hanging);
        line += sep_;
      }
      for (int64_t i = trailing; i > 1; --i) {
        extend(s, line, format(axis + 1, next_hanging, next_width), elem_width, hanging);
        line += sep_;
      }
      extend(s, line, format(axis + 1, next_hanging, next_width), elem_width, hanging);
      s += line;
    } else {
      const std::string line_sep = rstrip(sep_) + std::string(static_cast<size_t>(axes_left - 1), '\n');
      for (int64_t i = 0; i < leading; ++i)
        s += hanging + format(axis + 1, next_hanging, next_width) + line_sep;
      if (show_summary) s += hanging + "..." + line_sep;
      for (int64_t i = trailing; i > 1; --i)
        s += hanging + format(axis + 1, next_hanging, next_width) + line_sep;
      s += hanging + format(axis + 1, next_hanging, next_width);
    }
    return "[" + s.substr(hanging.size()) + "]";
  }

 private:
  static void extend(std::string& s, std::string& line, const std::string& word, int width,
                     const std::string& next_prefix) {
    bool needs_wrap = static_cast<int>(line.size() + word.size()) > width;
    if (line.size() <= next_prefix.size()) needs_wrap = false;  // wrapping would not help
    if (needs_wrap) {
      s += rstrip(line) + "\n";
      line = next_prefix;
    }
    line += word;
  }

  const TensorShape& shape_;
  const std::vector<std::string>& words_;
  size_t pos_ = 0;
  std::string sep_;
  bool summarise_;
};

// numpy's array2string for a non-empty array of rank >= 1.
std::string array_to_string(const Tensor& t, const void* data, const std::string& sep,
                            const std::string& prefix, int line_width) {
  const bool summarise = t.num_elements() > kThreshold;
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(std::min<int64_t>(t.num_elements(), 4096)));
  shown_indices(t.shape(), summarise, 0, 0, idx);
  const std::vector<std::string> words = format_elements(data, t.dtype(), idx);
  Layout layout(t.shape(), words, sep, summarise);
  // (Not " " + std::string(...): GCC 12 warns -Wrestrict on that under the sanitizers.)
  return layout.format(0, std::string(prefix.size() + 1, ' '), line_width);
}

}  // namespace

std::string numpy_scalar_str(double v, DType dtype) {
  switch (dtype.id) {
    case DTypeId::Float16:
    case DTypeId::Float32:
    case DTypeId::Float64: return float_scalar_text(v, dtype.id);
    case DTypeId::BFloat16: return bfloat16_text(static_cast<float>(v));
    case DTypeId::Bool: return v != 0 ? "True" : "False";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", v);
      return buf;
    }
  }
}

std::string numpy_str(const Tensor& t) {
  const HostBytes hb = host_bytes(t);
  if (t.rank() == 0) return scalar_text(hb.data, t.dtype(), 0);
  if (t.num_elements() == 0) return "[]";
  return array_to_string(t, hb.data, " ", "", kLineWidth);
}

std::string numpy_repr(const Tensor& t) {
  const HostBytes hb = host_bytes(t);
  std::string text;
  if (t.rank() == 0) {
    // TF's numpy_text shows a scalar as repr(value.item()): a Python float, so float16,
    // bfloat16 and float32 values print as the double they widen to (0.10000000149011612).
    text = is_floating(t.dtype())
               ? float_scalar_text(load_double(hb.data, t.dtype(), 0), DTypeId::Float64)
               : scalar_text(hb.data, t.dtype(), 0);
  } else {
    const DType dt = t.dtype();
    // numpy leaves out the dtype of its default types (int_, float_, bool_) unless empty.
    const bool implied = dt == float64 || dt == int64 || dt == bool_;
    const bool skip_dtype = implied && t.num_elements() > 0;
    const std::string prefix = "array(";
    const std::string suffix = skip_dtype ? ")" : ",";
    std::string lst;
    if (t.num_elements() > 0) {
      lst = array_to_string(t, hb.data, ", ", prefix,
                            kLineWidth - static_cast<int>(suffix.size()));
    } else if (t.rank() == 1) {
      lst = "[]";
    } else {
      lst = "[], shape=" + t.shape().to_string();
    }
    text = prefix + lst + suffix;
    if (!skip_dtype) {
      const std::string dtype_str = "dtype=" + std::string(dtype_name(dt)) + ")";
      const size_t nl = text.rfind('\n');
      const size_t last_line_len = nl == std::string::npos ? text.size() : text.size() - nl - 1;
      if (static_cast<int>(last_line_len + dtype_str.size() + 1) > kLineWidth)
        text += "\n" + std::string(prefix.size(), ' ');
      else
        text += " ";
      text += dtype_str;
    }
  }
  if (text.find('\n') != std::string::npos) text = "\n" + text;
  return text;
}

}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "None";
  if (t.is_symbolic()) {
    // A placeholder inside a trace has no value (TF prints a graph tensor without one too).
    return os << "Tensor(shape=" << t.shape().to_string() << ", dtype=" << dtype_name(t.dtype())
              << ")";
  }
  std::string text = detail::numpy_str(t);
  if (text.find('\n') != std::string::npos) text = "\n" + text;
  return os << "tf.Tensor(" << text << ", shape=" << t.shape().to_string()
            << ", dtype=" << dtype_name(t.dtype()) << ")";
}

}  // namespace tapeflow
