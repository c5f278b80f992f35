// Internal to distribute/: the processes ("workers") of a MultiWorkerMirroredStrategy, one MPI
// rank each (launched with mpirun). distribute/mpi/worker_group.cpp implements it on MPI,
// distribute/no_mpi/worker_group.cpp reports that tapeflow was built without MPI.
//
// Every collective here is called by every worker in the same order, from one thread per
// process at a time (the strategy's first replica thread inside run, the caller's thread outside
// it); a process-wide lock serialises them anyway. Each one waits at most timeout() seconds for
// its peers: a worker that is gone or stuck makes the others raise DeadlineExceededError (or
// UnavailableError when MPI reports the failure, or when the worker says its step failed:
// abort()) instead of hanging. After such a failure the group is broken: later collectives raise
// at once, and at exit the process ends the MPI job with MPI_Abort instead of finalising (which
// would wait for the lost peer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace tapeflow::distribute::detail {

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual double timeout_seconds() const = 0;
  // In place: data[0, count) becomes the sum over the workers. A ring (reduce-scatter, then
  // all-gather): every worker gets bit-identical results, and each element's additions happen
  // in an order that depends only on the number of workers.
  virtual void all_reduce_sum(void* data, size_t count, DType dtype, const char* what) = 0;
  // Worker 0's nbytes at data are copied into every other worker's data.
  virtual void broadcast(void* data, size_t nbytes, const char* what) = 0;
  // Every worker's value, in rank order.
  virtual std::vector<int64_t> all_gather(int64_t value, const char* what) = 0;
  // This worker's step failed (`reason`): tells every other worker, whose collectives then raise
  // UnavailableError naming this worker and the reason instead of waiting for the timeout. Does
  // not wait; the group is broken afterwards (a no-op when it already is).
  virtual void abort(const std::string& reason) = 0;

  // Where this worker is in its strategy's sequence of collectives, which check_workers_agree
  // compares (so that a worker that skipped a collective, or a whole step's, is an error on every
  // worker at once rather than pairing with another step's): the strategy.run calls begun, and
  // the checked collectives since the last one began or ended. The strategy calls these around
  // each run; like the collectives, from one thread at a time.
  void begin_step() {
    ++steps_;
    in_step_ = true;
    checked_ = 0;
  }
  void end_step() {
    in_step_ = false;
    checked_ = 0;
  }
  struct Position {
    int64_t steps = 0;
    bool in_step = false;
    int64_t checked = 0;  // collectives checked before this one
  };
  // The position of the next checked collective (and counts it).
  Position next_position() {
    Position p{steps_, in_step_, checked_};
    ++checked_;
    return p;
  }

 private:
  int64_t steps_ = 0;
  bool in_step_ = false;
  int64_t checked_ = 0;
};

// Raised identically on every worker (they checked the same gathered facts, e.g. different
// tensors in one all-reduce): no worker needs telling, and the group stays usable.
class WorkersAgreedError final : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};

// Checks, before a collective, that every worker is about to do the same: each worker states its
// part (`what` and `description`, e.g. "SUM float32 (4,)"; `consistent` false when this worker's
// own replicas already disagree) and its position (WorkerGroup::next_position), and gathers every
// worker's fingerprint of them, so all reach the same verdict. When they differ, every worker
// raises the same WorkersAgreedError naming what the first differing worker w and worker 0 do:
// "[what] <headline(w)> (worker 0: ...; worker w: ...; this is worker r); <rule>", or, when they
// are at different collectives (another position or op), "[what] the workers are at different
// collectives ..." with the positions. One small collective when the workers agree (two more to
// exchange the descriptions when they do not); called in the same order on every worker.
void check_workers_agree(WorkerGroup& workers, const char* what, const std::string& description,
                         const std::function<std::string(int)>& headline, std::string_view rule,
                         bool consistent = true);

// True when tapeflow was built with MPI.
bool mpi_built();
// The group of all processes of this MPI job (MPI_COMM_WORLD), initialising MPI on first use
// (MPI_THREAD_SERIALIZED; finalised at exit). A process started without mpirun is a group of
// one. timeout_seconds bounds every wait of this group's collectives.
std::shared_ptr<WorkerGroup> world_worker_group(double timeout_seconds);
// The default collective timeout: TAPEFLOW_COLLECTIVE_TIMEOUT (seconds) or 300.
double default_collective_timeout();

}  // namespace tapeflow::distribute::detail
