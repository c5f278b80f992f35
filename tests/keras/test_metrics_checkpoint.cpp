// Checkpoints of the metrics whose state Keras builds at the first update (FBetaScore, F1Score,
// R2Score, AUC with multi_label): restored into a fresh metric that has not built it, the state is
// built from the saved shapes (as TF's deferred restoration), so result() and later updates
// continue where the saved metric stopped; saved shapes that do not fit are clear errors.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/checkpoint.h"
#include "keras/metrics.h"
#include "ops/factory.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace metrics = tapeflow::keras::metrics;
namespace fs = std::filesystem;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

// A fresh directory under the system temp dir, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("tapeflow_metric_ckpt_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The first batches of tests/keras/test_metrics_fscore.cpp (multi-label targets and scores).
tf::Tensor yt1() {
  return tf::constant({{1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}, {1.f, 0.f, 1.f}});
}
tf::Tensor yp1() {
  return tf::constant(
      {{0.7f, 0.2f, 0.1f}, {0.3f, 0.3f, 0.4f}, {0.1f, 0.5f, 0.6f}, {0.6f, 0.1f, 0.6f}});
}
tf::Tensor yt2() {
  return tf::constant(
      {{0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}, {1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 0.f}});
}
tf::Tensor yp2() {
  return tf::constant({{0.2f, 0.6f, 0.2f},
                       {0.4f, 0.45f, 0.15f},
                       {0.9f, 0.05f, 0.05f},
                       {0.f, 0.f, 0.f},
                       {0.3f, 0.3f, 0.2f}});
}

// Writes {"m": saved} to a file of `dir` and restores it into {"m": fresh}.
tf::train::CheckpointLoadStatus round_trip(const TempDir& dir, const metrics::Metric& saved,
                                           const metrics::Metric& fresh) {
  const std::string path = tf::train::Checkpoint({{"m", saved}}).write(dir / "metric");
  return tf::train::Checkpoint({{"m", fresh}}).restore(path);
}

void check_same_state(const metrics::Metric& got, const metrics::Metric& want) {
  const auto g = got.tracked_variables(), w = want.tracked_variables();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    CHECK(g[i].first == w[i].first);
    CHECK(g[i].second.shape() == w[i].second.shape());
    check_close(g[i].second.value(), w[i].second.value(), 0, 0);
  }
}

}  // namespace

TEST_CASE("metric checkpoint: lazily built F-scores and R2 restore into fresh metrics",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    TempDir dir;
    // keras.metrics.F1Score(average="macro") without weights: 0.599999964 after the first
    // batch, 0.619047582 after both (tests/keras/test_metrics_fscore.cpp).
    metrics::F1Score f1("macro");
    f1.update_state(yt1(), yp1());
    metrics::F1Score fresh("macro");
    REQUIRE(fresh.variables().empty());
    const auto status = round_trip(dir, f1, fresh);
    status.assert_consumed();
    CHECK(status.deferred.empty());
    check_same_state(fresh, f1);
    check_values(fresh.result(), {0.599999964}, 2e-6);
    fresh.update_state(yt2(), yp2());
    check_values(fresh.result(), {0.619047582}, 2e-6);
    // The restored state fixes the class count as the first update does.
    TF_REQUIRE_THROWS_CONTAINING(fresh.update_state(tf::ones({2, 4}), tf::ones({2, 4})),
                                 tf::InvalidArgumentError,
                                 "F1Score 'f1_score' was built for y_pred of shape "
                                 "(batch_size, 3)");

    // "micro" keeps scalars, which do not tell the class count: the next update fixes it.
    metrics::FBetaScore micro("micro", 2.0, 0.5);
    micro.update_state(yt1(), yp1());
    metrics::FBetaScore micro_fresh("micro", 2.0, 0.5);
    round_trip(dir, micro, micro_fresh).assert_consumed();
    check_same_state(micro_fresh, micro);
    check_close(micro_fresh.result(), micro.result(), 0, 0);
    micro.update_state(yt2(), yp2());
    micro_fresh.update_state(yt2(), yp2());
    check_close(micro_fresh.result(), micro.result(), 0, 0);
    TF_REQUIRE_THROWS_CONTAINING(micro_fresh.update_state(tf::ones({2, 4}), tf::ones({2, 4})),
                                 tf::InvalidArgumentError, "(batch_size, 3)");

    // R2Score: num_samples is made by the constructor, the per-output sums by the build.
    metrics::R2Score r2(std::nullopt, 2);
    r2.update_state(yt1(), yp1());
    metrics::R2Score r2_fresh(std::nullopt, 2);
    REQUIRE(r2_fresh.variables().size() == 1);
    round_trip(dir, r2, r2_fresh).assert_consumed();
    check_same_state(r2_fresh, r2);
    check_close(r2_fresh.result(), r2.result(), 0, 0);
    r2.update_state(yt2(), yp2());
    r2_fresh.update_state(yt2(), yp2());
    check_close(r2_fresh.result(), r2.result(), 0, 0);
  }
}

TEST_CASE("metric checkpoint: a lazily built multi_label AUC restores into a fresh one",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    TempDir dir;
    metrics::AUCOptions o;
    o.num_thresholds = 7;
    o.curve = "PR";
    o.multi_label = true;
    o.label_weights = {1.0, 2.0, 0.5};
    metrics::AUC auc(o);
    auc.update_state(yt1(), yp1());
    metrics::AUC fresh(o);
    TF_REQUIRE_THROWS_CONTAINING(fresh.result(), tf::FailedPreconditionError,
                                 "multi_label builds its state at the first update_state");
    round_trip(dir, auc, fresh).assert_consumed();
    check_same_state(fresh, auc);
    CHECK(fresh.variables()[0].shape() == tf::TensorShape({7, 3}));
    check_close(fresh.result(), auc.result(), 0, 0);
    // A traced update continues from the restored state as the eager one does.
    auto step = tf::function([&](const tf::Tensor& y, const tf::Tensor& p) {
      fresh.update_state(y, p);
      return fresh.result();
    });
    step(yt2(), yp2());
    auc.update_state(yt2(), yp2());
    check_close(fresh.result(), auc.result(), 1e-6, 1e-7);
    TF_REQUIRE_THROWS_CONTAINING(fresh.update_state(tf::ones({2, 2}), tf::ones({2, 2})),
                                 tf::InvalidArgumentError, "3 label_weights");
  }
}

TEST_CASE("metric checkpoint: saved state that does not fit the metric is a clear error",
          "[keras][cpu]") {
  TempDir dir;
  metrics::F1Score macro("macro");
  macro.update_state(yt1(), yp1());
  const std::string path = tf::train::Checkpoint({{"m", macro}}).write(dir / "macro");
  // Scalar micro counts cannot take (3,) ones.
  metrics::F1Score micro("micro");
  tf::testing::require_error(
      [&] {
        tf::train::Checkpoint({{"m", micro}}).restore(path);
      },
      {"f1_score", "macro.safetensors", "true_positives", "(3,)", "with shape ()"});
  CHECK(micro.variables().empty());  // left unbuilt

  metrics::AUCOptions o;
  o.multi_label = true;
  o.num_thresholds = 5;
  metrics::AUC auc(o);
  auc.update_state(yt1(), yp1());
  const std::string auc_path = tf::train::Checkpoint({{"m", auc}}).write(dir / "auc");
  // Another num_thresholds, and label_weights for another number of labels.
  o.num_thresholds = 6;
  metrics::AUC other(o);
  tf::testing::require_error(
      [&] {
        tf::train::Checkpoint({{"m", other}}).restore(auc_path);
      },
      {"auc", "true_positives", "(5, 3)", "(6, 3)"});
  o.num_thresholds = 5;
  o.label_weights = {1.0, 1.0};
  metrics::AUC weighted(o);
  tf::testing::require_error(
      [&] {
        tf::train::Checkpoint({{"m", weighted}}).restore(auc_path);
      },
      {"auc", "2 label_weights", "3 labels"});
  CHECK(weighted.variables().empty());

  // A file without the metric's state leaves it unbuilt (nothing to restore, nothing missing).
  tf::Variable step(tf::constant(int64_t{3}), "step");
  const std::string other_path = tf::train::Checkpoint({{"step", step}}).write(dir / "step");
  metrics::F1Score unbuilt("macro");
  tf::train::Checkpoint({{"m", unbuilt}}).restore(other_path).assert_existing_objects_matched();
  CHECK(unbuilt.variables().empty());
  TF_REQUIRE_THROWS_CONTAINING(unbuilt.result(), tf::FailedPreconditionError,
                               "has no state before its first update_state");
}
