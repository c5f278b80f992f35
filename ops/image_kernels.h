// Per-pixel body of the ImageProjectiveTransform kernels (ops/cpu/image.cpp and
// ops/cuda/image.cu): one output element from its NHWC coordinates. __host__ __device__ and free
// of CUDA headers, so both devices run this very arithmetic. It follows TF's
// ImageProjectiveTransformV3 kernel: coordinates and weights in float32, fill_mode applied to
// the input point before interpolation, and pixels outside the image read as fill_value.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#ifdef __CUDACC__
#define TF_IMAGE_HD __host__ __device__ __forceinline__
#else
#define TF_IMAGE_HD inline
#endif

namespace tapeflow::image_kernels {

enum Interpolation : int { kNearest = 0, kBilinear = 1 };
enum FillMode : int { kReflect = 0, kWrap = 1, kConstant = 2, kNearestFill = 3 };

TF_IMAGE_HD float clamp_coord(float v, int64_t len) {
  const float hi = static_cast<float>(len - 1);
  return v < 0.0f ? 0.0f : (v > hi ? hi : v);
}

// Maps a coordinate outside [0, len - 1] back inside, as TF's MapCoordinate for each mode.
TF_IMAGE_HD float map_coordinate(float c, int64_t len, int mode) {
  if (mode == kConstant) return c;  // the read below gives fill_value outside
  if (mode == kNearestFill) return clamp_coord(c, len);
  if (c >= 0.0f && c <= static_cast<float>(len - 1)) return c;
  if (len <= 1) return 0.0f;
  if (mode == kReflect) {
    // d c b a | a b c d | d c b a: period 2 * len.
    const int64_t sz2 = 2 * len;
    const float p = static_cast<float>(sz2);
    if (c < 0.0f) {
      c += p * static_cast<float>(static_cast<int64_t>(-c / p));
      c = c < -static_cast<float>(len) ? c + p : -c - 1.0f;
    } else {
      c -= p * static_cast<float>(static_cast<int64_t>(c / p));
      if (c >= static_cast<float>(len)) c = p - c - 1.0f;
    }
  } else {  // kWrap: a b c d | a b c d, TF's arithmetic (its period count uses len - 1)
    const float sz = static_cast<float>(len - 1);
    const float l = static_cast<float>(len);
    if (c < 0.0f)
      c += l * static_cast<float>(static_cast<int64_t>(-c / sz) + 1);
    else
      c -= l * static_cast<float>(static_cast<int64_t>(c / sz));
  }
  // A point such as 3.5 with len 4 stays inside after rounding only when clamped.
  return clamp_coord(c, len);
}

// Output element (b, y, x, ch) of a (batch, out_h, out_w, channels) result. `in` is the
// (batch, h, w, channels) input read through `load` (its compute type C), `t` the 8 parameters
// of this image's transform.
template <class C, class T, class Load>
TF_IMAGE_HD C transform_pixel(const T* in, int64_t h, int64_t w, int64_t channels, int64_t b,
                              int64_t y, int64_t x, int64_t ch, const float* t, int interpolation,
                              int fill_mode, float fill_value, Load load) {
  const float fx = static_cast<float>(x), fy = static_cast<float>(y);
  const float k = t[6] * fx + t[7] * fy + 1.0f;
  if (k == 0.0f) return static_cast<C>(fill_value);
  const float sx = map_coordinate((t[0] * fx + t[1] * fy + t[2]) / k, w, fill_mode);
  const float sy = map_coordinate((t[3] * fx + t[4] * fy + t[5]) / k, h, fill_mode);
  auto read = [&](float ry, float rx) -> float {
    // Compared as floats first: a point far outside would overflow int64.
    if (!(ry >= 0.0f && rx >= 0.0f && ry < static_cast<float>(h) && rx < static_cast<float>(w)))
      return fill_value;
    const int64_t iy = static_cast<int64_t>(ry), ix = static_cast<int64_t>(rx);
    return static_cast<float>(load(in[((b * h + iy) * w + ix) * channels + ch]));
  };
  if (interpolation == kNearest) return static_cast<C>(read(::roundf(sy), ::roundf(sx)));
  const float y0 = ::floorf(sy), x0 = ::floorf(sx);
  const float y1 = y0 + 1.0f, x1 = x0 + 1.0f;
  const float top = (x1 - sx) * read(y0, x0) + (sx - x0) * read(y0, x1);
  const float bottom = (x1 - sx) * read(y1, x0) + (sx - x0) * read(y1, x1);
  return static_cast<C>((y1 - sy) * top + (sy - y0) * bottom);
}

}  // namespace tapeflow::image_kernels

namespace tapeflow::image_kernels {

// CropAndResize (ops/cpu/image_crop.cpp, ops/cuda/image_crop.cu), as TF's kernels compute it in
// C = crop_t<T> (float, or double for float64 images): sample i of n along an image axis of `len` pixels,
// inside the box edge a..z (normalised): a (len - 1) + i (z - a) (len - 1) / (n - 1), the
// box centre when n is 1.
template <class T>
using crop_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class C>
TF_IMAGE_HD C crop_position(C a, C z, int64_t len, int64_t n, int64_t i) {
  const C span = static_cast<C>(len - 1);
  if (n > 1) return a * span + static_cast<C>(i) * ((z - a) * span / static_cast<C>(n - 1));
  return C(0.5) * (a + z) * span;
}

// Whether a sample position lies inside the axis (TF's test: outside gives the extrapolation
// value, or no gradient).
template <class C>
TF_IMAGE_HD bool crop_inside(C v, int64_t len) {
  return v >= C(0) && v <= static_cast<C>(len - 1);
}

// The two pixels around an inside position and the weight of the far one; `near` rounds half
// away from zero (TF's roundf), for nearest sampling.
template <class C>
struct CropTaps {
  int64_t lo, hi, near;
  C lerp;
};
template <class C>
TF_IMAGE_HD CropTaps<C> crop_taps(C v) {
  const C f = ::floor(v);
  return {static_cast<int64_t>(f), static_cast<int64_t>(::ceil(v)),
          static_cast<int64_t>(::round(v)), v - f};
}

}  // namespace tapeflow::image_kernels
