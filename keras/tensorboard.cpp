#include "keras/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/log.h"

namespace tapeflow::keras {
namespace summary {

namespace detail {
// CRC-32C, core/crc32c.h (the crc32 instruction where the CPU has it).
uint32_t crc32c(const void* data, size_t n) {
  return tapeflow::detail::crc32c(data, n);
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
}  // namespace detail

namespace {
// Protocol-buffer encoding of the few Event fields we write (tensorflow/core/util/event.proto:
// Event{double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5}
// and summary.proto: Summary{repeated Value value = 1}, Value{string tag = 1; float
// simple_value = 2}).
void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}
void put_tag(std::string& s, int field, int wire) { put_varint(s, (uint64_t(field) << 3) | wire); }
template <class T>
void put_fixed(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only (x86-64, aarch64)
  s.append(b, sizeof(T));
}
void put_bytes(std::string& s, int field, const std::string& bytes) {
  put_tag(s, field, 2);
  put_varint(s, bytes.size());
  s += bytes;
}

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string event(double time, int64_t step, const std::string* file_version,
                  const std::string* summary) {
  std::string e;
  put_tag(e, 1, 1);
  put_fixed(e, time);
  put_tag(e, 2, 0);
  put_varint(e, static_cast<uint64_t>(step));
  if (file_version) put_bytes(e, 3, *file_version);
  if (summary) put_bytes(e, 5, *summary);
  return e;
}

std::atomic<int> g_file_counter{0};
}  // namespace

EventFileWriter::EventFileWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TF_CHECK_T(NotFoundError, !ec, "TensorBoard", "cannot create the log directory {}: {}", dir,
             ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  path_ = (std::filesystem::path(dir) /
           fmt::format("events.out.tfevents.{:010d}.{}.{}.{}", static_cast<int64_t>(wall_time()),
                       host, ::getpid(), g_file_counter++))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  TF_CHECK_T(NotFoundError, file_ != nullptr, "TensorBoard", "cannot open {} for writing: {}",
             path_, std::strerror(errno));
  try {
    const std::string version = "brain.Event:2";
    write_record(event(wall_time(), 0, &version, nullptr));
    flush();
  } catch (...) {
    std::fclose(file_);  // the destructor does not run for a constructor that throws
    file_ = nullptr;
    throw;
  }
}

EventFileWriter::~EventFileWriter() {
  if (!file_) return;
  // A destructor must not throw: events that could not be written are reported in the log.
  const bool failed = std::ferror(file_) != 0;
  errno = 0;
  if (std::fclose(file_) != 0 || failed) {
    const int e = errno;
    try {
      TF_LOG_ERROR(
          "TensorBoard: closing {} failed, events written since the last flush() may be "
          "lost: {}",
          path_, e ? std::strerror(e) : "a write error occurred earlier");
    } catch (...) {
    }
  }
}

void EventFileWriter::write_record(const std::string& data) {
  std::string rec;
  const uint64_t len = data.size();
  put_fixed(rec, len);
  put_fixed(rec, detail::masked_crc32c(rec.data(), 8));
  rec += data;
  put_fixed(rec, detail::masked_crc32c(data.data(), data.size()));
  TF_CHECK_T(InternalError, std::fwrite(rec.data(), 1, rec.size(), file_) == rec.size(),
             "TensorBoard", "writing {} failed: {}", path_, std::strerror(errno));
}

void EventFileWriter::scalar(const std::string& tag, double value, int64_t step) {
  std::string v;
  put_bytes(v, 1, tag);
  put_tag(v, 2, 5);
  put_fixed(v, static_cast<float>(value));
  std::string summary;
  put_bytes(summary, 1, v);
  write_record(event(wall_time(), step, nullptr, &summary));
}

void EventFileWriter::flush() {
  // A buffered fwrite reports nothing: the error (a full disk, EFBIG) shows here.
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_) != 0) {
    const int e = errno;
    TF_THROW(InternalError, "TensorBoard", "writing {} failed, events were lost: {}", path_,
             e ? std::strerror(e) : "a write error occurred earlier");
  }
  // Some file systems cannot fsync (EINVAL, EROFS): the data is then as durable as they make it.
  if (::fsync(::fileno(file_)) != 0 && errno != EINVAL && errno != EROFS)
    TF_THROW(InternalError, "TensorBoard", "cannot fsync {}: {}", path_, std::strerror(errno));
}

namespace {
struct Reader {
  const std::string& path;
  const std::string& buf;
  size_t pos = 0;
  size_t end = 0;
  [[noreturn]] void corrupt(const char* what) const {
    TF_THROW(InvalidArgumentError, "TensorBoard", "{} is corrupt: {} at byte {}", path, what, pos);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= end) corrupt("truncated varint");
      const auto b = static_cast<uint8_t>(buf[pos++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    corrupt("varint too long");
  }
  template <class T>
  T fixed() {
    if (end - pos < sizeof(T)) corrupt("truncated field");
    T v;
    std::memcpy(&v, buf.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  // Skips a field of the given wire type.
  void skip(int wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: fixed<uint64_t>(); break;
      case 5: fixed<uint32_t>(); break;
      case 2: {
        const uint64_t n = varint();
        if (n > end - pos) corrupt("length past the record");
        pos += n;
        break;
      }
      default: corrupt("unknown wire type");
    }
  }
};
}  // namespace

std::vector<ScalarEvent> read_scalar_events(const std::string& path) {
  // Checked first: opening a named pipe waits for a writer, and reading a directory throws
  // std::ios_base::failure.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  TF_CHECK_T(NotFoundError, std::filesystem::exists(status), "TensorBoard", "cannot open {}: {}",
             path, ec ? ec.message() : "no such file");
  TF_CHECK_ARG(std::filesystem::is_regular_file(status), "TensorBoard",
               "{} is not a regular file (a directory, named pipe, device or socket)", path);
  std::ifstream in(path, std::ios::binary);
  TF_CHECK_T(NotFoundError, in.good(), "TensorBoard", "cannot open {}", path);
  std::string buf;
  try {
    buf.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    TF_THROW(InternalError, "TensorBoard", "reading {} failed: {}", path, e.what());
  }
  TF_CHECK_T(InternalError, !in.bad(), "TensorBoard", "reading {} failed", path);
  std::vector<ScalarEvent> out;
  size_t pos = 0;
  while (pos < buf.size()) {
    auto fail = [&](const char* what) {
      TF_THROW(InvalidArgumentError, "TensorBoard", "{} is corrupt: {} at byte {}", path, what,
               pos);
    };
    if (buf.size() - pos < 12) fail("truncated record header");
    uint64_t len;
    uint32_t len_crc;
    std::memcpy(&len, buf.data() + pos, 8);
    std::memcpy(&len_crc, buf.data() + pos + 8, 4);
    if (len_crc != detail::masked_crc32c(buf.data() + pos, 8)) fail("bad length checksum");
    if (len > buf.size() - pos - 12 || buf.size() - pos - 12 - len < 4) fail("truncated record");
    const size_t data = pos + 12;
    uint32_t data_crc;
    std::memcpy(&data_crc, buf.data() + data + len, 4);
    if (data_crc != detail::masked_crc32c(buf.data() + data, len)) fail("bad data checksum");
    // Decode the Event.
    Reader r{path, buf, data, data + len};
    ScalarEvent ev;
    bool has_value = false;
    while (r.pos < r.end) {
      const uint64_t key = r.varint();
      const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
      if (field == 1 && wire == 1) {
        ev.wall_time = r.fixed<double>();
      } else if (field == 2 && wire == 0) {
        ev.step = static_cast<int64_t>(r.varint());
      } else if (field == 5 && wire == 2) {
        const uint64_t n = r.varint();
        if (n > r.end - r.pos) r.corrupt("summary past the record");
        Reader s{path, buf, r.pos, r.pos + n};
        while (s.pos < s.end) {
          const uint64_t k = s.varint();
          if ((k >> 3) == 1 && (k & 7) == 2) {
            const uint64_t vn = s.varint();
            if (vn > s.end - s.pos) s.corrupt("value past the summary");
            Reader v{path, buf, s.pos, s.pos + vn};
            while (v.pos < v.end) {
              const uint64_t vk = v.varint();
              if ((vk >> 3) == 1 && (vk & 7) == 2) {
                const uint64_t tn = v.varint();
                if (tn > v.end - v.pos) v.corrupt("tag past the value");
                ev.tag.assign(buf, v.pos, tn);
                v.pos += tn;
              } else if ((vk >> 3) == 2 && (vk & 7) == 5) {
                ev.value = v.fixed<float>();
                has_value = true;
              } else {
                v.skip(static_cast<int>(vk & 7));
              }
            }
            s.pos += vn;
          } else {
            s.skip(static_cast<int>(k & 7));
          }
        }
        r.pos += n;
      } else {
        r.skip(wire);
      }
    }
    if (has_value) out.push_back(std::move(ev));
    pos = data + len + 4;
  }
  return out;
}

}  // namespace summary

namespace callbacks {

TensorBoard::TensorBoard(std::string log_dir) : log_dir_(std::move(log_dir)) {
  TF_CHECK_ARG(!log_dir_.empty(), "TensorBoard", "log_dir is empty");
}

void TensorBoard::on_train_begin(const Logs&) {
  train_ = std::make_shared<summary::EventFileWriter>(
      (std::filesystem::path(log_dir_) / "train").string());
  validation_.reset();
}

void TensorBoard::on_epoch_end(int epoch, const Logs& logs) {
  // Keras: "val_loss" goes to validation/ as "epoch_loss"; the optimizer's learning rate (a
  // schedule's too) to train/, once, even when a LearningRateScheduler logged it already.
  const bool own_rate = ctx_ && ctx_->get_learning_rate;
  for (const auto& [name, value] : logs) {
    if (own_rate && name == "learning_rate") continue;
    if (name.starts_with("val_")) {
      if (!validation_)
        validation_ = std::make_shared<summary::EventFileWriter>(
            (std::filesystem::path(log_dir_) / "validation").string());
      validation_->scalar("epoch_" + name.substr(4), value, epoch);
    } else if (train_) {
      train_->scalar("epoch_" + name, value, epoch);
    }
  }
  if (train_ && own_rate) train_->scalar("epoch_learning_rate", ctx_->get_learning_rate(), epoch);
  if (train_) train_->flush();
  if (validation_) validation_->flush();
}

void TensorBoard::on_train_end(const Logs&) {
  train_.reset();
  validation_.reset();
}

}  // namespace callbacks
}  // namespace tapeflow::keras
