// tf::train::Checkpoint and CheckpointManager, stored as safetensors files (keras/safetensors.h).
//
//   tf::train::Checkpoint ckpt({{"model", model}, {"optimizer", optimizer}});
//   tf::train::CheckpointManager manager(ckpt, "/tmp/run", /*max_to_keep=*/3);
//   manager.restore_or_initialize();       // the latest checkpoint, if any
//   ...  manager.save();                   // "/tmp/run/ckpt-1", "-2", ... (oldest deleted)
//
// A checkpoint names each variable "<object key>/<tracked name>" ("model/dense/kernel",
// "optimizer/iterations", "optimizer/dense/kernel/m") plus its own "save_counter". save(prefix)
// writes "<prefix>-<n>.safetensors" and returns "<prefix>-<n>" (TF's path without extension);
// restore() takes that path with or without the extension. Files are written atomically (see
// safetensors.h), the manager's index file ("checkpoint", TF's text layout) too, and old
// checkpoints are deleted only after the index stops naming them: a process killed at any point
// leaves the previous checkpoint loadable. Mirrored variables save their first copy and restore
// every copy. Values whose variables do not exist yet wait for them (TF's deferred restoration):
// optimizer slots are created with the saved values at the first apply_gradients, and the
// weights of a layer or model that is not built yet are assigned as soon as it builds them,
// before its first call computes anything. A metric whose state is built at its first update
// (F1Score, R2Score, AUC with multi_label) builds it from the saved shapes at restore().
//
// Checkpoint and CheckpointManager are shared handles; use one from one thread at a time.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "keras/trackable.h"

namespace tapeflow::train {

// What a checkpoint holds under a key: a Trackable handle (copied; layers, models, optimizers and
// metrics are shared handles, so the copy refers to the same state), a shared_ptr to one, a
// std::ref to one that outlives the checkpoint, or a single Variable.
class TrackableRef {
 public:
  template <class T>
    requires std::derived_from<T, keras::Trackable> && std::copy_constructible<T>
  TrackableRef(const T& object)  // NOLINT: implicit, for brace lists
      : ptr_(std::make_shared<T>(object)) {}
  template <class T>
    requires std::derived_from<T, keras::Trackable>
  TrackableRef(std::shared_ptr<T> object)  // NOLINT
      : ptr_(std::move(object)) {}
  template <class T>
    requires std::derived_from<T, keras::Trackable>
  TrackableRef(std::reference_wrapper<T> object)  // NOLINT
      : ptr_(std::shared_ptr<keras::Trackable>(std::shared_ptr<void>(), &object.get())) {}
  TrackableRef(const Variable& variable);  // NOLINT

  const keras::Trackable& get() const { return *ptr_; }

 private:
  std::shared_ptr<keras::Trackable> ptr_;
};

namespace detail {
struct DeferredValues;  // the values of one restore() that wait for layers to build
}

// What restore() found (TF's CheckpointLoadStatus).
struct CheckpointLoadStatus {
  std::string path;
  std::vector<std::string> missing;  // variables of the objects absent from the file
  // Tensors of the file that nothing took. Optimizer slots deferred until the optimizer creates
  // them count as taken; slots it can never create (an optimizer without such slots, slots of a
  // variable the checkpoint's objects do not have) are unused.
  std::vector<std::string> unused;
  // Tensors for the weights of layers and models that were not built (their optimizer slots
  // included): each is assigned when the layer that creates its weight is built. Those that the
  // built model turns out not to have keep waiting (a warning names them once).
  std::vector<std::string> deferred;
  // The names of `deferred` that have not reached their variables yet (now, not at restore).
  std::vector<std::string> waiting() const;
  // FailedPreconditionError unless every variable was restored, every tensor used and no
  // deferred value is still waiting (as TF's, it fails until the layers are built).
  const CheckpointLoadStatus& assert_consumed() const;
  // FailedPreconditionError unless every existing variable was restored.
  const CheckpointLoadStatus& assert_existing_objects_matched() const;

  std::shared_ptr<detail::DeferredValues> deferred_state;  // shared with the waiting layers
};

class Checkpoint {
 public:
  explicit Checkpoint(std::vector<std::pair<std::string, TrackableRef>> objects);

  // Writes exactly `file_prefix` (+ ".safetensors" unless given); returns file_prefix.
  std::string write(const std::string& file_prefix) const;
  // save_counter += 1, then writes "<file_prefix>-<save_counter>"; returns that prefix.
  std::string save(const std::string& file_prefix);
  // Restores every variable present in the file (and save_counter); see CheckpointLoadStatus.
  // Values for variables that do not exist yet wait for them: an optimizer's slots, and the
  // weights of a layer or model that is not built (listed in `deferred`).
  CheckpointLoadStatus restore(const std::string& save_path);
  CheckpointLoadStatus read(const std::string& save_path) { return restore(save_path); }

  // The number of save() calls (restored with the checkpoint), an int64 variable.
  Variable save_counter() const;
  // Every (checkpoint name, variable) pair, save_counter first.
  std::vector<std::pair<std::string, Variable>> variables() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

class CheckpointManager {
 public:
  // Creates `directory` if needed and reads its index, so max_to_keep continues across
  // processes; numbering follows save_counter, which continues only once the latest checkpoint
  // is restored (restore_or_initialize(); TF's manager behaves the same). Temporary files left
  // by killed writers of this host (dead pids) are removed, never another host's.
  // max_to_keep: nullopt keeps every checkpoint. A checkpoint_name with a folder ("sub/ckpt")
  // writes "<directory>/sub/ckpt-<n>"; the index records paths relative to the directory.
  CheckpointManager(Checkpoint checkpoint, std::string directory,
                    std::optional<int> max_to_keep = 5, std::string checkpoint_name = "ckpt");

  // Writes "<directory>/<name>-<n>" (n = checkpoint_number, else the incremented save_counter),
  // records it in the index and deletes the checkpoints beyond max_to_keep. Returns the path.
  std::string save(std::optional<int64_t> checkpoint_number = std::nullopt);
  // The newest checkpoint's path, or "" when there is none.
  std::string latest_checkpoint() const;
  // The kept checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;
  const std::string& directory() const;
  // Restores the latest checkpoint and returns its path, or returns "" when there is none.
  std::string restore_or_initialize();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The newest checkpoint recorded in `directory`'s index whose file exists, or "".
std::string latest_checkpoint(const std::string& directory);

}  // namespace tapeflow::train
