// MultiWorkerMirroredStrategy across processes. CTest runs this binary under `mpirun -np 2`
// (one CPU replica per process) and alone (a one-worker strategy); every case holds for any
// number of workers. The hidden [.failure] cases end the job on purpose (a stuck or a dying
// worker); tests/distribute/multi_worker/run_failure.cmake runs them and checks the outcome.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "distribute/sgd_mlp.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/model.h"
#include "ops/activation.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using namespace sgd_mlp;

namespace {

// One strategy for the whole process: MPI is initialised once, and every worker must create its
// strategies in the same order.
ds::MultiWorkerMirroredStrategy& strategy() {
  static ds::MultiWorkerMirroredStrategy s(
      ds::experimental::CommunicationOptions{.timeout_seconds = 60});
  return s;
}

// Every worker's copy of `t`, gathered through SUM reductions (worker w's value at slot w).
std::vector<std::vector<float>> gather_floats(const tf::Tensor& t) {
  auto& s = strategy();
  const auto mine = t.numpy<float>();
  const size_t n = mine.size();
  std::vector<float> slots(n * static_cast<size_t>(s.num_workers()), 0.0f);
  std::copy(mine.begin(), mine.end(), slots.begin() + static_cast<std::ptrdiff_t>(n) * s.worker_index());
  const tf::Tensor local = tf::constant(slots);
  std::vector<tf::Tensor> parts(s.devices().size(), tf::zeros_like(local));
  parts[0] = local;
  const auto all = s.reduce(ds::ReduceOp::SUM, ds::PerReplica<tf::Tensor>(parts)).numpy<float>();
  std::vector<std::vector<float>> out;
  for (int w = 0; w < s.num_workers(); ++w)
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(n) * w,
                     all.begin() + static_cast<std::ptrdiff_t>(n) * (w + 1));
  return out;
}

// A folder for this job, the same path on every worker (named after worker 0's pid).
std::filesystem::path job_folder(const std::string& name) {
  auto& s = strategy();
  std::vector<tf::Tensor> parts(s.devices().size(), tf::Tensor(int64_t{0}));
  parts[0] = tf::Tensor(static_cast<int64_t>(s.worker_index() == 0 ? ::getpid() : 0));
  const int64_t pid =
      s.reduce(ds::ReduceOp::SUM, ds::PerReplica<tf::Tensor>(parts)).item<int64_t>();
  return std::filesystem::temp_directory_path() /
         ("tapeflow_mw_" + name + "_" + std::to_string(pid));
}

// Calls fn(epoch) at the end of every epoch.
struct AtEpochEnd final : tf::keras::callbacks::Callback {
  explicit AtEpochEnd(std::function<void(int)> f) : fn(std::move(f)) {}
  void on_epoch_end(int epoch, const tf::keras::Logs&) override { fn(epoch); }
  std::function<void(int)> fn;
};

// The message of the InvalidArgumentError that f raises (a test failure when it raises none).
template <class F>
std::string invalid_argument_of(F&& f) {
  try {
    f();
  } catch (const tf::InvalidArgumentError& e) {
    return e.what();
  }
  FAIL("no InvalidArgumentError");
  return {};
}

// Runs f; when it raises DeadlineExceededError, writes one line per worker for run_failure.cmake
// to find and returns the seconds waited. Nothing when f returns.
std::optional<double> seconds_until_deadline(int rank, const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  try {
    f();
  } catch (const tf::DeadlineExceededError& e) {
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "worker %d raised DeadlineExceededError after %.1f s: %s\n", rank, waited,
                 e.what());
    return waited;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("multi-worker: workers, global replica ids and cross-worker reduce",
          "[distribute][mpi]") {
  auto& s = strategy();
  const int workers = s.num_workers();
  REQUIRE(workers >= 1);
  CHECK(s.worker_index() >= 0);
  CHECK(s.worker_index() < workers);
  CHECK(s.devices().size() == 1);
  CHECK(s.num_replicas_in_sync() == workers);
  // A worker with a GPU mirrors onto it and all-reduces through NCCL (the ring where workers
  // share one GPU), else onto its CPU through the ring.
  const bool gpu = tf::testing::has_gpu();
  const std::string ops = s.extended().cross_device_ops();
  if (!gpu)
    CHECK(ops == "RING");
  else if (workers == 1)
    CHECK(ops == "NCCL");
  else
    CHECK((ops == "NCCL" || ops == "RING"));
  const std::string device = s.extended().worker_devices()[0];
  const std::string task = "/job:worker/replica:0/task:" + std::to_string(s.worker_index());
  CHECK(device.rfind(task + (gpu ? "/device:GPU:" : "/device:CPU:0"), 0) == 0);
  // Replica ids are global; all_reduce and reduce span every worker.
  auto ids = s.run([] {
    auto* ctx = ds::get_replica_context();
    const float id = static_cast<float>(ctx->replica_id_in_sync_group());
    tf::Tensor summed = ctx->all_reduce(ds::ReduceOp::SUM, tf::constant({id, 1.0f}));
    tf::Tensor mean = ctx->all_reduce(ds::ReduceOp::MEAN, tf::constant({id, 1.0f}));
    return std::vector<tf::Tensor>{tf::constant(id), summed, mean, tf::constant(ctx->num_replicas_in_sync())};
  });
  const double n = workers, id_sum = n * (n - 1) / 2;
  CHECK(ids[0][0].item<float>() == static_cast<float>(s.worker_index()));
  tf::testing::check_values(ids[0][1], {id_sum, n}, 0, 0);
  tf::testing::check_values(ids[0][2], {id_sum / n, 1.0}, 1e-7, 0);
  CHECK(ids[0][3].item<int32_t>() == workers);
  auto one_each = s.run([] { return tf::constant(1.0); });
  tf::testing::check_values(s.reduce(ds::ReduceOp::SUM, one_each), {n}, 0, 0);
  tf::testing::check_values(s.reduce(ds::ReduceOp::MEAN, one_each), {1.0}, 0, 0);
  // With an axis, MEAN divides by every worker's rows: worker w contributes w + 1 rows of w.
  auto rows = s.run([] {
    const int w = ds::get_replica_context()->replica_id_in_sync_group();
    return tf::fill({w + 1}, tf::Tensor(static_cast<double>(w)));
  });
  double num = 0, den = 0;
  for (int w = 0; w < workers; ++w) {
    num += static_cast<double>(w) * (w + 1);
    den += w + 1;
  }
  tf::testing::check_values(s.reduce(ds::ReduceOp::MEAN, rows, 0), {num / den}, 1e-12, 0);
}

TEST_CASE("multi-worker: variables start from worker 0's value", "[distribute][mpi]") {
  auto& s = strategy();
  tf::detail::clear_random_seed();  // no global seed (the test main sets one)
  tf::Variable v = [&] {
    auto scope = s.scope();
    // Unseeded: every process draws other numbers; the strategy broadcasts worker 0's.
    return tf::Variable(tf::random::normal({5}), "v");
  }();
  const auto all = gather_floats(v.value());
  for (const auto& w : all) CHECK(w == all[0]);
  // Made inside run: replica 0's initial value of worker 0, on every replica of every worker.
  tf::Variable made;
  std::mutex mu;
  (void)s.run([&] {
    const tf::Variable u(tf::fill({3}, tf::Tensor(static_cast<float>(s.worker_index() + 1))),
                         "made_in_run");
    std::lock_guard lock(mu);
    made = u;
    return u.value();
  });
  REQUIRE(made.is_mirrored());
  for (const auto& w : gather_floats(made.value())) CHECK(w == std::vector<float>{1, 1, 1});
}

TEST_CASE("multi-worker: SGD over the workers matches one process at the same global batch",
          "[distribute][mpi]") {
  auto& s = strategy();
  const int epochs = 3;
  const auto data = dataset(44);
  Mlp m = [&] {
    auto scope = s.scope();
    // Different seeds on different workers (deterministic, yet each worker draws other
    // numbers): worker 0's values reach every worker.
    const int64_t seed = 100 + 2 * s.worker_index();
    return make_mlp({tf::random::normal({kIn, kHidden}, 0.0, 0.5, tf::float32, seed),
                     tf::zeros({kHidden}),
                     tf::random::normal({kHidden, 1}, 0.0, 0.5, tf::float32, seed + 1),
                     tf::zeros({1})});
  }();
  std::vector<tf::Tensor> init;
  for (auto& v : m.vars) init.push_back(tf::identity(v.value()));
  const auto want = train_single(init, data, epochs);

  auto traced = tf::function(
      [&](tf::Tensor x, tf::Tensor y, int64_t global) { return replica_step(m, x, y, global); },
      tf::FunctionOptions{.name = "replica_step"});
  double first = 0, last = 0;
  for (int e = 0; e < epochs; ++e) {
    size_t b = 0;
    for (const auto& element : s.experimental_distribute_dataset(data)) {
      const int64_t global = data[b++][0].shape()[0];
      // Epoch 1 eagerly, then the traced step: both paths meet over MPI.
      auto losses = s.run([&](const std::vector<tf::Tensor>& batch) {
        return e == 0 ? replica_step(m, batch[0], batch[1], global)
                      : traced(batch[0], batch[1], global);
      }, element);
      const double loss = s.reduce(ds::ReduceOp::SUM, losses).item<double>();
      // The first batch's loss, in the first and in the last epoch.
      if (b == 1 && e == 0) first = loss;
      if (b == 1) last = loss;
    }
  }
  CHECK(last < first);
  for (size_t i = 0; i < m.vars.size(); ++i) {
    INFO("variable " << m.vars[i].name());
    // Every worker holds the same bits (the ring hands every worker the same sums)...
    const auto all = gather_floats(m.vars[i].value());
    for (const auto& w : all) CHECK(w == all[0]);
    // ...and equals, to float rounding, one process training on the whole global batches.
    tf::testing::check_close(m.vars[i].value(), want[i], 1e-4, 1e-5);
  }
}

TEST_CASE("multi-worker: different tensors on different workers are an error on every worker",
          "[distribute][mpi]") {
  auto& s = strategy();
  if (s.num_workers() < 2) return;  // needs a second worker to disagree with
  TF_REQUIRE_THROWS_CONTAINING(s.run([&] {
    const int64_t n = 3 + s.worker_index();
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({n}));
  }),
                               tf::InvalidArgumentError, "all-reduces other tensors than worker 0");
  // The workers agree again afterwards.
  auto ok = s.run([] { return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({2})); });
  tf::testing::check_values(ok[0], {double(s.num_workers()), double(s.num_workers())}, 0, 0);
}

TEST_CASE("multi-worker: reduce of different shapes or dtypes on the workers is an error on "
          "every worker",
          "[distribute][mpi]") {
  auto& s = strategy();
  if (s.num_workers() < 2) return;  // needs a second worker to disagree with
  const size_t local = s.devices().size();
  const int64_t n = 3 + s.worker_index();
  TF_REQUIRE_THROWS_CONTAINING(
      s.reduce(ds::ReduceOp::SUM, ds::PerReplica<tf::Tensor>(
                                      std::vector<tf::Tensor>(local, tf::ones({n})))),
      tf::InvalidArgumentError, "the workers reduce values of different dtypes or shapes");
  const tf::Tensor mixed = s.worker_index() == 0 ? tf::ones({2}) : tf::ones({2}, tf::float64);
  // Both sides are named, on every worker.
  const std::string m = invalid_argument_of([&] {
    (void)s.reduce(ds::ReduceOp::SUM,
                   ds::PerReplica<tf::Tensor>(std::vector<tf::Tensor>(local, mixed)));
  });
  CHECK_THAT(m, Catch::Matchers::Contains("worker 0: SUM float32 (2,)") &&
                    Catch::Matchers::Contains("worker 1: SUM float64 (2,)"));
  // The workers agree again afterwards.
  const double total = static_cast<double>(s.num_replicas_in_sync());
  tf::testing::check_values(
      s.reduce(ds::ReduceOp::SUM,
               ds::PerReplica<tf::Tensor>(std::vector<tf::Tensor>(local, tf::ones({2})))),
      {total, total}, 0, 0);
}

TEST_CASE("multi-worker: variables that differ between the workers are an error on every worker",
          "[distribute][mpi]") {
  using Catch::Matchers::Contains;
  auto& s = strategy();
  if (s.num_workers() < 2) return;  // needs a second worker to disagree with
  const int rank = s.worker_index();
  auto scope = s.scope();
  // Another shape: worker 0's 4 values must not land in worker 1's 8 (nor the reverse).
  std::string m = invalid_argument_of([&] { tf::Variable(tf::zeros({rank == 0 ? 4 : 8}), "vs"); });
  CHECK_THAT(m, Contains("vs") && Contains("(4,)") && Contains("(8,)"));
  // Another dtype: worker 0's float32 bits must not become worker 1's int32 values.
  m = invalid_argument_of(
      [&] { tf::Variable(rank == 0 ? tf::zeros({2}) : tf::zeros({2}, tf::int32), "vd"); });
  CHECK_THAT(m, Contains("vd") && Contains("float32") && Contains("int32"));
  // Worker 0 alone creates one more variable first: the variables must not pair up shifted.
  m = invalid_argument_of([&] {
    if (rank == 0)
      tf::Variable(tf::fill({3}, tf::Tensor(7.0f)), "only_on_worker_zero");
    else
      tf::Variable(tf::fill({3}, tf::Tensor(1.0f)), "everywhere");
  });
  CHECK_THAT(m, Contains("only_on_worker_zero") && Contains("everywhere"));
  // Keras' automatic numbering may differ between the workers (worker 0 named one more Dense;
  // its weights, created lazily, never exist): the same layer is still the same variable.
  std::optional<tf::keras::layers::Dense> extra;
  if (rank == 0) extra.emplace(2);
  auto numbered = tf::keras::Sequential({tf::keras::layers::Dense(2)});
  (void)numbered(tf::ones({1, 3}), false);
  const auto kernels = gather_floats(numbered.trainable_variables()[0].value());
  for (const auto& k : kernels) CHECK(k == kernels[0]);
  // The workers agree again afterwards.
  tf::Variable v(tf::random::normal({3}), "after");
  const auto all = gather_floats(v.value());
  for (const auto& w : all) CHECK(w == all[0]);
}

TEST_CASE("multi-worker: reduce with different ops on the workers is an error on every worker",
          "[distribute][mpi]") {
  using Catch::Matchers::Contains;
  auto& s = strategy();
  if (s.num_workers() < 2) return;  // needs a second worker to disagree with
  const auto ones = s.run([] { return tf::constant(1.0f); });
  const std::string m = invalid_argument_of([&] {
    (void)s.reduce(s.worker_index() == 0 ? ds::ReduceOp::SUM : ds::ReduceOp::MEAN, ones);
  });
  CHECK_THAT(m, Contains("SUM") && Contains("MEAN"));
  // The workers agree again afterwards.
  tf::testing::check_values(s.reduce(ds::ReduceOp::MEAN, ones), {1.0}, 0, 0);
}

TEST_CASE("multi-worker: a worker that skips an all-reduce is an error on every worker at once",
          "[distribute][mpi]") {
  using Catch::Matchers::Contains;
  if (strategy().num_workers() < 2) return;  // needs a second worker to disagree with
  // A strategy of its own: its workers stay out of step afterwards. A timeout far above the
  // test's expected time, so that an error by timeout fails the check below.
  ds::MultiWorkerMirroredStrategy s(ds::experimental::CommunicationOptions{.timeout_seconds = 20});
  const int rank = s.worker_index();
  const auto start = std::chrono::steady_clock::now();
  int raised_at = -1;
  std::string message;
  for (int step = 0; step < 3 && raised_at < 0; ++step) {
    try {
      auto r = s.run([&]() -> tf::Tensor {
        if (rank == 1 && step == 1) return tf::constant(-1.0f);  // skips this step's all-reduce
        return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM,
                                                     tf::constant(static_cast<float>(step)));
      });
      // Never a sum that mixes two steps.
      if (!(rank == 1 && step == 1))
        CHECK(r[0].item<float>() == static_cast<float>(step * s.num_workers()));
    } catch (const tf::InvalidArgumentError& e) {
      raised_at = step;
      message = e.what();
    }
  }
  // Worker 1's third step meets the others' second: both raise there, without waiting.
  CHECK(raised_at == (rank == 1 ? 2 : 1));
  CHECK_THAT(message, Contains("strategy.run 2") && Contains("strategy.run 3"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 10);
}

TEST_CASE("multi-worker: integer all-reduces wrap around instead of overflowing",
          "[distribute][mpi]") {
  auto& s = strategy();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  auto out = s.run([] {
    return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::constant({kMax, 1}));
  });
  const auto replicas = static_cast<uint32_t>(s.num_replicas_in_sync());
  const auto want = static_cast<int32_t>(static_cast<uint32_t>(kMax) * replicas);
  CHECK(out[0].numpy<int32_t>() == std::vector<int32_t>{want, static_cast<int32_t>(replicas)});
}

TEST_CASE("multi-worker: keras fit under the strategy's scope matches one process",
          "[distribute][mpi][keras]") {
  namespace K = tf::keras;
  auto& s = strategy();
  // Three seeded Gaussian blobs (the same in every process) in four batches of 24. Keras averages
  // each replica's loss over its own rows and divides by the replicas (as TF's Keras does), which
  // equals the global mean only when the replicas get equal shares: 24 rows split evenly over 1,
  // 2, 3, 4, 6 or 8 workers.
  const int64_t n = 96;
  const auto noise = tf::testing::random_values(static_cast<size_t>(2 * n), -0.6, 0.6, 10);
  std::vector<float> xs(static_cast<size_t>(2 * n));
  std::vector<int32_t> ys(static_cast<size_t>(n));
  const float cx[3] = {-2.f, 2.f, 0.f}, cy[3] = {-1.f, -1.f, 2.f};
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const int c = static_cast<int>(i % 3);
    ys[i] = c;
    xs[2 * i] = cx[c] + static_cast<float>(noise[2 * i]);
    xs[2 * i + 1] = cy[c] + static_cast<float>(noise[2 * i + 1]);
  }
  const tf::Tensor x = tf::constant(xs, {n, 2}), y = tf::constant(ys, {n});
  auto make = [] { return K::Sequential({K::layers::Dense(16, "relu"), K::layers::Dense(3)}); };
  auto train = [&](K::Sequential& model) {
    model.compile(K::optimizers::SGD(0.1, 0.9), K::losses::SparseCategoricalCrossentropy(true),
                  {"accuracy"});
    return model.fit(x, y, {.epochs = 3, .batch_size = 24, .verbose = 0, .shuffle = false});
  };
  tf::random::set_seed(21);
  auto single = make();
  const K::History h1 = train(single);
  tf::random::set_seed(21);
  std::optional<K::Sequential> distributed;
  K::History h2;
  {
    auto scope = s.scope();
    distributed.emplace(make());
    h2 = train(*distributed);
  }
  // The logged loss and accuracy cover every worker's share of the batches, as TF's do.
  for (size_t e = 0; e < 3; ++e) {
    CHECK(h2.history.at("loss")[e] == Approx(h1.history.at("loss")[e]).epsilon(1e-4));
    CHECK(h2.history.at("accuracy")[e] == Approx(h1.history.at("accuracy")[e]).margin(1e-6));
  }
  const auto a = single.get_weights(), b = distributed->get_weights();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    tf::testing::check_close(a[i], b[i], 1e-4, 1e-5);
    const auto all = gather_floats(b[i]);
    for (const auto& w : all) CHECK(w == all[0]);
  }
}

TEST_CASE("multi-worker: fit shuffles alike on every worker", "[distribute][mpi][keras]") {
  namespace K = tf::keras;
  auto& s = strategy();
  // Each worker with its own global seed: fit's shuffle must still give every worker the same
  // order (each keeps its share of the same global batches), in every epoch.
  tf::random::set_seed(1000 + s.worker_index());
  // w[i] moves only when row i (one-hot) is trained on: rows trained on once per epoch all
  // end equal, a row trained twice or never stands out. Global batches split evenly over the
  // replicas (each averages its own rows' loss).
  const int batch = 2 * s.num_replicas_in_sync();
  const int64_t n = 4 * batch;
  std::optional<K::Sequential> model;
  {
    auto scope = s.scope();
    model.emplace(K::Sequential({K::layers::Dense(1, "", false, "zeros")}));
    model->compile(K::optimizers::SGD(0.5), K::losses::MeanSquaredError());
    model->fit(tf::eye(n), tf::ones({n, 1}), {.epochs = 2, .batch_size = batch, .verbose = 0});
  }
  const tf::Tensor w = model->get_weights()[0];
  const auto values = w.numpy<float>();
  for (float v : values) {
    CHECK(v != 0.0f);
    CHECK(v == values[0]);
  }
  const auto all = gather_floats(w);
  for (const auto& other : all) CHECK(other == all[0]);
  tf::random::set_seed(21);
}

TEST_CASE(
    "multi-worker: BackupAndRestore is written by worker 0 alone and deleted when every "
    "worker is done",
    "[distribute][mpi][keras]") {
  namespace K = tf::keras;
  namespace fs = std::filesystem;
  auto& s = strategy();
  const int rank = s.worker_index();
  const fs::path dir = job_folder("backup");
  const fs::path temp = dir / ("workertemp_" + std::to_string(rank));
  const tf::Tensor x = tf::random::normal({24, 8}, 0, 1, tf::float32, 3);
  const tf::Tensor y = tf::zeros({24}, tf::int32);
  std::optional<K::Sequential> model;
  {
    auto scope = s.scope();
    model.emplace(K::Sequential({K::layers::Dense(16, "relu"), K::layers::Dense(3)}));
    model->compile(K::optimizers::Adam(1e-3), K::losses::SparseCategoricalCrossentropy(true));
  }
  // Worker 0 saves its first backup a second late: another worker's save must not have written
  // backup_dir meanwhile, and must have deleted its own temporary folder.
  AtEpochEnd late([&](int epoch) {
    if (rank == 0 && epoch == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  });
  AtEpochEnd look([&](int epoch) {
    CHECK_FALSE(fs::exists(temp));
    if (rank == 0)
      CHECK(fs::exists(dir / "checkpoint"));
    else if (epoch == 0)
      CHECK_FALSE(fs::exists(dir / "checkpoint"));
  });
  model->fit(x, y,
             {.epochs = 2,
              .batch_size = 12,
              .callbacks = {late, K::callbacks::BackupAndRestore(dir.string()), look},
              .verbose = 0,
              .shuffle = false});
  // Gone on every worker once all are done (worker 0 deletes it after every worker's last save).
  (void)job_folder("sync");
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("multi-worker: BackupAndRestore resumes every worker from worker 0's backup",
          "[distribute][mpi][keras]") {
  namespace K = tf::keras;
  namespace fs = std::filesystem;
  auto& s = strategy();
  const int rank = s.worker_index();
  const fs::path dir = job_folder("resume");
  const tf::Tensor x = tf::random::normal({24, 8}, 0, 1, tf::float32, 4);
  const tf::Tensor y = tf::zeros({24}, tf::int32);
  std::optional<K::Sequential> model;
  {
    auto scope = s.scope();
    model.emplace(K::Sequential({K::layers::Dense(16, "relu"), K::layers::Dense(3)}));
    model->compile(K::optimizers::SGD(0.1), K::losses::SparseCategoricalCrossentropy(true));
  }
  std::vector<int> epochs;
  auto fit = [&](const fs::path& backup, std::optional<int> fail_after) {
    epochs.clear();
    AtEpochEnd note([&](int epoch) {
      epochs.push_back(epoch);
      if (fail_after && epoch == *fail_after) throw std::runtime_error("interrupted");
    });
    model->fit(x, y,
               {.epochs = 4,
                .batch_size = 12,
                .callbacks = {K::callbacks::BackupAndRestore(backup.string()), note},
                .verbose = 0,
                .shuffle = false});
  };
  // Interrupted after epoch 1: the backup records it.
  CHECK_THROWS_WITH(fit(dir, 1), "interrupted");
  if (s.num_workers() > 1) {
    // A worker that does not see worker 0's backup (another folder here; another machine's disk
    // in a job) would start again from epoch 0: every worker raises instead.
    const fs::path elsewhere = job_folder("elsewhere");
    TF_REQUIRE_THROWS_CONTAINING(fit(rank == 0 ? dir : elsewhere, std::nullopt),
                                 tf::FailedPreconditionError, "would resume from different epochs");
    fs::remove_all(elsewhere);
  }
  // Every worker resumes after epoch 1.
  fit(dir, std::nullopt);
  CHECK(epochs == std::vector<int>{2, 3});
  (void)job_folder("sync");
  CHECK_FALSE(fs::exists(dir));
}

// ---- hidden: run by run_failure.cmake; each ends the job ----

TEST_CASE("multi-worker failure: a stuck worker", "[.failure_stuck]") {
  ds::MultiWorkerMirroredStrategy s(ds::experimental::CommunicationOptions{.timeout_seconds = 2});
  REQUIRE(s.num_workers() >= 2);
  if (s.worker_index() == 1) std::this_thread::sleep_for(std::chrono::seconds(5));
  const auto waited = seconds_until_deadline(s.worker_index(), [&] {
    s.run([] { return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({4})); });
  });
  if (!waited) FAIL("the all-reduce completed without the stuck worker");
  CHECK(*waited < 10);
}

TEST_CASE("multi-worker failure: a stuck worker among three", "[.failure_ring]") {
  // Worker 1 is stuck; worker 2 waits for it and worker 0 for worker 2 (the ring), long enough
  // that worker 0 times out first and ends the job. Its error must not call worker 2, alive and
  // itself waiting, the culprit.
  const int rank = [] {
    ds::MultiWorkerMirroredStrategy probe(
        ds::experimental::CommunicationOptions{.timeout_seconds = 60});
    return probe.worker_index();
  }();
  ds::MultiWorkerMirroredStrategy s(
      ds::experimental::CommunicationOptions{.timeout_seconds = rank == 0 ? 2.0 : 30.0});
  REQUIRE(s.num_workers() == 3);
  if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(40));
  const auto waited = seconds_until_deadline(rank, [&] {
    s.run([] { return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({4})); });
  });
  if (!waited) FAIL("the all-reduce completed without the stuck worker");
}

TEST_CASE("multi-worker failure: a worker that never creates its strategy", "[.failure_absent]") {
  // Creating a strategy is collective (its communicator). Both workers create a first one (MPI's
  // start-up, itself without a deadline, is behind them then); worker 1 comes 5 s late to the
  // second.
  ds::MultiWorkerMirroredStrategy first(
      ds::experimental::CommunicationOptions{.timeout_seconds = 2});
  REQUIRE(first.num_workers() >= 2);
  const int rank = first.worker_index();
  if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(5));
  const auto waited = seconds_until_deadline(rank, [] {
    ds::MultiWorkerMirroredStrategy second(
        ds::experimental::CommunicationOptions{.timeout_seconds = 2});
  });
  if (!waited && rank == 0) FAIL("the strategy was created without worker 1");
  if (waited) CHECK(*waited < 10);
}

TEST_CASE("multi-worker failure: a worker's step raises", "[.failure_raises]") {
  // A long timeout: the other worker must learn of the failure from worker 1 itself.
  ds::MultiWorkerMirroredStrategy s(ds::experimental::CommunicationOptions{.timeout_seconds = 60});
  REQUIRE(s.num_workers() >= 2);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 5; ++step) {
    try {
      s.run([&] {
        if (step == 2 && s.worker_index() == 1) throw std::runtime_error("boom in worker 1's step");
        return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({4}));
      });
    } catch (const std::exception& e) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "worker %d raised at step %d after %.1f s: %s\n", s.worker_index(),
                   step, waited, e.what());
      CHECK(waited < 20);
      return;
    }
  }
  FAIL("no worker saw the failure");
}

TEST_CASE("multi-worker failure: a worker dies", "[.failure_dies]") {
  ds::MultiWorkerMirroredStrategy s(ds::experimental::CommunicationOptions{.timeout_seconds = 20});
  REQUIRE(s.num_workers() >= 2);
  for (int step = 0; step < 1000; ++step) {
    if (step == 3 && s.worker_index() == 1) ::raise(SIGKILL);
    try {
      s.run([] { return ds::get_replica_context()->all_reduce(ds::ReduceOp::SUM, tf::ones({4})); });
    } catch (const tf::Error& e) {
      std::fprintf(stderr, "worker %d raised at step %d: %s\n", s.worker_index(), step, e.what());
      return;
    }
  }
}
