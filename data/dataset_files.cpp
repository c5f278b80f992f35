// File-backed datasets: cache(filename), save(path) and load(path). One record file format and one
// reader/writer serve both.
//
// Record file format, version 1 (all integers little-endian):
//   header, 32 bytes:
//     char[8] magic "TPFLRECS"
//     u32     format version (1)
//     u32     reserved (0)
//     u64     number of elements (records)
//     u64     offset of the spec block; 0 while the file is being written
//   records, one per element, in order:
//     u32     record tag "TREC"
//     u32     CRC-32C (Castagnoli, core/crc32c.h) of the payload
//     u64     payload size in bytes
//     payload: per component, u8 rank, rank x i64 dims, then the tensor's bytes in row-major
//              order (number of elements x the spec's dtype size; bool is one byte 0 or 1)
//   spec block (the element spec: what every record above conforms to):
//     u32     number of components (0 for a file without elements)
//     per component: u8 dtype name length, the name ("float32", TF's names), u8 rank,
//                    rank x i64 dims (-1 where the elements' sizes differ)
//     u64     number of elements (again)
//     char[8] end magic "TPFLEND1", the last bytes of the file
// The writer fills a temporary file and patches the header at the end, so a file is complete
// exactly when its header points at a spec block that ends the file; anything else is a
// truncated or unfinished file. A saved dataset (save/load) is a directory holding one record
// file per shard ("shard-00000000.tprec", ...) and a manifest written last, before the
// directory is renamed into place:
//   "manifest": char[8] "TPFLSAVE", u32 version (1), u32 number of shards, that many i64 shard
//               indices in increasing order, then a spec block as above (the spec of all shards).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/file.h"
#include "core/log.h"
#include "data/dataset_internal.h"

namespace tapeflow::data {
namespace detail {
namespace {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little,
              "the dataset file format is little-endian and read without byte swapping");

constexpr char kMagic[8] = {'T', 'P', 'F', 'L', 'R', 'E', 'C', 'S'};
constexpr char kEndMagic[8] = {'T', 'P', 'F', 'L', 'E', 'N', 'D', '1'};
constexpr char kSaveMagic[8] = {'T', 'P', 'F', 'L', 'S', 'A', 'V', 'E'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kRecordTag = 0x43455254;  // "TREC"
constexpr uint64_t kHeaderSize = 32;
constexpr const char* kManifest = "manifest";

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// An element's spec as the records see it, relaxed (dims to -1) as elements of other sizes come.
class SpecBuilder {
 public:
  // Checks e against the elements seen so far (same components, dtypes and ranks; `op` and
  // `file` name the caller in errors) and widens the spec to cover it.
  void observe(const Element& e, const char* op, const std::string& file) {
    if (!started_) {
      started_ = true;
      for (const Tensor& t : e) {
        TF_CHECK_ARG(t.defined(), op, "element 0 for '{}' has an undefined tensor", file);
        spec_.emplace_back(t.shape(), t.dtype());
      }
      ++count_;
      return;
    }
    TF_CHECK_ARG(e.size() == spec_.size(), op,
                 "element {} for '{}' has {} component(s) but the first one has {}; a dataset "
                 "file holds elements of one structure",
                 count_, file, e.size(), spec_.size());
    for (size_t c = 0; c < e.size(); ++c) {
      const Tensor& t = e[c];
      TF_CHECK_ARG(t.defined(), op, "element {} for '{}' has an undefined tensor", count_, file);
      TensorSpec& s = spec_[c];
      TF_CHECK_ARG(t.dtype() == s.dtype && t.rank() == s.shape.rank(), op,
                   "component {} of element {} for '{}' is {} {} but the first element's is {} "
                   "of rank {}; a dataset file keeps each component's dtype and rank",
                   c, count_, file, dtype_name(t.dtype()), t.shape().to_string(),
                   dtype_name(s.dtype), s.shape.rank());
      for (int i = 0; i < s.shape.rank(); ++i)
        if (s.shape[i] != t.shape()[i]) s.shape[i] = None;
    }
    ++count_;
  }
  const std::vector<TensorSpec>& spec() const { return spec_; }
  int64_t count() const { return count_; }

 private:
  bool started_ = false;
  std::vector<TensorSpec> spec_;
  int64_t count_ = 0;
};

std::string spec_string(const std::vector<TensorSpec>& spec) {
  std::string s = "(";
  for (size_t c = 0; c < spec.size(); ++c) {
    if (c) s += ", ";
    s += fmt::format("{} {}", dtype_name(spec[c].dtype), spec[c].shape.to_string());
  }
  return s + ")";
}

void append(std::vector<uint8_t>& buf, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  buf.insert(buf.end(), b, b + n);
}
template <class T>
void append_pod(std::vector<uint8_t>& buf, T v) {
  append(buf, &v, sizeof v);
}

std::vector<uint8_t> encode_spec(const std::vector<TensorSpec>& spec, int64_t count) {
  std::vector<uint8_t> b;
  append_pod<uint32_t>(b, static_cast<uint32_t>(spec.size()));
  for (const TensorSpec& s : spec) {
    const std::string_view name = dtype_name(s.dtype);
    append_pod<uint8_t>(b, static_cast<uint8_t>(name.size()));
    append(b, name.data(), name.size());
    append_pod<uint8_t>(b, static_cast<uint8_t>(s.shape.rank()));
    for (int64_t d : s.shape) append_pod<int64_t>(b, d);
  }
  append_pod<uint64_t>(b, static_cast<uint64_t>(count));
  append(b, kEndMagic, sizeof kEndMagic);
  return b;
}

// Reads a file's bytes with bounds checks: every failure is a DataLossError naming the file.
class FileReader {
 public:
  FileReader(std::string path, const char* op) : path_(std::move(path)), op_(op) {
    f_ = std::fopen(path_.c_str(), "rb");
    if (!f_) {
      const int err = errno;
      if (err == ENOENT) TF_THROW(NotFoundError, op_, "'{}' does not exist", path_);
      TF_THROW(FailedPreconditionError, op_, "cannot open '{}': {}", path_, errno_text(err));
    }
    // Records are a few kB: a 1 MiB buffer makes one read() per MiB, not per two records.
    std::setvbuf(f_, nullptr, _IOFBF, size_t{1} << 20);
    struct stat st {};
    if (::fstat(::fileno(f_), &st) != 0) {
      const int err = errno;
      std::fclose(f_);
      TF_THROW(InternalError, op_, "cannot stat '{}': {}", path_, errno_text(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileReader() {
    if (f_) std::fclose(f_);
  }
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint64_t size() const { return size_; }
  uint64_t pos() const { return pos_; }
  const std::string& path() const { return path_; }
  void seek(uint64_t off) {
    if (off > size_ || ::fseeko(f_, static_cast<off_t>(off), SEEK_SET) != 0)
      corrupt(fmt::format("offset {} is past the end of the file ({} bytes)", off, size_));
    pos_ = off;
  }
  // n bytes that must lie before `limit` (the end of the section being read).
  void read(void* dst, uint64_t n, uint64_t limit, const char* what) {
    if (n > limit || pos_ > limit - n)
      corrupt(
          fmt::format("{} at offset {} ({} bytes) runs past {} (the file is truncated or "
                      "corrupt)",
                      what, pos_, n, limit == size_ ? "the end of the file" : "its section"));
    if (n && std::fread(dst, 1, static_cast<size_t>(n), f_) != n)
      corrupt(fmt::format("cannot read {} bytes at offset {}", n, pos_));
    pos_ += n;
  }
  template <class T>
  T read_pod(uint64_t limit, const char* what) {
    T v;
    read(&v, sizeof v, limit, what);
    return v;
  }
  [[noreturn]] void corrupt(const std::string& why) const {
    TF_THROW(DataLossError, op_, "'{}' is not a valid tapeflow dataset file: {}", path_, why);
  }

 private:
  std::string path_;
  const char* op_;
  std::FILE* f_ = nullptr;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
};

DType dtype_from_name(const FileReader& r, std::string_view name) {
  for (DType d : {float16, bfloat16, float32, float64, int32, int64, uint8, bool_})
    if (dtype_name(d) == name) return d;
  r.corrupt(fmt::format("unknown dtype '{}'", name));
}

// Reads a spec block that must end the file; returns the spec and its element count.
std::vector<TensorSpec> decode_spec(FileReader& r, int64_t& count) {
  const uint64_t end = r.size();
  const uint32_t n = r.read_pod<uint32_t>(end, "the number of components");
  if (n > 4096) r.corrupt(fmt::format("implausible number of components {}", n));
  std::vector<TensorSpec> spec;
  for (uint32_t c = 0; c < n; ++c) {
    const uint8_t len = r.read_pod<uint8_t>(end, "a dtype name length");
    std::string name(len, '\0');
    r.read(name.data(), len, end, "a dtype name");
    const DType d = dtype_from_name(r, name);
    const uint8_t rank = r.read_pod<uint8_t>(end, "a rank");
    if (rank > TensorShape::kMaxRank)
      r.corrupt(
          fmt::format("component {} has rank {} (at most {})", c, rank, TensorShape::kMaxRank));
    TensorShape s;
    for (int i = 0; i < rank; ++i) {
      const int64_t dim = r.read_pod<int64_t>(end, "a dimension");
      if (dim < -1) r.corrupt(fmt::format("component {} has dimension {}", c, dim));
      s.push_back(dim);
    }
    spec.emplace_back(s, d);
  }
  const uint64_t cnt = r.read_pod<uint64_t>(end, "the element count");
  char magic[8];
  r.read(magic, sizeof magic, end, "the end marker");
  if (std::memcmp(magic, kEndMagic, sizeof magic) != 0 || r.pos() != end)
    r.corrupt("the spec block does not end the file with its end marker");
  if (cnt > static_cast<uint64_t>(INT64_MAX)) r.corrupt("implausible element count");
  count = static_cast<int64_t>(cnt);
  return spec;
}

// Streams the elements of one record file, checking each against the file's spec.
class RecordReader {
 public:
  RecordReader(const std::string& path, const char* op) : r_(path, op) {
    char magic[8];
    r_.read(magic, sizeof magic, r_.size(), "the header");
    if (std::memcmp(magic, kMagic, sizeof magic) != 0) r_.corrupt("no tapeflow dataset header");
    const uint32_t version = r_.read_pod<uint32_t>(r_.size(), "the version");
    if (version != kVersion)
      r_.corrupt(fmt::format("format version {}, this build reads version {}", version, kVersion));
    r_.read_pod<uint32_t>(r_.size(), "the header");
    const uint64_t count = r_.read_pod<uint64_t>(r_.size(), "the element count");
    spec_offset_ = r_.read_pod<uint64_t>(r_.size(), "the spec offset");
    if (spec_offset_ == 0) r_.corrupt("the file was never completed (no spec block)");
    if (spec_offset_ < kHeaderSize || spec_offset_ >= r_.size())
      r_.corrupt(
          fmt::format("the spec block offset {} is outside the file ({} bytes): the file "
                      "is truncated",
                      spec_offset_, r_.size()));
    r_.seek(spec_offset_);
    int64_t spec_count = 0;
    spec_ = decode_spec(r_, spec_count);
    if (static_cast<uint64_t>(spec_count) != count)
      r_.corrupt(
          fmt::format("the header counts {} elements, the spec block {}", count, spec_count));
    count_ = spec_count;
    r_.seek(kHeaderSize);
  }
  const std::vector<TensorSpec>& spec() const { return spec_; }
  int64_t count() const { return count_; }
  const std::string& path() const { return r_.path(); }

  bool next(Element& out) {
    if (read_ == count_) {
      if (r_.pos() != spec_offset_)
        r_.corrupt(fmt::format("{} bytes after the last of its {} records", spec_offset_ - r_.pos(),
                               count_));
      return false;
    }
    const uint64_t lim = spec_offset_;
    if (r_.read_pod<uint32_t>(lim, "a record tag") != kRecordTag)
      r_.corrupt(fmt::format("record {} at offset {} has no record tag", read_, r_.pos() - 4));
    const uint32_t crc = r_.read_pod<uint32_t>(lim, "a record checksum");
    const uint64_t size = r_.read_pod<uint64_t>(lim, "a record size");
    if (size > lim - r_.pos())
      r_.corrupt(fmt::format("record {} ({} bytes) runs past the records' end", read_, size));
    // The payload goes straight into the tensors (no staging copy); the CRC follows the pieces.
    const uint64_t end = r_.pos() + size;
    uint32_t sum = 0;
    auto take = [&](void* dst, uint64_t n) {
      if (n > end - r_.pos())
        r_.corrupt(fmt::format("record {} is shorter than its tensors", read_));
      r_.read(dst, n, end, "a record");
      sum = tapeflow::detail::crc32c_extend(sum, dst, static_cast<size_t>(n));
    };
    out.resize(spec_.size());
    for (size_t c = 0; c < spec_.size(); ++c) {
      const TensorSpec& s = spec_[c];
      uint8_t rank;
      take(&rank, 1);
      if (rank != s.shape.rank())
        r_.corrupt(fmt::format("component {} of record {} has rank {}, the spec {}", c, read_, rank,
                               s.shape.rank()));
      int64_t dims[TensorShape::kMaxRank];  // rank equals the spec's, at most kMaxRank
      take(dims, sizeof(int64_t) * rank);
      TensorShape shape;
      for (int i = 0; i < rank; ++i) {
        if (dims[i] < 0)
          r_.corrupt(fmt::format("component {} of record {} has a negative dimension", c, read_));
        shape.push_back(dims[i]);
      }
      if (!s.is_compatible_with(shape))
        r_.corrupt(fmt::format("component {} of record {} has shape {}, outside the spec {}", c,
                               read_, shape.to_string(), s.shape.to_string()));
      // The size check before the allocation: a corrupt shape must not allocate terabytes.
      const uint64_t bytes =
          static_cast<uint64_t>(shape.num_elements()) * static_cast<uint64_t>(dtype_size(s.dtype));
      if (bytes > end - r_.pos())
        r_.corrupt(fmt::format("record {} is shorter than its tensors", read_));
      Tensor t = tapeflow::detail::empty(shape, s.dtype, Device{});
      take(t.raw_data(), t.nbytes());
      out[c] = std::move(t);
    }
    if (r_.pos() != end)
      r_.corrupt(fmt::format("record {} has {} bytes after its tensors", read_, end - r_.pos()));
    if (sum != crc) r_.corrupt(fmt::format("record {} fails its checksum", read_));
    ++read_;
    return true;
  }

 private:
  FileReader r_;
  std::vector<TensorSpec> spec_;
  uint64_t spec_offset_ = 0;
  int64_t count_ = 0;
  int64_t read_ = 0;
};

// A unique temporary name beside `path` (same directory, so the final rename stays atomic): the
// one checkpoints and weight files use (core/file.h).
std::string temp_name(const std::string& path) {
  return tapeflow::detail::temporary_path_for(path);
}

// Writes one record file under a temporary name; finish() renames it to its final path, and a
// writer destroyed before that removes the temporary file.
class RecordWriter {
 public:
  RecordWriter(std::string path, const char* op)
      : path_(std::move(path)), tmp_(temp_name(path_)), op_(op) {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) {
      const int err = errno;
      if (err == ENOENT)
        TF_THROW(NotFoundError, op_, "cannot create '{}': its directory does not exist", path_);
      TF_THROW(FailedPreconditionError, op_, "cannot create '{}': {}", tmp_, errno_text(err));
    }
    std::vector<uint8_t> h;
    append(h, kMagic, sizeof kMagic);
    append_pod<uint32_t>(h, kVersion);
    append_pod<uint32_t>(h, 0);
    append_pod<uint64_t>(h, 0);
    append_pod<uint64_t>(h, 0);  // no spec block yet: an unfinished file never reads as complete
    put(h.data(), h.size());
  }
  ~RecordWriter() { abandon(); }
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  void write(const Element& e) {
    spec_.observe(e, op_, path_);
    buf_.clear();
    std::vector<tapeflow::detail::HostBytes> bytes;
    for (const Tensor& t : e) {
      append_pod<uint8_t>(buf_, static_cast<uint8_t>(t.rank()));
      for (int64_t d : t.shape()) append_pod<int64_t>(buf_, d);
      if (t.nbytes()) {
        auto hb = tapeflow::detail::host_bytes(t);
        append(buf_, hb.data, t.nbytes());
      }
    }
    std::vector<uint8_t> head;
    append_pod<uint32_t>(head, kRecordTag);
    append_pod<uint32_t>(head, tapeflow::detail::crc32c(buf_.data(), buf_.size()));
    append_pod<uint64_t>(head, buf_.size());
    put(head.data(), head.size());
    put(buf_.data(), buf_.size());
  }
  const SpecBuilder& spec() const { return spec_; }

  // Writes the spec block, then the header that points at it, syncs and renames the file into
  // place (replacing an older one).
  void finish() {
    const uint64_t spec_offset = offset_;
    const std::vector<uint8_t> block = encode_spec(spec_.spec(), spec_.count());
    put(block.data(), block.size());
    if (::fseeko(f_, 16, SEEK_SET) != 0) fail("seek");
    const uint64_t n = static_cast<uint64_t>(spec_.count());
    put(&n, 8);
    put(&spec_offset, 8);
    if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) fail("flush");
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail("close");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) fail(fmt::format("rename to '{}'", path_), ec.value());
    done_ = true;
  }

  // Closes and removes the temporary file (nothing once finished). Never throws.
  void abandon() noexcept {
    if (done_) return;
    if (f_) std::fclose(f_);
    f_ = nullptr;
    std::error_code ec;
    fs::remove(tmp_, ec);
    done_ = true;
  }

 private:
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail("write");
    offset_ += n;
  }
  [[noreturn]] void fail(const std::string& what, int err = -1) {
    if (err < 0) err = errno;
    abandon();
    TF_THROW(InternalError, op_, "cannot {} the temporary file '{}' for '{}': {}", what, tmp_,
             path_, errno_text(err));
  }

  std::string path_;
  std::string tmp_;
  const char* op_;
  std::FILE* f_ = nullptr;
  uint64_t offset_ = 0;
  bool done_ = false;
  SpecBuilder spec_;
  std::vector<uint8_t> buf_;
};

// ---- cache(filename) ----

constexpr const char* kCacheOp = "Dataset.cache";

// filename.lockfile, created with O_EXCL while an iterator writes the cache; removed when it
// completes or is abandoned. A process that crashes leaves it behind, and then every iteration
// that would write the cache fails until it is deleted, as in TF.
class CacheLock {
 public:
  explicit CacheLock(std::string path) : path_(std::move(path)) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      if (err == EEXIST) {
        std::string contents;
        if (std::FILE* f = std::fopen(path_.c_str(), "rb")) {
          char buf[256];
          const size_t n = std::fread(buf, 1, sizeof buf, f);
          std::fclose(f);
          contents.assign(buf, n);
          while (!contents.empty() && contents.back() == '\n') contents.pop_back();
        }
        TF_THROW(AlreadyExistsError, kCacheOp,
                 "There appears to be a concurrent caching iterator running - cache lockfile "
                 "already exists ('{}'). If you are sure no other running iterator or process "
                 "is writing this cache file, delete the lockfile and iterate again. Lockfile "
                 "contents: {}",
                 path_, contents);
      }
      if (err == ENOENT)
        TF_THROW(NotFoundError, kCacheOp,
                 "cannot create the lockfile '{}': its directory does not "
                 "exist",
                 path_);
      TF_THROW(FailedPreconditionError, kCacheOp, "cannot create the lockfile '{}': {}", path_,
               errno_text(err));
    }
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const std::string text =
        fmt::format("Created at: {} by process {}\n", now, static_cast<long>(::getpid()));
    // The contents only inform whoever finds a stale lockfile; a short write changes nothing.
    [[maybe_unused]] const ssize_t w = ::write(fd, text.data(), text.size());
    ::close(fd);
  }
  ~CacheLock() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  std::string path_;
};

class CacheReadIterator final : public IteratorBase {
 public:
  explicit CacheReadIterator(std::unique_ptr<RecordReader> r) : r_(std::move(r)) {}
  bool next(Element& out) override { return r_->next(out); }

 private:
  std::unique_ptr<RecordReader> r_;
};

// Runs the input and writes what it yields; the file is completed (renamed into place) when the
// input ends or has yielded its known cardinality, else discarded when the iterator goes.
class CacheWriteIterator final : public IteratorBase {
 public:
  CacheWriteIterator(std::unique_ptr<IteratorBase> in, int64_t expected, std::string filename,
                     std::unique_ptr<CacheLock> lock)
      : in_(std::move(in)),
        expected_(expected),
        filename_(std::move(filename)),
        writer_(std::make_unique<RecordWriter>(filename_, kCacheOp)),
        lock_(std::move(lock)) {}
  ~CacheWriteIterator() override {
    if (writer_) {
      TF_LOG_WARN(
          "[Dataset.cache] the iterator over a dataset cached to '{}' was destroyed after {} "
          "element(s), before the end of its input: the partial cache is discarded (as TF). "
          "Iterate to the end (e.g. take(k).cache(filename) rather than cache(filename).take(k)) "
          "to write the cache.",
          filename_, writer_->spec().count());
      writer_->abandon();
    }
  }
  bool next(Element& out) override {
    if (!writer_) return false;
    if (!in_->next(out)) {
      finish();
      return false;
    }
    writer_->write(out);
    if (expected_ >= 0 && writer_->spec().count() == expected_) finish();
    return true;
  }

 private:
  void finish() {
    writer_->finish();
    writer_.reset();
    lock_.reset();
    in_.reset();
  }
  std::unique_ptr<IteratorBase> in_;
  int64_t expected_;
  std::string filename_;
  std::unique_ptr<RecordWriter> writer_;  // null once finished
  std::unique_ptr<CacheLock> lock_;
};

// An iterator that yields nothing (the input was complete without elements).
class DoneIterator final : public IteratorBase {
 public:
  bool next(Element&) override { return false; }
};

class CacheFileDataset final : public DatasetBase {
 public:
  CacheFileDataset(std::shared_ptr<const DatasetBase> in, std::string filename)
      : in_(std::move(in)), filename_(std::move(filename)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    if (auto it = try_read()) return it;
    auto lock = std::make_unique<CacheLock>(filename_ + ".lockfile");
    // Another writer may have completed the file between the check above and the lock.
    if (auto it = try_read()) return it;
    const int64_t n = in_->cardinality();
    return std::make_unique<CacheWriteIterator>(in_->make_iterator(), n, filename_,
                                                std::move(lock));
  }
  int64_t cardinality() const override { return in_->cardinality(); }

 private:
  std::unique_ptr<IteratorBase> try_read() const {
    std::error_code ec;
    if (!fs::exists(filename_, ec)) return nullptr;
    auto r = std::make_unique<RecordReader>(filename_, kCacheOp);
    const int64_t n = in_->cardinality();
    TF_CHECK_ARG(n < 0 || n == r->count(), kCacheOp,
                 "the cache file '{}' holds {} element(s) {} but the input dataset has {}: it "
                 "was written by another pipeline; delete it or use another filename",
                 filename_, r->count(), spec_string(r->spec()), n);
    return std::make_unique<CacheReadIterator>(std::move(r));
  }
  std::shared_ptr<const DatasetBase> in_;
  std::string filename_;
};

// ---- save / load ----

constexpr const char* kSaveOp = "Dataset.save";
constexpr const char* kLoadOp = "Dataset.load";

std::string shard_file(const std::string& dir, int64_t shard) {
  return (fs::path(dir) / fmt::format("shard-{:08d}.tprec", shard)).string();
}

struct Manifest {
  std::vector<int64_t> shards;
  std::vector<TensorSpec> spec;
  int64_t count = 0;
};

Manifest read_manifest(const std::string& dir, const char* op) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    TF_THROW(NotFoundError, op, "'{}' is not a directory written by Dataset.save", dir);
  const std::string path = (fs::path(dir) / kManifest).string();
  if (!fs::exists(path, ec))
    TF_THROW(NotFoundError, op, "'{}' has no manifest: it is not a saved dataset", dir);
  FileReader r(path, op);
  const uint64_t end = r.size();
  char magic[8];
  r.read(magic, sizeof magic, end, "the header");
  if (std::memcmp(magic, kSaveMagic, sizeof magic) != 0) r.corrupt("no saved-dataset header");
  const uint32_t version = r.read_pod<uint32_t>(end, "the version");
  if (version != kVersion)
    r.corrupt(fmt::format("format version {}, this build reads version {}", version, kVersion));
  const uint32_t n = r.read_pod<uint32_t>(end, "the number of shards");
  if (static_cast<uint64_t>(n) * 8 > end) r.corrupt(fmt::format("implausible shard count {}", n));
  Manifest m;
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t s = r.read_pod<int64_t>(end, "a shard index");
    if (s < 0 || (!m.shards.empty() && s <= m.shards.back()))
      r.corrupt("the shard indices are not increasing and non-negative");
    m.shards.push_back(s);
  }
  m.spec = decode_spec(r, m.count);
  return m;
}

// save() replaces an earlier save (or an empty directory) at its path, never other files.
void check_replaceable(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const bool ok = fs::is_directory(dir, ec) &&
                  (fs::is_empty(dir, ec) || fs::exists(fs::path(dir) / kManifest, ec));
  TF_CHECK_T(AlreadyExistsError, ok, kSaveOp,
             "'{}' exists and is not a saved dataset (save replaces only an earlier save or an "
             "empty directory)",
             dir);
}

class LoadIterator final : public IteratorBase {
 public:
  LoadIterator(std::string dir, std::shared_ptr<const Manifest> m)
      : dir_(std::move(dir)), m_(std::move(m)) {}
  bool next(Element& out) override {
    while (true) {
      if (!cur_) {
        if (shard_ == m_->shards.size()) {
          TF_CHECK_T(DataLossError, read_ == m_->count, kLoadOp,
                     "the shards of '{}' hold {} element(s) but its manifest counts {}", dir_,
                     read_, m_->count);
          return false;
        }
        cur_ = std::make_unique<RecordReader>(shard_file(dir_, m_->shards[shard_++]), kLoadOp);
        check_shard_spec(*cur_);
      }
      if (cur_->next(out)) {
        ++read_;
        return true;
      }
      cur_.reset();
    }
  }

 private:
  void check_shard_spec(const RecordReader& r) const {
    bool ok = r.spec().size() == m_->spec.size();
    for (size_t c = 0; ok && c < r.spec().size(); ++c) {
      const TensorSpec& s = r.spec()[c];
      const TensorSpec& want = m_->spec[c];
      ok = s.dtype == want.dtype && s.shape.rank() == want.shape.rank();
      for (int i = 0; ok && i < s.shape.rank(); ++i)
        ok = want.shape[i] == None || want.shape[i] == s.shape[i];
    }
    TF_CHECK_T(DataLossError, ok || r.count() == 0, kLoadOp,
               "the shard '{}' has element spec {}, outside its manifest's {}", r.path(),
               spec_string(r.spec()), spec_string(m_->spec));
  }
  std::string dir_;
  std::shared_ptr<const Manifest> m_;
  std::unique_ptr<RecordReader> cur_;
  size_t shard_ = 0;
  int64_t read_ = 0;
};

class LoadDataset final : public DatasetBase {
 public:
  LoadDataset(std::string dir, std::shared_ptr<const Manifest> m)
      : dir_(std::move(dir)), m_(std::move(m)) {}
  std::unique_ptr<IteratorBase> make_iterator() const override {
    return std::make_unique<LoadIterator>(dir_, m_);
  }
  int64_t cardinality() const override { return m_->count; }

 private:
  std::string dir_;
  std::shared_ptr<const Manifest> m_;
};

}  // namespace
}  // namespace detail

Dataset Dataset::cache(const std::string& filename) const {
  if (filename.empty()) return cache();
  return Dataset(std::make_shared<detail::CacheFileDataset>(node_, filename));
}

void Dataset::save(const std::string& path) const {
  save_impl(path, nullptr);
}

void Dataset::save_impl(const std::string& path, detail::KeyFn shard_func) const {
  namespace fs = std::filesystem;
  using detail::kSaveOp;
  TF_CHECK_ARG(!path.empty(), kSaveOp, "the path is empty");
  TF_CHECK_ARG(node_->cardinality() != INFINITE_CARDINALITY, kSaveOp,
               "cannot save the infinite dataset to '{}'", path);
  const fs::path target = fs::path(path).lexically_normal();
  const std::string final_dir = (target.has_filename() ? target : target.parent_path()).string();
  detail::check_replaceable(final_dir);
  const std::string tmp_dir = detail::temp_name(final_dir);
  std::error_code ec;
  fs::create_directory(tmp_dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory)
      TF_THROW(NotFoundError, kSaveOp, "cannot create '{}': its parent directory does not exist",
               final_dir);
    TF_THROW(FailedPreconditionError, kSaveOp, "cannot create '{}': {}", tmp_dir, ec.message());
  }
  // The temporary directory goes unless it was renamed into place.
  struct Cleanup {
    std::string dir;
    bool keep = false;
    ~Cleanup() {
      std::error_code e;
      if (!keep) fs::remove_all(dir, e);
    }
  } cleanup{tmp_dir};
  {
    std::map<int64_t, std::unique_ptr<detail::RecordWriter>> writers;
    // The spec of the whole dataset (each shard file also keeps its own).
    detail::SpecBuilder all;
    std::unique_ptr<detail::IteratorBase> it = node_->make_iterator();
    Element e;
    while (it->next(e)) {
      all.observe(e, kSaveOp, path);
      int64_t shard = 0;
      if (shard_func) {
        detail::UserFnScope scope;
        shard = shard_func(e);
      }
      TF_CHECK_ARG(shard >= 0, kSaveOp,
                   "shard_func must return a shard index >= 0, got {} for element {}", shard,
                   all.count() - 1);
      auto& w = writers[shard];
      if (!w)
        w = std::make_unique<detail::RecordWriter>(detail::shard_file(tmp_dir, shard), kSaveOp);
      w->write(e);
    }
    // The shard files, then the manifest: the directory is complete once the manifest is in it.
    std::vector<uint8_t> m;
    detail::append(m, detail::kSaveMagic, sizeof detail::kSaveMagic);
    detail::append_pod<uint32_t>(m, detail::kVersion);
    detail::append_pod<uint32_t>(m, static_cast<uint32_t>(writers.size()));
    for (auto& [k, w] : writers) {
      detail::append_pod<int64_t>(m, k);
      w->finish();
    }
    const std::vector<uint8_t> block = detail::encode_spec(all.spec(), all.count());
    m.insert(m.end(), block.begin(), block.end());
    tapeflow::detail::write_file_atomically(
        kSaveOp, (fs::path(tmp_dir) / detail::kManifest).string(), {{m.data(), m.size()}});
  }
  // Replace an earlier save: move it aside, move the new one in, then delete the old one. A
  // crash in between leaves the old one under its .old name and `path` absent or complete.
  std::string old_dir;
  detail::check_replaceable(final_dir);
  if (fs::exists(final_dir, ec)) {
    old_dir = detail::temp_name(final_dir);
    fs::rename(final_dir, old_dir, ec);
    if (ec)
      TF_THROW(FailedPreconditionError, kSaveOp, "cannot replace '{}': {}", final_dir,
               ec.message());
  }
  fs::rename(tmp_dir, final_dir, ec);
  if (ec)
    TF_THROW(FailedPreconditionError, kSaveOp, "cannot rename '{}' to '{}': {}", tmp_dir, final_dir,
             ec.message());
  cleanup.keep = true;
  if (!old_dir.empty()) fs::remove_all(old_dir, ec);
}

std::vector<TensorSpec> Dataset::saved_element_spec(const std::string& path) {
  return detail::read_manifest(path, "Dataset.saved_element_spec").spec;
}

Dataset Dataset::load(const std::string& path, const std::vector<TensorSpec>& element_spec) {
  using detail::kLoadOp;
  auto m = std::make_shared<detail::Manifest>(detail::read_manifest(path, kLoadOp));
  if (!element_spec.empty()) {
    bool ok = element_spec.size() == m->spec.size() || m->count == 0;
    for (size_t c = 0; ok && m->count > 0 && c < element_spec.size(); ++c) {
      const TensorSpec& want = element_spec[c];
      const TensorSpec& got = m->spec[c];
      ok = want.dtype == got.dtype && want.shape.rank() == got.shape.rank();
      for (int i = 0; ok && i < want.shape.rank(); ++i)
        ok = want.shape[i] == None || want.shape[i] == got.shape[i];
    }
    TF_CHECK_ARG(ok, kLoadOp,
                 "the element_spec {} does not match the spec {} saved in '{}' (each component's "
                 "dtype and rank must be equal, and each given dimension equal to the saved one)",
                 detail::spec_string(element_spec), detail::spec_string(m->spec), path);
  }
  return Dataset(std::make_shared<detail::LoadDataset>(path, std::move(m)));
}

}  // namespace tapeflow::data
