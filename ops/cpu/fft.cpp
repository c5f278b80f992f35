// CPU kernels of Fft, Rfft and Irfft (ops/signal.h). Rows are transformed in the tensor's own
// precision (float32 in float32, as TF's CPU kernels; float64 in float64), several rows at once:
// the values of kLanes rows sit side by side (lane l of each value is row l), so every butterfly
// is one vector operation over the rows (a batch short of rows is padded with zeros, so a row's
// result never depends on its neighbours). A mixed-radix Stockham FFT (self-sorting: no
// bit-reversal pass; butterflies of radix 4, 2, 3 and 5 written out, 7, 11 and 13 as their
// plain DFT; each stage reads its twiddles from one table of the n-th roots of unity) serves
// lengths whose prime factors are at most 13, and Bluestein's chirp-z transform (a circular
// convolution of length m = the power of two >= 2n - 1, done with two radix-4 transforms, the
// chirp's transform computed once per call, in float64) the others, so every length costs
// O(n log n). Roots and chirps come from cos/sin of exact arguments (k * k reduced mod 2n
// first), in float64. A real row of even length n is transformed as a complex row of n / 2
// (even samples as real parts, odd ones as imaginary parts) and split after, for rfft and for
// irfft in reverse; odd lengths go through the complex transform. irfft drops the imaginary
// parts of bin 0 and of the Nyquist bin. Batches of rows are split over the thread pool, each
// thread with its own scratch; on CPUs with AVX2 the transforms run compiled for it (FMA
// contraction may change the last bits, well within the transform's rounding).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/isa.h"
#include "ops/signal.h"

namespace tapeflow::prims {

namespace {

// A complex double with plain arithmetic (std::complex's operator* checks for NaN results and
// calls a library routine on them, which keeps the loops from being optimised).
struct C {
  double r, i;
};
inline C operator+(C a, C b) {
  return {a.r + b.r, a.i + b.i};
}
inline C operator-(C a, C b) {
  return {a.r - b.r, a.i - b.i};
}
inline C operator*(C a, C b) {
  return {a.r * b.r - a.i * b.i, a.r * b.i + a.i * b.r};
}
inline C operator*(C a, double s) {
  return {a.r * s, a.i * s};
}
inline C conj(C a) {
  return {a.r, -a.i};
}
// a * i * sign (sign = +-1).
inline C rot(C a, double sign) {
  return {-sign * a.i, sign * a.r};
}

// kLanes<F> complex values of one position, one per row (row l is lane l), as GCC vector types
// (32 bytes: one AVX register, two SSE ones in the baseline build), so that every operation
// is a vector instruction.
template <class F>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <class F>
inline constexpr int kLanes = static_cast<int>(32 / sizeof(F));  // 8 floats, 4 doubles
// 32-byte aligned in every build (GCC gives the vector types of a baseline build less).
template <class F>
struct alignas(32) CV {
  typename VecOf<F>::type r, i;
};
template <class F>
inline CV<F> operator+(const CV<F>& a, const CV<F>& b) {
  return {a.r + b.r, a.i + b.i};
}
template <class F>
inline CV<F> operator-(const CV<F>& a, const CV<F>& b) {
  return {a.r - b.r, a.i - b.i};
}
// By a twiddle (the same for every row).
template <class F>
inline CV<F> operator*(const CV<F>& a, C w) {
  const auto wr = static_cast<F>(w.r), wi = static_cast<F>(w.i);
  return {a.r * wr - a.i * wi, a.r * wi + a.i * wr};
}
template <class F>
inline CV<F> operator*(const CV<F>& a, double s) {
  const auto f = static_cast<F>(s);
  return {a.r * f, a.i * f};
}
template <class F>
inline CV<F> conj(const CV<F>& a) {
  return {a.r, -a.i};
}
template <class F>
inline CV<F> rot(const CV<F>& a, double sign) {
  const auto f = static_cast<F>(sign);
  return {-f * a.i, f * a.r};
}
// The value with its imaginary part dropped.
template <class F>
inline CV<F> real_only(const CV<F>& a) {
  return {a.r, typename VecOf<F>::type{}};
}

// exp(sign 2 pi i num / den), num reduced mod den first (exact arguments for large num).
C root(int64_t num, int64_t den, double sign) {
  const int64_t k = num % den;
  const double a = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(den);
  return {std::cos(a), sign * std::sin(a)};
}

// The complex DFT of one length and direction, unnormalised; shared (read-only) by the threads
// of a call. run() transforms values of type X: C (one row, float64: how Bluestein's kernel is
// made) or CV<F> (kLanes<F> rows in F).
class FftPlan {
 public:
  FftPlan(int64_t n, bool inverse) : n_(n), sign_(inverse ? 1.0 : -1.0) {
    if (n <= 1) return;
    int64_t rest = n;
    while (rest % 4 == 0) {
      radices_.push_back(4);
      rest /= 4;
    }
    for (int64_t p : {2, 3, 5, 7, 11, 13})
      while (rest % p == 0) {
        radices_.push_back(static_cast<int>(p));
        rest /= p;
      }
    if (rest == 1) {
      roots_.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) roots_[static_cast<size_t>(k)] = root(k, n, sign_);
      return;
    }
    // Bluestein: X_k = w_k sum_j (x_j w_j) conj(w_{k-j}), w_t = exp(sign i pi t^2 / n).
    radices_.clear();
    m_ = 1;
    while (m_ < 2 * n - 1) m_ *= 2;
    forward_ = std::make_unique<FftPlan>(m_, false);
    backward_ = std::make_unique<FftPlan>(m_, true);
    chirp_.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      // t^2 mod 2n keeps the angle small and exact (t < n < 2^31: t * t fits int64).
      const int64_t r = (t * t) % (2 * n);
      const double a = std::numbers::pi * static_cast<double>(r) / static_cast<double>(n);
      chirp_[static_cast<size_t>(t)] = {std::cos(a), sign_ * std::sin(a)};
    }
    kernel_.assign(static_cast<size_t>(m_), C{0, 0});
    for (int64_t t = 0; t < n; ++t) {
      const C c = conj(chirp_[static_cast<size_t>(t)]);
      kernel_[static_cast<size_t>(t)] = c;
      if (t > 0) kernel_[static_cast<size_t>(m_ - t)] = c;
    }
    std::vector<C> scratch(forward_->scratch_size());
    forward_->run_direct(kernel_.data(), scratch.data());
    // The convolution's inverse transform is unnormalised: fold its 1/m into the kernel.
    for (C& k : kernel_) k = k * (1.0 / static_cast<double>(m_));
  }

  // Values of scratch run() needs.
  size_t scratch_size() const { return static_cast<size_t>(m_ > 0 ? 2 * m_ : n_); }

  // In place on x (n values).
  template <class X>
  void run(X* x, X* scratch) const {
    if (m_ > 0)
      bluestein(x, scratch);
    else
      run_direct(x, scratch);
  }

 private:
  // The Stockham stages (a plan without Bluestein). Bluestein's plans call this, never run(), so
  // that nothing recurses (the AVX2 entry points inline everything, see run_avx2).
  template <class X>
  void run_direct(X* x, X* scratch) const {
    if (n_ <= 1) return;
    X* in = x;
    X* out = scratch;
    int64_t len = n_, stride = 1;
    for (int r : radices_) {
      stage(in, out, len, stride, r);
      len /= r;
      stride *= r;
      std::swap(in, out);
    }
    if (in != x)
      for (int64_t k = 0; k < n_; ++k) x[k] = in[k];
  }

  // One Stockham step of radix r on sub-transforms of length len (stride sub-sequences):
  // y[q + s (r p + j)] = w_len^(j p) sum_k x[q + s (p + k m)] W_r^(j k), m = len / r.
  template <class X>
  void stage(const X* x, X* y, int64_t len, int64_t s, int r) const {
    const int64_t m = len / r;
    const C* w = roots_.data();  // w_len^t = roots_[t * s]
    switch (r) {
      case 4:
        for (int64_t p = 0; p < m; ++p) {
          const C w1 = w[p * s], w2 = w[2 * p * s], w3 = w[3 * p * s];
          const X* a = x + s * p;
          X* b = y + s * 4 * p;
          for (int64_t q = 0; q < s; ++q) {
            const X a0 = a[q], a1 = a[q + s * m], a2 = a[q + 2 * s * m], a3 = a[q + 3 * s * m];
            const X t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, t3 = rot(a1 - a3, sign_);
            b[q] = t0 + t2;
            b[q + s] = (t1 + t3) * w1;
            b[q + 2 * s] = (t0 - t2) * w2;
            b[q + 3 * s] = (t1 - t3) * w3;
          }
        }
        return;
      case 2:
        for (int64_t p = 0; p < m; ++p) {
          const C w1 = w[p * s];
          const X* a = x + s * p;
          X* b = y + s * 2 * p;
          for (int64_t q = 0; q < s; ++q) {
            const X a0 = a[q], a1 = a[q + s * m];
            b[q] = a0 + a1;
            b[q + s] = (a0 - a1) * w1;
          }
        }
        return;
      case 3: {
        const double h = sign_ * std::sqrt(3.0) / 2.0;
        for (int64_t p = 0; p < m; ++p) {
          const C w1 = w[p * s], w2 = w[2 * p * s];
          const X* a = x + s * p;
          X* b = y + s * 3 * p;
          for (int64_t q = 0; q < s; ++q) {
            const X a0 = a[q], a1 = a[q + s * m], a2 = a[q + 2 * s * m];
            const X t1 = a1 + a2, t2 = a0 - t1 * 0.5, t3 = rot(a1 - a2, 1.0) * h;
            b[q] = a0 + t1;
            b[q + s] = (t2 + t3) * w1;
            b[q + 2 * s] = (t2 - t3) * w2;
          }
        }
        return;
      }
      case 5: {
        const double c1 = std::cos(2.0 * std::numbers::pi / 5.0),
                     c2 = std::cos(4.0 * std::numbers::pi / 5.0),
                     s1 = sign_ * std::sin(2.0 * std::numbers::pi / 5.0),
                     s2 = sign_ * std::sin(4.0 * std::numbers::pi / 5.0);
        for (int64_t p = 0; p < m; ++p) {
          const C w1 = w[p * s], w2 = w[2 * p * s], w3 = w[3 * p * s], w4 = w[4 * p * s];
          const X* a = x + s * p;
          X* b = y + s * 5 * p;
          for (int64_t q = 0; q < s; ++q) {
            const X a0 = a[q], a1 = a[q + s * m], a2 = a[q + 2 * s * m], a3 = a[q + 3 * s * m],
                    a4 = a[q + 4 * s * m];
            const X t1 = a1 + a4, t2 = a2 + a3, t3 = a1 - a4, t4 = a2 - a3;
            const X b1 = a0 + t1 * c1 + t2 * c2, b2 = a0 + t1 * c2 + t2 * c1;
            const X d1 = rot(t3 * s1 + t4 * s2, 1.0), d2 = rot(t3 * s2 - t4 * s1, 1.0);
            b[q] = a0 + t1 + t2;
            b[q + s] = (b1 + d1) * w1;
            b[q + 2 * s] = (b2 + d2) * w2;
            b[q + 3 * s] = (b2 - d2) * w3;
            b[q + 4 * s] = (b1 - d1) * w4;
          }
        }
        return;
      }
      default: {
        // A small prime: its plain DFT, W_r^t = roots_[t n / r].
        const int64_t step = n_ / r;
        X a[13];
        for (int64_t p = 0; p < m; ++p) {
          for (int64_t q = 0; q < s; ++q) {
            for (int k = 0; k < r; ++k) a[k] = x[q + s * (p + k * m)];
            for (int j = 0; j < r; ++j) {
              X acc = a[0];
              for (int k = 1; k < r; ++k) acc = acc + a[k] * w[((j * k) % r) * step];
              y[q + s * (r * p + j)] = j == 0 ? acc : acc * w[j * p * s];
            }
          }
        }
        return;
      }
    }
  }

  template <class X>
  void bluestein(X* x, X* scratch) const {
    X* a = scratch;
    X* sub = scratch + m_;
    for (int64_t j = 0; j < n_; ++j) a[j] = x[j] * chirp_[static_cast<size_t>(j)];
    for (int64_t j = n_; j < m_; ++j) a[j] = X{};
    forward_->run_direct(a, sub);
    for (int64_t j = 0; j < m_; ++j) a[j] = a[j] * kernel_[static_cast<size_t>(j)];
    backward_->run_direct(a, sub);
    for (int64_t k = 0; k < n_; ++k) x[k] = a[k] * chirp_[static_cast<size_t>(k)];
  }

  int64_t n_;
  double sign_;
  std::vector<int> radices_;
  std::vector<C> roots_;  // exp(sign 2 pi i k / n), k < n
  int64_t m_ = 0;         // Bluestein's convolution length; 0 for a direct plan
  std::unique_ptr<FftPlan> forward_, backward_;
  std::vector<C> chirp_, kernel_;
};

// The transforms of a real row of even length n through a complex one of n / 2: rfft packs
// z_j = x_2j + i x_2j+1, transforms, and splits Z into the spectra E (even samples) and O (odd
// samples): X_k = E_k + w^k O_k, w = exp(-2 pi i / n); irfft undoes each step.
class RealPlan {
 public:
  RealPlan(int64_t n, bool inverse) : n_(n), half_(n / 2, inverse) {
    twiddles_.resize(static_cast<size_t>(n / 2 + 1));
    for (int64_t k = 0; k <= n / 2; ++k) twiddles_[static_cast<size_t>(k)] = root(k, n, -1.0);
  }
  size_t scratch_size() const { return half_.scratch_size(); }

  // z: the n / 2 packed values (overwritten) -> spec: n / 2 + 1 values.
  template <class X>
  void forward(X* z, X* spec, X* scratch) const {
    const int64_t h = n_ / 2;
    half_.run(z, scratch);
    for (int64_t k = 0; k <= h; ++k) {
      const X zk = z[k % h], zc = conj(z[(h - k) % h]);
      const X e = (zk + zc) * 0.5, o = rot(zk - zc, -1.0) * 0.5;  // (zk - zc) / 2i
      spec[k] = e + o * twiddles_[static_cast<size_t>(k)];
    }
  }

  // spec: n / 2 + 1 values (the imaginary parts of bins 0 and n / 2 ignored) -> z: n / 2
  // values, z_j = (x_2j + i x_2j+1) / 2 for the n real values x, unnormalised (n times the
  // signal whose rfft spec is).
  template <class X>
  void inverse(const X* spec, X* z, X* scratch) const {
    const int64_t h = n_ / 2;
    for (int64_t k = 0; k < h; ++k) {
      X xk = spec[k], xc = conj(spec[h - k]);
      if (k == 0) {  // bins 0 and n / 2: real
        xk = real_only(xk);
        xc = real_only(xc);
      }
      const X e = (xk + xc) * 0.5;
      const X o = (xk - xc) * conj(twiddles_[static_cast<size_t>(k)]) * 0.5;
      z[k] = e + rot(o, 1.0);  // E + i O
    }
    half_.run(z, scratch);
  }

 private:
  int64_t n_;
  FftPlan half_;
  std::vector<C> twiddles_;  // exp(-2 pi i k / n), k <= n / 2
};

// The transforms of kLanes<F> rows, dispatched to copies compiled for AVX2 where the CPU has
// it. `flatten` inlines the whole transform (stages, butterflies, lane loops) into each copy.
#if TF_CPU_MULTIVERSION
#define TF_FFT_AVX2(F)                                                                        \
  TF_TARGET_AVX2 __attribute__((flatten)) void plan_run_avx2(const FftPlan& p, CV<F>* x,      \
                                                             CV<F>* s) {                      \
    p.run(x, s);                                                                              \
  }                                                                                           \
  TF_TARGET_AVX2 __attribute__((flatten)) void real_forward_avx2(const RealPlan& p, CV<F>* z, \
                                                                 CV<F>* spec, CV<F>* s) {     \
    p.forward(z, spec, s);                                                                    \
  }                                                                                           \
  TF_TARGET_AVX2 __attribute__((flatten)) void real_inverse_avx2(                             \
      const RealPlan& p, const CV<F>* spec, CV<F>* z, CV<F>* s) {                             \
    p.inverse(spec, z, s);                                                                    \
  }
TF_FFT_AVX2(float)
TF_FFT_AVX2(double)
#undef TF_FFT_AVX2
#endif

// The transforms, through the AVX2 copies where the CPU has them.
template <class F>
void transform(const FftPlan& p, CV<F>* x, CV<F>* s) {
#if TF_CPU_MULTIVERSION
  if (cpu::cpu_has_avx2()) return plan_run_avx2(p, x, s);
#endif
  p.run(x, s);
}
template <class F>
void transform_real(const RealPlan& p, CV<F>* z, CV<F>* spec, CV<F>* s) {
#if TF_CPU_MULTIVERSION
  if (cpu::cpu_has_avx2()) return real_forward_avx2(p, z, spec, s);
#endif
  p.forward(z, spec, s);
}
template <class F>
void transform_real_inverse(const RealPlan& p, const CV<F>* spec, CV<F>* z, CV<F>* s) {
#if TF_CPU_MULTIVERSION
  if (cpu::cpu_has_avx2()) return real_inverse_avx2(p, spec, z, s);
#endif
  p.inverse(spec, z, s);
}

int64_t rows_of(const Tensor& t, int64_t n) {
  return n == 0 ? 0 : t.shape().num_elements() / n;
}

// Batches of kLanes<F> rows, about 64K complex values a task.
template <class F>
int64_t batch_grain(int64_t n) {
  return std::max<int64_t>(1, 65536 / kLanes<F> / std::max<int64_t>(1, n));
}

// Calls fn(b0, e0, valid) for each batch of rows [first, first + valid) with scratch of the
// calling thread: v (n_values), spec (n_spec), work (n_work) lane vectors.
template <class F, class Fn>
void for_batches(int64_t rows, int64_t n, size_t n_values, size_t n_spec, size_t n_work, Fn fn) {
  const int64_t L = kLanes<F>;
  const int64_t batches = (rows + L - 1) / L;
  detail::parallel_for(batches, batch_grain<F>(n), [&](int64_t b, int64_t e) {
    std::vector<CV<F>> v(n_values), spec(n_spec), work(n_work);
    for (int64_t batch = b; batch < e; ++batch) {
      const int64_t first = batch * L;
      fn(first, std::min(L, rows - first), v.data(), spec.data(), work.data());
    }
  });
}

template <class T>
void fft_rows(const Tensor& re, const Tensor& im, Tensor& out_re, Tensor& out_im, bool inverse) {
  using F = T;
  const int64_t n = re.shape()[-1];
  const int64_t rows = rows_of(re, n);
  if (rows == 0) return;
  const FftPlan plan(n, inverse);
  const T* xr = re.data<T>();
  const T* xi = im.data<T>();
  T* yr = out_re.data<T>();
  T* yi = out_im.data<T>();
  const F scale = inverse ? F(1) / static_cast<F>(n) : F(1);
  const auto un = static_cast<size_t>(n);
  for_batches<F>(rows, n, un, 0, plan.scratch_size(),
                 [&](int64_t first, int64_t valid, CV<F>* v, CV<F>*, CV<F>* work) {
                   for (int64_t j = 0; j < n; ++j)
                     for (int64_t l = 0; l < kLanes<F>; ++l) {
                       const bool in = l < valid;
                       v[j].r[l] = in ? xr[(first + l) * n + j] : F(0);
                       v[j].i[l] = in ? xi[(first + l) * n + j] : F(0);
                     }
                   transform(plan, v, work);
                   for (int64_t l = 0; l < valid; ++l)
                     for (int64_t j = 0; j < n; ++j) {
                       yr[(first + l) * n + j] = v[j].r[l] * scale;
                       yi[(first + l) * n + j] = v[j].i[l] * scale;
                     }
                 });
}

template <class T>
void rfft_rows(const Tensor& x, Tensor& out_re, Tensor& out_im, int64_t n) {
  using F = T;
  const int64_t rows = rows_of(x, n);
  if (rows == 0) return;
  const int64_t m = n / 2 + 1;
  const T* src = x.data<T>();
  T* yr = out_re.data<T>();
  T* yi = out_im.data<T>();
  const auto store = [&](int64_t first, int64_t valid, const CV<F>* spec) {
    for (int64_t l = 0; l < valid; ++l)
      for (int64_t k = 0; k < m; ++k) {
        yr[(first + l) * m + k] = spec[k].r[l];
        yi[(first + l) * m + k] = spec[k].i[l];
      }
  };
  if (n % 2 == 0) {
    const RealPlan plan(n, false);
    const int64_t h = n / 2;
    for_batches<F>(rows, n, static_cast<size_t>(h), static_cast<size_t>(m), plan.scratch_size(),
                   [&](int64_t first, int64_t valid, CV<F>* z, CV<F>* spec, CV<F>* work) {
                     for (int64_t j = 0; j < h; ++j)
                       for (int64_t l = 0; l < kLanes<F>; ++l) {
                         const bool in = l < valid;
                         z[j].r[l] = in ? src[(first + l) * n + 2 * j] : F(0);
                         z[j].i[l] = in ? src[(first + l) * n + 2 * j + 1] : F(0);
                       }
                     transform_real(plan, z, spec, work);
                     store(first, valid, spec);
                   });
    return;
  }
  const FftPlan plan(n, false);
  for_batches<F>(rows, n, static_cast<size_t>(n), 0, plan.scratch_size(),
                 [&](int64_t first, int64_t valid, CV<F>* v, CV<F>*, CV<F>* work) {
                   for (int64_t j = 0; j < n; ++j)
                     for (int64_t l = 0; l < kLanes<F>; ++l) {
                       v[j].r[l] = l < valid ? src[(first + l) * n + j] : F(0);
                       v[j].i[l] = F(0);
                     }
                   transform(plan, v, work);
                   store(first, valid, v);
                 });
}

template <class T>
void irfft_rows(const Tensor& re, const Tensor& im, Tensor& out, int64_t n) {
  using F = T;
  const int64_t rows = rows_of(out, n);
  if (rows == 0) return;
  const int64_t m = n / 2 + 1;
  const T* xr = re.data<T>();
  const T* xi = im.data<T>();
  T* y = out.data<T>();
  const F scale = F(1) / static_cast<F>(n);
  const auto load = [&](int64_t first, int64_t valid, CV<F>* spec) {
    for (int64_t k = 0; k < m; ++k)
      for (int64_t l = 0; l < kLanes<F>; ++l) {
        const bool in = l < valid;
        spec[k].r[l] = in ? xr[(first + l) * m + k] : F(0);
        spec[k].i[l] = in ? xi[(first + l) * m + k] : F(0);
      }
  };
  if (n % 2 == 0) {
    const RealPlan plan(n, true);
    const int64_t h = n / 2;
    const F twice = F(2) * scale;
    for_batches<F>(rows, n, static_cast<size_t>(h), static_cast<size_t>(m), plan.scratch_size(),
                   [&](int64_t first, int64_t valid, CV<F>* z, CV<F>* spec, CV<F>* work) {
                     load(first, valid, spec);
                     transform_real_inverse(plan, spec, z, work);
                     for (int64_t l = 0; l < valid; ++l)
                       for (int64_t j = 0; j < h; ++j) {
                         y[(first + l) * n + 2 * j] = z[j].r[l] * twice;
                         y[(first + l) * n + 2 * j + 1] = z[j].i[l] * twice;
                       }
                   });
    return;
  }
  // Odd n: the Hermitian spectrum rebuilt in full (bin 0 real) and transformed as complex.
  const FftPlan plan(n, true);
  for_batches<F>(rows, n, static_cast<size_t>(n), static_cast<size_t>(m), plan.scratch_size(),
                 [&](int64_t first, int64_t valid, CV<F>* v, CV<F>* spec, CV<F>* work) {
                   load(first, valid, spec);
                   v[0] = real_only(spec[0]);
                   for (int64_t k = 1; k < m; ++k) {
                     v[k] = spec[k];
                     v[n - k] = conj(spec[k]);
                   }
                   transform(plan, v, work);
                   for (int64_t l = 0; l < valid; ++l)
                     for (int64_t j = 0; j < n; ++j) y[(first + l) * n + j] = v[j].r[l] * scale;
                 });
}

}  // namespace

void Fft::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    fft_rows<float>(in[0], in[1], out[0], out[1], inverse);
  else
    fft_rows<double>(in[0], in[1], out[0], out[1], inverse);
}

void Rfft::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    rfft_rows<float>(in[0], out[0], out[1], fft_length);
  else
    rfft_rows<double>(in[0], out[0], out[1], fft_length);
}

void Irfft::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == float32)
    irfft_rows<float>(in[0], in[1], out[0], fft_length);
  else
    irfft_rows<double>(in[0], in[1], out[0], fft_length);
}

}  // namespace tapeflow::prims
