// CPU kernels of the movement primitives. Every kernel moves bytes (dtype matters only for
// pad's fill value): slice, pad and concat copy contiguous runs with memcpy, broadcast_to
// replicates runs, gather copies one slab per index, and transpose either copies runs (when the
// innermost dimension stays innermost) or works in 32x32 tiles over the two dimensions that
// trade places. Work is split over the shared OpenMP pool with detail::parallel_for; nothing
// throws inside a parallel region (gather checks its indices first).
#include "ops/movement.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu/transpose.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/check.h"
#include "core/parallel.h"
#include "ops/helpers.h"

namespace tapeflow::prims {

namespace {

constexpr int kMaxRank = TensorShape::kMaxRank;
constexpr int64_t kPiece = 256 << 10;  // bytes per task when one long run is split

// memcpy, parallel for large sizes.
void parallel_memcpy(char* dst, const char* src, int64_t n) {
  if (n <= 0) return;
  const int64_t pieces = (n + kPiece - 1) / kPiece;
  detail::parallel_for(pieces, 2, [&](int64_t b, int64_t e) {
    const int64_t s = b * kPiece, t = std::min(n, e * kPiece);
    std::memcpy(dst + s, src + s, static_cast<size_t>(t - s));
  });
}

// Calls fn(dst + offset_d(i), src + offset_s(i)) for every index i of the row-major box
// dims[0, k), where the offsets are sums of i_d times the byte strides ss / ds. `work` is the
// bytes one call moves (it sizes the parallel grain).
template <class F>
void for_each_run(int k, const int64_t* dims, const int64_t* ss, const int64_t* ds, const char* src,
                  char* dst, int64_t work, F&& fn) {
  int64_t count = 1;
  for (int d = 0; d < k; ++d) count *= dims[d];
  if (count == 0) return;
  const int64_t grain = std::max<int64_t>(1, (64 << 10) / std::max<int64_t>(work, 1));
  detail::parallel_for(count, grain, [&](int64_t b, int64_t e) {
    int64_t idx[kMaxRank] = {};
    int64_t so = 0, dof = 0, rem = b;
    for (int d = k - 1; d >= 0; --d) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
      so += idx[d] * ss[d];
      dof += idx[d] * ds[d];
    }
    for (int64_t i = b; i < e; ++i) {
      fn(dst + dof, src + so);
      for (int d = k - 1; d >= 0; --d) {
        so += ss[d];
        dof += ds[d];
        if (++idx[d] < dims[d]) break;
        so -= ss[d] * dims[d];
        dof -= ds[d] * dims[d];
        idx[d] = 0;
      }
    }
  });
}

// Copies runs of `run` bytes (see for_each_run).
void copy_runs(int k, const int64_t* dims, const int64_t* ss, const int64_t* ds, const char* src,
               char* dst, int64_t run) {
  if (run <= 0) return;
  int64_t count = 1;
  for (int d = 0; d < k; ++d) count *= dims[d];
  if (count < 2 * detail::num_threads() && run >= 2 * kPiece) {
    // Few long runs: one after the other, each split over the threads.
    for_each_run(k, dims, ss, ds, src, dst, 0,
                 [&](char* d, const char* s) { parallel_memcpy(d, s, run); });
    return;
  }
  switch (run) {
    case 1:
      return for_each_run(k, dims, ss, ds, src, dst, 1, [](char* d, const char* s) { *d = *s; });
    case 2:
      return for_each_run(k, dims, ss, ds, src, dst, 2,
                          [](char* d, const char* s) { std::memcpy(d, s, 2); });
    case 4:
      return for_each_run(k, dims, ss, ds, src, dst, 4,
                          [](char* d, const char* s) { std::memcpy(d, s, 4); });
    case 8:
      return for_each_run(k, dims, ss, ds, src, dst, 8,
                          [](char* d, const char* s) { std::memcpy(d, s, 8); });
    default:
      return for_each_run(k, dims, ss, ds, src, dst, run, [run](char* d, const char* s) {
        std::memcpy(d, s, static_cast<size_t>(run));
      });
  }
}

// Copies between the box [begin, begin + size) of a row-major array of shape `big` and a
// contiguous array of shape `size`: big -> small when to_small, else small -> big.
void box_copy(const TensorShape& big, std::span<const int64_t> begin, std::span<const int64_t> size,
              size_t es, char* big_ptr, char* small_ptr, bool to_small) {
  const int r = big.rank();
  for (int d = 0; d < r; ++d)
    if (size[d] == 0) return;
  const auto bst = detail::contiguous_strides(big);
  // The run: the trailing dimensions that the box covers fully, plus the next one.
  int j = r - 1;
  int64_t run = 1;
  while (j >= 0 && size[j] == big[j]) run *= size[j--];
  if (j >= 0) run *= size[j];
  int64_t offset = 0;
  for (int d = 0; d < r; ++d) offset += begin[d] * bst[d];
  // Outer dimensions [0, j), skipping those of size 1.
  int64_t dims[kMaxRank], bs[kMaxRank], ss[kMaxRank];
  int k = 0;
  int64_t small_stride = run;
  for (int d = j - 1; d >= 0; --d) {
    if (size[d] != 1) {
      dims[k] = size[d];
      bs[k] = bst[d] * static_cast<int64_t>(es);
      ss[k] = small_stride * static_cast<int64_t>(es);
      ++k;
    }
    small_stride *= size[d];
  }
  std::reverse(dims, dims + k);
  std::reverse(bs, bs + k);
  std::reverse(ss, ss + k);
  char* b = big_ptr + offset * static_cast<int64_t>(es);
  const int64_t bytes = run * static_cast<int64_t>(es);
  if (to_small)
    copy_runs(k, dims, bs, ss, b, small_ptr, bytes);
  else
    copy_runs(k, dims, ss, bs, small_ptr, b, bytes);
}

// `value` converted to T (integers saturate instead of overflowing; NaN gives 0).
template <class T>
T convert_value(double value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(value)) return 0;
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (value <= lo) return std::numeric_limits<T>::lowest();
    if (value >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(value);
  } else {
    return T(static_cast<compute_t<T>>(value));
  }
}

template <class E>
void parallel_fill(E* dst, int64_t n, E v) {
  detail::parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
}

// ---- transpose ----

// One tile: d[a * Dq + c] = s[a + c * S] for a in [a0, a1), c in [c0, c1).
template <class E>
inline void transpose_tile(const E* s, E* d, int64_t a0, int64_t a1, int64_t c0, int64_t c1,
                           int64_t S, int64_t Dq) {
  int64_t a = a0;
#ifdef __SSE2__
  if constexpr (sizeof(E) == 4) {
    // 4x4 blocks through SSE registers: four loads, eight unpacks, four stores.
    for (; a + 4 <= a1; a += 4) {
      int64_t c = c0;
      for (; c + 4 <= c1; c += 4) {
        const E* p = s + a + c * S;
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + S));
        const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * S));
        const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * S));
        const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
        const __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
        E* q = d + a * Dq + c;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_unpacklo_epi64(t0, t1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + Dq), _mm_unpackhi_epi64(t0, t1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 2 * Dq), _mm_unpacklo_epi64(t2, t3));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 3 * Dq), _mm_unpackhi_epi64(t2, t3));
      }
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t cc = c; cc < c1; ++cc) d[(a + i) * Dq + cc] = s[a + i + cc * S];
    }
  }
#endif
  for (; a < a1; ++a) {
    E* drow = d + a * Dq;
    const E* scol = s + a;
    for (int64_t c = c0; c < c1; ++c) drow[c] = scol[c * S];
  }
}

template <class E>
void transpose_tiled(const E* src, E* dst, int rr, const int64_t* od, const int64_t* sst,
                     const int64_t* dst_st, int q) {
  constexpr int64_t B = 64;
  const int l = rr - 1;
  const int64_t nq = od[q], nl = od[l];
  const int64_t S = sst[l];      // source stride along the output's innermost dimension
  const int64_t Dq = dst_st[q];  // destination stride along the source's innermost dimension
  int64_t bdims[kMaxRank], bss[kMaxRank], bds[kMaxRank];
  int nb = 0;
  int64_t batch = 1;
  for (int i = 0; i < rr; ++i) {
    if (i == q || i == l) continue;
    bdims[nb] = od[i];
    bss[nb] = sst[i];
    bds[nb] = dst_st[i];
    batch *= od[i];
    ++nb;
  }
  const int64_t tq = (nq + B - 1) / B, tl = (nl + B - 1) / B;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t rem = t / (tq * tl);
      const int64_t tile = t % (tq * tl);
      int64_t so = 0, dof = 0;
      for (int d = nb - 1; d >= 0; --d) {
        const int64_t id = rem % bdims[d];
        rem /= bdims[d];
        so += id * bss[d];
        dof += id * bds[d];
      }
      const int64_t a0 = (tile / tl) * B, c0 = (tile % tl) * B;
      transpose_tile(src + so, dst + dof, a0, std::min(nq, a0 + B), c0, std::min(nl, c0 + B), S,
                     Dq);
    }
  };
  detail::parallel_for(batch * tq * tl, std::max<int64_t>(1, 16384 / (B * B)), body);
}

void transpose_cpu(const Tensor& in, Tensor& out, std::span<const int> perm) {
  const size_t es = dtype_size(in.dtype());
  if (in.num_elements() == 0) return;
  const int r = in.rank();
  // Drop size-1 dimensions, then merge input dimensions that stay adjacent and in order.
  int newidx[kMaxRank];
  int64_t dims1[kMaxRank];
  int r1 = 0;
  for (int d = 0; d < r; ++d) {
    newidx[d] = -1;
    if (in.shape()[d] != 1) {
      newidx[d] = r1;
      dims1[r1++] = in.shape()[d];
    }
  }
  int perm1[kMaxRank];
  int p1 = 0;
  for (int i = 0; i < r; ++i)
    if (newidx[perm[i]] >= 0) perm1[p1++] = newidx[perm[i]];
  // group_of[input dim] for merged groups: output positions i, i+1 merge when
  // perm1[i+1] == perm1[i] + 1.
  int start_of_group[kMaxRank];  // first input dim of each group, in output order
  int len_of_group[kMaxRank];
  int ng = 0;
  for (int i = 0; i < r1; ++i) {
    if (ng > 0 && perm1[i] == start_of_group[ng - 1] + len_of_group[ng - 1]) {
      ++len_of_group[ng - 1];
    } else {
      start_of_group[ng] = perm1[i];
      len_of_group[ng] = 1;
      ++ng;
    }
  }
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t nbytes = in.num_elements() * static_cast<int64_t>(es);
  if (ng <= 1) {
    parallel_memcpy(dst, src, nbytes);
    return;
  }
  // Merged input dims in input order: sort groups by their first input dim.
  int order[kMaxRank];  // order[g] = rank of group g in input order
  for (int g = 0; g < ng; ++g) {
    order[g] = 0;
    for (int h = 0; h < ng; ++h) order[g] += start_of_group[h] < start_of_group[g];
  }
  int64_t idim[kMaxRank];
  for (int g = 0; g < ng; ++g) {
    int64_t n = 1;
    for (int d = start_of_group[g]; d < start_of_group[g] + len_of_group[g]; ++d) n *= dims1[d];
    idim[order[g]] = n;
  }
  int64_t ist[kMaxRank];
  int64_t acc = 1;
  for (int d = ng - 1; d >= 0; --d) {
    ist[d] = acc;
    acc *= idim[d];
  }
  // Output dims, source strides and destination strides (elements), in output order.
  int64_t od[kMaxRank], sst[kMaxRank], dst_st[kMaxRank];
  for (int i = 0; i < ng; ++i) {
    od[i] = idim[order[i]];
    sst[i] = ist[order[i]];
  }
  acc = 1;
  for (int i = ng - 1; i >= 0; --i) {
    dst_st[i] = acc;
    acc *= od[i];
  }
  if (order[ng - 1] == ng - 1) {
    // The innermost input dimension stays innermost: copy runs.
    int64_t ss[kMaxRank], ds[kMaxRank];
    for (int i = 0; i < ng - 1; ++i) {
      ss[i] = sst[i] * static_cast<int64_t>(es);
      ds[i] = dst_st[i] * static_cast<int64_t>(es);
    }
    copy_runs(ng - 1, od, ss, ds, src, dst, od[ng - 1] * static_cast<int64_t>(es));
    return;
  }
  int q = 0;
  while (order[q] != ng - 1) ++q;
  TF_DISPATCH_BY_SIZE(es, transpose_tiled<E>(reinterpret_cast<const E*>(src),
                                               reinterpret_cast<E*>(dst), ng, od, sst, dst_st, q));
}

// ---- broadcast_to ----

void broadcast_cpu(const Tensor& in, Tensor& out) {
  const TensorShape& O = out.shape();
  if (out.num_elements() == 0) return;
  const size_t es = dtype_size(in.dtype());
  const auto bs = detail::broadcast_strides(in.shape(), O);
  // Dimensions of the output without size-1 ones; merge runs of broadcast dimensions and runs
  // of contiguous ones.
  int64_t dim[kMaxRank], st[kMaxRank];
  int m = 0;
  for (int d = 0; d < O.rank(); ++d) {
    if (O[d] == 1) continue;
    if (m > 0 && ((st[m - 1] == 0 && bs[d] == 0) || (bs[d] != 0 && st[m - 1] == bs[d] * O[d]))) {
      dim[m - 1] *= O[d];
      st[m - 1] = bs[d];
    } else {
      dim[m] = O[d];
      st[m] = bs[d];
      ++m;
    }
  }
  // Each output segment is the source run of L elements repeated rpt times.
  int64_t L = 1, rpt = 1;
  if (m > 0 && st[m - 1] == 1) L = dim[--m];
  if (m > 0 && st[m - 1] == 0) rpt = dim[--m];
  int64_t ss[kMaxRank], ds[kMaxRank];
  int64_t acc = L * rpt;
  for (int i = m - 1; i >= 0; --i) {
    ss[i] = st[i] * static_cast<int64_t>(es);
    ds[i] = acc * static_cast<int64_t>(es);
    acc *= dim[i];
  }
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t run = L * static_cast<int64_t>(es), seg = run * rpt;
  TF_DISPATCH_BY_SIZE(es, {
    if (L == 1) {
      if (m == 0) {
        E v;
        std::memcpy(&v, src, sizeof(E));
        parallel_fill(reinterpret_cast<E*>(dst), rpt, v);
      } else {
        for_each_run(m, dim, ss, ds, src, dst, seg, [rpt](char* d, const char* s) {
          E v;
          std::memcpy(&v, s, sizeof(E));
          std::fill_n(reinterpret_cast<E*>(d), rpt, v);
        });
      }
    } else {
      for_each_run(m, dim, ss, ds, src, dst, seg, [run, seg](char* d, const char* s) {
        std::memcpy(d, s, static_cast<size_t>(run));
        for (int64_t done = run; done < seg;) {
          const int64_t n = std::min(done, seg - done);
          std::memcpy(d + done, d, static_cast<size_t>(n));
          done += n;
        }
      });
    }
  });
}

// ---- gather ----

std::string index_position(const TensorShape& s, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = s[d] ? flat % s[d] : 0;
    if (s[d]) flat /= s[d];
  }
  return fmt::format("{}", fmt::join(idx, ","));
}

template <class I>
void gather_cpu(const Tensor& params, const Tensor& indices, Tensor& out, int axis,
                const char* op) {
  const I* idx = indices.data<I>();
  const int64_t n = indices.num_elements();
  int64_t outer = 1, inner = 1;
  const int64_t N = params.shape()[axis];
  for (int d = 0; d < axis; ++d) outer *= params.shape()[d];
  for (int d = axis + 1; d < params.rank(); ++d) inner *= params.shape()[d];
  for (int64_t j = 0; j < n; ++j) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (v < 0 || v >= N) [[unlikely]]
      TF_THROW(InvalidArgumentError, op,
               "indices[{}] = {} is not in [0, {}) (params of shape {}, axis {}, indices of "
               "shape {})",
               index_position(indices.shape(), j), v, N, params.shape().to_string(), axis,
               indices.shape().to_string());
  }
  const size_t es = dtype_size(params.dtype());
  const int64_t bytes = inner * static_cast<int64_t>(es);
  if (outer == 0 || n == 0 || bytes == 0) return;
  const char* src = static_cast<const char*>(params.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t grain = std::max<int64_t>(1, (64 << 10) / bytes);
  TF_DISPATCH_BY_SIZE(es, {
    detail::parallel_for(outer * n, grain, [&](int64_t b, int64_t e) {
      int64_t o = b / n, j = b % n;
      for (int64_t t = b; t < e; ++t) {
        const char* s = src + (o * N + static_cast<int64_t>(idx[j])) * bytes;
        char* d = dst + t * bytes;
        if (inner == 1)
          *reinterpret_cast<E*>(d) = *reinterpret_cast<const E*>(s);
        else
          std::memcpy(d, s, static_cast<size_t>(bytes));
        if (++j == n) {
          j = 0;
          ++o;
        }
      }
    });
  });
}

}  // namespace

Tensor nchw_to_nhwc(const Tensor& t) {
  const TensorShape& s = t.shape();
  Tensor r = detail::empty(TensorShape{s[0], s[2], s[3], s[1]}, t.dtype(), Device{});
  constexpr int perm[4] = {0, 2, 3, 1};
  transpose_cpu(t, r, perm);
  return r;
}

void nhwc_to_nchw(const Tensor& src, Tensor& dst) {
  constexpr int perm[4] = {0, 3, 1, 2};
  transpose_cpu(src, dst, perm);
}

void Transpose::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  transpose_cpu(in[0], out[0], perm);
}

void BroadcastTo::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  broadcast_cpu(in[0], out[0]);
}

void Slice::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  box_copy(in[0].shape(), begin, out[0].shape().dims(), dtype_size(in[0].dtype()),
           static_cast<char*>(in[0].raw_data()), static_cast<char*>(out[0].raw_data()), true);
}

void Concat::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const TensorShape& os = out[0].shape();
  std::vector<int64_t> begin(static_cast<size_t>(os.rank()), 0);
  for (const Tensor& t : in) {
    box_copy(os, begin, t.shape().dims(), dtype_size(t.dtype()),
             static_cast<char*>(out[0].raw_data()), static_cast<char*>(t.raw_data()), false);
    begin[axis] += t.shape()[axis];
  }
}

void Pad::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  if (n != in[0].num_elements()) {
    TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
      const T v = convert_value<T>(constant_value);
      TF_DISPATCH_BY_SIZE(sizeof(T), {
        E bits;
        std::memcpy(&bits, &v, sizeof(E));
        parallel_fill(static_cast<E*>(out[0].raw_data()), n, bits);
      });
    });
  }
  std::vector<int64_t> begin;
  for (auto& p : paddings) begin.push_back(p.first);
  box_copy(out[0].shape(), begin, in[0].shape().dims(), dtype_size(in[0].dtype()),
           static_cast<char*>(out[0].raw_data()), static_cast<char*>(in[0].raw_data()), false);
}

void Gather::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[1].dtype() == int32)
    gather_cpu<int32_t>(in[0], in[1], out[0], axis, name());
  else
    gather_cpu<int64_t>(in[0], in[1], out[0], axis, name());
}

}  // namespace tapeflow::prims
