#include "keras/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/check.h"
#include "core/context.h"
#include "core/file.h"
#include "core/log.h"
#include "keras/layers.h"
#include "keras/metrics.h"
#include "keras/metrics_impl.h"
#include "keras/optimizers.h"
#include "keras/safetensors.h"
#include "ops/factory.h"

namespace tapeflow::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kExt = ".safetensors";
constexpr const char* kIndex = "checkpoint";

class VariableTrackable final : public keras::Trackable {
 public:
  explicit VariableTrackable(Variable v) : v_(std::move(v)) {}
  std::vector<std::pair<std::string, Variable>> tracked_variables() const override {
    return {{"", v_}};
  }

 private:
  Variable v_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
std::string file_of(const std::string& prefix) {
  return ends_with(prefix, kExt) ? prefix : prefix + kExt;
}
std::string prefix_of(const std::string& path) {
  return ends_with(path, kExt) ? path.substr(0, path.size() - std::string(kExt).size()) : path;
}

// Whether `path` exists; an error inspecting it (permissions, a name too long) reads as absent.
bool file_present(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec) && !ec;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// TF's index layout: model_checkpoint_path: "ckpt-3" then all_model_checkpoint_paths lines.
std::vector<std::string> read_index(const std::string& directory, const char* op) {
  const fs::path index = fs::path(directory) / kIndex;
  // Checked first: opening a named pipe would wait for a writer.
  std::error_code ec;
  const auto status = fs::status(index, ec);
  if (!fs::exists(status)) return {};
  TF_CHECK_ARG(fs::is_regular_file(status), op,
               "the checkpoint index '{}' is not a regular file (a directory, named pipe, device "
               "or socket)",
               index.string());
  std::ifstream in(index);
  std::vector<std::string> all;
  std::string latest, line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    const auto q1 = line.find('"');
    const auto q2 = line.rfind('"');
    if (colon == std::string::npos || q1 == std::string::npos || q2 <= q1) continue;
    const std::string key = line.substr(0, colon);
    std::string value = line.substr(q1 + 1, q2 - q1 - 1);
    if (!value.empty() && fs::path(value).is_relative()) value = (fs::path(directory) / value).string();
    if (key == "model_checkpoint_path") latest = value;
    if (key == "all_model_checkpoint_paths") all.push_back(value);
  }
  if (!latest.empty() && std::find(all.begin(), all.end(), latest) == all.end())
    all.push_back(latest);
  return all;
}

void write_index(const std::string& directory, const std::vector<std::string>& paths) {
  std::ostringstream out;
  // Relative to the directory, as TF's relpath: "sub/ckpt-3" for a checkpoint_name with a folder
  // (the file name alone named a file that read_index then looked for in the directory itself).
  auto rel = [&](const std::string& p) {
    const fs::path r = fs::path(p).lexically_relative(directory);
    return r.empty() ? p : r.string();
  };
  out << "model_checkpoint_path: " << quoted(paths.empty() ? "" : rel(paths.back())) << "\n";
  for (const auto& p : paths) out << "all_model_checkpoint_paths: " << quoted(rel(p)) << "\n";
  const std::string text = out.str();
  keras::safetensors::detail::write_atomically((fs::path(directory) / kIndex).string(),
                                               {{text.data(), text.size()}});
}

// Removes the temporary files of writers of this host that no longer exist (never another
// host's: workers on several machines may share the folder).
void remove_stale_temporaries(const std::string& directory) {
  std::error_code ec;
  // Incremented with an error_code: a range-for's ++ would throw filesystem_error.
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    if (tapeflow::detail::is_stale_temporary(entry.path().filename().string())) {
      TF_LOG_INFO("CheckpointManager: removing '{}' left by a writer that died", entry.path().string());
      std::error_code remove_ec;
      fs::remove(entry.path(), remove_ec);
    }
  }
}

}  // namespace

namespace detail {
struct DeferredValues {
  std::mutex mu;
  std::set<std::string> waiting;  // guarded by mu
  void done(const std::string& name) {
    std::lock_guard lock(mu);
    waiting.erase(name);
  }
};
}  // namespace detail

TrackableRef::TrackableRef(const Variable& variable)
    : ptr_(std::make_shared<VariableTrackable>(variable)) {}

std::vector<std::string> CheckpointLoadStatus::waiting() const {
  if (!deferred_state) return {};
  std::lock_guard lock(deferred_state->mu);
  return {deferred_state->waiting.begin(), deferred_state->waiting.end()};
}

const CheckpointLoadStatus& CheckpointLoadStatus::assert_consumed() const {
  assert_existing_objects_matched();
  TF_CHECK_T(FailedPreconditionError, unused.empty(), "Checkpoint",
             "'{}' holds values that nothing restored: {}", path, fmt::join(unused, ", "));
  const auto still = waiting();
  TF_CHECK_T(FailedPreconditionError, still.empty(), "Checkpoint",
             "values of '{}' still wait for variables that do not exist: {} (a layer or model "
             "that is not built yet restores them when it builds)",
             path, fmt::join(still, ", "));
  return *this;
}

const CheckpointLoadStatus& CheckpointLoadStatus::assert_existing_objects_matched() const {
  TF_CHECK_T(FailedPreconditionError, missing.empty(), "Checkpoint",
             "'{}' has no value for: {}", path, fmt::join(missing, ", "));
  return *this;
}

// ---- Checkpoint ----

struct Checkpoint::Impl {
  std::vector<std::pair<std::string, TrackableRef>> objects;
  Variable save_counter;
};

Checkpoint::Checkpoint(std::vector<std::pair<std::string, TrackableRef>> objects)
    : impl_(std::make_shared<Impl>()) {
  std::set<std::string> keys;
  for (const auto& [key, ref] : objects) {
    TF_CHECK_ARG(!key.empty() && key != "save_counter" && key.find('/') == std::string::npos,
                 "Checkpoint", "invalid object key '{}' (non-empty, no '/', not save_counter)",
                 key);
    TF_CHECK_ARG(keys.insert(key).second, "Checkpoint", "the key '{}' is used twice", key);
  }
  impl_->objects = std::move(objects);
  // One plain counter, even under a strategy's scope.
  tapeflow::detail::MirrorVariablesScope no_mirror(std::vector<Device>{});
  impl_->save_counter = Variable(constant(Tensor(int64_t{0}), int64), "save_counter", false);
}

Variable Checkpoint::save_counter() const { return impl_->save_counter; }

namespace {

const keras::optimizers::Optimizer* as_optimizer(const keras::Trackable& t) {
  return dynamic_cast<const keras::optimizers::Optimizer*>(&t);
}

// The variables of the objects that are not optimizers, by their path in the checkpoint
// ("model/dense/kernel"): what an optimizer's slots are named after.
std::vector<std::pair<std::string, Variable>> slot_owner_paths(
    const std::vector<std::pair<std::string, TrackableRef>>& objects) {
  std::vector<std::pair<std::string, Variable>> out;
  for (const auto& [key, ref] : objects) {
    if (as_optimizer(ref.get())) continue;
    for (auto& [name, v] : ref.get().tracked_variables())
      out.emplace_back(name.empty() ? key : key + "/" + name, v);
  }
  return out;
}

// The mirrored state variables of the metrics among `objects`: result() sums their replica
// copies (TF's SyncOnRead SUM), so a checkpoint holds that sum, and a restore puts it in the
// first copy and zeroes the others (as a cross-replica update_state writes the first copy only).
std::set<const void*> summed_metric_state(
    const std::vector<std::pair<std::string, TrackableRef>>& objects) {
  std::set<const void*> out;
  for (const auto& [key, ref] : objects)
    if (const auto* metric = dynamic_cast<const keras::metrics::Metric*>(&ref.get());
        metric && metric->defined())
      for (const auto& [name, v] : metric->tracked_variables())
        if (v.is_mirrored()) out.insert(v.handle_id());
  return out;
}

}  // namespace

std::vector<std::pair<std::string, Variable>> Checkpoint::variables() const {
  std::vector<std::pair<std::string, Variable>> out{{"save_counter", impl_->save_counter}};
  std::set<std::string> seen{"save_counter"};
  // The paths of the other objects' variables: an optimizer's slots are named after the path of
  // their variable ("optimizer/model/dense/kernel/m", as TF's object graph keys them), not after
  // its process-wide name, which depends on what else the process made before.
  std::unordered_map<const void*, std::string> path_of;
  for (auto& [path, v] : slot_owner_paths(impl_->objects)) path_of.emplace(v.handle_id(), path);
  for (const auto& [key, ref] : impl_->objects) {
    std::unordered_map<const void*, std::string> slot_path;  // slot variable -> its name
    if (const auto* opt = as_optimizer(ref.get())) {
      const auto names = opt->slot_names();
      for (const auto& [owner, slots] : opt->slots())
        if (auto it = path_of.find(owner.handle_id()); it != path_of.end())
          for (size_t i = 0; i < slots.size() && i < names.size(); ++i)
            slot_path.emplace(slots[i].handle_id(), it->second + "/" + names[i]);
    }
    for (auto& [name, v] : ref.get().tracked_variables()) {
      auto sp = slot_path.find(v.handle_id());
      const std::string& local = sp != slot_path.end() ? sp->second : name;
      std::string full = local.empty() ? key : key + "/" + local;
      TF_CHECK_ARG(seen.insert(full).second, "Checkpoint",
                   "two variables are named '{}'; tracked names must be unique", full);
      out.emplace_back(std::move(full), v);
    }
  }
  return out;
}

std::string Checkpoint::write(const std::string& file_prefix) const {
  const std::string path = file_of(file_prefix);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    TF_CHECK_T(FailedPreconditionError, !ec, "Checkpoint",
               "cannot create the directory '{}' for '{}': {}", parent.string(), path,
               ec.message());
  }
  // Mirrored metric state is saved as its total over the replica copies (TF saves a SyncOnRead
  // SUM variable's aggregated value), everything else as save_variables does (a mirror's first
  // copy: the copies agree).
  TF_CHECK_T(FailedPreconditionError, tapeflow::detail::thread_context().trace == nullptr,
             "Checkpoint", "cannot save '{}' inside a traced tf::function; save outside it", path);
  const auto summed = summed_metric_state(impl_->objects);
  std::vector<std::pair<std::string, Tensor>> tensors;
  {
    tapeflow::detail::PauseTapes pause;
    tapeflow::detail::ReplicaComponentScope cross_replica(-1);
    for (const auto& [name, v] : variables())
      tensors.emplace_back(
          name, summed.count(v.handle_id()) ? keras::metrics::detail::aggregated(v) : v.value());
  }
  keras::safetensors::save_file(path, tensors,
                                {{"format", "tapeflow.train.Checkpoint"}, {"version", "1"}});
  return prefix_of(file_prefix);
}

namespace {
// Before save_counter changes: inside a trace its value has no number to name the file with.
void check_not_tracing(const char* op, const std::string& where) {
  TF_CHECK_T(FailedPreconditionError, tapeflow::detail::thread_context().trace == nullptr, op,
             "cannot save '{}' inside a traced tf::function; save outside it", where);
}
}  // namespace

std::string Checkpoint::save(const std::string& file_prefix) {
  check_not_tracing("Checkpoint", file_prefix);
  impl_->save_counter.assign_add(constant(Tensor(int64_t{1}), int64));
  const int64_t n = impl_->save_counter.value().item<int64_t>();
  return write(fmt::format("{}-{}", prefix_of(file_prefix), n));
}

CheckpointLoadStatus Checkpoint::restore(const std::string& save_path) {
  const std::string path = file_of(save_path);
  keras::safetensors::Reader reader(path);
  CheckpointLoadStatus status;
  status.path = path;
  // Metrics whose state is built at their first update (F1Score, AUC with multi_label) and has
  // not been: built now from the saved shapes, so that their values restore below.
  std::map<std::string, const keras::safetensors::TensorInfo*> saved;
  for (const auto& info : reader.tensors()) saved.emplace(info.name, &info);
  for (const auto& [key, ref] : impl_->objects)
    if (const auto* metric = dynamic_cast<const keras::metrics::Metric*>(&ref.get());
        metric && metric->defined())
      metric->build_from_saved(
          [&](const std::string& name) -> const TensorShape* {
            const auto it = saved.find(key + "/" + name);
            return it == saved.end() ? nullptr : &it->second->shape;
          },
          path);
  const auto vars = variables();
  std::set<std::string> used;
  for (const auto& [name, v] : vars) used.insert(name);
  std::set<const void*> absent;
  for (const auto& [name, v] : keras::safetensors::assign_present(reader, vars)) {
    status.missing.push_back(name);
    absent.insert(v.handle_id());
  }
  // assign_present wrote the saved total into every copy of a mirrored metric variable: the
  // first copy keeps it, the others restart from zero (result() sums the copies).
  {
    const auto summed = summed_metric_state(impl_->objects);
    tapeflow::detail::PauseTapes pause;
    for (const auto& [name, v] : vars)
      if (summed.count(v.handle_id()) && !absent.count(v.handle_id()))
        for (size_t i = 1; i < v.components().size(); ++i)
          v.components()[i].assign(zeros_like(v.components()[i].value()));
  }
  // Layers and models that are not built yet: the file's values under their key wait for the
  // weights their build creates (TF's deferred restoration).
  std::map<std::string, std::shared_ptr<keras::detail::LayerImpl>> deferring;
  for (const auto& [key, ref] : impl_->objects)
    if (const auto* layer = dynamic_cast<const keras::Layer*>(&ref.get());
        layer && layer->defined() && !layer->impl().fully_built())
      deferring.emplace(key, layer->impl_ptr());
  status.deferred_state = std::make_shared<detail::DeferredValues>();
  // `name` is under `key`: the layer's tracked name is what follows "<key>/".
  auto defer = [&](const std::string& file_name, const std::string& name, const std::string& key,
                   keras::detail::LayerImpl::DeferredRestore restore) {
    {
      std::lock_guard lock(status.deferred_state->mu);  // before the layer can take it
      status.deferred_state->waiting.insert(file_name);
    }
    deferring.at(key)->defer_restore(name.substr(key.size() + 1), std::move(restore));
    status.deferred.push_back(file_name);
    used.insert(file_name);
  };
  auto deferring_key = [&](const std::string& name) -> const std::string* {
    const auto slash = name.find('/');
    if (slash == std::string::npos) return nullptr;
    const auto it = deferring.find(name.substr(0, slash));
    return it == deferring.end() ? nullptr : &it->first;
  };
  // Read before anything waits: a read error leaves the layers as they were.
  std::vector<std::tuple<std::string, const std::string*, Tensor>> values;
  for (const auto& info : reader.tensors())
    if (const std::string* key = used.count(info.name) ? nullptr : deferring_key(info.name))
      values.emplace_back(info.name, key, reader.read(info.name));
  for (auto& [file_name, key, value] : values) {
    defer(file_name, file_name, *key,
          [value, name = file_name, file = path, state = status.deferred_state](Variable v) {
            keras::safetensors::detail::check_fits("Checkpoint", file, name, value.shape(),
                                                   value.dtype(), v);
            v.assign(value);
            state->done(name);
          });
  }
  // Tensors of an optimizer's key that match no existing variable are slots not created yet:
  // "<optimizer>/<path of a variable>/<slot>" waits for that variable's slots; other names (older
  // checkpoints, "<optimizer>/<variable name>/<slot>") wait under their name. A slot that can
  // never be created (the optimizer keeps no such slot, or it names a path of this checkpoint's
  // objects that has no variable) stays unused, so assert_consumed() fails as TF's does.
  std::map<std::string, Variable> by_path;
  for (auto& [path, v] : slot_owner_paths(impl_->objects)) by_path.emplace(path, v);
  std::set<std::string> object_keys;
  for (const auto& [key, ref] : impl_->objects)
    if (!as_optimizer(ref.get())) object_keys.insert(key);
  for (const auto& [key, ref] : impl_->objects) {
    const auto* opt = as_optimizer(ref.get());
    if (!opt) continue;
    keras::optimizers::Optimizer handle = *opt;
    const auto slot_names = opt->slot_names();
    std::vector<std::pair<std::string, Tensor>> pending;
    std::vector<std::string> pending_names;
    const std::string prefix = key + "/";
    for (const auto& info : reader.tensors()) {
      if (used.count(info.name) || info.name.rfind(prefix, 0) != 0) continue;
      const std::string rest = info.name.substr(prefix.size());
      for (const std::string& slot : slot_names) {
        const std::string tail = "/" + slot;
        if (rest.size() <= tail.size() || rest.compare(rest.size() - tail.size(), tail.size(), tail))
          continue;
        const std::string owner = rest.substr(0, rest.size() - tail.size());
        if (auto it = by_path.find(owner); it != by_path.end()) {
          handle.restore_deferred_slot(it->second, slot, reader.read(info.name));
          used.insert(info.name);
        } else if (const std::string* owner_key = deferring_key(owner)) {
          // The slot of a weight that a layer not built yet will create.
          defer(info.name, owner, *owner_key,
                [handle, slot, value = reader.read(info.name), name = info.name,
                 state = status.deferred_state](Variable v) mutable {
                  handle.restore_deferred_slot(v, slot, value);
                  state->done(name);
                });
        } else if (!object_keys.count(owner.substr(0, owner.find('/')))) {
          pending.emplace_back(rest, reader.read(info.name));
          pending_names.push_back(info.name);
        }
        break;
      }
    }
    if (!pending.empty()) {
      handle.restore_deferred(pending);
      used.insert(pending_names.begin(), pending_names.end());
    }
  }
  for (const auto& info : reader.tensors())
    if (!used.count(info.name)) status.unused.push_back(info.name);
  if (!status.deferred.empty())
    TF_LOG_DEBUG("Checkpoint: {} value(s) of '{}' wait for layers that are not built yet",
                 status.deferred.size(), path);
  if (!status.missing.empty())
    TF_LOG_WARN("Checkpoint: '{}' has no value for {} variable(s): {}", path, status.missing.size(),
                fmt::join(status.missing, ", "));
  if (!status.unused.empty()) {
    const size_t shown = std::min<size_t>(status.unused.size(), 10);
    std::vector<std::string> names;  // from the file: escaped and cut
    for (size_t i = 0; i < shown; ++i)
      names.push_back(keras::safetensors::detail::printable(status.unused[i]));
    TF_LOG_WARN("Checkpoint: {} value(s) of '{}' were not restored, no variable takes them: {}{}",
                status.unused.size(), path, fmt::join(names, ", "),
                shown < status.unused.size() ? ", ..." : "");
  }
  return status;
}

// ---- CheckpointManager ----

struct CheckpointManager::Impl {
  Checkpoint checkpoint;
  std::string directory;
  std::optional<int> max_to_keep;
  std::string name;
  std::vector<std::string> kept;  // prefixes, oldest first
};

CheckpointManager::CheckpointManager(Checkpoint checkpoint, std::string directory,
                                     std::optional<int> max_to_keep, std::string checkpoint_name)
    : impl_(std::make_shared<Impl>(Impl{std::move(checkpoint), std::move(directory), max_to_keep,
                                        std::move(checkpoint_name), {}})) {
  TF_CHECK_ARG(!max_to_keep || *max_to_keep > 0, "CheckpointManager",
               "max_to_keep must be positive or nullopt, got {}", max_to_keep.value_or(0));
  TF_CHECK_ARG(!impl_->directory.empty(), "CheckpointManager", "the directory is empty");
  std::error_code ec;
  fs::create_directories(impl_->directory, ec);
  std::error_code dir_ec;
  TF_CHECK_T(NotFoundError, fs::is_directory(impl_->directory, dir_ec), "CheckpointManager",
             "cannot create the directory '{}': {}", impl_->directory,
             (ec ? ec : dir_ec).message());
  remove_stale_temporaries(impl_->directory);
  // A checkpoint_name with a folder ("sub/ckpt") writes its files there.
  const fs::path name_dir = fs::path(impl_->name).parent_path();
  if (!name_dir.empty() && fs::is_directory(fs::path(impl_->directory) / name_dir, dir_ec))
    remove_stale_temporaries((fs::path(impl_->directory) / name_dir).string());
  for (const auto& p : read_index(impl_->directory, "CheckpointManager"))
    if (file_present(file_of(p))) impl_->kept.push_back(p);
}

std::string CheckpointManager::save(std::optional<int64_t> checkpoint_number) {
  auto& m = *impl_;
  check_not_tracing("CheckpointManager", (fs::path(m.directory) / m.name).string());
  Variable counter = m.checkpoint.save_counter();
  counter.assign_add(constant(Tensor(int64_t{1}), int64));
  const int64_t n = checkpoint_number.value_or(counter.value().item<int64_t>());
  const std::string prefix = (fs::path(m.directory) / fmt::format("{}-{}", m.name, n)).string();
  m.checkpoint.write(prefix);
  m.kept.erase(std::remove(m.kept.begin(), m.kept.end(), prefix), m.kept.end());
  m.kept.push_back(prefix);
  std::vector<std::string> doomed;
  if (m.max_to_keep)
    while (static_cast<int>(m.kept.size()) > *m.max_to_keep) {
      doomed.push_back(m.kept.front());
      m.kept.erase(m.kept.begin());
    }
  // The index stops naming a checkpoint before its file goes.
  write_index(m.directory, m.kept);
  for (const auto& p : doomed) {
    std::error_code ec;
    fs::remove(file_of(p), ec);
    if (ec) TF_LOG_WARN("CheckpointManager: cannot delete '{}': {}", file_of(p), ec.message());
  }
  return prefix;
}

std::string CheckpointManager::latest_checkpoint() const {
  return impl_->kept.empty() ? std::string() : impl_->kept.back();
}
std::vector<std::string> CheckpointManager::checkpoints() const { return impl_->kept; }
const std::string& CheckpointManager::directory() const { return impl_->directory; }

std::string CheckpointManager::restore_or_initialize() {
  const std::string latest = latest_checkpoint();
  if (!latest.empty()) impl_->checkpoint.restore(latest);
  return latest;
}

std::string latest_checkpoint(const std::string& directory) {
  auto all = read_index(directory, "latest_checkpoint");
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (file_present(file_of(*it))) return *it;
  return {};
}

}  // namespace tapeflow::train
