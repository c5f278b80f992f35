// TensorBoard event files: a writer for TF's record format (length, masked CRC-32C, an Event
// protocol buffer, CRC) with scalar summaries, and the Keras TensorBoard callback that writes
// each epoch's logs to <log_dir>/train and <log_dir>/validation as "epoch_<name>" scalars, as
// tf.keras does. TensorBoard reads the files directly (`tensorboard --logdir <log_dir>`).
// A writer is not thread-safe; flush() makes everything written so far durable, and raises an
// InternalError naming the file when that fails (a full disk); the destructor logs such errors.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "keras/callbacks.h"

namespace tapeflow::keras {

namespace summary {

class EventFileWriter {
 public:
  // Creates <dir> if needed and a new file events.out.tfevents.<time>.<host>.<pid>.<n> in it.
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  void scalar(const std::string& tag, double value, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// One decoded scalar event (for tests and tools).
struct ScalarEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  float value = 0;
};
// Reads an event file back, checking every CRC; throws InvalidArgumentError naming the file on
// a truncated or corrupt record. Events without a scalar (the file_version header) are skipped.
std::vector<ScalarEvent> read_scalar_events(const std::string& path);

namespace detail {
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);
}  // namespace detail

}  // namespace summary

namespace callbacks {

// Keras' TensorBoard callback (scalars per epoch; update_freq="epoch").
class TensorBoard : public Callback {
 public:
  explicit TensorBoard(std::string log_dir = "logs");
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs&) override;
  bool reads_batch_logs() const override { return false; }

 private:
  std::string log_dir_;
  std::shared_ptr<summary::EventFileWriter> train_, validation_;
};

}  // namespace callbacks
}  // namespace tapeflow::keras
