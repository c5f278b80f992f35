// tf.signal: discrete Fourier transforms (fft, ifft, fft2d, ifft2d, fft3d, ifft3d, rfft, irfft,
// rfft2d, irfft2d, rfft3d, irfft3d, the fftnd family, fftshift, ifftshift), framing
// (frame, overlap_and_add), windows (hann, hamming, kaiser, kaiser_bessel_derived, vorbis),
// short-time Fourier transforms (stft, inverse_stft, inverse_stft_window_fn), cosine transforms
// (dct, idct, mdct, inverse_mdct) and the mel helpers (linear_to_mel_weight_matrix,
// mfccs_from_log_mel_spectrograms).
//
// Complex values. tapeflow has no complex dtype: a complex tensor is a ComplexTensor, its real
// and imaginary parts as two float32 (TF's complex64) or float64 (complex128) tensors of one
// shape, as Keras 3's keras.ops.fft/rfft/stft pass (real, imag) tuples. TF's tf.math.real and
// tf.math.imag are the two members; tf.abs of a complex tensor is signal::abs.
//
// Kernels. Three primitives do the transforms along the innermost axis: Fft (complex to complex,
// forward or inverse), Rfft (real to the fft_length / 2 + 1 non-negative frequencies) and Irfft
// (back). The CPU kernel computes in the dtype (float32 as TF's CPU kernels and cuFFT), several
// rows at once (one per vector lane; a row's result does not depend on its neighbours): a
// mixed-radix Stockham FFT for lengths whose prime factors are at most 13 and Bluestein's
// chirp-z transform (through a power-of-two FFT) for the others, so any length costs
// O(n log n); even-length real rows go through a complex FFT of half the length; batches of rows
// are split over the thread pool (ops/cpu/fft.cpp). The CUDA kernel runs cuFFT (ops/cuda/signal.cu). The forward transform is
// unnormalised, the inverse divides by n, as TF and numpy.
//
// Gradients (the transforms are linear): fft's is n ifft of the cotangent, ifft's fft / n,
// rfft's the real part of n ifft of the cotangent zero-padded to fft_length, irfft's rfft of the
// cotangent weighted 1/n at the zero and Nyquist frequencies and 2/n elsewhere (the imaginary
// parts of those two bins are ignored by irfft, so their cotangent is 0). Each is written with
// the transforms themselves, so every order differentiates.
//
// Errors: float16, bfloat16 and integer inputs raise InvalidArgumentError naming the op and the
// dtype (TF raises for them too); so do rank-0 inputs, real and imaginary parts of different
// shapes or dtypes, and negative lengths. TF aborts the process on rfft/irfft with
// fft_length = 0; here a length of 0 gives an empty innermost axis.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow {

namespace signal {

struct ComplexTensor {
  Tensor real;
  Tensor imag;
};

// The DFT over the innermost axis of the complex input (tf.signal.fft): X_k = sum_n x_n
// exp(-2 pi i k n / N). ifft is the inverse, with the 1/N factor.
ComplexTensor fft(const ComplexTensor& input);
ComplexTensor ifft(const ComplexTensor& input);
// The 2-D DFT over the two innermost axes (tf.signal.fft2d / ifft2d).
ComplexTensor fft2d(const ComplexTensor& input);
ComplexTensor ifft2d(const ComplexTensor& input);
// The DFT of a real signal over its innermost axis, cropped or zero-padded to fft_length first
// (-1: the axis' length); the fft_length / 2 + 1 unique frequencies (tf.signal.rfft).
ComplexTensor rfft(const Tensor& input, int64_t fft_length = -1);
// The real signal of length fft_length (-1: 2 (m - 1) for m input frequencies) whose rfft the
// input is, cropped or zero-padded to fft_length / 2 + 1 frequencies first; the imaginary parts
// of the zero frequency and (even lengths) of the Nyquist frequency are ignored
// (tf.signal.irfft).
Tensor irfft(const ComplexTensor& input, int64_t fft_length = -1);
// The 2-D transforms of a real signal over its two innermost axes (tf.signal.rfft2d /
// irfft2d): rfft over the last axis, then the complex DFT over the one before, each axis
// cropped or zero-padded to fft_length {height, width} first ({} : the axes' lengths; for
// irfft2d {height, 2 (m - 1)}).
ComplexTensor rfft2d(const Tensor& input, std::vector<int64_t> fft_length = {});
Tensor irfft2d(const ComplexTensor& input, std::vector<int64_t> fft_length = {});
// The same over the three innermost axes (tf.signal.fft3d, ifft3d, rfft3d, irfft3d);
// fft_length is {depth, height, width}.
ComplexTensor fft3d(const ComplexTensor& input);
ComplexTensor ifft3d(const ComplexTensor& input);
ComplexTensor rfft3d(const Tensor& input, std::vector<int64_t> fft_length = {});
Tensor irfft3d(const ComplexTensor& input, std::vector<int64_t> fft_length = {});
// N-dimensional transforms over `axes` (tf.signal.fftnd, ifftnd, rfftnd, irfftnd; NumPy's
// fftn family): axes {} means every axis; fft_length {} the axes' sizes (for irfftnd the last
// axis' 2 (m - 1)), else one length per axis, each axis cropped or zero-padded to it first.
// rfftnd halves the last of `axes`; irfftnd restores it. norm "backward" (TF's None: 1/n on
// the inverse only), "ortho" (1/sqrt(n) both ways) or "forward" (1/n on the forward only), n
// being the product of the lengths. TF 2.21 has GPU kernels only for these; tapeflow runs them
// on every device.
ComplexTensor fftnd(const ComplexTensor& input, std::vector<int64_t> fft_length = {},
                    std::vector<int> axes = {}, const std::string& norm = "backward");
ComplexTensor ifftnd(const ComplexTensor& input, std::vector<int64_t> fft_length = {},
                     std::vector<int> axes = {}, const std::string& norm = "backward");
ComplexTensor rfftnd(const Tensor& input, std::vector<int64_t> fft_length = {},
                     std::vector<int> axes = {}, const std::string& norm = "backward");
Tensor irfftnd(const ComplexTensor& input, std::vector<int64_t> fft_length = {},
               std::vector<int> axes = {}, const std::string& norm = "backward");
// x rolled by half of each axis' size (tf.signal.fftshift: the zero frequency moves to the
// centre; ifftshift undoes it, also for odd sizes); axes {} means every axis.
Tensor fftshift(const Tensor& x, std::vector<int> axes = {});
Tensor ifftshift(const Tensor& x, std::vector<int> axes = {});
// |z| elementwise, sqrt(re^2 + im^2) computed without overflow (tf.abs of a complex tensor);
// the gradient at 0 is 0, as TF's.
Tensor abs(const ComplexTensor& z);
// atan2(im, re) (tf.math.angle).
Tensor angle(const ComplexTensor& z);

// Frames of frame_length samples every frame_step samples along axis (tf.signal.frame): the
// axis becomes two, [..., frames, frame_length, ...]; frames = 1 + (n - frame_length) /
// frame_step (0 when n < frame_length), or with pad_end ceil(n / frame_step), the signal padded
// with pad_value at its end. Differentiable w.r.t. the signal.
Tensor frame(const Tensor& signal, int64_t frame_length, int64_t frame_step, bool pad_end = false,
             double pad_value = 0.0, int axis = -1);
// The adjoint of frame on the last two axes (tf.signal.overlap_and_add): [..., frames,
// frame_length] -> [..., (frames - 1) frame_step + frame_length], overlapping samples summed.
Tensor overlap_and_add(const Tensor& signal, int64_t frame_step);

// Raised-cosine windows (tf.signal.hann_window, hamming_window) of a floating dtype. As TF,
// `periodic` changes only even lengths (a periodic window of length L is the symmetric one of
// length L + 1 without its last sample); a window of length 1 is [1].
Tensor hann_window(int64_t window_length, bool periodic = true, DType dtype = float32);
Tensor hamming_window(int64_t window_length, bool periodic = true, DType dtype = float32);
// The Kaiser window I0(beta sqrt(1 - (2 n / (L - 1) - 1)^2)) / I0(beta) (tf.signal.kaiser_window,
// NumPy's kaiser), its Kaiser-Bessel-derived window for the MDCT (L even: the square roots of the
// cumulative sums of a Kaiser window of L / 2 + 1, mirrored;
// tf.signal.kaiser_bessel_derived_window) and the Vorbis power-complementary window sin(pi / 2
// sin^2(pi (n + 0.5) / L)) (tf.signal.vorbis_window). Computed in float64, then cast.
Tensor kaiser_window(int64_t window_length, double beta = 12.0, DType dtype = float32);
Tensor kaiser_bessel_derived_window(int64_t window_length, double beta = 12.0,
                                    DType dtype = float32);
Tensor vorbis_window(int64_t window_length, DType dtype = float32);

// A window function: (frame_length, dtype) -> the window [frame_length]. A null WindowFn means
// no window (TF's window_fn=None).
using WindowFn = std::function<Tensor(int64_t, DType)>;
WindowFn hann_window_fn(bool periodic = true);
WindowFn hamming_window_fn(bool periodic = true);
WindowFn kaiser_window_fn(double beta = 12.0);
WindowFn kaiser_bessel_derived_window_fn(double beta = 12.0);
WindowFn vorbis_window_fn();

// Short-time Fourier transform (tf.signal.stft): signals [..., samples] (float32/float64) ->
// [..., frames, fft_length / 2 + 1]: rfft(window * frame(signals)). fft_length -1 is the
// smallest power of two >= frame_length.
ComplexTensor stft(const Tensor& signals, int64_t frame_length, int64_t frame_step,
                   int64_t fft_length = -1, const WindowFn& window_fn = hann_window_fn(),
                   bool pad_end = false);
// The inverse (tf.signal.inverse_stft): irfft of each frame, cropped to frame_length, windowed
// and overlap-added. Perfect reconstruction needs the window of inverse_stft_window_fn.
Tensor inverse_stft(const ComplexTensor& stfts, int64_t frame_length, int64_t frame_step,
                    int64_t fft_length = -1, const WindowFn& window_fn = hann_window_fn());
// The window that makes inverse_stft invert stft made with forward_window_fn
// (tf.signal.inverse_stft_window_fn): the forward window divided by the overlap-added squares
// of the forward window.
WindowFn inverse_stft_window_fn(int64_t frame_step,
                                const WindowFn& forward_window_fn = hann_window_fn());

// Discrete cosine transforms of types 1-4 over the last axis (tf.signal.dct): the input is
// cropped or zero-padded to n first (-1: as it is); norm "" (none) or "ortho" (types 2-4 only,
// as TF). idct is TF's inverse: dct of type 1 -> 1, 2 -> 3, 3 -> 2, 4 -> 4, so that with
// "ortho" idct(dct(x)) = x, and without it idct(dct(x)) = 2 N x (N - 1 for type 1). Computed as
// a product with the N x N cosine matrix.
Tensor dct(const Tensor& input, int type = 2, int64_t n = -1, int axis = -1,
           const std::string& norm = "");
Tensor idct(const Tensor& input, int type = 2, int64_t n = -1, int axis = -1,
            const std::string& norm = "");

// The modified DCT (tf.signal.mdct): signals [..., samples] framed with frame_length (a
// multiple of 4) and a step of half of it, windowed (a null window_fn scales by 1/sqrt(2)),
// folded and transformed by a type-4 DCT -> [..., frames, frame_length / 2]. norm "" or
// "ortho". inverse_mdct undoes it by overlap-adding (time-domain aliasing cancels with a
// power-complementary window such as vorbis or KBD; with "ortho" the round trip is exact
// except the first and last half frames).
Tensor mdct(const Tensor& signals, int64_t frame_length,
            const WindowFn& window_fn = vorbis_window_fn(), bool pad_end = false,
            const std::string& norm = "");
Tensor inverse_mdct(const Tensor& mdcts, const WindowFn& window_fn = vorbis_window_fn(),
                    const std::string& norm = "");

// The [num_spectrogram_bins, num_mel_bins] matrix that maps linear-frequency spectrogram bins
// (0 .. sample_rate / 2) to triangular mel bands between lower_edge_hertz and upper_edge_hertz
// (HTK's mel(f) = 1127 ln(1 + f / 700); each band peaks at 1; the zero-frequency row is 0), as
// tf.signal.linear_to_mel_weight_matrix.
Tensor linear_to_mel_weight_matrix(int64_t num_mel_bins = 20, int64_t num_spectrogram_bins = 129,
                                   double sample_rate = 8000, double lower_edge_hertz = 125.0,
                                   double upper_edge_hertz = 3800.0, DType dtype = float32);
// MFCCs from [..., num_mel_bins] log-mel spectrograms: the type-2 DCT over the last axis scaled
// by 1 / sqrt(2 num_mel_bins) (tf.signal.mfccs_from_log_mel_spectrograms).
Tensor mfccs_from_log_mel_spectrograms(const Tensor& log_mel_spectrograms);

}  // namespace signal

namespace prims {

// Inputs: real and imaginary parts [..., n] of one shape and dtype (float32/float64); outputs
// the same: their DFT over the innermost axis (inverse: with exp(+...) and 1/n).
struct Fft final : PrimitiveBase<Fft> {
  bool inverse = false;
  explicit Fft(bool inv) : inverse(inv) {}
  const char* name() const override { return inverse ? "ifft" : "fft"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  std::string attributes() const override { return inverse ? "inverse=true" : "inverse=false"; }
};

// Input: a real signal [..., fft_length] (the frontend crops or pads it); outputs the real and
// imaginary parts [..., fft_length / 2 + 1] of its DFT.
struct Rfft final : PrimitiveBase<Rfft> {
  int64_t fft_length = 0;
  explicit Rfft(int64_t n) : fft_length(n) {}
  const char* name() const override { return "rfft"; }
  int num_outputs() const override { return 2; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  bool vjp_accepts_undefined_cotangents() const override { return true; }
  std::string attributes() const override { return "fft_length=" + std::to_string(fft_length); }
};

// Inputs: real and imaginary parts [..., fft_length / 2 + 1] (the frontend crops or pads them);
// output: the real signal [..., fft_length].
struct Irfft final : PrimitiveBase<Irfft> {
  int64_t fft_length = 0;
  explicit Irfft(int64_t n) : fft_length(n) {}
  const char* name() const override { return "irfft"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override { return "fft_length=" + std::to_string(fft_length); }
};

}  // namespace prims
}  // namespace tapeflow
