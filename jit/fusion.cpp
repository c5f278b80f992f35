#include "jit/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/log.h"
#include "core/parallel.h"
#include "jit/cuda_codegen.h"
#include "jit/cuda_kernels.h"
#include "jit/passes.h"
#include "ops/activation.h"
#include "ops/binary.h"
#include "ops/cpu/fusion_kernels.h"
#include "ops/cpu/unary_ops.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"

namespace tapeflow {

namespace {

constexpr int64_t kTile = 1024;    // elements per tile and step: 4 or 8 KiB, several stay in L1/L2
constexpr int64_t kGrain = 16384;  // elements per thread below which the pool is not used
constexpr int64_t kPrefetchTiles = 2;  // how far ahead the streams are prefetched, in tiles
constexpr int64_t kPrefetchMinSteps = 4;  // and in chains of at least this many steps only
// Calls whose whole output has at most this many elements run the steps' arithmetic inline
// (run_tiny) instead of calling a vector loop per step.
constexpr int64_t kTinySpan = 16;

// n uninitialised elements of T: on the stack up to N, else on the heap (replays of small
// graphs are dominated by such per-call costs).
template <class T, size_t N>
class SmallArray {
 public:
  explicit SmallArray(int64_t n) {
    if (n > static_cast<int64_t>(N)) {
      heap_.reset(new T[static_cast<size_t>(n)]);
      data_ = heap_.get();
    }
  }
  SmallArray(const SmallArray&) = delete;
  SmallArray& operator=(const SmallArray&) = delete;
  T* data() { return data_; }
  T& operator[](int64_t i) { return data_[i]; }

 private:
  alignas(64) std::array<T, N> local_;
  std::unique_ptr<T[]> heap_;
  T* data_ = local_.data();
};

// How run_tiny computes a step: kCall, its unary loop; kBinaryLoop, its vector-vector loop (a
// binary op without an inline form there); otherwise that binary arithmetic inline.
enum class TinyKind : uint8_t {
  kCall,
  kBinaryLoop,
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kMaximum,
  kMinimum
};

struct FusedElementwise final : PrimitiveBase<FusedElementwise> {
  // Operand o of a step: o < num_inputs is a node input, else the result of step o - num_inputs.
  struct Step {
    std::shared_ptr<Primitive> prim;
    int a = -1, b = -1;
    // The loops for the node's dtype (float32 or float64; unused on a GPU); binary ones for
    // tiles of at least cpu::kWideSpan elements and for shorter ones.
    cpu::UnaryRange<float> unary = nullptr;
    cpu::BinaryRanges<float> binary, binary_short;
    cpu::UnaryRange<double> unary64 = nullptr;
    cpu::BinaryRanges<double> binary64, binary64_short;
    int slot = -1;  // tile buffer of the result (-1: the last step writes the output)
    TinyKind tiny = TinyKind::kCall;  // CPU only

    template <class T>
    auto unary_loop() const {
      if constexpr (std::is_same_v<T, float>) return unary;
      else return unary64;
    }
    template <class T>
    const auto& binary_loops(int64_t span) const {
      const bool wide = span >= cpu::kWideSpan;
      if constexpr (std::is_same_v<T, float>) return wide ? binary : binary_short;
      else return wide ? binary64 : binary64_short;
    }
  };
  int num_inputs = 0;
  std::vector<Step> steps;
  TensorMeta meta;
  int num_slots = 0;

  const char* name() const override { return "fused_elementwise"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    TF_CHECK_T(InternalError, static_cast<int>(in.size()) == num_inputs, name(),
               "expects {} inputs, got {}", num_inputs, in.size());
    out[0] = meta;
  }
  // CUDA graphs (jit_compile): the chain's generated kernel, compiled by NVRTC for the way each
  // input was read while tracing (full size, one element or a repeated row: its period); other
  // input sizes at run time get their own variant.
  std::shared_ptr<const jit::CudaModule> cuda_module;
  std::vector<int64_t> cuda_periods;
  // The kernels may write the output over full-size inputs (jit::fused_writing_over_inputs).
  bool output_may_alias = false;

  void eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const override;
  template <class T>
  void run_cpu(std::span<const Tensor> in, Tensor& out) const;
  template <class T>
  void run_tiny(const T* const* ptr, const uint8_t* scalar, T* dst, int64_t n) const;
  void eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const override;
  std::string cuda_source(const std::vector<int64_t>& periods) const {
    std::vector<jit::CudaFusedStep> cs;
    for (const Step& st : steps) cs.push_back({st.prim->name(), st.a, st.b});
    return jit::cuda_fused_source("tf_fused", num_inputs, periods, cs, output_may_alias);
  }
  bool is_elementwise() const override { return true; }
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    // Recompute the chain op by op under a tape and differentiate it.
    std::vector<Tensor> xs(primals.begin(), primals.end());
    GradientTape tape;
    for (int k : argnums) tape.watch(xs[k]);
    Tensor y = unfused(xs);
    Tensor target = reduce_sum(multiply(y, cotangents[0]));
    std::vector<Tensor> sources;
    for (int k : argnums) sources.push_back(xs[k]);
    std::vector<Tensor> g = tape.gradient(target, sources);
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i].defined()) g[i] = detail::sum_to_shape(g[i], primals[argnums[i]].shape());
    return g;
  }
  std::string attributes() const override {
    std::string s;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      s += fmt::format("{}{}(%{}{})", i ? ", " : "", st.prim->name(), st.a,
                       st.b >= 0 ? fmt::format(", %{}", st.b) : "");
    }
    if (cuda_module) s += "; nvrtc " + cuda_module->target();
    return s;
  }
  Tensor unfused(std::span<const Tensor> in) const {
    std::vector<Tensor> vals(in.begin(), in.end());
    for (const Step& st : steps) {
      std::vector<Tensor> args{vals[st.a]};
      if (st.b >= 0) args.push_back(vals[st.b]);
      vals.push_back(detail::dispatch(*st.prim, args));
    }
    return vals.back();
  }
};

void FusedElementwise::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (meta.dtype == float64) run_cpu<double>(in, out[0]);
  else run_cpu<float>(in, out[0]);
}

template <class T>
void FusedElementwise::run_cpu(std::span<const Tensor> in, Tensor& out) const {
  const int64_t n = out.num_elements();
  if (n == 0) return;
  // Per input: its data, whether it is one element read by every output, and its period when it
  // is read as a repeated row (period elements, a divisor of n; 0 otherwise). A short row (below
  // a tile) is laid out repeated over a tile and a period once per thread, so that every tile
  // reads it at an offset; a long one is read in place unless the tile wraps around its end.
  SmallArray<const T*, 16> ptr(num_inputs);
  SmallArray<int64_t, 16> period(num_inputs);
  SmallArray<uint8_t, 16> scalar(num_inputs);
  bool any_period = false;
  for (int k = 0; k < num_inputs; ++k) {
    ptr[k] = in[k].data<T>();
    const int64_t m = in[k].num_elements();
    scalar[k] = m == 1 && n > 1;
    period[k] = 0;
    if (m != n && m != 1) {
      TF_CHECK_T(InternalError, m > 1 && n % m == 0, name(),
                 "input {} has {} elements, which does not divide the {} outputs", k, m, n);
      period[k] = m;
      any_period = true;
    }
  }
  T* dst = out.data<T>();
  // The output may be a full-size input's buffer (a variable updated in place,
  // jit/variable_update.h): every element is read before it is written, at the same index, but
  // the loops take __restrict pointers. A last step reading that input is binary with a step
  // (fusion groups grow along step edges) or, in a one-step node, another full-size or row input
  // as its other operand: it runs the in-place loop (av or va). Earlier steps read the input
  // before the last one writes the tile.
  const Step& last = steps.back();
  auto aliases_out = [&](int o) {
    return o >= 0 && o < num_inputs && ptr[o] == dst && period[o] == 0 && !scalar[o];
  };
  const bool alias_a = aliases_out(last.a), alias_b = aliases_out(last.b);
  const bool in_place = alias_a || alias_b;
  const int other = alias_a ? last.b : last.a;
  TF_CHECK_T(InternalError,
             !in_place || (!last.template unary_loop<T>() && alias_a != alias_b &&
                           (other >= num_inputs || (ptr[other] != dst && !scalar[other]))),
             name(), "the output aliases an input that the last step reads other than as one "
             "operand of a binary op whose other operand is a step or another tensor of "
             "elements");
  if (n <= kTinySpan && !any_period && !in_place)
    return run_tiny(ptr.data(), scalar.data(), dst, n);
  // The streams read and written in full (full-size inputs, then the output): their tile two
  // tiles ahead is prefetched while this one computes, a share of its cache lines before each
  // step. The hardware prefetchers follow demand misses only, so without this the memory idles
  // during the arithmetic steps and the arithmetic waits during the first reads and last writes
  // (a 6-step tanh/exp chain over 16M float32 on one core: 27.6 -> 20.0 ms). Only chains of
  // kPrefetchMinSteps or more: on shorter ones the memory is the bottleneck anyway, the hardware
  // prefetchers keep up, and the prefetch instructions cost more than they save (relu(x + b) over
  // 3 MiB on one core: 270 -> 340 us with them).
  SmallArray<const char*, 16> streams(num_inputs + 1);
  int num_streams = 0;
  for (int k = 0; k < num_inputs; ++k)
    if (period[k] == 0 && !scalar[k] && ptr[k] != dst)
      streams[num_streams++] = reinterpret_cast<const char*>(ptr[k]);
  const int num_read_streams = num_streams;
  streams[num_streams++] = reinterpret_cast<const char*>(dst);
  const int64_t num_steps = static_cast<int64_t>(steps.size());
  const bool prefetch = num_steps >= kPrefetchMinSteps;
  const int64_t grain = std::max<int64_t>(kGrain / num_steps, kTile);
  detail::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    // Tile buffers as long as this range's tiles, uninitialised (every step writes its slot
    // before a later step reads it).
    const int64_t stride = std::min(kTile, end - begin);
    SmallArray<T, 512> tiles(num_slots * stride);
    T* const buffers = tiles.data();
    std::vector<std::vector<T>> rows(any_period ? static_cast<size_t>(num_inputs) : 0);
    // Elements [pos, pos + len) of input k's repetition, into `to`.
    auto repeat = [&](int k, int64_t pos, int64_t len, T* to) {
      for (int64_t done = 0; done < len;) {
        const int64_t run = std::min(period[k] - pos, len - done);
        std::copy_n(ptr[k] + pos, run, to + done);
        done += run;
        pos = 0;
      }
    };
    for (int k = 0; k < num_inputs; ++k) {
      if (period[k] == 0) continue;
      auto& row = rows[static_cast<size_t>(k)];
      row.resize(static_cast<size_t>(period[k] < kTile ? kTile + period[k] : kTile));
      if (period[k] < kTile) repeat(k, 0, kTile + period[k], row.data());
    }
    std::vector<const T*> at(any_period ? static_cast<size_t>(num_inputs) : 0);  // rows' tiles
    for (int64_t t = begin; t < end; t += kTile) {
      const int64_t len = std::min(kTile, end - t);
      for (int k = 0; k < num_inputs; ++k) {
        if (period[k] == 0) continue;
        const int64_t pos = t % period[k];
        T* row = rows[static_cast<size_t>(k)].data();
        if (period[k] < kTile) {
          at[static_cast<size_t>(k)] = row + pos;
        } else if (pos + len <= period[k]) {
          at[static_cast<size_t>(k)] = ptr[k] + pos;
        } else {
          repeat(k, pos, len, row);
          at[static_cast<size_t>(k)] = row;
        }
      }
      auto vec = [&](int o) -> const T* {
        if (o < num_inputs) return period[o] ? at[static_cast<size_t>(o)] : ptr[o] + t;
        const int slot = steps[o - num_inputs].slot;
        return buffers + slot * stride;
      };
      auto is_scalar = [&](int o) { return o < num_inputs && scalar[o]; };
      const int64_t ahead = t + kPrefetchTiles * kTile;
      const int64_t lines =
          prefetch && ahead < end ? (std::min(kTile, end - ahead) * int64_t{sizeof(T)} + 63) / 64
                                  : 0;
      int64_t step_index = 0;
      for (const Step& st : steps) {
        if (lines > 0) {  // this step's share of the lines ahead
          const int64_t from = lines * step_index / num_steps;
          const int64_t to = lines * (step_index + 1) / num_steps;
          for (int k = 0; k < num_streams; ++k) {
            const char* at_line = streams[k] + ahead * int64_t{sizeof(T)};
            for (int64_t l = from; l < to; ++l) {
              if (k < num_read_streams) __builtin_prefetch(at_line + 64 * l, 0, 3);
              else __builtin_prefetch(at_line + 64 * l, 1, 3);
            }
          }
        }
        ++step_index;
        if (in_place && &st == &last) {
          const auto& binary = st.template binary_loops<T>(len);
          if (alias_a) binary.av(dst + t, vec(st.b), len);
          else binary.va(vec(st.a), dst + t, len);
          continue;
        }
        T* o = st.slot < 0 ? dst + t : buffers + st.slot * stride;
        if (const auto unary = st.template unary_loop<T>()) {
          unary(vec(st.a), o, len);
        } else {
          const auto& binary = st.template binary_loops<T>(len);
          if (is_scalar(st.a)) binary.sv(*ptr[st.a], vec(st.b), o, len);
          else if (is_scalar(st.b)) binary.vs(vec(st.a), *ptr[st.b], o, len);
          else binary.vv(vec(st.a), vec(st.b), o, len);
        }
      }
    }
  });
}

// o = F(a, b) elementwise, F one of the functors the binary loops apply (ops/cpu/unary_ops.h),
// inline: the same arithmetic, so the same bits.
template <class F, class T>
void tiny_binary(const T* __restrict a, const T* __restrict b, T* __restrict o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = F{}(a[i], b[i]);
}

// A call on a few elements (scalars, tiny tensors): a chain of 100 steps over 4 elements spent
// 9.5 ns per step in the tiled loop, most of it calling into a vector loop per step and reading
// its result back. Here the binary steps' arithmetic is inline (tiny_binary); unary steps still
// call their loop. One-element inputs are repeated over the n elements first.
template <class T>
void FusedElementwise::run_tiny(const T* const* ptr, const uint8_t* scalar, T* dst,
                                int64_t n) const {
  const int num_steps = static_cast<int>(steps.size());
  SmallArray<const T*, 128> operand(num_inputs + num_steps);
  SmallArray<T, 256> repeated(num_inputs * n);
  SmallArray<T, 512> buffers(num_slots * n);
  for (int k = 0; k < num_inputs; ++k) {
    operand[k] = ptr[k];
    if (scalar[k]) {
      T* r = repeated.data() + k * n;
      std::fill_n(r, n, ptr[k][0]);
      operand[k] = r;
    }
  }
  for (int s = 0; s < num_steps; ++s) {
    const Step& st = steps[static_cast<size_t>(s)];
    T* __restrict o = st.slot < 0 ? dst : buffers.data() + st.slot * n;
    const T* __restrict a = operand[st.a];
    const T* __restrict b = st.b >= 0 ? operand[st.b] : nullptr;
    switch (st.tiny) {
      case TinyKind::kAdd: tiny_binary<cpu::AddOp>(a, b, o, n); break;
      case TinyKind::kSubtract: tiny_binary<cpu::SubtractOp>(a, b, o, n); break;
      case TinyKind::kMultiply: tiny_binary<cpu::MultiplyOp>(a, b, o, n); break;
      case TinyKind::kDivide: tiny_binary<cpu::DivideOp>(a, b, o, n); break;
      case TinyKind::kMaximum: tiny_binary<cpu::MaximumOp>(a, b, o, n); break;
      case TinyKind::kMinimum: tiny_binary<cpu::MinimumOp>(a, b, o, n); break;
      case TinyKind::kCall:
        st.template unary_loop<T>()(a, o, n);
        break;
      case TinyKind::kBinaryLoop:
        st.template binary_loops<T>(n >= cpu::kWideSpan).vv(a, b, o, n);
        break;
    }
    operand[num_inputs + s] = o;
  }
}

void FusedElementwise::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_CHECK_T(InternalError, cuda_module != nullptr, name(),
             "this fused node has no CUDA kernel (made for a CPU graph)");
  const Device device = out[0].placement();
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  for (int k = 0; k < num_inputs; ++k) {
    const int64_t m = in[k].num_elements();
    TF_CHECK_T(InternalError, m > 0 && n % m == 0, name(),
               "input {} has {} elements for {} outputs", k, m, n);
  }
  // Shapes of a graph for None dimensions may read inputs another way than traced.
  const std::vector<int64_t> periods = jit::detail::fused_input_periods(in, n);
  const std::shared_ptr<const jit::CudaModule> module =
      periods == cuda_periods ? cuda_module
                              : jit::CudaModule::compile(cuda_source(periods), device);
  jit::detail::launch_fused(*module, device, in, periods, out[0]);
}

// Whether an operand of shape `a` broadcasts to `out` as a row repeated along out's leading
// dimensions (a's dimensions, leading ones dropped, equal out's trailing ones), so that element
// i of the output reads element i mod a.num_elements().
bool repeats_as_row(const TensorShape& a, const TensorShape& out) {
  int first = 0;
  while (first < a.rank() && a[first] == 1) ++first;
  const int r = a.rank() - first;
  if (r == 0 || r > out.rank()) return false;
  for (int d = 0; d < r; ++d)
    if (a[first + d] != out[out.rank() - r + d]) return false;
  return true;
}

template <class T>
cpu::UnaryRange<T> unary_kernel(const Primitive& p) {
  if (auto f = cpu::unary_range<T>(p)) return f;
  return cpu::relu_range<T>(p);
}

// Whether node i of g can join a fused chain: an elementwise op with loops for its dtype on the
// CPU (float32, float64) or, with `cuda`, a generated form on a GPU (float32), whose operands
// are full size, one element or a row repeated along its output.
bool fusable(const Graph& g, int i, bool cuda) {
  using Ref = Graph::Ref;
  const Graph::Node& nd = g.nodes[i];
  if (nd.outputs.size() != 1 || nd.prim->has_side_effects()) return false;
  const DType dtype = nd.outputs[0].dtype;
  if (nd.device.is_cpu()) {
    // float32 and float64 (the CPU loops of both are at hand).
    if (dtype != float32 && dtype != float64) return false;
    const bool unary = unary_kernel<float>(*nd.prim) != nullptr && nd.inputs.size() == 1;
    const bool binary =
        static_cast<bool>(cpu::binary_ranges<float>(*nd.prim, false)) && nd.inputs.size() == 2;
    if (!unary && !binary) return false;
  } else if (dtype != float32 || !cuda || !nd.device.is_gpu() ||
             !jit::cuda_codegen_supports(nd.prim->name(),
                                         static_cast<int>(nd.inputs.size()))) {
    return false;
  }
  const TensorShape& out_shape = nd.outputs[0].shape;
  const int64_t n = out_shape.num_elements();
  for (const Ref& r : nd.inputs) {
    const TensorMeta m = g.meta_of(r);
    if (m.dtype != dtype) return false;
    const int64_t k = m.shape.num_elements();
    if (k == n || k == 1) continue;
    // A row repeated along the leading dimensions (a bias over channels) is read periodically.
    if (!repeats_as_row(m.shape, out_shape)) return false;
  }
  return true;
}

// The inline form run_tiny uses for a binary step.
TinyKind tiny_kind(const Primitive& p) {
  if (typeid(p) == typeid(prims::Add)) return TinyKind::kAdd;
  if (typeid(p) == typeid(prims::Subtract)) return TinyKind::kSubtract;
  if (typeid(p) == typeid(prims::Multiply)) return TinyKind::kMultiply;
  if (typeid(p) == typeid(prims::Divide)) return TinyKind::kDivide;
  if (typeid(p) == typeid(prims::Maximum)) return TinyKind::kMaximum;
  if (typeid(p) == typeid(prims::Minimum)) return TinyKind::kMinimum;
  return TinyKind::kBinaryLoop;
}

// The fused node of a group of nodes (in program order), and its inputs in the graph's
// numbering.
struct Built {
  std::shared_ptr<FusedElementwise> op;
  std::vector<Graph::Ref> ext;
};
Built build_fused(const Graph& g, const std::vector<int>& members) {
  using Ref = Graph::Ref;
  using Source = Graph::Source;
  Built b;
  auto op = std::make_shared<FusedElementwise>();
  std::vector<Ref>& ext = b.ext;
  std::map<int, int> step_of;  // member node -> step index
  // Each external value's input number, found by key (a scan of ext made long chains with a
  // new constant per step quadratic: 50000 steps took 1.7 s to fuse).
  std::map<std::tuple<int, int, int>, int> ext_of;
  auto operand = [&](const Ref& r) {
    if (r.source == Source::Node && step_of.count(r.index))
      return -2 - step_of[r.index];  // a step (fixed below; -1 means "no operand")
    const auto [it, fresh] = ext_of.try_emplace(
        std::tuple{static_cast<int>(r.source), r.index, r.output}, static_cast<int>(ext.size()));
    if (fresh) ext.push_back(r);
    return it->second;
  };
  const bool on_cpu = g.nodes[members.back()].device.is_cpu();
  for (int m : members) {
    const Graph::Node& nd = g.nodes[m];
    FusedElementwise::Step st;
    st.prim = nd.prim;
    st.a = operand(nd.inputs[0]);
    if (nd.inputs.size() > 1) st.b = operand(nd.inputs[1]);
    if (on_cpu && nd.outputs[0].dtype == float64) {
      st.unary64 = nd.inputs.size() == 1 ? unary_kernel<double>(*nd.prim) : nullptr;
      if (!st.unary64) {
        st.binary64 = cpu::binary_ranges<double>(*nd.prim, false);
        st.binary64_short = cpu::binary_ranges<double>(*nd.prim, true);
      }
    } else if (on_cpu) {
      st.unary = nd.inputs.size() == 1 ? unary_kernel<float>(*nd.prim) : nullptr;
      if (!st.unary) {
        st.binary = cpu::binary_ranges<float>(*nd.prim, false);
        st.binary_short = cpu::binary_ranges<float>(*nd.prim, true);
      }
    }
    if (on_cpu && nd.inputs.size() > 1) st.tiny = tiny_kind(*nd.prim);
    step_of[m] = static_cast<int>(op->steps.size());
    op->steps.push_back(st);
  }
  op->num_inputs = static_cast<int>(ext.size());
  // Step operands: -2 - s means step s, numbered after the inputs.
  for (auto& st : op->steps) {
    if (st.a <= -2) st.a = op->num_inputs + (-2 - st.a);
    if (st.b <= -2) st.b = op->num_inputs + (-2 - st.b);
  }
  // Tile slots (CPU): a step's buffer is free again after its last reader (the last step
  // writes the output).
  const int S = static_cast<int>(op->steps.size());
  std::vector<int> last_read(S, -1);
  for (int s = 0; s < S; ++s)
    for (int o : {op->steps[s].a, op->steps[s].b})
      if (o >= op->num_inputs) last_read[o - op->num_inputs] = s;
  std::vector<int> free_slots;
  for (int s = 0; s < S; ++s) {
    // The loops take __restrict pointers, so a step never writes over its own operands: its
    // slot is chosen before the operands it reads for the last time are released.
    if (s == S - 1) {
      op->steps[s].slot = -1;
    } else if (!free_slots.empty()) {
      op->steps[s].slot = free_slots.back();
      free_slots.pop_back();
    } else {
      op->steps[s].slot = op->num_slots++;
    }
    const int a = op->steps[s].a, b = op->steps[s].b;
    for (int o : {a, b == a ? -1 : b})
      if (o >= op->num_inputs && last_read[o - op->num_inputs] == s)
        free_slots.push_back(op->steps[o - op->num_inputs].slot);
  }
  op->meta = g.nodes[members.back()].outputs[0];
  // On a GPU: the chain's kernels, generated for the way each input is read (its period) and
  // compiled by NVRTC now (throws when they do not compile).
  const Device device = g.nodes[members.back()].device;
  if (device.is_gpu()) {
    op->cuda_periods.resize(static_cast<size_t>(op->num_inputs));
    const int64_t n = op->meta.shape.num_elements();
    for (int k = 0; k < op->num_inputs; ++k) {
      const int64_t m = g.meta_of(ext[static_cast<size_t>(k)]).shape.num_elements();
      op->cuda_periods[static_cast<size_t>(k)] = m == n ? 0 : m;
    }
    op->cuda_module = jit::CudaModule::compile(op->cuda_source(op->cuda_periods), device);
  }
  b.op = std::move(op);
  return b;
}

}  // namespace

namespace jit {

namespace detail {

std::vector<int64_t> fused_input_periods(std::span<const Tensor> in, int64_t n) {
  std::vector<int64_t> period(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t m = in[k].num_elements();
    period[k] = m == n ? 0 : m;
  }
  return period;
}

void launch_fused(const CudaModule& module, Device device, std::span<const Tensor> in,
                  Tensor& out) {
  launch_fused(module, device, in, fused_input_periods(in, out.num_elements()), out);
}

void launch_fused(const CudaModule& module, Device device, std::span<const Tensor> in,
                  std::span<const int64_t> period, Tensor& out) {
  const int64_t n = out.num_elements();
  if (n == 0) return;
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  bool aligned = aligned16(out.raw_data());
  // cudaLaunchKernel takes a pointer to each argument: the input pointers, out, n.
  std::vector<const void*> ptr(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    ptr[k] = in[k].raw_data();
    if (period[k] == 0) aligned = aligned && aligned16(ptr[k]);  // loaded as float4
  }
  void* dst = out.raw_data();
  long long count = n;
  std::vector<void*> args;
  args.reserve(in.size() + 2);
  for (const void*& p : ptr) args.push_back(&p);
  args.push_back(&dst);
  args.push_back(&count);
  if (aligned) module.launch("tf_fused_v4", device, std::max<int64_t>(n / 4, 1), args.data());
  else module.launch("tf_fused", device, n, args.data());
}

}  // namespace detail

bool fusion_enabled() {
  return env_switch("TAPEFLOW_FUSION").value_or(true);
}

std::shared_ptr<Primitive> fused_writing_over_inputs(const std::shared_ptr<Primitive>& fused,
                                                     Device device) {
  const auto* f = dynamic_cast<const FusedElementwise*>(fused.get());
  if (f == nullptr) return nullptr;
  // On the CPU the kernel copes with its output aliasing an input (in-place loops).
  if (f->cuda_module == nullptr || f->output_may_alias) return fused;
  auto copy = std::make_shared<FusedElementwise>(*f);
  copy->output_may_alias = true;
  copy->cuda_module = CudaModule::compile(copy->cuda_source(copy->cuda_periods), device);
  return copy;
}

std::shared_ptr<Primitive> fuse_single_op(const Graph& g, int node, const FusionOptions& options,
                                          std::vector<Graph::Ref>* inputs) {
  if (!fusable(g, node, options.cuda && nvrtc_available())) return nullptr;
  Built b;
  try {
    b = build_fused(g, {node});
  } catch (const Error& e) {
    TF_LOG_WARN("jit_compile: {} on {} has no generated kernel: {}", g.nodes[node].prim->name(),
                g.nodes[node].device.to_string(), e.what());
    return nullptr;
  }
  *inputs = std::move(b.ext);
  return b.op;
}

int fuse_elementwise(Graph& g) { return fuse_elementwise(g, FusionOptions{}); }

int fuse_elementwise(Graph& g, const FusionOptions& options) {
  using Ref = Graph::Ref;
  using Source = Graph::Source;
  const int n_nodes = g.num_nodes();
  // Uses of each node's (single) output, by nodes and by graph outputs.
  std::vector<int> uses(n_nodes, 0);
  std::vector<int> consumer(n_nodes, -1);
  for (int i = 0; i < n_nodes; ++i)
    for (const Ref& r : g.nodes[i].inputs)
      if (r.source == Source::Node) {
        ++uses[r.index];
        consumer[r.index] = i;
      }
  for (const Ref& r : g.outputs)
    if (r.source == Source::Node) {
      ++uses[r.index];
      consumer[r.index] = -2;  // a graph output
    }

  // GPU nodes are fused only for generated kernels, which need NVRTC.
  bool cuda = options.cuda;
  if (cuda) {
    std::string why;
    bool has_gpu_nodes = false;
    for (const Graph::Node& nd : g.nodes) has_gpu_nodes |= nd.device.is_gpu();
    if (has_gpu_nodes && !nvrtc_available(&why)) {
      static std::once_flag once;
      std::call_once(once, [&] {
        TF_LOG_WARN("jit_compile: GPU elementwise chains stay unfused: {}", why);
      });
      cuda = false;
    }
  }

  // Grow groups along single-use edges: a fusable node joins the group of a producer on its
  // device whose only use it is (and whose output has its element count); otherwise it starts
  // a group. A node fed by two such groups (a tree: a * s + b * t) merges them: the fused node
  // takes the place of the group's last member, after every external input of its members.
  std::vector<int> group(n_nodes, -1);
  std::vector<std::vector<int>> groups;
  for (int i = 0; i < n_nodes; ++i) {
    if (!fusable(g, i, cuda)) continue;
    const int64_t n = g.nodes[i].outputs[0].shape.num_elements();
    int join = -1;
    for (const Ref& r : g.nodes[i].inputs) {
      if (r.source != Source::Node || group[r.index] < 0) continue;
      const bool internal = uses[r.index] == 1 &&
                            g.nodes[r.index].outputs[0].shape.num_elements() == n &&
                            g.nodes[r.index].device == g.nodes[i].device;
      if (!internal) continue;
      const int other = group[r.index];
      if (join < 0 || join == other) {
        join = other;
        continue;
      }
      // Merge the two groups (members stay in program order).
      const int keep = std::min(join, other), drop = std::max(join, other);
      std::vector<int> merged;
      std::merge(groups[keep].begin(), groups[keep].end(), groups[drop].begin(),
                 groups[drop].end(), std::back_inserter(merged));
      for (int m : groups[drop]) group[m] = keep;
      groups[keep] = std::move(merged);
      groups[drop].clear();
      join = keep;
    }
    if (join < 0) {
      group[i] = static_cast<int>(groups.size());
      groups.push_back({i});
    } else {
      group[i] = join;
      groups[join].push_back(i);
    }
  }

  // A group is fused when only its last member is used outside it (and, on a GPU, when its
  // kernel compiles).
  std::vector<int> replace_at(n_nodes, -1);  // last member -> group
  std::vector<uint8_t> removed(n_nodes, 0);
  std::map<int, Built> built;
  int fused = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& members = groups[gi];
    if (members.size() < 2) continue;
    bool ok = true;
    for (size_t m = 0; m + 1 < members.size() && ok; ++m) {
      const int c = consumer[members[m]];
      ok = uses[members[m]] == 1 && c >= 0 && group[c] == static_cast<int>(gi);
    }
    if (!ok) continue;
    Built b;
    try {
      b = build_fused(g, members);
    } catch (const Error& e) {
      TF_LOG_WARN("jit_compile: an elementwise chain of {} ops on {} stays unfused: {}",
                  members.size(), g.nodes[members.back()].device.to_string(), e.what());
      continue;
    }
    built.emplace(static_cast<int>(gi), std::move(b));
    ++fused;
    replace_at[members.back()] = static_cast<int>(gi);
    for (size_t m = 0; m + 1 < members.size(); ++m) removed[members[m]] = 1;
  }
  if (fused == 0) return 0;

  std::vector<Graph::Node> nodes;
  std::vector<int> new_index(n_nodes, -1);
  auto remap = [&](Ref r) {
    if (r.source == Source::Node) r.index = new_index[r.index];
    return r;
  };
  for (int i = 0; i < n_nodes; ++i) {
    if (removed[i]) continue;
    if (replace_at[i] < 0) {
      Graph::Node nd = g.nodes[i];
      for (Ref& r : nd.inputs) r = remap(r);
      new_index[i] = static_cast<int>(nodes.size());
      nodes.push_back(std::move(nd));
      continue;
    }
    Built& b = built.at(replace_at[i]);
    Graph::Node nd;
    nd.prim = b.op;
    for (const Ref& r : b.ext) nd.inputs.push_back(remap(r));
    nd.outputs = {b.op->meta};
    nd.device = g.nodes[i].device;
    new_index[i] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(nd));
  }
  for (Ref& r : g.outputs) r = remap(r);
  g.nodes = std::move(nodes);
  return fused;
}

}  // namespace jit
}  // namespace tapeflow
