// The workers of a MultiWorkerMirroredStrategy on MPI (compiled when CMake finds MPI). Point-to-
// point messages only (MPI_Isend/MPI_Irecv polled with MPI_Testall), so that every wait has a
// deadline: MPI's own collectives block without one.
// The C API only: OpenMPI's and MPICH's mpi.h pull in the deprecated C++ bindings otherwise.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "distribute/collective.h"
#include "distribute/worker_group.h"

namespace tapeflow::distribute::detail {

bool mpi_built() { return true; }

namespace {

// Serialises every MPI call of the process (MPI_THREAD_SERIALIZED asks no more of us).
std::mutex& mpi_mutex() {
  static std::mutex mu;
  return mu;
}

// Set after a failed collective: the workers can no longer meet.
std::atomic<bool> g_broken{false};

// At exit: finalise, unless the group broke (a collective failed or a worker's step did): MPI_Finalize
// would wait for the lost or stuck peer, so the job is ended instead (mpirun then stops every
// worker and reports it).
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (g_broken.load()) {
    // stderr directly: the logger may already be destroyed this late in the exit.
    std::fputs("[tapeflow] [error] the workers of this job can no longer meet (a worker failed, "
               "stopped answering or died): ending the MPI job (MPI_Abort)\n",
               stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

// Element-wise dst += src for `count` elements of dtype (integers wrap around).
void add_into(void* dst, const void* src, size_t count, DType dtype) {
  TF_DISPATCH_ALL_TYPES(dtype, {
    if constexpr (std::is_same_v<T, bool>) {
      TF_THROW(InvalidArgumentError, "all_reduce", "cannot all-reduce a bool tensor");
    } else {
      using C = compute_t<T>;
      T* d = static_cast<T*>(dst);
      const T* s = static_cast<const T*>(src);
      for (size_t i = 0; i < count; ++i)
        d[i] = static_cast<T>(wrapping_add(static_cast<C>(d[i]), static_cast<C>(s[i])));
    }
  });
}

class MpiWorkerGroup final : public WorkerGroup {
 public:
  explicit MpiWorkerGroup(double timeout) : timeout_(timeout) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      TF_CHECK_T(UnavailableError, rc == MPI_SUCCESS, "MultiWorkerMirroredStrategy",
                 "MPI_Init_thread failed: {}", mpi_error_string(rc));
      TF_CHECK_T(UnavailableError, provided >= MPI_THREAD_SERIALIZED,
                 "MultiWorkerMirroredStrategy",
                 "the MPI library gives thread level {} but tapeflow needs "
                 "MPI_THREAD_SERIALIZED ({}): collectives run on the replica threads",
                 provided, MPI_THREAD_SERIALIZED);
      std::atexit(finalize_at_exit);
    }
    // A private communicator: our messages never meet the application's own MPI traffic.
    dup_world();
    // Errors come back as codes (and become exceptions), not as an abort of the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }

  ~MpiWorkerGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !g_broken.load()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeout_seconds() const override { return timeout_; }

  void all_reduce_sum(void* data, size_t count, DType dtype, const char* what) override {
    std::lock_guard lock(mpi_mutex());
    check_usable(what);
    if (size_ == 1 || count == 0) return;
    const size_t esize = dtype_size(dtype);
    const size_t w = static_cast<size_t>(size_);
    // Segments keep every message under 64 MiB (MPI counts are ints).
    const size_t chunk_max = (size_t{64} << 20) / esize;
    const size_t segment = chunk_max * w;
    auto* bytes = static_cast<uint8_t*>(data);
    for (size_t off = 0; off < count; off += segment) {
      const size_t n = std::min(segment, count - off);
      ring(bytes + off * esize, n, dtype, esize, what);
    }
  }

  void broadcast(void* data, size_t nbytes, const char* what) override {
    std::lock_guard lock(mpi_mutex());
    check_usable(what);
    if (size_ == 1 || nbytes == 0) return;
    auto* bytes = static_cast<uint8_t*>(data);
    constexpr size_t kPiece = size_t{64} << 20;
    for (size_t off = 0; off < nbytes; off += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, nbytes - off));
      std::vector<MPI_Request> reqs;
      if (rank_ == 0) {
        reqs.resize(static_cast<size_t>(size_ - 1));
        for (int r = 1; r < size_; ++r)
          post(MPI_Isend(bytes + off, n, MPI_BYTE, r, kTagBroadcast, comm_,
                         &reqs[static_cast<size_t>(r - 1)]),
               what);
        wait(reqs, what, "a worker did not receive");
      } else {
        reqs.resize(1);
        post(MPI_Irecv(bytes + off, n, MPI_BYTE, 0, kTagBroadcast, comm_, &reqs[0]), what);
        MPI_Status status;
        wait(reqs, what, "worker 0 did not send", &status);
        // A shorter message fits the buffer: the workers broadcast different sizes (callers
        // compare what they broadcast first, so this is a bug).
        int received = 0;
        MPI_Get_count(&status, MPI_BYTE, &received);
        if (received != n) {
          g_broken = true;
          TF_THROW(InternalError, what,
                   "worker {} of {}: received {} bytes from worker 0 where {} were expected: "
                   "the workers broadcast values of different sizes",
                   rank_, size_, received, n);
        }
      }
    }
  }

  void abort(const std::string& reason) override {
    std::lock_guard lock(mpi_mutex());
    if (g_broken.load() || size_ == 1) return;
    g_broken = true;
    abort_message_ = fmt::format("worker {} of {} failed: {}", rank_, size_, reason);
    abort_requests_.assign(static_cast<size_t>(size_ - 1), MPI_REQUEST_NULL);
    size_t k = 0;
    for (int r = 0; r < size_; ++r)
      if (r != rank_)
        MPI_Isend(abort_message_.data(), static_cast<int>(abort_message_.size()), MPI_CHAR, r,
                  kTagAbort, comm_, &abort_requests_[k++]);
  }

  std::vector<int64_t> all_gather(int64_t value, const char* what) override {
    std::vector<int64_t> all(static_cast<size_t>(size_), 0);
    all[static_cast<size_t>(rank_)] = value;
    all_reduce_sum(all.data(), all.size(), int64, what);
    return all;
  }

 private:
  static constexpr int kTagRing = 7101;
  static constexpr int kTagBroadcast = 7102;
  static constexpr int kTagAbort = 7103;

  // Another worker's abort message, if one has arrived: raised as UnavailableError.
  void check_aborted(std::vector<MPI_Request>& reqs, const char* what) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagAbort, comm_, &flag, &status) != MPI_SUCCESS || !flag)
      return;
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string message(static_cast<size_t>(std::max(count, 0)), '\0');
    MPI_Recv(message.data(), count, MPI_CHAR, status.MPI_SOURCE, kTagAbort, comm_,
             MPI_STATUS_IGNORE);
    for (MPI_Request& r : reqs)
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    g_broken = true;
    TF_THROW(UnavailableError, what, "worker {} of {}: the step ended because {}", rank_, size_,
             message);
  }

  void check_usable(const char* what) const {
    TF_CHECK_T(FailedPreconditionError, !g_broken.load(), what,
               "an earlier collective of this process failed (a worker is gone or stuck); the "
               "workers cannot continue together: restart the job (from a checkpoint)");
  }

  void post(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    g_broken = true;
    TF_THROW(UnavailableError, what, "worker {} of {}: MPI failed: {}", rank_, size_,
             mpi_error_string(rc));
  }

  // Calls poll(polls) until it returns true (then true) or timeout_ seconds have passed (then
  // false); spins briefly, then sleeps between polls.
  template <class Poll>
  bool poll_within_timeout(Poll&& poll) const {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration<double>(timeout_);
    for (int polls = 0;; ++polls) {
      if (poll(polls)) return true;
      if (clock::now() > deadline) return false;
      if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // The private communicator, a dup of MPI_COMM_WORLD, which is collective: it completes once
  // every worker has created its strategy. MPI_Comm_dup would wait forever for a worker that
  // never does (it failed before, or runs other code), so MPI_Comm_idup is polled against the
  // collective timeout. A collective request cannot be cancelled: after the deadline the group
  // is broken (and the job ends at exit, see finalize_at_exit).
  void dup_world() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    check_usable("MultiWorkerMirroredStrategy");
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &req);
    TF_CHECK_T(UnavailableError, rc == MPI_SUCCESS, "MultiWorkerMirroredStrategy",
               "MPI_Comm_idup failed: {}", mpi_error_string(rc));
    const bool created = poll_within_timeout([&](int) {
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
    if (created) return;
    g_broken = true;
    TF_THROW(DeadlineExceededError, "MultiWorkerMirroredStrategy",
             "worker {} of {}: the other workers did not create their strategy within {:g} s "
             "(the collective timeout; CommunicationOptions::timeout_seconds or "
             "TAPEFLOW_COLLECTIVE_TIMEOUT): every worker must create its strategies in the "
             "same order",
             rank_, size_, timeout_);
  }

  // Waits for every request, at most timeout_ seconds; `statuses` (one per request) receives
  // their statuses. `waiting_for` and `suspects` complete the timeout's message ("worker 1 did
  // not answer within 2 s ...: it is gone or stuck").
  void wait(std::vector<MPI_Request>& reqs, const char* what, const std::string& waiting_for,
            MPI_Status* statuses = MPI_STATUSES_IGNORE,
            const std::string& suspects = "it is gone or stuck") {
    const bool done = poll_within_timeout([&](int polls) {
      int all_done = 0;
      const int rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &all_done, statuses);
      if (rc != MPI_SUCCESS) {
        g_broken = true;
        TF_THROW(UnavailableError, what,
                 "worker {} of {}: {} (MPI: {}); a worker may have died", rank_, size_,
                 waiting_for, mpi_error_string(rc));
      }
      if (all_done) return true;
      if (polls % 64 == 63) check_aborted(reqs, what);
      return false;
    });
    if (done) return;
    for (MPI_Request& r : reqs)
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    g_broken = true;
    TF_THROW(DeadlineExceededError, what,
             "worker {} of {}: {} within {:g} s (the collective timeout; "
             "CommunicationOptions::timeout_seconds or TAPEFLOW_COLLECTIVE_TIMEOUT): {}",
             rank_, size_, waiting_for, timeout_, suspects);
  }

  // Who may have stopped the ring when the left neighbour did not answer: that neighbour, or,
  // with more than two workers, one further back (each worker waits for the one before it, so a
  // worker that is gone stops every worker after it).
  std::string ring_suspects(int left) const {
    if (size_ <= 2) return "it is gone or stuck";
    std::vector<int> further;
    for (int w = (left + size_ - 1) % size_; w != rank_; w = (w + size_ - 1) % size_)
      further.push_back(w);
    return fmt::format(
        "worker {} is gone or stuck, or it waits itself for a worker further back "
        "on the ring (worker{} {}) that is: each worker waits for the one before it",
        left, further.size() > 1 ? "s" : "", fmt::join(further, ", "));
  }

  // Ring all-reduce of n elements at data: reduce-scatter (after step s, worker r has added
  // its left neighbour's partial sum of chunk r-s-1 to its own), then all-gather of the finished
  // chunks. Chunk c covers elements [c n / w, (c + 1) n / w).
  void ring(uint8_t* data, size_t n, DType dtype, size_t esize, const char* what) {
    std::vector<uint8_t>& incoming = incoming_;
    const int w = size_;
    const int right = (rank_ + 1) % w, left = (rank_ + w - 1) % w;
    auto begin = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(w); };
    auto length = [&](int c) { return begin(c + 1) - begin(c); };
    const std::string from_left =
        size_ <= 2 ? fmt::format("worker {} did not answer", left)
                   : fmt::format(
                         "worker {}, the one before this worker on the ring, did not answer", left);
    const std::string suspects = ring_suspects(left);
    for (int s = 0; s < w - 1; ++s) {
      const int send_c = (rank_ - s + w) % w, recv_c = (rank_ - s - 1 + 2 * w) % w;
      if (incoming.size() < length(recv_c) * esize) incoming.resize(length(recv_c) * esize);
      std::vector<MPI_Request> reqs(2);
      post(MPI_Irecv(incoming.data(), static_cast<int>(length(recv_c) * esize), MPI_BYTE, left,
                     kTagRing, comm_, &reqs[0]),
           what);
      post(MPI_Isend(data + begin(send_c) * esize, static_cast<int>(length(send_c) * esize),
                     MPI_BYTE, right, kTagRing, comm_, &reqs[1]),
           what);
      wait(reqs, what, from_left, MPI_STATUSES_IGNORE, suspects);
      add_into(data + begin(recv_c) * esize, incoming.data(), length(recv_c), dtype);
    }
    for (int s = 0; s < w - 1; ++s) {
      const int send_c = (rank_ + 1 - s + w) % w, recv_c = (rank_ - s + w) % w;
      std::vector<MPI_Request> reqs(2);
      post(MPI_Irecv(data + begin(recv_c) * esize, static_cast<int>(length(recv_c) * esize),
                     MPI_BYTE, left, kTagRing, comm_, &reqs[0]),
           what);
      post(MPI_Isend(data + begin(send_c) * esize, static_cast<int>(length(send_c) * esize),
                     MPI_BYTE, right, kTagRing, comm_, &reqs[1]),
           what);
      wait(reqs, what, from_left, MPI_STATUSES_IGNORE, suspects);
    }
  }

  double timeout_;
  // The ring's receive buffer, kept between calls (under the MPI mutex).
  std::vector<uint8_t> incoming_;
  // What abort() sent, alive while its sends may be in flight.
  std::string abort_message_;
  std::vector<MPI_Request> abort_requests_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::shared_ptr<WorkerGroup> world_worker_group(double timeout_seconds) {
  TF_CHECK_ARG(timeout_seconds > 0, "MultiWorkerMirroredStrategy",
               "the collective timeout must be positive, got {} s", timeout_seconds);
  std::lock_guard lock(mpi_mutex());
  return std::make_shared<MpiWorkerGroup>(timeout_seconds);
}

}  // namespace tapeflow::distribute::detail
