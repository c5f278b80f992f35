// CPU kernels of Fft, Rfft and Irfft (ops/signal.h). Every row is transformed in float64 whatever
// the dtype, with a mixed-radix Stockham FFT (self-sorting: no bit-reversal pass; butterflies of
// radix 4, 2, 3 and 5 written out, 7, 11 and 13 as their plain DFT; each stage reads
// its twiddles from one table of the n-th roots of unity) for lengths whose prime factors are at
// most 13, and Bluestein's chirp-z transform (a circular convolution of length m = the power of
// two >= 2n - 1, done with two radix-4 transforms, the chirp's transform computed once per call)
// for the others, so every length costs O(n log n). Roots and chirps come from cos/sin of exact
// arguments (k * k reduced mod 2n first), so the error stays within a few float64 ulps times
// log n. A real row of even length n is transformed as a complex row of n / 2 (even samples as
// real parts, odd ones as imaginary parts) and split after, for rfft and for irfft in reverse;
// odd lengths go through the complex transform. irfft drops the imaginary parts of bin 0 and of
// the Nyquist bin. Rows are split over the thread pool, each thread with its own scratch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
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

// exp(sign 2 pi i num / den), num reduced mod den first (exact arguments for large num).
C root(int64_t num, int64_t den, double sign) {
  const int64_t k = num % den;
  const double a = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(den);
  return {std::cos(a), sign * std::sin(a)};
}

// The complex DFT of one length and direction, unnormalised; shared (read-only) by the threads
// of a call.
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
    forward_->run(kernel_.data(), scratch.data());
    // The convolution's inverse transform is unnormalised: fold its 1/m into the kernel.
    for (C& k : kernel_) k = k * (1.0 / static_cast<double>(m_));
  }

  int64_t size() const { return n_; }
  // Complex values of scratch run() needs.
  size_t scratch_size() const { return static_cast<size_t>(m_ > 0 ? 2 * m_ : n_); }

  // In place on x (n values).
  void run(C* x, C* scratch) const {
    if (n_ <= 1) return;
    if (m_ > 0) {
      bluestein(x, scratch);
      return;
    }
    C* in = x;
    C* out = scratch;
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

 private:
  // One Stockham step of radix r on sub-transforms of length len (stride sub-sequences):
  // y[q + s (r p + j)] = w_len^(j p) sum_k x[q + s (p + k m)] W_r^(j k), m = len / r.
  void stage(const C* x, C* y, int64_t len, int64_t s, int r) const {
    const int64_t m = len / r;
    const C* w = roots_.data();  // w_len^t = roots_[t * s]
    switch (r) {
      case 4:
        for (int64_t p = 0; p < m; ++p) {
          const C w1 = w[p * s], w2 = w[2 * p * s], w3 = w[3 * p * s];
          const C* a = x + s * p;
          C* b = y + s * 4 * p;
          for (int64_t q = 0; q < s; ++q) {
            const C a0 = a[q], a1 = a[q + s * m], a2 = a[q + 2 * s * m], a3 = a[q + 3 * s * m];
            const C t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, t3 = rot(a1 - a3, sign_);
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
          const C* a = x + s * p;
          C* b = y + s * 2 * p;
          for (int64_t q = 0; q < s; ++q) {
            const C a0 = a[q], a1 = a[q + s * m];
            b[q] = a0 + a1;
            b[q + s] = (a0 - a1) * w1;
          }
        }
        return;
      case 3: {
        const double h = sign_ * std::sqrt(3.0) / 2.0;
        for (int64_t p = 0; p < m; ++p) {
          const C w1 = w[p * s], w2 = w[2 * p * s];
          const C* a = x + s * p;
          C* b = y + s * 3 * p;
          for (int64_t q = 0; q < s; ++q) {
            const C a0 = a[q], a1 = a[q + s * m], a2 = a[q + 2 * s * m];
            const C t1 = a1 + a2, t2 = a0 - t1 * 0.5, t3 = rot(a1 - a2, 1.0) * h;
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
          const C* a = x + s * p;
          C* b = y + s * 5 * p;
          for (int64_t q = 0; q < s; ++q) {
            const C a0 = a[q], a1 = a[q + s * m], a2 = a[q + 2 * s * m], a3 = a[q + 3 * s * m],
                    a4 = a[q + 4 * s * m];
            const C t1 = a1 + a4, t2 = a2 + a3, t3 = a1 - a4, t4 = a2 - a3;
            const C b1 = a0 + t1 * c1 + t2 * c2, b2 = a0 + t1 * c2 + t2 * c1;
            const C d1 = rot(t3 * s1 + t4 * s2, 1.0), d2 = rot(t3 * s2 - t4 * s1, 1.0);
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
        C a[13];
        for (int64_t p = 0; p < m; ++p) {
          for (int64_t q = 0; q < s; ++q) {
            for (int k = 0; k < r; ++k) a[k] = x[q + s * (p + k * m)];
            for (int j = 0; j < r; ++j) {
              C acc = a[0];
              for (int k = 1; k < r; ++k) acc = acc + a[k] * w[((j * k) % r) * step];
              y[q + s * (r * p + j)] = j == 0 ? acc : acc * w[j * p * s];
            }
          }
        }
        return;
      }
    }
  }

  void bluestein(C* x, C* scratch) const {
    C* a = scratch;
    C* sub = scratch + m_;
    for (int64_t j = 0; j < n_; ++j) a[j] = x[j] * chirp_[static_cast<size_t>(j)];
    for (int64_t j = n_; j < m_; ++j) a[j] = C{0, 0};
    forward_->run(a, sub);
    for (int64_t j = 0; j < m_; ++j) a[j] = a[j] * kernel_[static_cast<size_t>(j)];
    backward_->run(a, sub);
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
  size_t scratch_size() const { return static_cast<size_t>(n_ / 2) + half_.scratch_size(); }

  // x: n real values -> spec: n / 2 + 1 complex values.
  void forward(const double* x, C* spec, C* scratch) const {
    const int64_t h = n_ / 2;
    C* z = scratch;
    for (int64_t j = 0; j < h; ++j) z[j] = {x[2 * j], x[2 * j + 1]};
    half_.run(z, scratch + h);
    for (int64_t k = 0; k <= h; ++k) {
      const C zk = z[k % h], zc = conj(z[(h - k) % h]);
      const C e = (zk + zc) * 0.5, o = rot(zk - zc, -1.0) * 0.5;  // (zk - zc) / 2i
      spec[k] = e + twiddles_[static_cast<size_t>(k)] * o;
    }
  }

  // spec: n / 2 + 1 complex values (the imaginary parts of bins 0 and n / 2 ignored) -> n real
  // values, unnormalised (n times the signal whose rfft spec is).
  void inverse(const C* spec, double* x, C* scratch) const {
    const int64_t h = n_ / 2;
    C* z = scratch;
    for (int64_t k = 0; k < h; ++k) {
      C xk = spec[k], xc = conj(spec[h - k]);
      if (k == 0) {  // bins 0 and n / 2: real
        xk.i = 0;
        xc.i = 0;
      }
      const C e = (xk + xc) * 0.5;
      const C o = (xk - xc) * conj(twiddles_[static_cast<size_t>(k)]) * 0.5;
      z[k] = e + rot(o, 1.0);  // E + i O
    }
    half_.run(z, scratch + h);
    for (int64_t j = 0; j < h; ++j) {
      x[2 * j] = 2.0 * z[j].r;
      x[2 * j + 1] = 2.0 * z[j].i;
    }
  }

 private:
  int64_t n_;
  FftPlan half_;
  std::vector<C> twiddles_;  // exp(-2 pi i k / n), k <= n / 2
};

int64_t rows_of(const Tensor& t, int64_t n) {
  return n == 0 ? 0 : t.shape().num_elements() / n;
}

// About 64K complex values a task.
int64_t row_grain(int64_t n) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, n));
}

template <class T>
void fft_rows(const Tensor& re, const Tensor& im, Tensor& out_re, Tensor& out_im, bool inverse) {
  const int64_t n = re.shape()[-1];
  const int64_t rows = rows_of(re, n);
  if (rows == 0) return;
  const FftPlan plan(n, inverse);
  const T* xr = re.data<T>();
  const T* xi = im.data<T>();
  T* yr = out_re.data<T>();
  T* yi = out_im.data<T>();
  const double scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
    std::vector<C> row(static_cast<size_t>(n)), scratch(plan.scratch_size());
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r * n;
      for (int64_t j = 0; j < n; ++j)
        row[static_cast<size_t>(j)] = {static_cast<double>(xr[o + j]),
                                       static_cast<double>(xi[o + j])};
      plan.run(row.data(), scratch.data());
      for (int64_t j = 0; j < n; ++j) {
        yr[o + j] = static_cast<T>(row[static_cast<size_t>(j)].r * scale);
        yi[o + j] = static_cast<T>(row[static_cast<size_t>(j)].i * scale);
      }
    }
  });
}

template <class T>
void rfft_rows(const Tensor& x, Tensor& out_re, Tensor& out_im, int64_t n) {
  const int64_t rows = rows_of(x, n);
  if (rows == 0) return;
  const int64_t m = n / 2 + 1;
  const T* src = x.data<T>();
  T* yr = out_re.data<T>();
  T* yi = out_im.data<T>();
  auto store = [&](int64_t r, const C* spec) {
    for (int64_t k = 0; k < m; ++k) {
      yr[r * m + k] = static_cast<T>(spec[k].r);
      yi[r * m + k] = static_cast<T>(spec[k].i);
    }
  };
  if (n % 2 == 0) {
    const RealPlan plan(n, false);
    detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
      std::vector<double> row(static_cast<size_t>(n));
      std::vector<C> spec(static_cast<size_t>(m)), scratch(plan.scratch_size());
      for (int64_t r = b; r < e; ++r) {
        for (int64_t j = 0; j < n; ++j)
          row[static_cast<size_t>(j)] = static_cast<double>(src[r * n + j]);
        plan.forward(row.data(), spec.data(), scratch.data());
        store(r, spec.data());
      }
    });
    return;
  }
  const FftPlan plan(n, false);
  detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
    std::vector<C> row(static_cast<size_t>(n)), scratch(plan.scratch_size());
    for (int64_t r = b; r < e; ++r) {
      for (int64_t j = 0; j < n; ++j)
        row[static_cast<size_t>(j)] = {static_cast<double>(src[r * n + j]), 0.0};
      plan.run(row.data(), scratch.data());
      store(r, row.data());
    }
  });
}

template <class T>
void irfft_rows(const Tensor& re, const Tensor& im, Tensor& out, int64_t n) {
  const int64_t rows = rows_of(out, n);
  if (rows == 0) return;
  const int64_t m = n / 2 + 1;
  const T* xr = re.data<T>();
  const T* xi = im.data<T>();
  T* y = out.data<T>();
  const double scale = 1.0 / static_cast<double>(n);
  if (n % 2 == 0) {
    const RealPlan plan(n, true);
    detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
      std::vector<double> row(static_cast<size_t>(n));
      std::vector<C> spec(static_cast<size_t>(m)), scratch(plan.scratch_size());
      for (int64_t r = b; r < e; ++r) {
        for (int64_t k = 0; k < m; ++k)
          spec[static_cast<size_t>(k)] = {static_cast<double>(xr[r * m + k]),
                                          static_cast<double>(xi[r * m + k])};
        plan.inverse(spec.data(), row.data(), scratch.data());
        for (int64_t j = 0; j < n; ++j)
          y[r * n + j] = static_cast<T>(row[static_cast<size_t>(j)] * scale);
      }
    });
    return;
  }
  // Odd n: the Hermitian spectrum rebuilt in full (bin 0 real) and transformed as complex.
  const FftPlan plan(n, true);
  detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
    std::vector<C> row(static_cast<size_t>(n)), scratch(plan.scratch_size());
    for (int64_t r = b; r < e; ++r) {
      for (int64_t k = 0; k < m; ++k) {
        const C v{static_cast<double>(xr[r * m + k]),
                  k == 0 ? 0.0 : static_cast<double>(xi[r * m + k])};
        row[static_cast<size_t>(k)] = v;
        if (k > 0) row[static_cast<size_t>(n - k)] = conj(v);
      }
      plan.run(row.data(), scratch.data());
      for (int64_t j = 0; j < n; ++j)
        y[r * n + j] = static_cast<T>(row[static_cast<size_t>(j)].r * scale);
    }
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
