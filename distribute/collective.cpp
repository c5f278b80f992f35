#include "distribute/collective.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/hash.h"
#include "core/parallel.h"
#include "distribute/nccl.h"
#include "distribute/worker_group.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"

namespace tapeflow::distribute {

namespace detail {

std::string reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::MEAN:
      return "MEAN";
  }
  return fmt::format("ReduceOp({})", static_cast<int>(op));
}

void check_reduce_op(ReduceOp op, const char* who) {
  TF_CHECK_ARG(op == ReduceOp::SUM || op == ReduceOp::MEAN, who,
               "the reduce op must be ReduceOp::SUM or ReduceOp::MEAN, got {}",
               reduce_op_name(op));
}

double default_collective_timeout() {
  if (const char* env = std::getenv("TAPEFLOW_COLLECTIVE_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    TF_CHECK_ARG(end != env && *end == '\0' && v > 0, "MultiWorkerMirroredStrategy",
                 "TAPEFLOW_COLLECTIVE_TIMEOUT must be a positive number of seconds, got '{}'",
                 env);
    return v;
  }
  return 300.0;
}

namespace {

// Every worker's `mine` (the same count on each), in rank order: a SUM of zero-filled slots.
std::vector<int64_t> gather_values(WorkerGroup& workers, const std::vector<int64_t>& mine,
                                   const char* what) {
  const size_t k = mine.size();
  std::vector<int64_t> all(k * static_cast<size_t>(workers.size()), 0);
  std::copy(mine.begin(), mine.end(),
            all.begin() + static_cast<std::ptrdiff_t>(k) * workers.rank());
  workers.all_reduce_sum(all.data(), all.size(), int64, what);
  return all;
}

// Every worker's text, in rank order, given every worker's length.
std::vector<std::string> gather_texts(WorkerGroup& workers, const std::string& mine,
                                      const std::vector<size_t>& lengths, const char* what) {
  std::vector<size_t> offsets(lengths.size() + 1, 0);
  for (size_t w = 0; w < lengths.size(); ++w) offsets[w + 1] = offsets[w] + lengths[w];
  std::vector<uint8_t> bytes(offsets.back(), 0);
  std::copy(
      mine.begin(), mine.end(),
      bytes.begin() + static_cast<std::ptrdiff_t>(offsets[static_cast<size_t>(workers.rank())]));
  if (!bytes.empty()) workers.all_reduce_sum(bytes.data(), bytes.size(), uint8, what);
  std::vector<std::string> out;
  for (size_t w = 0; w < lengths.size(); ++w)
    out.emplace_back(reinterpret_cast<const char*>(bytes.data()) + offsets[w], lengths[w]);
  return out;
}

// `text` for a message, cut around where it first differs from `other` when it is long (an
// all-reduce of many tensors).
std::string excerpt(const std::string& text, const std::string& other) {
  constexpr size_t kMax = 240, kBefore = 60;
  if (text.size() <= kMax) return text;
  size_t i = 0;
  while (i < text.size() && i < other.size() && text[i] == other[i]) ++i;
  const size_t begin = i > kBefore ? i - kBefore : 0;
  return (begin > 0 ? "..." : "") + text.substr(begin, kMax) +
         (begin + kMax < text.size() ? "..." : "");
}

// "collective 2 of strategy.run 3" (1-based).
std::string position_text(const WorkerGroup::Position& p) {
  if (p.in_step) return fmt::format("collective {} of strategy.run {}", p.checked + 1, p.steps);
  if (p.steps == 0)
    return fmt::format("collective {} before the first strategy.run", p.checked + 1);
  return fmt::format("collective {} after strategy.run {}", p.checked + 1, p.steps);
}
int64_t hash_of(std::string_view text) {
  return static_cast<int64_t>(tapeflow::detail::fnv1a(text) >> 1);
}

}  // namespace

void check_workers_agree(WorkerGroup& workers, const char* what, const std::string& description,
                         const std::function<std::string(int)>& headline, std::string_view rule,
                         bool consistent) {
  if (workers.size() == 1) return;
  const WorkerGroup::Position at = workers.next_position();
  // What a worker says when they differ: the collective, its position and its description
  // (last: a variable's name may hold a newline).
  const std::string text = std::string(what) + '\n' + position_text(at) + '\n' + description;
  // Per worker: the fingerprints of its description and of its collective and position, whether
  // its replicas agree, the length of its text.
  constexpr size_t kFields = 4;
  const std::vector<int64_t> all =
      gather_values(workers,
                    {hash_of(description),
                     hash_of(fmt::format("{} {} {} {}", what, at.steps, at.in_step, at.checked)),
                     consistent ? 1 : 0, static_cast<int64_t>(text.size())},
                    what);
  const auto field = [&](size_t w, size_t f) { return all[w * kFields + f]; };
  const size_t n = static_cast<size_t>(workers.size());
  // The first worker at another collective than worker 0 (another op or position), else the
  // first that describes another part.
  size_t elsewhere = 0, differs = 0;
  for (size_t w = n - 1; w > 0; --w) {
    if (field(w, 1) != field(0, 1)) elsewhere = w;
    if (field(w, 0) != field(0, 0)) differs = w;
  }
  if (elsewhere != 0) {
    differs = elsewhere;
  } else {
    for (size_t w = 0; w < n; ++w)
      if (field(w, 2) == 0)
        throw WorkersAgreedError(fmt::format(
            "[{}] the replicas of worker {} passed different tensors; {}", what, w, rule));
    if (differs == 0) return;
  }
  // Every worker reached this verdict from the same gathered facts: all exchange their texts.
  std::vector<size_t> lengths;
  for (size_t w = 0; w < n; ++w) lengths.push_back(static_cast<size_t>(field(w, 3)));
  const std::vector<std::string> texts = gather_texts(workers, text, lengths, what);
  std::vector<std::string> said;  // per worker: what it says in the message
  for (const std::string& t : texts) {
    const size_t a = t.find('\n'), b = t.find('\n', a + 1);
    said.push_back(elsewhere != 0 ? fmt::format("{} {} at {}", t.substr(0, a), t.substr(b + 1),
                                                t.substr(a + 1, b - a - 1))
                                  : t.substr(b + 1));
  }
  // Worker 0's and the first differing worker's (and this worker's, when it is neither).
  std::vector<std::string> parts;
  const size_t self = static_cast<size_t>(workers.rank());
  std::vector<size_t> shown{0, differs};
  if (self != 0 && self != differs && said[self] != said[0] && said[self] != said[differs])
    shown.push_back(self);
  for (size_t w : shown)
    parts.push_back(fmt::format("worker {}: {}", w, excerpt(said[w], said[w == 0 ? differs : 0])));
  if (elsewhere != 0)
    throw WorkersAgreedError(fmt::format(
        "[{}] the workers are at different collectives: worker {} differs from worker 0 ({}; "
        "this is worker {}); a worker skipped or added a collective: every worker must run the "
        "same steps (strategy.run) with the same collectives (all_reduce, strategy.reduce, "
        "variables created in the scope) in the same order",
        what, differs, fmt::join(parts, "; "), workers.rank()));
  throw WorkersAgreedError(fmt::format("[{}] {} ({}; this is worker {}); {}", what,
                                       headline(static_cast<int>(differs)), fmt::join(parts, "; "),
                                       workers.rank(), rule));
}

// ---- StepBarrier ----

void StepBarrier::arrive_and_wait(const char* what, bool cancellable) {
  std::unique_lock lock(mu_);
  if (cancellable && cancelled_) throw StepCancelled(cause_);
  TF_CHECK_T(FailedPreconditionError, !cancellable || finished_ == 0, what,
             "{} of {} replicas already finished the step while another waits here: every "
             "replica must make the same collective calls (all_reduce) in the same order",
             finished_, n_);
  const uint64_t gen = generation_;
  if (count_ == 0)
    first_what_ = what;
  else if (other_what_.empty() && first_what_ != what)
    other_what_ = what;
  // Every replica that met here raises the same error when they came from different collectives.
  auto check_met = [&] {
    TF_CHECK_T(FailedPreconditionError, met_different_.empty(), what,
               "the replicas met at different collective calls ({}): every replica must make "
               "the same collective calls (all_reduce, creating a variable) in the same order",
               met_different_);
  };
  if (++count_ == n_) {
    count_ = 0;
    // In a fixed order (whichever replica arrived first).
    met_different_ = other_what_.empty()
                         ? std::string()
                         : fmt::format("{} and {}", std::min(first_what_, other_what_),
                                       std::max(first_what_, other_what_));
    other_what_.clear();
    ++generation_;
    cv_.notify_all();
    check_met();
    return;
  }
  cv_.wait(lock, [&] {
    return generation_ != gen || (cancellable && (cancelled_ || finished_ > 0));
  });
  if (generation_ != gen) {
    check_met();
    return;
  }
  // Leaving early: this replica no longer counts as arrived.
  --count_;
  if (cancelled_) throw StepCancelled(cause_);
  TF_THROW(FailedPreconditionError, what,
           "{} of {} replicas finished the step while this replica waits here: every replica "
           "must make the same collective calls (all_reduce) in the same order",
           finished_, n_);
}

void StepBarrier::cancel(const std::string& cause) {
  std::lock_guard lock(mu_);
  if (!cancelled_) cause_ = cause;
  cancelled_ = true;
  cv_.notify_all();
}

void StepBarrier::replica_finished() {
  std::lock_guard lock(mu_);
  ++finished_;
  cv_.notify_all();
}

bool StepBarrier::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void StepBarrier::reset() {
  std::lock_guard lock(mu_);
  count_ = 0;
  cancelled_ = false;
  cause_.clear();
  finished_ = 0;
  first_what_.clear();
  other_what_.clear();
  met_different_.clear();
}

// ---- buckets ----

std::vector<Bucket> plan_buckets(std::span<const TensorMeta> tensors, size_t first_bytes,
                                 size_t bytes) {
  std::vector<DType> order;
  for (const TensorMeta& m : tensors)
    if (std::find(order.begin(), order.end(), m.dtype) == order.end()) order.push_back(m.dtype);
  std::vector<Bucket> out;
  for (DType d : order) {
    Bucket cur{d, {}, 0};
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].dtype != d) continue;
      const int64_t n = tensors[i].shape.num_elements();
      const size_t cap = out.empty() ? first_bytes : bytes;
      if (!cur.tensors.empty() &&
          static_cast<size_t>(cur.num_elements + n) * dtype_size(d) > cap) {
        out.push_back(std::move(cur));
        cur = Bucket{d, {}, 0};
      }
      cur.tensors.push_back(i);
      cur.num_elements += n;
    }
    if (!cur.tensors.empty()) out.push_back(std::move(cur));
  }
  return out;
}

// ---- the in-process reduction ----

namespace {

// dst[k][0, n) = sum over replicas s of src[s][0, n), in replica order, for every k. Blocks keep
// the partial sums in cache; the order of additions never depends on the thread split.
template <class T>
void reduce_segment(const std::vector<const T*>& src, const std::vector<T*>& dst, int64_t n,
                    ReduceOp op) {
  using C = compute_t<T>;
  constexpr int64_t kBlock = 2048;
  const size_t r = src.size();
  const C scale = static_cast<C>(r);
  auto run_block = [&](int64_t b, int64_t e) {
    C acc[kBlock];
    const int64_t len = e - b;
    const T* s0 = src[0] + b;
    for (int64_t j = 0; j < len; ++j) acc[j] = static_cast<C>(s0[j]);
    for (size_t s = 1; s < r; ++s) {
      const T* sp = src[s] + b;
      for (int64_t j = 0; j < len; ++j) acc[j] = wrapping_add(acc[j], static_cast<C>(sp[j]));
    }
    if (op == ReduceOp::MEAN)
      for (int64_t j = 0; j < len; ++j) acc[j] /= scale;
    for (size_t k = 0; k < dst.size(); ++k) {
      T* dp = dst[k] + b;
      for (int64_t j = 0; j < len; ++j) dp[j] = static_cast<T>(acc[j]);
    }
  };
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // The replicas already work in parallel (one chunk each); each adds threads only for big chunks.
  const int threads = std::max(1, tapeflow::detail::num_threads() / static_cast<int>(r));
  if (threads > 1 && n >= 32 * kBlock) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t bi = 0; bi < blocks; ++bi) run_block(bi * kBlock, std::min(n, (bi + 1) * kBlock));
  } else {
    for (int64_t bi = 0; bi < blocks; ++bi) run_block(bi * kBlock, std::min(n, (bi + 1) * kBlock));
  }
}

// dst[0, n) = src[0, n) / divisor in the dtype's compute type (MEAN after a SUM over the
// workers); dst may be src.
void divide_elements(void* dst, const void* src, int64_t n, DType dtype, int divisor) {
  TF_DISPATCH_ALL_TYPES(dtype, {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = compute_t<T>;
      const C scale = static_cast<C>(divisor);
      const T* from = static_cast<const T*>(src);
      T* to = static_cast<T*>(dst);
      for (int64_t j = 0; j < n; ++j) to[j] = static_cast<T>(static_cast<C>(from[j]) / scale);
    }
  });
}

std::string meta_string(const Tensor& t) {
  return fmt::format("{} {}", dtype_name(t.dtype()), t.shape().to_string());
}

// The message of a failure, for the StepCancelled of the replicas it cancels.
std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

Collectives::Collectives(std::vector<Device> devices, CollectiveKind kind,
                         std::shared_ptr<WorkerGroup> workers)
    : devices_(std::move(devices)),
      kind_(kind),
      barrier_(static_cast<int>(devices_.size())),
      in_slots_(devices_.size()),
      op_slots_(devices_.size(), ReduceOp::SUM),
      out_slots_(devices_.size()),
      nccl_slots_(devices_.size()),
      workers_(std::move(workers)) {
  const int local = size();
  global_size_ = workers_ ? local * workers_->size() : local;
  global_offset_ = workers_ ? local * workers_->rank() : 0;
  if (kind_ == CollectiveKind::Nccl) comms_ = make_nccl_comms(devices_, workers_.get());
  // Tests set TAPEFLOW_ALL_REDUCE_SHORTCUT=0 to run a one-replica all-reduce through the real
  // path (NCCL over one GPU).
  if (const char* v = std::getenv("TAPEFLOW_ALL_REDUCE_SHORTCUT"))
    shortcut_ = std::string(v) != "0";
}

bool Collectives::multi_worker() const { return workers_ != nullptr && workers_->size() > 1; }

void Collectives::check_workers_agree(ReduceOp op, std::span<const Tensor> tensors,
                                      const std::string& local_bad) {
  std::vector<std::string> metas;
  for (const Tensor& t : tensors) metas.push_back(meta_string(t));
  detail::check_workers_agree(
      *workers_, "all_reduce", fmt::format("{} {}", reduce_op_name(op), fmt::join(metas, ", ")),
      [](int w) { return fmt::format("worker {} all-reduces other tensors than worker 0", w); },
      "every replica of every worker must all-reduce tensors of the same shapes and dtypes in "
      "the same order, with the same op",
      local_bad.empty());
}

void Collectives::reduce_over_workers(ReduceOp op, std::span<const Tensor> sums,
                                      const std::string& local_bad) {
  worker_sums_.clear();
  worker_failure_ = nullptr;
  try {
    check_workers_agree(op, sums, local_bad);
    std::vector<TensorMeta> metas;
    for (const Tensor& t : sums) metas.push_back({t.shape(), t.dtype()});
    // On the first replica's device when that is a CPU (results may be views of it).
    const Device home = devices_[0].is_cpu() ? devices_[0] : Device{DeviceType::CPU, 0};
    // One flat buffer per bucket: a ring per bucket, not per tensor.
    for (const Bucket& b : plan_buckets(metas)) {
      Tensor flat = tapeflow::detail::empty(TensorShape{b.num_elements}, b.dtype, home);
      auto* dst = static_cast<uint8_t*>(flat.raw_data());
      size_t offset = 0;
      for (size_t ti : b.tensors) {
        std::memcpy(dst + offset, sums[ti].raw_data(), sums[ti].nbytes());
        offset += sums[ti].nbytes();
      }
      workers_->all_reduce_sum(dst, static_cast<size_t>(b.num_elements), b.dtype, "all_reduce");
      worker_sums_.push_back(flat);
    }
  } catch (...) {
    worker_failure_ = std::current_exception();
  }
}

Collectives::~Collectives() = default;

std::string Collectives::mismatch() const {
  const std::span<const Tensor> first = in_slots_[0];
  for (size_t r = 1; r < in_slots_.size(); ++r) {
    if (op_slots_[r] != op_slots_[0])
      return fmt::format("replica 0 all-reduces with ReduceOp::{} and replica {} with "
                         "ReduceOp::{}",
                         reduce_op_name(op_slots_[0]), r, reduce_op_name(op_slots_[r]));
    const std::span<const Tensor> other = in_slots_[r];
    if (other.size() != first.size())
      return fmt::format("replica 0 all-reduces {} tensors and replica {} all-reduces {}",
                         first.size(), r, other.size());
    for (size_t i = 0; i < first.size(); ++i)
      if (other[i].shape() != first[i].shape() || other[i].dtype() != first[i].dtype())
        return fmt::format("tensor {} is {} on replica 0 and {} on replica {}", i,
                           meta_string(first[i]), meta_string(other[i]), r);
  }
  return {};
}

void Collectives::all_reduce(int replica, ReduceOp op, std::span<const Tensor> in,
                             std::span<Tensor> out) {
  check_reduce_op(op, "all_reduce");
  for (const Tensor& t : in)
    TF_CHECK_ARG(t.dtype() != bool_, "all_reduce", "cannot all-reduce a bool tensor ({})",
                 meta_string(t));
  if (global_size_ == 1 && shortcut_) {
    // One replica: nothing to communicate (TF's single-replica shortcut).
    for (size_t i = 0; i < in.size(); ++i) out[i] = in[i];
    return;
  }
  if (kind_ == CollectiveKind::Nccl) nccl(replica, op, in, out);
  else in_process(replica, op, in, out);
}

void Collectives::in_process(int replica, ReduceOp op, std::span<const Tensor> in,
                             std::span<Tensor> out) {
  const Device dev = devices_[static_cast<size_t>(replica)];
  const Device host{DeviceType::CPU, 0};
  // GPU replicas (logical devices sharing one GPU) reduce through host copies.
  std::vector<Tensor> host_in(in.begin(), in.end());
  for (size_t i = 0; i < in.size(); ++i)
    if (!host_in[i].placement().is_cpu())
      host_in[i] = tapeflow::detail::copy_to_device(host_in[i], host);
  if (multi_worker() && size() == 1) {
    // One replica in this process: no local stage. Its tensors are packed straight into the
    // buckets that the ring sums, and the results are views of them.
    reduce_over_workers(op, host_in, std::string());
    std::vector<Tensor> sums = std::exchange(worker_sums_, {});
    if (worker_failure_) std::rethrow_exception(std::exchange(worker_failure_, nullptr));
    std::vector<TensorMeta> metas;
    for (const Tensor& t : host_in) metas.push_back({t.shape(), t.dtype()});
    const std::vector<Bucket> buckets = plan_buckets(metas);
    for (size_t k = 0; k < buckets.size(); ++k) {
      Tensor& flat = sums[k];
      if (op == ReduceOp::MEAN)
        divide_elements(flat.raw_data(), flat.raw_data(), flat.num_elements(), flat.dtype(),
                        global_size_);
      size_t offset = 0;
      for (size_t ti : buckets[k].tensors) {
        const Tensor v = tapeflow::detail::view(flat, in[ti].shape(), offset);
        out[ti] = v.placement() == dev ? v : tapeflow::detail::copy_to_device(v, dev);
        offset += in[ti].nbytes();
      }
    }
    return;
  }
  std::vector<Tensor> host_out(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    host_out[i] = tapeflow::detail::empty(in[i].shape(), in[i].dtype(), dev.is_cpu() ? dev : host);
  in_slots_[static_cast<size_t>(replica)] = host_in;
  op_slots_[static_cast<size_t>(replica)] = op;
  out_slots_[static_cast<size_t>(replica)] = host_out;
  barrier_.arrive_and_wait("all_reduce");

  // Every replica reads the same published metadata, so all agree on the outcome.
  const std::string bad = mismatch();
  // Across workers: the local stage sums, the workers' sums are divided after the ring.
  const bool multi = multi_worker();
  const ReduceOp local_op = multi ? ReduceOp::SUM : op;
  if (bad.empty()) {
    std::vector<TensorMeta> metas;
    metas.reserve(in.size());
    for (const Tensor& t : host_in) metas.push_back({t.shape(), t.dtype()});
    const size_t n = in_slots_.size();
    // Bucket by bucket, this replica sums its share [lo, hi) of the bucket's elements (taken in
    // list order) from every replica's buffer and writes it into every replica's output.
    for (const Bucket& b : plan_buckets(metas)) {
      const int64_t lo = b.num_elements * replica / static_cast<int64_t>(n);
      const int64_t hi = b.num_elements * (replica + 1) / static_cast<int64_t>(n);
      int64_t base = 0;
      for (size_t ti : b.tensors) {
        const int64_t len = host_in[ti].num_elements();
        const int64_t b0 = std::max(lo, base), e0 = std::min(hi, base + len);
        if (b0 < e0) {
          const int64_t off = b0 - base;
          TF_DISPATCH_ALL_TYPES(b.dtype, {
            std::vector<const T*> src(n);
            std::vector<T*> dst(n);
            for (size_t s = 0; s < n; ++s) {
              src[s] = in_slots_[s][ti].data<T>() + off;
              dst[s] = out_slots_[s][ti].data<T>() + off;
            }
            if constexpr (!std::is_same_v<T, bool>)
              reduce_segment<T>(src, dst, e0 - b0, local_op);
          });
        }
        base += len;
      }
    }
  }
  // Nobody leaves (freeing buffers others read) before every replica is done; every replica
  // passed the first barrier and nothing above throws, so this wait always completes.
  barrier_.arrive_and_wait("all_reduce", /*cancellable=*/false);
  if (multi) {
    // Over the workers, on the first replica's thread; the others wait for its result (the
    // waits are bounded by the worker group's timeout, so this barrier always completes).
    if (replica == 0) reduce_over_workers(op, host_out, bad);
    barrier_.arrive_and_wait("all_reduce", /*cancellable=*/false);
    if (worker_failure_) {
      if (replica == 0) std::rethrow_exception(worker_failure_);
      throw StepCancelled(message_of(worker_failure_));
    }
  }
  TF_CHECK_ARG(bad.empty(), "all_reduce",
               "the replicas passed different tensors: {}; every replica must all-reduce tensors "
               "of the same shapes and dtypes in the same order",
               bad);
  if (multi) {
    // Every replica copies the workers' sums into its own outputs (MEAN: divided by every
    // worker's replicas).
    std::vector<TensorMeta> metas;
    for (const Tensor& t : host_out) metas.push_back({t.shape(), t.dtype()});
    const std::vector<Bucket> buckets = plan_buckets(metas);
    for (size_t k = 0; k < buckets.size(); ++k) {
      const auto* src = static_cast<const uint8_t*>(worker_sums_[k].raw_data());
      size_t offset = 0;
      for (size_t ti : buckets[k].tensors) {
        Tensor& o = host_out[ti];
        if (op == ReduceOp::SUM)
          std::memcpy(o.raw_data(), src + offset, o.nbytes());
        else
          divide_elements(o.raw_data(), src + offset, o.num_elements(), o.dtype(), global_size_);
        offset += o.nbytes();
      }
    }
  }
  for (size_t i = 0; i < in.size(); ++i)
    out[i] = dev.is_cpu() ? host_out[i] : tapeflow::detail::copy_to_device(host_out[i], dev);
}

void Collectives::nccl(int replica, ReduceOp op, std::span<const Tensor> in,
                       std::span<Tensor> out) {
  const Device dev = devices_[static_cast<size_t>(replica)];
  // The flattening and scaling ops are plumbing of this one collective: no tape records them.
  tapeflow::detail::PauseTapes pause;
  // Flatten each bucket into one buffer on the replica's device (ops on its stream).
  std::vector<TensorMeta> metas;
  for (const Tensor& t : in) metas.push_back({t.shape(), t.dtype()});
  const std::vector<Bucket> buckets = plan_buckets(metas);
  std::vector<Tensor> flat_in(buckets.size()), flat_out(buckets.size());
  std::vector<NcclCall> calls(buckets.size());
  {
    DeviceScope scope(dev);
    for (size_t k = 0; k < buckets.size(); ++k) {
      std::vector<Tensor> parts;
      for (size_t ti : buckets[k].tensors) parts.push_back(reshape(in[ti], TensorShape{-1}));
      flat_in[k] = parts.size() == 1 ? parts[0] : concat(parts, 0);
      flat_out[k] =
          tapeflow::detail::empty(TensorShape{buckets[k].num_elements}, buckets[k].dtype, dev);
      // MEAN is NCCL's average: the result keeps the bucket's dtype (an integer mean divides
      // as integers, as the in-process path), and no scaling op (whose host scalar would wait
      // for the stream) runs afterwards.
      calls[k] = NcclCall{flat_in[k].raw_data(), flat_out[k].raw_data(),
                          static_cast<size_t>(buckets[k].num_elements), buckets[k].dtype,
                          op == ReduceOp::MEAN};
    }
  }
  in_slots_[static_cast<size_t>(replica)] = in;
  op_slots_[static_cast<size_t>(replica)] = op;
  nccl_slots_[static_cast<size_t>(replica)] = &calls;
  barrier_.arrive_and_wait("all_reduce");
  const std::string bad = mismatch();
  std::exception_ptr failure;
  if (replica == 0) {
    // One thread enqueues every replica's calls in one group (NCCL's single-thread,
    // multi-device model); each runs on its device's stream, ordered after the flattening.
    try {
      // Communicators aborted by their watchdog (a peer lost): fail before talking to peers.
      comms_->check_healthy();
      // Every worker must enqueue the same calls: NCCL itself would hang on a mismatch.
      if (multi_worker()) check_workers_agree(op, in, bad);
      if (!bad.empty()) throw StepCancelled();  // reported below, by every replica
      std::vector<const std::vector<NcclCall>*> all(nccl_slots_.size());
      for (size_t r = 0; r < all.size(); ++r)
        all[r] = static_cast<const std::vector<NcclCall>*>(nccl_slots_[r]);
      comms_->all_reduce_group(all);
    } catch (const StepCancelled&) {
    } catch (...) {
      failure = std::current_exception();
      barrier_.cancel(message_of(failure));
    }
  }
  // The others keep their buffers and call lists alive until the group is enqueued.
  barrier_.arrive_and_wait("all_reduce", /*cancellable=*/false);
  if (failure) std::rethrow_exception(failure);
  if (barrier_.cancelled()) throw StepCancelled();
  TF_CHECK_ARG(bad.empty(), "all_reduce",
               "the replicas passed different tensors: {}; every replica must all-reduce tensors "
               "of the same shapes and dtypes in the same order",
               bad);
  DeviceScope scope(dev);
  for (size_t k = 0; k < buckets.size(); ++k) {
    const Tensor& result = flat_out[k];
    size_t offset = 0;
    for (size_t ti : buckets[k].tensors) {
      out[ti] = tapeflow::detail::view(result, in[ti].shape(), offset);
      offset += in[ti].nbytes();
    }
  }
}

// ---- the all_reduce primitive: one graph node per call, so traced steps replay it ----

namespace {

struct AllReduceOp final : PrimitiveBase<AllReduceOp> {
  ReduceOp op;
  int n;
  AllReduceOp(ReduceOp o, int count) : op(o), n(count) {}
  const char* name() const override { return "all_reduce"; }
  int num_outputs() const override { return n; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override {
    for (size_t i = 0; i < in.size(); ++i) out[i] = {in[i].shape(), in[i].dtype()};
  }
  void eval_cpu(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  void eval_cuda(std::span<const Tensor>, std::span<Tensor>) const override {
    TF_THROW(InternalError, name(), "runs through produce(), never as a kernel");
  }
  bool produce(std::span<const Tensor> in, std::span<Tensor> out, Device) const override {
    auto* ctx = dynamic_cast<MirroredReplicaContext*>(get_replica_context());
    TF_CHECK_T(FailedPreconditionError, ctx != nullptr, "all_reduce",
               "ran outside strategy.run (a traced step that all-reduces must be called by "
               "strategy.run on every replica)");
    ctx->collectives().all_reduce(ctx->local_id(), op, in, out);
    return true;
  }
  // The gradient of an all-reduce is the same all-reduce of the upstream gradients (TF's).
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums, std::span<const Tensor>) const override {
    std::vector<Tensor> g(cotangents.size());
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = cotangents[i].defined() ? cotangents[i] : zeros_like(primals[i]);
    std::vector<Tensor> reduced =
        tapeflow::detail::dispatch_multi(AllReduceOp(op, static_cast<int>(g.size())), g);
    std::vector<Tensor> out;
    for (int a : argnums) out.push_back(reduced[static_cast<size_t>(a)]);
    return out;
  }
  uint32_t vjp_saves() const override { return 0; }
  bool has_side_effects() const override { return true; }
  std::string attributes() const override { return fmt::format("op={}", reduce_op_name(op)); }
};

}  // namespace

Tensor MirroredReplicaContext::all_reduce(ReduceOp op, const Tensor& value) {
  check_reduce_op(op, "all_reduce");
  TF_CHECK_ARG(value.defined(), "all_reduce", "the value is an undefined tensor");
  return tapeflow::detail::dispatch(AllReduceOp(op, 1), {value});
}

std::vector<Tensor> MirroredReplicaContext::all_reduce(ReduceOp op,
                                                       const std::vector<Tensor>& values) {
  check_reduce_op(op, "all_reduce");
  if (values.empty()) return {};
  for (size_t i = 0; i < values.size(); ++i)
    TF_CHECK_ARG(values[i].defined(), "all_reduce", "value {} is an undefined tensor", i);
  return tapeflow::detail::dispatch_multi(AllReduceOp(op, static_cast<int>(values.size())),
                                          values);
}

}  // namespace detail

}  // namespace tapeflow::distribute
