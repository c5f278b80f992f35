// CPU kernels of Fft, Rfft and Irfft (ops/signal.h). Every row is transformed in float64
// (std::complex<double>) whatever the dtype: an iterative radix-2 Cooley-Tukey transform for
// power-of-two lengths, Bluestein's chirp-z transform for the others (the DFT of length n as a
// circular convolution of length m = the power of two >= 2n - 1, done with two radix-2
// transforms; the chirp's FFT is computed once per call). Twiddles and chirps come from
// cos/sin of exact arguments (k * k reduced mod 2n first), so the error stays within a few
// float64 ulps times log n. Rows are split over the thread pool, each thread with its own
// scratch. rfft transforms the real row as a complex one and keeps bins 0..n/2; irfft rebuilds
// the Hermitian spectrum (imaginary parts of bin 0 and of the Nyquist bin dropped) and keeps
// the real part of its inverse.
#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/signal.h"

namespace tapeflow::prims {

namespace {

using cd = std::complex<double>;

bool is_power_of_two(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// A transform of one length and direction, shared (read-only) by the threads of a call.
class FftPlan {
 public:
  FftPlan(int64_t n, bool inverse) : n_(n) {
    if (n <= 1) return;
    if (is_power_of_two(n)) {
      radix2_twiddles(n, inverse, twiddles_);
      return;
    }
    // Bluestein: X_k = w_k sum_j (x_j w_j) conj(w_{k-j}), w_t = exp(-+ i pi t^2 / n).
    m_ = 1;
    while (m_ < 2 * n - 1) m_ *= 2;
    radix2_twiddles(m_, false, twiddles_);
    radix2_twiddles(m_, true, inverse_twiddles_);
    chirp_.resize(static_cast<size_t>(n));
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t t = 0; t < n; ++t) {
      // t^2 mod 2n keeps the angle small and exact (t < n < 2^31 here: t * t fits int64).
      const int64_t r = (t * t) % (2 * n);
      const double a = std::numbers::pi * static_cast<double>(r) / static_cast<double>(n);
      chirp_[static_cast<size_t>(t)] = cd(std::cos(a), sign * std::sin(a));
    }
    kernel_.assign(static_cast<size_t>(m_), cd(0, 0));
    for (int64_t t = 0; t < n; ++t) {
      const cd c = std::conj(chirp_[static_cast<size_t>(t)]);
      kernel_[static_cast<size_t>(t)] = c;
      if (t > 0) kernel_[static_cast<size_t>(m_ - t)] = c;
    }
    radix2(kernel_.data(), m_, twiddles_);
  }

  // Scratch a thread needs for one row (Bluestein's convolution buffer).
  size_t scratch_size() const { return static_cast<size_t>(m_); }

  // In place on `x` (n values), unnormalised.
  void run(cd* x, std::vector<cd>& scratch) const {
    if (n_ <= 1) return;
    if (m_ == 0) {
      radix2(x, n_, twiddles_);
      return;
    }
    cd* a = scratch.data();
    for (int64_t j = 0; j < n_; ++j) a[j] = x[j] * chirp_[static_cast<size_t>(j)];
    for (int64_t j = n_; j < m_; ++j) a[j] = cd(0, 0);
    radix2(a, m_, twiddles_);
    for (int64_t j = 0; j < m_; ++j) a[j] *= kernel_[static_cast<size_t>(j)];
    radix2(a, m_, inverse_twiddles_);
    const double inv_m = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) x[k] = a[k] * chirp_[static_cast<size_t>(k)] * inv_m;
  }

 private:
  static void radix2_twiddles(int64_t n, bool inverse, std::vector<cd>& w) {
    w.resize(static_cast<size_t>(n / 2));
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n / 2; ++k) {
      const double a = 2.0 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
      w[static_cast<size_t>(k)] = cd(std::cos(a), sign * std::sin(a));
    }
  }

  // Iterative decimation-in-time radix-2 FFT of length n (a power of two) with the twiddles
  // w[k] = exp(-+ 2 pi i k / n), k < n / 2.
  static void radix2(cd* x, int64_t n, const std::vector<cd>& w) {
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(x[i], x[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const int64_t half = len / 2, stride = n / len;
      for (int64_t i = 0; i < n; i += len) {
        for (int64_t k = 0; k < half; ++k) {
          const cd t = x[i + k + half] * w[static_cast<size_t>(k * stride)];
          x[i + k + half] = x[i + k] - t;
          x[i + k] += t;
        }
      }
    }
  }

  int64_t n_;
  int64_t m_ = 0;  // Bluestein's convolution length; 0 for a radix-2 plan
  std::vector<cd> twiddles_, inverse_twiddles_, chirp_, kernel_;
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
    std::vector<cd> row(static_cast<size_t>(n)), scratch(plan.scratch_size());
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r * n;
      for (int64_t j = 0; j < n; ++j)
        row[static_cast<size_t>(j)] =
            cd(static_cast<double>(xr[o + j]), static_cast<double>(xi[o + j]));
      plan.run(row.data(), scratch);
      for (int64_t j = 0; j < n; ++j) {
        yr[o + j] = static_cast<T>(row[static_cast<size_t>(j)].real() * scale);
        yi[o + j] = static_cast<T>(row[static_cast<size_t>(j)].imag() * scale);
      }
    }
  });
}

template <class T>
void rfft_rows(const Tensor& x, Tensor& out_re, Tensor& out_im, int64_t n) {
  const int64_t rows = rows_of(x, n);
  if (rows == 0) return;
  const int64_t m = n / 2 + 1;
  const FftPlan plan(n, false);
  const T* src = x.data<T>();
  T* yr = out_re.data<T>();
  T* yi = out_im.data<T>();
  detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
    std::vector<cd> row(static_cast<size_t>(n)), scratch(plan.scratch_size());
    for (int64_t r = b; r < e; ++r) {
      for (int64_t j = 0; j < n; ++j)
        row[static_cast<size_t>(j)] = cd(static_cast<double>(src[r * n + j]), 0.0);
      plan.run(row.data(), scratch);
      for (int64_t k = 0; k < m; ++k) {
        yr[r * m + k] = static_cast<T>(row[static_cast<size_t>(k)].real());
        yi[r * m + k] = static_cast<T>(row[static_cast<size_t>(k)].imag());
      }
    }
  });
}

template <class T>
void irfft_rows(const Tensor& re, const Tensor& im, Tensor& out, int64_t n) {
  const int64_t rows = rows_of(out, n);
  if (rows == 0) return;
  const int64_t m = n / 2 + 1;
  const FftPlan plan(n, true);
  const T* xr = re.data<T>();
  const T* xi = im.data<T>();
  T* y = out.data<T>();
  const double scale = 1.0 / static_cast<double>(n);
  detail::parallel_for(rows, row_grain(n), [&](int64_t b, int64_t e) {
    std::vector<cd> row(static_cast<size_t>(n)), scratch(plan.scratch_size());
    for (int64_t r = b; r < e; ++r) {
      for (int64_t k = 0; k < m; ++k) {
        const bool real_only = k == 0 || (n % 2 == 0 && k == n / 2);
        const cd v(static_cast<double>(xr[r * m + k]),
                   real_only ? 0.0 : static_cast<double>(xi[r * m + k]));
        row[static_cast<size_t>(k)] = v;
        if (k > 0 && n - k > k) row[static_cast<size_t>(n - k)] = std::conj(v);
      }
      plan.run(row.data(), scratch);
      for (int64_t j = 0; j < n; ++j)
        y[r * n + j] = static_cast<T>(row[static_cast<size_t>(j)].real() * scale);
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
