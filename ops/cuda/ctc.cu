// CUDA kernel of CtcLoss (tf.nn.ctc_loss's loss and its gradient): the CPU kernel's algorithm
// (ctc_one in ops/nn_more.cpp) in float64 log space for float32 and float64 logits, one block
// per batch entry. Its threads run, for that entry:
//  1. the argument checks (lengths in range, labels in [0, C) other than the blank);
//  2. zeros for the gradient rows of frames past logit_length; the log-sum-exp of each frame's
//     logits (a warp a frame); for each label position the next one of the same class;
//  3. alpha forward over time, then beta backward, threads over the extended-label positions s
//     (blank, l1, blank, ..., blank: 2L+1 of them), frames one barrier apart, both kept in a
//     global workspace (B x T x (2L+1) doubles each, from the caching allocator);
//  4. the gradient softmax - occupancy / p: every (t, k) first gets softmax(t, k), then one
//     thread per (frame, class of the label) sums that class's alpha * beta over its positions
//     in ascending order (the CPU's order, so no atomics) and overwrites its entry.
// An unreachable label (p = 0) gives an infinite loss and a zero gradient, as on the CPU.
// Bad arguments: the checks run on the device because the inputs live there (checking on the
// host before the launch would copy all labels back on every call); a bad entry raises a
// device flag and gets a NaN loss and gradient. The host reads the flag back once per call
// (that read waits for the stream: the error must come from the call, as on the CPU) and, when
// it is set, runs the CPU kernel's checks on the inputs read back (CtcLoss::check_arguments),
// so the InvalidArgumentError and its message are the CPU's. Inside a CUDA-graph capture nothing
// may be read on the host: bad entries then stay NaN.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/nn_more.h"

namespace tapeflow::prims {

namespace {

namespace tc = ::tapeflow::cuda;
namespace dc = ::tapeflow::detail::cuda;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kMaxThreads = 512;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An int32 or int64 input read as int64 (labels and both lengths come in either width).
struct Ints {
  const void* p;
  bool wide;
  __device__ __forceinline__ int64_t operator[](int64_t i) const {
    return wide ? static_cast<const int64_t*>(p)[i] : int64_t{static_cast<const int32_t*>(p)[i]};
  }
};

Ints ints_of(const Tensor& t) {
  return {t.raw_data(), t.dtype() == int64};
}

// log(exp(a) + exp(b)); -inf is the empty sum (log_add(-inf, -inf) = -inf, no NaN).
__device__ __forceinline__ double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  return fmax(a, b) + log1p(exp(-fabs(a - b)));
}

// Entry b0 + blockIdx.x of logits and grad (T, B, C), loss (B,), labels (B, L); ws: B x
// (2 T (2L+1) + T) doubles; chain: B x 2L int64; *bad set to 1 by a block whose entry fails a
// check. blockDim.x is a multiple of 32 (the log-sum-exp takes a warp per frame). Every barrier
// below is reached by all threads of the block: the loops around them have block-uniform bounds,
// and the early returns depend on block-uniform values only (the check's vote, logit_length, log p
// in shared memory).
template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    ctc_kernel(const T* __restrict__ logits, Ints labels, Ints label_len, Ints frames, int64_t tn,
               int64_t bn, int64_t cn, int64_t ln, int64_t blank, double* __restrict__ ws,
               int64_t* __restrict__ chain, T* __restrict__ loss, T* __restrict__ grad,
               int* __restrict__ bad, int64_t b0) {
  __shared__ double log_p_shared;
  const int64_t b = b0 + blockIdx.x;
  const int tid = threadIdx.x, nt = blockDim.x;
  const int64_t lb = label_len[b], tb = frames[b];
  const int64_t row_stride = bn * cn;  // from frame t to frame t + 1 in logits and grad
  const T* x = logits + b * cn;
  T* g = grad + b * cn;
  const int64_t lrow = b * ln;

  // 1. The CPU kernel's checks (the host re-runs them for the message).
  const bool lengths_ok = lb >= 0 && lb <= ln && tb >= 0 && tb <= tn;
  bool wrong = !lengths_ok;
  if (lengths_ok)
    for (int64_t i = tid; i < lb; i += nt) {
      const int64_t v = labels[lrow + i];
      wrong = wrong || v < 0 || v >= cn || v == blank;
    }
  if (__syncthreads_or(wrong)) {
    if (tid == 0) {
      *bad = 1;
      loss[b] = tc::store<T>(kNaN);
    }
    for (int64_t i = tid; i < tn * cn; i += nt)
      g[(i / cn) * row_stride + i % cn] = tc::store<T>(kNaN);
    return;
  }

  // 2. Frames past the entry's own have no gradient.
  for (int64_t i = tid; i < (tn - tb) * cn; i += nt)
    g[(tb + i / cn) * row_stride + i % cn] = tc::store<T>(0.0);
  if (tb == 0) {
    if (tid == 0) loss[b] = tc::store<T>(lb == 0 ? 0.0 : kInf);
    return;
  }
  const int64_t nmax = 2 * ln + 1, n = 2 * lb + 1;
  double* alpha = ws + b * tn * (2 * nmax + 1);  // (T, 2L+1) rows of this entry
  double* beta = alpha + tn * nmax;
  double* lse = beta + tn * nmax;      // (T,)
  int64_t* next = chain + b * 2 * ln;  // the next label position of the same class, or -1
  int64_t* first = next + ln;          // 1 at each class's first position in the label
  {
    const int lane = tid & 31, warps = nt >> 5;
    for (int64_t t = tid >> 5; t < tb; t += warps) {  // warp-uniform: the shuffles see 32 lanes
      const T* row = x + t * row_stride;
      double m = kNegInf;
      for (int64_t k = lane; k < cn; k += 32) {
        const double v = tc::load(row[k]);
        m = m < v ? v : m;  // std::max(m, v) as the CPU kernel (a NaN logit is skipped here)
      }
      for (int o = 16; o > 0; o >>= 1) {
        const double v = __shfl_xor_sync(kFull, m, o);
        m = m < v ? v : m;
      }
      double sum = 0;
      for (int64_t k = lane; k < cn; k += 32) sum += exp(static_cast<double>(tc::load(row[k])) - m);
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFull, sum, o);
      if (lane == 0) lse[t] = m + log(sum);
    }
  }
  for (int64_t j = tid; j < lb; j += nt) {
    const int64_t v = labels[lrow + j];
    int64_t nx = -1;
    for (int64_t q = j + 1; q < lb && nx < 0; ++q)
      if (labels[lrow + q] == v) nx = q;
    bool is_first = true;
    for (int64_t q = j - 1; q >= 0 && is_first; --q)
      if (labels[lrow + q] == v) is_first = false;
    next[j] = nx;
    first[j] = is_first ? 1 : 0;
  }
  __syncthreads();  // lse, next and first are read by every thread below

  // Log-softmax of frame t, class k; the class at extended position s; whether s may be reached
  // from s - 2 (a label differing from the previous one; labels are never the blank here).
  auto y = [&](int64_t t, int64_t k) {
    return static_cast<double>(tc::load(x[t * row_stride + k])) - lse[t];
  };
  auto ext = [&](int64_t s) { return (s & 1) ? labels[lrow + s / 2] : blank; };
  auto can_skip = [&](int64_t s) {
    return (s & 1) && s >= 3 && labels[lrow + s / 2] != labels[lrow + s / 2 - 1];
  };

  // 3. Alpha forward (each frame reads the previous frame's row, written before the barrier).
  for (int64_t s = tid; s < n; s += nt)
    alpha[s] = s == 0 ? y(0, blank) : s == 1 ? y(0, ext(1)) : kNegInf;
  __syncthreads();
  for (int64_t t = 1; t < tb; ++t) {
    const double* prev = alpha + (t - 1) * nmax;
    double* cur = alpha + t * nmax;
    for (int64_t s = tid; s < n; s += nt) {
      double v = prev[s];
      if (s >= 1) v = log_add(v, prev[s - 1]);
      if (can_skip(s)) v = log_add(v, prev[s - 2]);
      cur[s] = v == kNegInf ? kNegInf : v + y(t, ext(s));
    }
    __syncthreads();
  }
  if (tid == 0) {
    const double* last = alpha + (tb - 1) * nmax;
    double lp = last[n - 1];
    if (n > 1) lp = log_add(lp, last[n - 2]);
    log_p_shared = lp;
  }
  __syncthreads();
  const double log_p = log_p_shared;
  if (log_p == kNegInf) {  // no alignment: infinite loss, zero gradient (beta not needed)
    if (tid == 0) loss[b] = tc::store<T>(kInf);
    for (int64_t i = tid; i < tb * cn; i += nt)
      g[(i / cn) * row_stride + i % cn] = tc::store<T>(0.0);
    return;
  }

  // Beta backward.
  {
    double* last = beta + (tb - 1) * nmax;
    for (int64_t s = tid; s < n; s += nt)
      last[s] = s == n - 1 ? y(tb - 1, blank) : s == n - 2 ? y(tb - 1, ext(n - 2)) : kNegInf;
  }
  __syncthreads();
  for (int64_t t = tb - 2; t >= 0; --t) {
    const double* after = beta + (t + 1) * nmax;
    double* cur = beta + t * nmax;
    for (int64_t s = tid; s < n; s += nt) {
      double v = after[s];
      if (s + 1 < n) v = log_add(v, after[s + 1]);
      if (s + 2 < n && can_skip(s + 2)) v = log_add(v, after[s + 2]);
      cur[s] = v == kNegInf ? kNegInf : v + y(t, ext(s));
    }
    __syncthreads();
  }

  // 4. softmax(t, k) everywhere, then softmax - share for the blank and the label's classes
  // (alpha and beta both hold frame t's emission, hence the - y(t, k)).
  for (int64_t i = tid; i < tb * cn; i += nt) {
    const int64_t t = i / cn, k = i % cn;
    g[t * row_stride + k] = tc::store<T>(exp(y(t, k)));
  }
  __syncthreads();                // the writes below replace some of these
  const int64_t groups = lb + 1;  // the blank, then the label positions (a class's first only)
  for (int64_t i = tid; i < tb * groups; i += nt) {
    const int64_t t = i / groups, j = i % groups - 1;
    if (j >= 0 && first[j] == 0) continue;
    const double* a = alpha + t * nmax;
    const double* be = beta + t * nmax;
    double occ = kNegInf;
    int64_t k = blank;
    if (j < 0) {
      for (int64_t s = 0; s < n; s += 2) occ = log_add(occ, a[s] + be[s]);
    } else {
      k = labels[lrow + j];
      for (int64_t q = j; q >= 0; q = next[q]) occ = log_add(occ, a[2 * q + 1] + be[2 * q + 1]);
    }
    const double yk = y(t, k);
    const double share = occ == kNegInf ? 0.0 : exp(occ - log_p - yk);
    g[t * row_stride + k] = tc::store<T>(exp(yk) - share);
  }
  if (tid == 0) loss[b] = tc::store<T>(-log_p);
}

template <class T>
void launch(const CtcLoss& p, std::span<const Tensor> in, std::span<Tensor> out, double* ws,
            int64_t* chain, int* bad, cudaStream_t s) {
  const TensorShape& shape = in[0].shape();
  const int64_t tn = shape[0], bn = shape[1], cn = shape[2], ln = in[1].shape()[1];
  // Threads for the 2L+1 positions (a multiple of the warp), at least 4 warps for the per-frame
  // and per-class loops; longer labels stride.
  const int threads =
      static_cast<int>(std::clamp<int64_t>((2 * ln + 1 + 31) / 32 * 32, 128, kMaxThreads));
  // One block per entry, entries b0 + blockIdx.x (launches of at most 2^31 - 1 blocks).
  constexpr int64_t kMaxGrid = 0x7fffffff;
  for (int64_t b0 = 0; b0 < bn; b0 += kMaxGrid)
    ctc_kernel<T><<<static_cast<unsigned>(std::min(bn - b0, kMaxGrid)), threads, 0, s>>>(
        tc::dptr<T>(in[0]), ints_of(in[1]), ints_of(in[2]), ints_of(in[3]), tn, bn, cn, ln, p.blank,
        ws, chain, tc::dptr<T>(out[0]), tc::dptr<T>(out[1]), bad, b0);
}

}  // namespace

void CtcLoss::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const TensorShape& shape = in[0].shape();
  const int64_t tn = shape[0], bn = shape[1], ln = in[1].shape()[1];
  if (bn == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = dc::stream(dev);
  // Scratch from the device's caching allocator (freed in stream order when these go).
  const int64_t nmax = 2 * ln + 1;
  Tensor ws = detail::empty(TensorShape{bn * tn * (2 * nmax + 1)}, float64, dev);
  Tensor chain = detail::empty(TensorShape{bn * 2 * ln}, int64, dev);
  Tensor flag = detail::empty(TensorShape{1}, int32, dev);
  auto* bad = static_cast<int*>(flag.raw_data());
  TF_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), s));
  auto* w = static_cast<double*>(ws.raw_data());
  auto* c = static_cast<int64_t*>(chain.raw_data());
  if (in[0].dtype() == float64)
    launch<double>(*this, in, out, w, c, bad, s);
  else
    launch<float>(*this, in, out, w, c, bad, s);
  dc::check_launch(name());
  // Recorded into a CUDA graph (a captured traced step), nothing may be read on the host: a bad
  // entry keeps its NaN loss and gradient.
  if (dc::in_capture_scope(dev)) return;
  int flagged = 0;
  detail::copy_bytes(&flagged, Device{}, bad, dev, sizeof(flagged));
  if (flagged == 0) return;
  check_arguments(in);  // throws the CPU kernel's InvalidArgumentError
  throw InternalError(std::string("[") + name() +
                      "] the CUDA kernel flagged an argument that the host checks accept");
}

}  // namespace tapeflow::prims
