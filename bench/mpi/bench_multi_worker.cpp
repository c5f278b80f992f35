// MultiWorkerMirroredStrategy across processes, measured under mpirun (a fixed number of
// repetitions on every worker: Google Benchmark picks its iteration counts per process, which
// would make the workers' collectives differ):
//   - all-reduce SUM of float32 buffers (64 KiB ... 64 MiB) over the workers: the ring over MPI,
//     as algorithm bandwidth (buffer bytes / time) and bus bandwidth (times 2 (W - 1) / W);
//   - an SGD step of a 784-256-256-10 MLP at global batch 256 split over the workers, against
//     the same step on one process with the whole batch (measured by worker 0 while the others
//     wait).
//
//   mpirun -np 2 build/bench/bench_multi_worker [repetitions]
// Medians over the repetitions; worker 0 prints the table.
#include <tapeflow/tapeflow.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "distribute_mlp.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;

using namespace distribute_bench;

namespace {

template <class F>
double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  f();  // warm-up
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  ds::MultiWorkerMirroredStrategy strategy;
  const int w = strategy.num_workers();
  const bool chief = strategy.worker_index() == 0;
  auto barrier = [&] {
    (void)strategy.reduce(ds::ReduceOp::SUM, strategy.run([] { return tf::constant(0.0f); }));
  };
  if (chief)
    std::printf("workers %d, replicas in sync %d, OMP_NUM_THREADS %s, all-reduce %s\n", w,
                strategy.num_replicas_in_sync(),
                std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "(unset)",
                strategy.extended().cross_device_ops().c_str());

  if (chief)
    std::printf("\n| all-reduce SUM float32 | median | algorithm bandwidth | bus bandwidth |\n"
                "| --- | --- | --- | --- |\n");
  for (int64_t bytes :
       {int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20}) {
    const tf::Tensor buf = tf::ones({bytes / 4});
    const int r = bytes >= (int64_t{16} << 20) ? std::max(5, reps / 4) : reps;
    barrier();
    const double s = median_seconds(r, [&] {
      strategy.run([&] { return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, buf); });
    });
    const double algo = static_cast<double>(bytes) / s / 1e9;
    if (chief)
      std::printf("| %lld KiB | %.3f ms | %.2f GB/s | %.2f GB/s |\n",
                  static_cast<long long>(bytes >> 10), s * 1e3, algo,
                  algo * 2.0 * (w - 1) / std::max(w, 1));
  }

  // The MLP step: one process with the whole batch (worker 0, the others wait), then every
  // worker with its share.
  const tf::Tensor x = features(), y = labels();
  double single = 0;
  barrier();
  if (chief) {
    Mlp m = make_mlp();
    single = median_seconds(reps, [&] { (void)sgd_step(m, x, y, kBatch); });
  }
  barrier();
  Mlp mirrored = [&] {
    auto scope = strategy.scope();
    return make_mlp();
  }();
  const auto per_replica = tf::distribute::detail::split_global_batch({x, y}, strategy.layout());
  const double multi = median_seconds(reps, [&] {
    strategy.run(
        [&](const std::vector<tf::Tensor>& b) { return sgd_step(mirrored, b[0], b[1], kBatch); },
        per_replica);
  });
  if (chief) {
    std::printf("\n| MLP 784-256-256-10 SGD step, global batch %d | median | examples/s |\n"
                "| --- | --- | --- |\n",
                kBatch);
    std::printf("| one process, whole batch | %.3f ms | %.0f |\n", single * 1e3, kBatch / single);
    std::printf("| %d workers, %d rows each | %.3f ms | %.0f |\n", w, kBatch / w, multi * 1e3,
                kBatch / multi);
  }
  return 0;
}
