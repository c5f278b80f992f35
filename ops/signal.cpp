#include "ops/signal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/cpu/special_math.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/scatter.h"
#include "ops/unary.h"

namespace tapeflow {

namespace {

// rfft's number of outputs for a length (TF gives an empty axis for length 0).
int64_t rfft_bins(int64_t n) {
  return n == 0 ? 0 : n / 2 + 1;
}

void check_real(const char* op, DType d, const char* what) {
  TF_CHECK_ARG(d == float32 || d == float64, op,
               "{} must be float32 or float64 (TF's complex64 / complex128 parts), got {}", what,
               dtype_name(d));
}

void check_parts(const char* op, const Tensor& re, const Tensor& im) {
  TF_CHECK_ARG(re.defined() && im.defined(), op, "the real and imaginary parts must be defined");
  check_real(op, re.dtype(), "the real part");
  TF_CHECK_ARG(re.dtype() == im.dtype() && re.shape() == im.shape(), op,
               "the real and imaginary parts must have one shape and dtype, got {} {} and {} {}",
               re.shape().to_string(), dtype_name(re.dtype()), im.shape().to_string(),
               dtype_name(im.dtype()));
  TF_CHECK_ARG(re.shape().rank() >= 1, op, "expects a tensor of rank >= 1, got shape {}",
               re.shape().to_string());
}

// The kernels index a row's chirp with t * t (CPU) and cuFFT takes the length as a long long:
// rows of up to 2^31 - 1 elements.
void check_length(const char* op, int64_t n) {
  TF_CHECK_ARG(n <= int64_t{2147483647}, op,
               "a transform length of {} exceeds the largest supported, 2^31 - 1", n);
}

}  // namespace

namespace prims {

void Fft::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_parts(name(), in[0], in[1]);
  check_length(name(), in[0].shape()[-1]);
  out[0] = out[1] = {in[0].shape(), in[0].dtype()};
}

void Rfft::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_real(name(), in[0].dtype(), "the input");
  const TensorShape& s = in[0].shape();
  TF_CHECK_ARG(s.rank() >= 1 && s[-1] == fft_length, name(),
               "expects a signal [..., {}], got shape {}", fft_length, s.to_string());
  check_length(name(), fft_length);
  TensorShape o = s;
  o[-1] = rfft_bins(fft_length);
  out[0] = out[1] = {o, in[0].dtype()};
}

void Irfft::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_parts(name(), in[0], in[1]);
  const TensorShape& s = in[0].shape();
  TF_CHECK_ARG(s[-1] == rfft_bins(fft_length), name(),
               "expects [..., {}] frequencies for fft_length {}, got shape {}",
               rfft_bins(fft_length), fft_length, s.to_string());
  check_length(name(), fft_length);
  TensorShape o = s;
  o[-1] = fft_length;
  out[0] = {o, in[0].dtype()};
}

namespace {
// A cotangent the tape left undefined (nothing used that output): zeros like the other one.
std::pair<Tensor, Tensor> both(std::span<const Tensor> cts) {
  Tensor gr = cts[0], gi = cts[1];
  if (!gr.defined()) gr = zeros_like(gi);
  if (!gi.defined()) gi = zeros_like(gr);
  return {gr, gi};
}
}  // namespace

// fft: X = F x, F_kn = exp(-2 pi i k n / N); the cotangent of x is F^H g = N ifft(g). ifft:
// x = F^H X / N; the cotangent is F g / N = fft(g) / N.
uint32_t Fft::vjp_saves() const {
  return 0;
}
std::vector<Tensor> Fft::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                             std::span<const int> argnums, std::span<const Tensor>) const {
  auto [gr, gi] = both(cts);
  const Tensor g_in[] = {gr, gi};
  auto d = detail::dispatch_multi(Fft(!inverse), g_in);
  const double n = static_cast<double>(p[0].shape()[-1]);
  const double scale = inverse ? (n > 0 ? 1.0 / n : 0.0) : n;
  std::vector<Tensor> out;
  for (int a : argnums) out.push_back(multiply(d[static_cast<size_t>(a)], Tensor(scale)));
  return out;
}

// rfft keeps bins 0..N/2 of F x for a real x: the cotangent is Re(F^H g') with g' the
// cotangent zero-padded to N bins, i.e. Re(N ifft(g')).
uint32_t Rfft::vjp_saves() const {
  return 0;
}
std::vector<Tensor> Rfft::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                              std::span<const int> argnums, std::span<const Tensor>) const {
  auto [gr, gi] = both(cts);
  const int rank = p[0].shape().rank();
  std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(rank), {0, 0});
  pads.back().second = fft_length - rfft_bins(fft_length);
  const Tensor g_in[] = {pad(gr, pads), pad(gi, pads)};
  auto d = detail::dispatch_multi(Fft(true), g_in);
  std::vector<Tensor> out;
  for (int a : argnums) {
    (void)a;
    out.push_back(multiply(d[0], Tensor(static_cast<double>(fft_length))));
  }
  return out;
}

// irfft: x_n = (1/N) (y_0 + sum_{0<k<N/2} 2 Re(y_k e^{+i theta}) + [N even] y_{N/2} (-1)^n):
// d/d Re y_k = (w_k / N) Re(rfft(g))_k, d/d Im y_k = (w_k / N) Im(rfft(g))_k with w_k = 1 at
// k = 0 and (even N) k = N/2, else 2; the imaginary parts of those two bins do not matter.
uint32_t Irfft::vjp_saves() const {
  return 0;
}
std::vector<Tensor> Irfft::vjp(std::span<const Tensor> p, std::span<const Tensor> cts,
                               std::span<const int> argnums, std::span<const Tensor>) const {
  const Tensor g_in[] = {cts[0]};
  auto r = detail::dispatch_multi(Rfft(fft_length), g_in);
  const int64_t m = rfft_bins(fft_length);
  const double n = static_cast<double>(fft_length);
  std::vector<double> wr(static_cast<size_t>(m)), wi(static_cast<size_t>(m));
  for (int64_t k = 0; k < m; ++k) {
    const bool edge = k == 0 || (fft_length % 2 == 0 && k == fft_length / 2);
    wr[static_cast<size_t>(k)] = (edge ? 1.0 : 2.0) / n;
    wi[static_cast<size_t>(k)] = edge ? 0.0 : 2.0 / n;
  }
  const DType dt = p[0].dtype();
  std::vector<Tensor> out;
  for (int a : argnums) {
    const auto& w = a == 0 ? wr : wi;
    out.push_back(multiply(r[static_cast<size_t>(a)], detail::from_doubles(w, {m}, dt)));
  }
  return out;
}

}  // namespace prims

namespace signal {

namespace {

// x[..., begin : begin + size].
Tensor slice_last(const Tensor& x, int64_t begin, int64_t size) {
  const auto rank = static_cast<size_t>(x.shape().rank());
  std::vector<int64_t> b(rank, 0), sz(rank, -1);
  b.back() = begin;
  sz.back() = size;
  return slice(x, b, sz);
}

// x's innermost axis cropped or zero-padded to `len`.
Tensor fit_last(const Tensor& x, int64_t len) {
  const TensorShape& s = x.shape();
  const int64_t n = s[-1];
  if (n == len) return x;
  const int rank = s.rank();
  if (n > len) {
    std::vector<int64_t> begin(static_cast<size_t>(rank), 0), size(static_cast<size_t>(rank), -1);
    size.back() = len;
    return slice(x, begin, size);
  }
  std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(rank), {0, 0});
  pads.back().second = len - n;
  return pad(x, pads);
}

ComplexTensor fft_last(const char* op, const ComplexTensor& z, bool inverse) {
  check_parts(op, z.real, z.imag);
  TF_CHECK_ARG(z.real.shape()[-1] >= 0, op, "the innermost dimension must be known, got shape {}",
               z.real.shape().to_string());
  const Tensor in[] = {z.real, z.imag};
  auto o = detail::dispatch_multi(prims::Fft(inverse), in);
  return {o[0], o[1]};
}

// x with its innermost axis and axis -k (k >= 2) swapped.
Tensor swap_with_last(const Tensor& x, int k) {
  const int r = x.shape().rank();
  std::vector<int> perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - k)]);
  return transpose(x, perm);
}
ComplexTensor swap_with_last(const ComplexTensor& z, int k) {
  return {swap_with_last(z.real, k), swap_with_last(z.imag, k)};
}

// The complex DFT over axis -k (k >= 1).
ComplexTensor fft_axis(const char* op, const ComplexTensor& z, int k, bool inverse) {
  if (k == 1) return fft_last(op, z, inverse);
  return swap_with_last(fft_last(op, swap_with_last(z, k), inverse), k);
}

// x's axis -k cropped or zero-padded to `len`.
Tensor fit_axis(const Tensor& x, int k, int64_t len) {
  if (k == 1) return fit_last(x, len);
  if (x.shape()[-k] == len) return x;
  return swap_with_last(fit_last(swap_with_last(x, k), len), k);
}

// x with axis `axis` split into (a, b), a * b being its size; the other sizes come from x when
// the op runs under a shape-generic trace (a plain reshape otherwise).
Tensor split_axis(const Tensor& x, int axis, int64_t a, int64_t b) {
  const TensorShape& s = x.shape();
  if (!detail::open_shapes()) {
    std::vector<int64_t> dims;
    for (int i = 0; i < s.rank(); ++i) {
      if (i == axis) {
        dims.push_back(a);
        dims.push_back(b);
      } else {
        dims.push_back(s[i]);
      }
    }
    return reshape(x, TensorShape(dims));
  }
  // Sizes from x when the graph runs; a and b from an empty tensor of shape (a, b, 0).
  const Tensor ab = zeros(TensorShape{a, b, 0}, x.dtype());
  std::vector<std::pair<int, int>> parts;
  for (int i = 0; i < s.rank(); ++i) {
    if (i == axis) {
      parts.push_back({1, 0});
      parts.push_back({1, 1});
    } else {
      parts.push_back({0, i});
    }
  }
  return detail::reshape_from(x, {x, ab}, parts);
}

Tensor raised_cosine(const char* op, int64_t length, bool periodic, DType dtype, double a,
                     double b) {
  TF_CHECK_ARG(length >= 0, op, "window_length must be >= 0, got {}", length);
  TF_CHECK_ARG(is_floating(dtype), op, "dtype must be a floating dtype, got {}", dtype_name(dtype));
  std::vector<double> w(static_cast<size_t>(length), 1.0);
  if (length > 1) {
    const bool even = length % 2 == 0;
    const double n = static_cast<double>(length + (periodic && even ? 1 : 0) - 1);
    for (int64_t i = 0; i < length; ++i)
      w[static_cast<size_t>(i)] =
          a - b * std::cos(2.0 * std::numbers::pi * static_cast<double>(i) / n);
  }
  return detail::from_doubles(w, {length}, dtype);
}

int64_t enclosing_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// stft's and inverse_stft's sizes checked, and the FFT length (-1: the smallest power of two
// >= frame_length).
int64_t stft_length(const char* op, int64_t frame_length, int64_t frame_step, int64_t fft_length) {
  TF_CHECK_ARG(frame_length >= 1 && frame_step >= 1, op,
               "frame_length and frame_step must be positive, got {} and {}", frame_length,
               frame_step);
  TF_CHECK_ARG(fft_length == -1 || fft_length >= 1, op, "fft_length must be positive, got {}",
               fft_length);
  return fft_length == -1 ? enclosing_power_of_two(frame_length) : fft_length;
}

Tensor window_of(const char* op, const WindowFn& fn, int64_t length, DType dtype) {
  Tensor w = fn(length, dtype);
  TF_CHECK_ARG(w.defined() && w.shape() == TensorShape{length}, op,
               "window_fn must return a window of shape ({},), got {}", length,
               w.defined() ? w.shape().to_string() : std::string("an undefined tensor"));
  return w.dtype() == dtype ? w : cast(w, dtype);
}

// The N x N matrix M of dct type `type` (y = x M over the last axis), with TF's scaling.
std::vector<double> dct_matrix(int type, int64_t n, bool ortho) {
  const double pi = std::numbers::pi;
  const double nn = static_cast<double>(n);
  std::vector<double> m(static_cast<size_t>(n * n));
  for (int64_t j = 0; j < n; ++j) {    // input index
    for (int64_t k = 0; k < n; ++k) {  // output index
      const double dj = static_cast<double>(j), dk = static_cast<double>(k);
      double v = 0;
      switch (type) {
        case 1:
          v = (j == 0 || j == n - 1) ? std::cos(pi * dk * dj / (nn - 1))
                                     : 2.0 * std::cos(pi * dk * dj / (nn - 1));
          break;
        case 2:
          v = 2.0 * std::cos(pi * dk * (2.0 * dj + 1.0) / (2.0 * nn));
          if (ortho) v *= k == 0 ? std::sqrt(1.0 / (4.0 * nn)) : std::sqrt(1.0 / (2.0 * nn));
          break;
        case 3:
          v = j == 0 ? 1.0 : 2.0 * std::cos(pi * dj * (2.0 * dk + 1.0) / (2.0 * nn));
          if (ortho) v *= j == 0 ? 1.0 / std::sqrt(nn) : std::sqrt(1.0 / (2.0 * nn));
          break;
        default:
          v = 2.0 * std::cos(pi * (2.0 * dj + 1.0) * (2.0 * dk + 1.0) / (4.0 * nn));
          if (ortho) v *= std::sqrt(1.0 / (2.0 * nn));
          break;
      }
      m[static_cast<size_t>(j * n + k)] = v;
    }
  }
  return m;
}

// Up to this length the dct is a product with its N x N matrix; longer ones run through
// rfft/irfft of length 2N (2(N - 1) for type 1, 4N for type 4).
constexpr int64_t kDctMatrixMaxLength = 128;

// dct_matrix as a host tensor of `dtype`, built once per (type, n, ortho, dtype) and kept (N^2
// cosines took half of a 128-point dct's time): at most 4 * 128 * 2 * 6 matrices of at most
// 128 KiB each in practice; the cache empties itself past 64 entries. Thread-safe; the tensors
// are never written.
Tensor cached_dct_matrix(int type, int64_t n, bool ortho, DType dtype) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, bool, int>, Tensor> cache;
  const auto key = std::make_tuple(type, n, ortho, static_cast<int>(dtype.id));
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  Tensor m = detail::from_doubles(dct_matrix(type, n, ortho), {n, n}, dtype);
  std::lock_guard lock(mu);
  if (cache.size() >= 64) cache.clear();
  cache.emplace(key, m);
  return m;
}

// A [len] constant of f(k), k = 0 .. len - 1, of dtype d (ops copy it to their device).
template <class F>
Tensor dct_table(DType d, int64_t len, F f) {
  std::vector<double> v(static_cast<size_t>(len));
  for (int64_t k = 0; k < len; ++k) v[static_cast<size_t>(k)] = f(static_cast<double>(k));
  return detail::from_doubles(v, {len}, d);
}

// The dct of x ([..., len], len > 1 for type 1) through the FFT, with dct_matrix's scaling:
//  type 2: X_k = 2 Re(exp(-i pi k / 2N) R_k), R = rfft(x, 2N) (the zero-padded signal);
//  type 3: X = 2N irfft(Z, 2N)[:N] with Z_j = x_j exp(i pi j / 2N) (and Z_N = 0);
//  type 1: X = Re(rfft(x_0 .. x_{N-1}, x_{N-2} .. x_1)), the even extension;
//  type 4: the odd outputs of the type-2 transform of x zero-padded to 2N.
// "ortho" scales the outputs (types 2, 4) or the inputs (type 3) as the matrix does.
Tensor dct_by_fft(const Tensor& x, int type, int64_t len, bool ortho) {
  const double pi = std::numbers::pi, nn = static_cast<double>(len);
  switch (type) {
    case 1: {
      const Tensor inner = slice_last(x, 1, len - 2);
      return rfft(concat({x, reverse(inner, {-1})}, -1)).real;
    }
    case 2: {
      const ComplexTensor r = rfft(x, 2 * len);
      auto scale = [&](double k) {
        return 2.0 * (!ortho   ? 1.0
                      : k == 0 ? std::sqrt(1.0 / (4.0 * nn))
                               : std::sqrt(1.0 / (2.0 * nn)));
      };
      const Tensor c = dct_table(
          x.dtype(), len, [&](double k) { return scale(k) * std::cos(pi * k / (2.0 * nn)); });
      const Tensor sn = dct_table(
          x.dtype(), len, [&](double k) { return scale(k) * std::sin(pi * k / (2.0 * nn)); });
      return add(multiply(fit_last(r.real, len), c), multiply(fit_last(r.imag, len), sn));
    }
    case 3: {
      // 2N times the irfft's 1 / 2N, and the ortho input weights, folded into the phases.
      auto weight = [&](double j) {
        return 2.0 * nn *
               (ortho ? (j == 0 ? 1.0 / std::sqrt(nn) : std::sqrt(1.0 / (2.0 * nn))) : 1.0);
      };
      const Tensor c = dct_table(
          x.dtype(), len, [&](double j) { return weight(j) * std::cos(pi * j / (2.0 * nn)); });
      const Tensor sn = dct_table(
          x.dtype(), len, [&](double j) { return weight(j) * std::sin(pi * j / (2.0 * nn)); });
      const ComplexTensor z{fit_last(multiply(x, c), len + 1), fit_last(multiply(x, sn), len + 1)};
      return fit_last(irfft(z, 2 * len), len);
    }
    default: {
      const Tensor y = dct_by_fft(fit_last(x, 2 * len), 2, 2 * len, false);
      std::vector<int64_t> odd(static_cast<size_t>(len));
      for (int64_t k = 0; k < len; ++k) odd[static_cast<size_t>(k)] = 2 * k + 1;
      const Tensor out = gather(y, constant(odd, TensorShape{len}), y.rank() - 1);
      return ortho ? multiply(out, Tensor(std::sqrt(1.0 / (2.0 * nn)))) : out;
    }
  }
}

Tensor dct_impl(const char* op, const Tensor& input, int type, int64_t n, int axis,
                const std::string& norm) {
  TF_CHECK_ARG(input.defined(), op, "the input is undefined");
  check_real(op, input.dtype(), "the input");
  TF_CHECK_ARG(type >= 1 && type <= 4, op, "only types 1, 2, 3 and 4 are supported, got {}", type);
  TF_CHECK_ARG(axis == -1, op, "axis must be -1 (as TF), got {}", axis);
  TF_CHECK_ARG(norm.empty() || norm == "ortho", op,
               "norm must be \"\" (none) or \"ortho\", got \"{}\"", norm);
  TF_CHECK_ARG(!(type == 1 && norm == "ortho"), op, "norm \"ortho\" is not supported for type 1");
  TF_CHECK_ARG(input.shape().rank() >= 1 && input.shape()[-1] >= 0, op,
               "expects [..., samples] with the samples known, got shape {}",
               input.shape().to_string());
  TF_CHECK_ARG(n == -1 || n > 0, op, "n must be positive (or -1), got {}", n);
  const Tensor x = n == -1 ? input : fit_last(input, n);
  const int64_t len = x.shape()[-1];
  TF_CHECK_ARG(len > 0, op, "the transform length must be positive, got {}", len);
  TF_CHECK_ARG(type != 1 || len > 1, op, "type 1 needs a length > 1, got {}", len);
  if (len > kDctMatrixMaxLength) return dct_by_fft(x, type, len, norm == "ortho");
  return linalg::tensordot(x, cached_dct_matrix(type, len, norm == "ortho", x.dtype()), 1);
}

}  // namespace

ComplexTensor fft(const ComplexTensor& input) {
  return fft_last("fft", input, false);
}
ComplexTensor ifft(const ComplexTensor& input) {
  return fft_last("ifft", input, true);
}

ComplexTensor rfft(const Tensor& input, int64_t fft_length) {
  TF_CHECK_ARG(input.defined(), "rfft", "the input is undefined");
  check_real("rfft", input.dtype(), "the input");
  const TensorShape& s = input.shape();
  TF_CHECK_ARG(s.rank() >= 1, "rfft", "expects a tensor of rank >= 1, got shape {}", s.to_string());
  TF_CHECK_ARG(fft_length >= -1, "rfft", "fft_length must be >= 0 (or -1), got {}", fft_length);
  const int64_t n = fft_length == -1 ? s[-1] : fft_length;
  TF_CHECK_ARG(n >= 0, "rfft", "the innermost dimension of {} is unknown: give fft_length",
               s.to_string());
  TF_CHECK_ARG(s[-1] >= 0, "rfft", "the innermost dimension must be known, got shape {}",
               s.to_string());
  const Tensor in[] = {fit_last(input, n)};
  auto o = detail::dispatch_multi(prims::Rfft(n), in);
  return {o[0], o[1]};
}

Tensor irfft(const ComplexTensor& input, int64_t fft_length) {
  check_parts("irfft", input.real, input.imag);
  const TensorShape& s = input.real.shape();
  TF_CHECK_ARG(s[-1] >= 0, "irfft", "the innermost dimension must be known, got shape {}",
               s.to_string());
  TF_CHECK_ARG(fft_length >= -1, "irfft", "fft_length must be >= 0 (or -1), got {}", fft_length);
  const int64_t n = fft_length == -1 ? 2 * (s[-1] - 1) : fft_length;
  TF_CHECK_ARG(n >= 0, "irfft",
               "the default fft_length 2 (m - 1) needs at least one frequency, got shape {}",
               s.to_string());
  const int64_t m = rfft_bins(n);
  const Tensor in[] = {fit_last(input.real, m), fit_last(input.imag, m)};
  return detail::dispatch_multi(prims::Irfft(n), in)[0];
}

namespace {
// The axes of a tensor of shape s as non-negative indices ({}: every axis), checked in range,
// distinct and of known size.
std::vector<int> nd_axes(const char* op, const TensorShape& s, std::vector<int> axes) {
  const int rank = s.rank();
  if (axes.empty())
    for (int a = 0; a < rank; ++a) axes.push_back(a);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int& a : axes) {
    TF_CHECK_ARG(a >= -rank && a < rank, op, "axis {} is out of range for shape {}", a,
                 s.to_string());
    if (a < 0) a += rank;
    TF_CHECK_ARG(!seen[static_cast<size_t>(a)], op, "axis {} is given twice", a);
    seen[static_cast<size_t>(a)] = true;
    TF_CHECK_ARG(s[a] >= 0, op, "axis {} of shape {} must have a known size", a, s.to_string());
  }
  return axes;
}

// One length per axis: fft_length, or the axes' sizes with last_default for the last axis.
std::vector<int64_t> nd_lengths(const char* op, const TensorShape& s, const std::vector<int>& axes,
                                const std::vector<int64_t>& fft_length, int64_t last_default) {
  TF_CHECK_ARG(fft_length.empty() || fft_length.size() == axes.size(), op,
               "fft_length must be empty or hold one length per axis ({}), got {} values",
               axes.size(), fft_length.size());
  std::vector<int64_t> lens = fft_length;
  if (lens.empty()) {
    for (int a : axes) lens.push_back(s[a]);
    if (!lens.empty()) lens.back() = last_default;
  }
  for (int64_t len : lens)
    TF_CHECK_ARG(len >= 0, op, "fft_length must be non-negative, got ({})", fmt::join(lens, ", "));
  return lens;
}

// The factor norm puts on a transform of n values (the inverse transforms already divide by n).
double nd_scale(const char* op, const std::string& norm, const std::vector<int64_t>& lens,
                bool inverse) {
  TF_CHECK_ARG(norm == "backward" || norm == "ortho" || norm == "forward", op,
               "norm must be \"backward\", \"ortho\" or \"forward\", got \"{}\"", norm);
  double n = 1;
  for (int64_t len : lens) n *= static_cast<double>(len);
  if (norm == "backward" || n == 0) return 1.0;
  if (norm == "ortho") return inverse ? std::sqrt(n) : 1.0 / std::sqrt(n);
  return inverse ? n : 1.0 / n;
}

ComplexTensor scaled(const ComplexTensor& z, double s) {
  if (s == 1.0) return z;
  return {multiply(z.real, Tensor(s)), multiply(z.imag, Tensor(s))};
}

ComplexTensor fit_axis(const ComplexTensor& z, int k, int64_t len) {
  return {fit_axis(z.real, k, len), fit_axis(z.imag, k, len)};
}

ComplexTensor complex_nd(const char* op, const ComplexTensor& input,
                         std::vector<int64_t> fft_length, std::vector<int> axes,
                         const std::string& norm, bool inverse) {
  check_parts(op, input.real, input.imag);
  const TensorShape& s = input.real.shape();
  axes = nd_axes(op, s, std::move(axes));
  const std::vector<int64_t> lens =
      nd_lengths(op, s, axes, fft_length, axes.empty() ? 0 : s[axes.back()]);
  const double scale = nd_scale(op, norm, lens, inverse);
  const int rank = s.rank();
  ComplexTensor z = input;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int k = rank - axes[i];
    z = fft_axis(op, fit_axis(z, k, lens[i]), k, inverse);
  }
  return scaled(z, scale);
}
// rfft over the last of `axes` (moved innermost and back), then the complex DFTs over the
// others, each axis cropped or zero-padded first (rfftnd, rfft2d, rfft3d).
ComplexTensor real_nd(const char* op, const Tensor& input, const std::vector<int64_t>& fft_length,
                      std::vector<int> axes, const std::string& norm) {
  TF_CHECK_ARG(input.defined(), op, "the input is undefined");
  check_real(op, input.dtype(), "the input");
  const TensorShape& s = input.shape();
  axes = nd_axes(op, s, std::move(axes));
  TF_CHECK_ARG(!axes.empty(), op, "needs at least one axis, got shape {}", s.to_string());
  const std::vector<int64_t> lens = nd_lengths(op, s, axes, fft_length, s[axes.back()]);
  const double scale = nd_scale(op, norm, lens, false);
  const int rank = s.rank();
  const int kr = rank - axes.back();
  Tensor x = input;
  for (size_t i = 0; i + 1 < axes.size(); ++i) x = fit_axis(x, rank - axes[i], lens[i]);
  ComplexTensor z;
  if (kr == 1) {
    z = rfft(x, lens.back());
  } else {
    z = swap_with_last(rfft(swap_with_last(x, kr), lens.back()), kr);
  }
  for (size_t i = 0; i + 1 < axes.size(); ++i) z = fft_axis(op, z, rank - axes[i], false);
  return scaled(z, scale);
}

// The inverse of real_nd: the inverse complex DFTs over all but the last of `axes`, then irfft
// over it (irfftnd, irfft2d, irfft3d).
Tensor inverse_real_nd(const char* op, const ComplexTensor& input,
                       const std::vector<int64_t>& fft_length, std::vector<int> axes,
                       const std::string& norm) {
  check_parts(op, input.real, input.imag);
  const TensorShape& s = input.real.shape();
  axes = nd_axes(op, s, std::move(axes));
  TF_CHECK_ARG(!axes.empty(), op, "needs at least one axis, got shape {}", s.to_string());
  const std::vector<int64_t> lens = nd_lengths(op, s, axes, fft_length, 2 * (s[axes.back()] - 1));
  const double scale = nd_scale(op, norm, lens, true);
  const int rank = s.rank();
  ComplexTensor z = input;
  for (size_t i = 0; i + 1 < axes.size(); ++i) {
    const int k = rank - axes[i];
    z = fft_axis(op, fit_axis(z, k, lens[i]), k, true);
  }
  z = scaled(z, scale);
  const int kr = rank - axes.back();
  if (kr == 1) return irfft(z, lens.back());
  return swap_with_last(irfft(swap_with_last(z, kr), lens.back()), kr);
}

// The `dims` innermost axes of s (the 2-D and 3-D transforms), which must exist and be known.
std::vector<int> innermost(const char* op, const TensorShape& s, int dims) {
  bool known = s.rank() >= dims;
  for (int k = 1; known && k <= dims; ++k) known = s[-k] >= 0;
  TF_CHECK_ARG(known, op,
               "expects a tensor of rank >= {} with its {} innermost dimensions known, got "
               "shape {}",
               dims, dims, s.to_string());
  std::vector<int> axes;
  for (int a = s.rank() - dims; a < s.rank(); ++a) axes.push_back(a);
  return axes;
}

ComplexTensor complex_inner(const char* op, const ComplexTensor& z, int dims, bool inverse) {
  check_parts(op, z.real, z.imag);
  return complex_nd(op, z, {}, innermost(op, z.real.shape(), dims), "backward", inverse);
}

}  // namespace

ComplexTensor fft2d(const ComplexTensor& input) {
  return complex_inner("fft2d", input, 2, false);
}
ComplexTensor ifft2d(const ComplexTensor& input) {
  return complex_inner("ifft2d", input, 2, true);
}
ComplexTensor fft3d(const ComplexTensor& input) {
  return complex_inner("fft3d", input, 3, false);
}
ComplexTensor ifft3d(const ComplexTensor& input) {
  return complex_inner("ifft3d", input, 3, true);
}

ComplexTensor rfft2d(const Tensor& input, std::vector<int64_t> fft_length) {
  TF_CHECK_ARG(input.defined(), "rfft2d", "the input is undefined");
  return real_nd("rfft2d", input, fft_length, innermost("rfft2d", input.shape(), 2), "backward");
}
Tensor irfft2d(const ComplexTensor& input, std::vector<int64_t> fft_length) {
  check_parts("irfft2d", input.real, input.imag);
  return inverse_real_nd("irfft2d", input, fft_length, innermost("irfft2d", input.real.shape(), 2),
                         "backward");
}
ComplexTensor rfft3d(const Tensor& input, std::vector<int64_t> fft_length) {
  TF_CHECK_ARG(input.defined(), "rfft3d", "the input is undefined");
  return real_nd("rfft3d", input, fft_length, innermost("rfft3d", input.shape(), 3), "backward");
}
Tensor irfft3d(const ComplexTensor& input, std::vector<int64_t> fft_length) {
  check_parts("irfft3d", input.real, input.imag);
  return inverse_real_nd("irfft3d", input, fft_length, innermost("irfft3d", input.real.shape(), 3),
                         "backward");
}

ComplexTensor fftnd(const ComplexTensor& input, std::vector<int64_t> fft_length,
                    std::vector<int> axes, const std::string& norm) {
  return complex_nd("fftnd", input, std::move(fft_length), std::move(axes), norm, false);
}
ComplexTensor ifftnd(const ComplexTensor& input, std::vector<int64_t> fft_length,
                     std::vector<int> axes, const std::string& norm) {
  return complex_nd("ifftnd", input, std::move(fft_length), std::move(axes), norm, true);
}
ComplexTensor rfftnd(const Tensor& input, std::vector<int64_t> fft_length, std::vector<int> axes,
                     const std::string& norm) {
  return real_nd("rfftnd", input, fft_length, std::move(axes), norm);
}
Tensor irfftnd(const ComplexTensor& input, std::vector<int64_t> fft_length, std::vector<int> axes,
               const std::string& norm) {
  return inverse_real_nd("irfftnd", input, fft_length, std::move(axes), norm);
}

Tensor abs(const ComplexTensor& z) {
  check_parts("abs", z.real, z.imag);
  // |z| = s sqrt((re / s)^2 + (im / s)^2), s = max(|re|, |im|): no overflow or underflow in
  // the squares. At z = 0 every branch that could divide by 0 is replaced by a constant, so the
  // gradient there is 0 (TF's div_no_nan).
  const Tensor s = maximum(tapeflow::abs(z.real), tapeflow::abs(z.imag));
  const Tensor nonzero = greater(s, Tensor(0.0));
  const Tensor safe_s = where(nonzero, s, ones_like(s));
  const Tensor inner = add(square(divide(z.real, safe_s)), square(divide(z.imag, safe_s)));
  return multiply(s, sqrt(where(nonzero, inner, ones_like(inner))));
}

Tensor angle(const ComplexTensor& z) {
  check_parts("angle", z.real, z.imag);
  return atan2(z.imag, z.real);
}

Tensor frame(const Tensor& signal, int64_t frame_length, int64_t frame_step, bool pad_end,
             double pad_value, int axis) {
  const char* op = "frame";
  TF_CHECK_ARG(signal.defined(), op, "the signal is undefined");
  const TensorShape& s = signal.shape();
  TF_CHECK_ARG(s.rank() >= 1, op, "expects a signal of rank >= 1, got shape {}", s.to_string());
  TF_CHECK_ARG(frame_length >= 1 && frame_step >= 1, op,
               "frame_length and frame_step must be positive, got {} and {}", frame_length,
               frame_step);
  const int ax = detail::normalize_axis(op, axis, s);
  const int64_t n = s[ax];
  TF_CHECK_ARG(n >= 0, op, "the length of axis {} must be known, got shape {}", axis,
               s.to_string());
  int64_t frames = 0;
  Tensor x = signal;
  if (pad_end) {
    frames = (n + frame_step - 1) / frame_step;
    const int64_t needed = frames == 0 ? 0 : (frames - 1) * frame_step + frame_length;
    if (needed > n) {
      std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(s.rank()), {0, 0});
      pads[static_cast<size_t>(ax)].second = needed - n;
      detail::check_value_fits(op, "pad_value", pad_value, signal.dtype());
      x = pad(x, pads, pad_value);
    }
  } else {
    frames = n >= frame_length ? 1 + (n - frame_length) / frame_step : 0;
  }
  std::vector<int64_t> idx(static_cast<size_t>(frames * frame_length));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t l = 0; l < frame_length; ++l)
      idx[static_cast<size_t>(f * frame_length + l)] = f * frame_step + l;
  const Tensor gathered = gather(x, constant(idx, TensorShape{frames * frame_length}), ax);
  return split_axis(gathered, ax, frames, frame_length);
}

Tensor overlap_and_add(const Tensor& signal, int64_t frame_step) {
  const char* op = "overlap_and_add";
  TF_CHECK_ARG(signal.defined(), op, "the signal is undefined");
  const TensorShape& s = signal.shape();
  TF_CHECK_ARG(s.rank() >= 2, op, "expects [..., frames, frame_length], got shape {}",
               s.to_string());
  TF_CHECK_ARG(frame_step >= 1, op, "frame_step must be positive, got {}", frame_step);
  const int64_t frames = s[-2], length = s[-1];
  TF_CHECK_ARG(frames >= 0 && length >= 0, op,
               "the numbers of frames and samples must be known, got shape {}", s.to_string());
  TF_CHECK_ARG(is_floating(signal.dtype()), op, "expects a floating signal, got {}",
               dtype_name(signal.dtype()));
  const int64_t out_len = frames == 0 ? 0 : (frames - 1) * frame_step + length;
  const int r = s.rank();
  // (..., F, L) -> (B, F * L) -> (F * L, B): a segment sum of the rows at f * step + l.
  std::vector<int> groups(1, r - 2);
  groups.push_back(2);
  const Tensor flat = detail::merge_axes(signal, groups);
  std::vector<int64_t> ids(static_cast<size_t>(frames * length));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t l = 0; l < length; ++l)
      ids[static_cast<size_t>(f * length + l)] = f * frame_step + l;
  const Tensor summed = transpose(
      unsorted_segment_sum(transpose(flat), constant(ids, TensorShape{frames * length}), out_len));
  // Back to (..., out_len): the leading sizes from the signal when the graph runs.
  const Tensor shape_src = zeros(TensorShape{out_len, 0}, signal.dtype());
  std::vector<std::pair<int, int>> parts;
  for (int i = 0; i + 2 < r; ++i) parts.push_back({0, i});
  parts.push_back({1, 0});
  return detail::reshape_from(summed, {signal, shape_src}, parts);
}

Tensor hann_window(int64_t window_length, bool periodic, DType dtype) {
  return raised_cosine("hann_window", window_length, periodic, dtype, 0.5, 0.5);
}
Tensor hamming_window(int64_t window_length, bool periodic, DType dtype) {
  return raised_cosine("hamming_window", window_length, periodic, dtype, 0.54, 0.46);
}
WindowFn hann_window_fn(bool periodic) {
  return [periodic](int64_t n, DType d) { return hann_window(n, periodic, d); };
}
WindowFn hamming_window_fn(bool periodic) {
  return [periodic](int64_t n, DType d) { return hamming_window(n, periodic, d); };
}

namespace {
void check_window(const char* op, int64_t length, DType dtype) {
  TF_CHECK_ARG(length >= 0, op, "window_length must be >= 0, got {}", length);
  TF_CHECK_ARG(is_floating(dtype), op, "dtype must be a floating dtype, got {}", dtype_name(dtype));
}
// The Kaiser window in float64: I0(beta sqrt(1 - t^2)) / I0(beta), t from -1 to 1, through the
// scaled i0e so that large beta does not overflow (even in beta, as NumPy's kaiser).
std::vector<double> kaiser_values(int64_t length, double beta) {
  std::vector<double> w(static_cast<size_t>(length), 1.0);
  if (length <= 1) return w;
  const double half = static_cast<double>(length - 1) / 2.0, b = std::abs(beta);
  for (int64_t i = 0; i < length; ++i) {
    const double t = (static_cast<double>(i) - half) / half;
    const double num = b * std::sqrt(std::max(0.0, 1.0 - t * t));
    w[static_cast<size_t>(i)] =
        std::exp(num - b) * special::bessel_ie(0, num) / special::bessel_ie(0, b);
  }
  return w;
}
}  // namespace

Tensor kaiser_window(int64_t window_length, double beta, DType dtype) {
  check_window("kaiser_window", window_length, dtype);
  return detail::from_doubles(kaiser_values(window_length, beta), {window_length}, dtype);
}

Tensor kaiser_bessel_derived_window(int64_t window_length, double beta, DType dtype) {
  const char* op = "kaiser_bessel_derived_window";
  check_window(op, window_length, dtype);
  // TF returns window_length - 1 values for an odd length; the window is defined for even ones.
  TF_CHECK_ARG(window_length % 2 == 0, op, "window_length must be even, got {}", window_length);
  const int64_t half = window_length / 2;
  const std::vector<double> k = kaiser_values(half + 1, beta);
  std::vector<double> csum(k.size());
  double acc = 0;
  for (size_t i = 0; i < k.size(); ++i) csum[i] = acc += k[i];
  std::vector<double> w(static_cast<size_t>(window_length));
  for (int64_t i = 0; i < half; ++i) {
    const double v = std::sqrt(csum[static_cast<size_t>(i)] / csum.back());
    w[static_cast<size_t>(i)] = v;
    w[static_cast<size_t>(window_length - 1 - i)] = v;
  }
  return detail::from_doubles(w, {window_length}, dtype);
}

Tensor vorbis_window(int64_t window_length, DType dtype) {
  check_window("vorbis_window", window_length, dtype);
  std::vector<double> w(static_cast<size_t>(window_length));
  for (int64_t i = 0; i < window_length; ++i) {
    const double s = std::sin(std::numbers::pi * (static_cast<double>(i) + 0.5) /
                              static_cast<double>(window_length));
    w[static_cast<size_t>(i)] = std::sin(std::numbers::pi / 2.0 * s * s);
  }
  return detail::from_doubles(w, {window_length}, dtype);
}

WindowFn kaiser_window_fn(double beta) {
  return [beta](int64_t n, DType d) { return kaiser_window(n, beta, d); };
}
WindowFn kaiser_bessel_derived_window_fn(double beta) {
  return [beta](int64_t n, DType d) { return kaiser_bessel_derived_window(n, beta, d); };
}
WindowFn vorbis_window_fn() {
  return [](int64_t n, DType d) { return vorbis_window(n, d); };
}

namespace {
Tensor shift_halves(const char* op, const Tensor& x, std::vector<int> axes, bool inverse) {
  TF_CHECK_ARG(x.defined(), op, "the input is undefined");
  const TensorShape& s = x.shape();
  axes = nd_axes(op, s, std::move(axes));
  if (axes.empty()) return x;
  std::vector<int64_t> shifts;
  for (int a : axes) shifts.push_back(inverse ? -(s[a] / 2) : s[a] / 2);
  return roll(x, shifts, axes);
}
}  // namespace

Tensor fftshift(const Tensor& x, std::vector<int> axes) {
  return shift_halves("fftshift", x, std::move(axes), false);
}
Tensor ifftshift(const Tensor& x, std::vector<int> axes) {
  return shift_halves("ifftshift", x, std::move(axes), true);
}

ComplexTensor stft(const Tensor& signals, int64_t frame_length, int64_t frame_step,
                   int64_t fft_length, const WindowFn& window_fn, bool pad_end) {
  const char* op = "stft";
  TF_CHECK_ARG(signals.defined(), op, "the signals are undefined");
  check_real(op, signals.dtype(), "signals");
  const int64_t n = stft_length(op, frame_length, frame_step, fft_length);
  return detail::naming_errors(op, [&] {
    Tensor framed = frame(signals, frame_length, frame_step, pad_end);
    if (window_fn)
      framed = multiply(framed, window_of(op, window_fn, frame_length, signals.dtype()));
    return rfft(framed, n);
  });
}

Tensor inverse_stft(const ComplexTensor& stfts, int64_t frame_length, int64_t frame_step,
                    int64_t fft_length, const WindowFn& window_fn) {
  const char* op = "inverse_stft";
  check_parts(op, stfts.real, stfts.imag);
  TF_CHECK_ARG(stfts.real.shape().rank() >= 2, op,
               "expects [..., frames, fft_unique_bins], got shape {}",
               stfts.real.shape().to_string());
  const int64_t n = stft_length(op, frame_length, frame_step, fft_length);
  return detail::naming_errors(op, [&] {
    Tensor frames = fit_last(irfft(stfts, n), frame_length);
    if (window_fn)
      frames = multiply(frames, window_of(op, window_fn, frame_length, stfts.real.dtype()));
    return overlap_and_add(frames, frame_step);
  });
}

WindowFn inverse_stft_window_fn(int64_t frame_step, const WindowFn& forward_window_fn) {
  TF_CHECK_ARG(frame_step >= 1, "inverse_stft_window_fn", "frame_step must be positive, got {}",
               frame_step);
  TF_CHECK_ARG(static_cast<bool>(forward_window_fn), "inverse_stft_window_fn",
               "forward_window_fn must be a window function");
  return [frame_step, forward_window_fn](int64_t frame_length, DType dtype) {
    const Tensor fwd = window_of("inverse_stft_window_fn", forward_window_fn, frame_length, dtype);
    // The squared window overlap-added at the hop: periodic with period frame_step.
    const int64_t overlaps = (frame_length + frame_step - 1) / frame_step;
    const Tensor sq = pad(square(fwd), {{0, overlaps * frame_step - frame_length}});
    const Tensor per_hop = reduce_sum(reshape(sq, {overlaps, frame_step}), {0}, true);
    const Tensor denom = reshape(tile(per_hop, {overlaps, 1}), {overlaps * frame_step});
    return divide(fwd, slice(denom, {0}, {frame_length}));
  };
}

Tensor dct(const Tensor& input, int type, int64_t n, int axis, const std::string& norm) {
  return dct_impl("dct", input, type, n, axis, norm);
}

Tensor idct(const Tensor& input, int type, int64_t n, int axis, const std::string& norm) {
  TF_CHECK_ARG(type >= 1 && type <= 4, "idct", "only types 1, 2, 3 and 4 are supported, got {}",
               type);
  static constexpr int kInverse[] = {0, 1, 3, 2, 4};
  return dct_impl("idct", input, kInverse[type], n, axis, norm);
}

Tensor mdct(const Tensor& signals, int64_t frame_length, const WindowFn& window_fn, bool pad_end,
            const std::string& norm) {
  const char* op = "mdct";
  TF_CHECK_ARG(signals.defined(), op, "the signals are undefined");
  check_real(op, signals.dtype(), "the signals");
  TF_CHECK_ARG(signals.shape().rank() >= 1, op, "expects signals of rank >= 1, got shape {}",
               signals.shape().to_string());
  TF_CHECK_ARG(frame_length > 0 && frame_length % 4 == 0, op,
               "frame_length must be a positive multiple of 4, got {}", frame_length);
  TF_CHECK_ARG(norm.empty() || norm == "ortho", op, "norm must be \"\" or \"ortho\", got \"{}\"",
               norm);
  Tensor framed = detail::naming_errors(
      op, [&] { return frame(signals, frame_length, frame_length / 2, pad_end); });
  framed = window_fn ? multiply(framed, window_of(op, window_fn, frame_length, signals.dtype()))
                     : multiply(framed, Tensor(1.0 / std::sqrt(2.0)));
  // (a, b, c, d) quarters -> (-c_r - d, a - b_r), _r reversed: the fold whose type-4 DCT is the
  // MDCT.
  const std::vector<Tensor> q = split(framed, 4, -1);
  const Tensor first = subtract(negative(reverse(q[2], {-1})), q[3]);
  const Tensor second = subtract(q[0], reverse(q[1], {-1}));
  return dct(concat({first, second}, -1), 4, -1, -1, norm);
}

Tensor inverse_mdct(const Tensor& mdcts, const WindowFn& window_fn, const std::string& norm) {
  const char* op = "inverse_mdct";
  TF_CHECK_ARG(mdcts.defined(), op, "the input is undefined");
  check_real(op, mdcts.dtype(), "the input");
  const TensorShape& s = mdcts.shape();
  TF_CHECK_ARG(s.rank() >= 2 && s[-1] >= 0 && s[-1] % 2 == 0, op,
               "expects [..., frames, frame_length / 2] of rank >= 2 with an even, known last "
               "dimension, got shape {}",
               s.to_string());
  TF_CHECK_ARG(norm.empty() || norm == "ortho", op, "norm must be \"\" or \"ortho\", got \"{}\"",
               norm);
  const int64_t half = s[-1];
  const Tensor y = detail::naming_errors(op, [&] {
    return norm.empty() ? multiply(dct(mdcts, 4), Tensor(0.5 / static_cast<double>(half)))
                        : dct(mdcts, 4, -1, -1, "ortho");
  });
  // Unfold (p, q) halves into (q, -q_r, -p_r, -p).
  const std::vector<Tensor> h = split(y, 2, -1);
  Tensor frames = concat(
      {h[1], negative(reverse(h[1], {-1})), negative(reverse(h[0], {-1})), negative(h[0])}, -1);
  frames = window_fn ? multiply(frames, window_of(op, window_fn, 2 * half, mdcts.dtype()))
                     : multiply(frames, Tensor(1.0 / std::sqrt(2.0)));
  return overlap_and_add(frames, half);
}

Tensor linear_to_mel_weight_matrix(int64_t num_mel_bins, int64_t num_spectrogram_bins,
                                   double sample_rate, double lower_edge_hertz,
                                   double upper_edge_hertz, DType dtype) {
  const char* op = "linear_to_mel_weight_matrix";
  TF_CHECK_ARG(num_mel_bins > 0, op, "num_mel_bins must be positive, got {}", num_mel_bins);
  TF_CHECK_ARG(num_spectrogram_bins > 0, op, "num_spectrogram_bins must be positive, got {}",
               num_spectrogram_bins);
  TF_CHECK_ARG(sample_rate > 0, op, "sample_rate must be positive, got {}", sample_rate);
  TF_CHECK_ARG(lower_edge_hertz >= 0, op, "lower_edge_hertz must be non-negative, got {}",
               lower_edge_hertz);
  TF_CHECK_ARG(lower_edge_hertz < upper_edge_hertz, op,
               "lower_edge_hertz {} >= upper_edge_hertz {}", lower_edge_hertz, upper_edge_hertz);
  TF_CHECK_ARG(upper_edge_hertz <= sample_rate / 2, op,
               "upper_edge_hertz must not exceed the Nyquist frequency sample_rate / 2, got {} "
               "with sample_rate {}",
               upper_edge_hertz, sample_rate);
  TF_CHECK_ARG(is_floating(dtype), op, "dtype must be a floating dtype, got {}", dtype_name(dtype));
  // TF computes in the result's dtype; float64 here, rounded once at the end (the results
  // agree with TF's float32 to a few ulps).
  auto mel = [](double hz) { return 1127.0 * std::log1p(hz / 700.0); };
  const int64_t bins = num_spectrogram_bins, mels = num_mel_bins;
  const double nyquist = sample_rate / 2.0;
  const double lo = mel(lower_edge_hertz), hi = mel(upper_edge_hertz);
  std::vector<double> edges(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i)
    edges[static_cast<size_t>(i)] =
        lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(mels + 1);
  std::vector<double> w(static_cast<size_t>(bins * mels), 0.0);
  for (int64_t b = 1; b < bins; ++b) {  // bin 0 (0 Hz) stays zero, as TF
    const double hz =
        bins == 1 ? 0.0 : nyquist * static_cast<double>(b) / static_cast<double>(bins - 1);
    const double m = mel(hz);
    for (int64_t j = 0; j < mels; ++j) {
      const double l = edges[static_cast<size_t>(j)], c = edges[static_cast<size_t>(j + 1)],
                   u = edges[static_cast<size_t>(j + 2)];
      const double v = std::min((m - l) / (c - l), (u - m) / (u - c));
      w[static_cast<size_t>(b * mels + j)] = std::max(0.0, v);
    }
  }
  return detail::from_doubles(w, {bins, mels}, dtype);
}

Tensor mfccs_from_log_mel_spectrograms(const Tensor& log_mel_spectrograms) {
  const char* op = "mfccs_from_log_mel_spectrograms";
  TF_CHECK_ARG(log_mel_spectrograms.defined(), op, "the input is undefined");
  const TensorShape& s = log_mel_spectrograms.shape();
  TF_CHECK_ARG(s.rank() >= 1 && s[-1] > 0, op,
               "expects [..., num_mel_bins] with num_mel_bins known and positive, got shape {}",
               s.to_string());
  const Tensor d = dct_impl(op, log_mel_spectrograms, 2, -1, -1, "");
  return multiply(d, Tensor(1.0 / std::sqrt(2.0 * static_cast<double>(s[-1]))));
}

}  // namespace signal
}  // namespace tapeflow
