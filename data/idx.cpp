#include "data/idx.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/check.h"
#include "core/file.h"

namespace tapeflow::data {
namespace {

constexpr const char* kRead = "read_idx";
constexpr const char* kWrite = "write_idx";
// A header claiming more than this is corrupt rather than a dataset we would load in memory.
constexpr uint64_t kMaxBytes = uint64_t{1} << 36;

// `data` as one gzip member (zlib's default level, as gzopen's "wb").
std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& data, const std::string& path) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip wrapper with its CRC-32 and length.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    TF_THROW(ResourceExhaustedError, kWrite, "{}: cannot start zlib's deflate", path);
  std::vector<uint8_t> out;
  size_t done = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    const size_t in_chunk = std::min<size_t>(data.size() - done, 1u << 30);
    zs.next_in = const_cast<uint8_t*>(data.data() + done);
    zs.avail_in = static_cast<unsigned>(in_chunk);
    const size_t old = out.size();
    out.resize(old + deflateBound(&zs, zs.avail_in) + 64);
    zs.next_out = out.data() + old;
    zs.avail_out = static_cast<unsigned>(out.size() - old);
    const bool last = done + in_chunk == data.size();
    rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    done += in_chunk - zs.avail_in;
    // The unused tail goes by erase: a shrinking resize() made GCC 12 warn (-Wstringop-overflow,
    // a memset it could not prove unreachable) in the sanitizer build.
    out.erase(out.end() - static_cast<std::ptrdiff_t>(zs.avail_out), out.end());
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&zs);
      TF_THROW(InternalError, kWrite, "{}: compression failed (zlib error {})", path, rc);
    }
  }
  deflateEnd(&zs);
  return out;
}

// The bytes of an IDX file, plain or gzip-compressed (detected from the gzip magic). gzip data
// goes through zlib's inflate directly rather than gzread, which accepts a stream cut before its
// CRC/length trailer and skips junk after the last member: here every member must end with a
// valid trailer, and anything after the last member that is not another member is an error.
class IdxSource {
 public:
  explicit IdxSource(const std::string& path) : path_(path), in_(1 << 17) {
    errno = 0;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0)
      TF_THROW(NotFoundError, kRead, "{}: cannot open: {}", path,
               std::strerror(errno ? errno : EIO));
    try {
      fill();
    } catch (...) {
      ::close(fd_);
      throw;
    }
    gzip_ = at_gzip_magic();
    if (gzip_) {
      zs_.zalloc = Z_NULL;
      zs_.zfree = Z_NULL;
      zs_.opaque = Z_NULL;
      zs_.next_in = Z_NULL;
      zs_.avail_in = 0;
      // 16 + MAX_WBITS: a gzip wrapper, whose CRC-32 and length inflate checks.
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {
        ::close(fd_);
        TF_THROW(ResourceExhaustedError, kRead, "{}: cannot start zlib's inflate", path);
      }
    }
  }
  ~IdxSource() {
    if (gzip_) inflateEnd(&zs_);
    ::close(fd_);
  }
  IdxSource(const IdxSource&) = delete;
  IdxSource& operator=(const IdxSource&) = delete;

  bool gzip() const { return gzip_; }

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  // Truncated or corrupt compressed data, and junk after the compressed stream, are
  // InvalidArgumentErrors.
  size_t read(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    size_t done = 0;
    while (done < n) {
      if (!gzip_) {
        if (available() == 0 && !fill()) break;
        const size_t k = std::min(n - done, available());
        std::memcpy(out + done, next_, k);
        next_ += k;
        done += k;
        continue;
      }
      if (member_done_) {
        // Another gzip member may follow (concatenated gzip files are one stream).
        if (available() < 2) fill();
        if (available() == 0) break;
        TF_CHECK_ARG(at_gzip_magic(), kRead,
                     "{}: trailing data after the end of the gzip stream (the file is corrupt)",
                     path_);
        inflateReset(&zs_);
        member_done_ = false;
      }
      if (available() == 0 && !eof_) eof_ = !fill();
      zs_.next_in = next_;
      zs_.avail_in = static_cast<unsigned>(available());
      zs_.next_out = out + done;
      zs_.avail_out = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const unsigned before = zs_.avail_out;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      next_ = zs_.next_in;
      done += before - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc == Z_BUF_ERROR || (rc == Z_OK && zs_.avail_out == before && eof_)) {
        // No progress: inflate has used every byte of the file (it may still have had output
        // pending, hence one call with no input) and the stream has not ended.
        TF_CHECK_ARG(!(eof_ && available() == 0), kRead,
                     "{}: truncated: the gzip stream ends before its end marker and checksum "
                     "(unexpected end of file)",
                     path_);
      } else if (rc != Z_OK) {
        TF_THROW(InvalidArgumentError, kRead, "{}: corrupt gzip data: {}", path_,
                 zs_.msg ? zs_.msg : "unknown zlib error");
      }
    }
    return done;
  }

 private:
  size_t available() const { return static_cast<size_t>(end_ - next_); }
  // Whether the unread bytes start with the gzip magic (a file's, or a next member's, start).
  bool at_gzip_magic() const { return available() >= 2 && next_[0] == 0x1f && next_[1] == 0x8b; }
  // Appends file bytes after the unread ones; false at the end of the file.
  bool fill() {
    const size_t keep = available();
    if (keep > 0) std::memmove(in_.data(), next_, keep);  // next_ is null before the first fill
    next_ = in_.data();
    end_ = in_.data() + keep;
    for (;;) {
      const ssize_t r = ::read(fd_, in_.data() + keep, in_.size() - keep);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) TF_THROW(InternalError, kRead, "{}: read failed: {}", path_, std::strerror(errno));
      end_ += r;
      return r > 0;
    }
  }

  std::string path_;
  int fd_ = -1;
  std::vector<uint8_t> in_;
  uint8_t* next_ = nullptr;
  uint8_t* end_ = nullptr;
  bool gzip_ = false;
  bool member_done_ = false;
  bool eof_ = false;
  z_stream zs_{};
};

void byteswap_in_place(uint8_t* data, size_t count, size_t width) {
  if (width == 1 || std::endian::native == std::endian::big) return;
  for (size_t i = 0; i < count; ++i) std::reverse(data + i * width, data + (i + 1) * width);
}

struct IdxType {
  uint8_t code;
  size_t width;
  DType dtype;
  const char* name;
};

constexpr IdxType kTypes[] = {
    {0x08, 1, uint8, "unsigned byte"}, {0x09, 1, int32, "signed byte"},
    {0x0B, 2, int32, "short"},         {0x0C, 4, int32, "int"},
    {0x0D, 4, float32, "float"},       {0x0E, 8, float64, "double"},
};

}  // namespace

Tensor read_idx(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    TF_THROW(NotFoundError, kRead, "{}: no such file", path);
  IdxSource f(path);

  uint8_t magic[4];
  const size_t got_magic = f.read(magic, 4);
  TF_CHECK_ARG(got_magic == 4, kRead,
               "{}: truncated: the file has {} byte(s), fewer than the "
               "4-byte IDX magic number",
               path, got_magic);
  TF_CHECK_ARG(magic[0] == 0 && magic[1] == 0, kRead,
               "{}: bad magic number 0x{:02x}{:02x}{:02x}{:02x}: an IDX file starts with two zero "
               "bytes, a type code and the rank (is this an IDX file?)",
               path, magic[0], magic[1], magic[2], magic[3]);
  const IdxType* type = nullptr;
  for (const IdxType& t : kTypes)
    if (t.code == magic[2]) type = &t;
  TF_CHECK_ARG(type != nullptr, kRead,
               "{}: unknown IDX type code 0x{:02x} (expected 0x08, 0x09, 0x0b, 0x0c, 0x0d or "
               "0x0e)",
               path, magic[2]);
  const int rank = magic[3];
  TF_CHECK_ARG(rank >= 1 && rank <= TensorShape::kMaxRank, kRead,
               "{}: rank {} in the header is outside 1..{}", path, rank, TensorShape::kMaxRank);

  std::vector<uint8_t> dims_be(static_cast<size_t>(rank) * 4);
  const size_t got_dims = f.read(dims_be.data(), dims_be.size());
  TF_CHECK_ARG(got_dims == dims_be.size(), kRead,
               "{}: truncated header: {} dimension(s) need {} bytes, the file has {}", path, rank,
               dims_be.size(), got_dims);
  TensorShape shape;
  uint64_t count = 1;
  // The product of the non-zero dimensions is bounded too: a zero next to huge dimensions holds
  // no data, but its strides would overflow (a TensorShape error that named no file).
  uint64_t nonzero = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* b = &dims_be[static_cast<size_t>(i) * 4];
    const uint64_t d =
        (uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) | (uint64_t{b[2]} << 8) | b[3];
    shape.push_back(static_cast<int64_t>(d));
    // Checked before multiplying, so that a corrupt header cannot overflow the count.
    const bool fits = d == 0 || nonzero <= kMaxBytes / type->width / d;
    if (d != 0) nonzero *= d;
    count *= d;
    TF_CHECK_ARG(fits, kRead,
                 "{}: the header's dimensions {} describe more than {} bytes of data{}; the "
                 "header is corrupt",
                 path, shape.to_string(), kMaxBytes,
                 count == 0 ? " (ignoring the zero dimension)" : "");
  }

  const size_t nbytes = static_cast<size_t>(count) * type->width;
  // Before allocating: the file must be able to hold what the header claims (a short file
  // claiming gigabytes is corrupt). Uncompressed data is one byte per byte; deflate expands at
  // most 1032-fold.
  std::error_code size_ec;
  const uint64_t file_size = std::filesystem::file_size(path, size_ec);
  if (!size_ec) {
    const uint64_t header = 4 + dims_be.size();
    const bool direct = !f.gzip();
    const uint64_t payload = file_size > header ? file_size - header : 0;
    TF_CHECK_ARG(!direct || nbytes <= payload, kRead,
                 "{}: truncated: the header's shape {} of {} needs {} data bytes, the file has {} "
                 "after the {}-byte header",
                 path, shape.to_string(), type->name, nbytes, payload, header);
    const uint64_t capacity = file_size * 1032 + 1024;
    TF_CHECK_ARG(direct || nbytes <= capacity, kRead,
                 "{}: truncated or corrupt: the header's shape {} of {} needs {} data bytes, more "
                 "than the {}-byte compressed file can hold",
                 path, shape.to_string(), type->name, nbytes, file_size);
  }
  // Signed bytes and shorts widen to int32 through a staging buffer; the rest land in place.
  const bool widen = type->width != dtype_size(type->dtype);
  Tensor out = tapeflow::detail::empty(shape, type->dtype, Device{});
  std::vector<uint8_t> staging(widen ? nbytes : 0);
  uint8_t* dst = widen ? staging.data() : static_cast<uint8_t*>(out.raw_data());
  const size_t got = nbytes ? f.read(dst, nbytes) : 0;
  TF_CHECK_ARG(got == nbytes, kRead,
               "{}: truncated: the header's shape {} of {} needs {} data bytes, the file has {}",
               path, shape.to_string(), type->name, nbytes, got);
  uint8_t extra;
  TF_CHECK_ARG(f.read(&extra, 1) == 0, kRead,
               "{}: trailing data after the {} bytes that the header's shape {} describes", path,
               nbytes, shape.to_string());

  if (!widen) {
    byteswap_in_place(dst, count, type->width);
  } else if (type->code == 0x09) {
    auto* o = out.data<int32_t>();
    for (size_t i = 0; i < count; ++i) o[i] = static_cast<int8_t>(staging[i]);
  } else {
    auto* o = out.data<int32_t>();
    for (size_t i = 0; i < count; ++i)
      o[i] = static_cast<int16_t>((staging[2 * i] << 8) | staging[2 * i + 1]);
  }
  return out;
}

void write_idx(const std::string& path, const Tensor& tensor, bool compress) {
  TF_CHECK_ARG(tensor.defined() && !tensor.is_symbolic(), kWrite, "{}: needs a tensor with a value",
               path);
  uint8_t code = 0;
  switch (tensor.dtype().id) {
    case DTypeId::UInt8:
      code = 0x08;
      break;
    case DTypeId::Int32:
      code = 0x0C;
      break;
    case DTypeId::Float32:
      code = 0x0D;
      break;
    case DTypeId::Float64:
      code = 0x0E;
      break;
    default:
      TF_THROW(InvalidArgumentError, kWrite,
               "{}: IDX has no type for dtype {} (use uint8, int32, float32 or float64)", path,
               dtype_name(tensor.dtype()));
  }
  TF_CHECK_ARG(tensor.rank() >= 1, kWrite, "{}: IDX needs rank >= 1, got shape ()", path);
  std::vector<uint8_t> bytes = {0, 0, code, static_cast<uint8_t>(tensor.rank())};
  for (int64_t d : tensor.shape()) {
    TF_CHECK_ARG(d <= UINT32_MAX, kWrite, "{}: dimension {} does not fit IDX's uint32", path, d);
    const auto u = static_cast<uint32_t>(d);
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(u >> s));
  }
  const size_t header = bytes.size();
  auto hb = tapeflow::detail::host_bytes(tensor);
  bytes.resize(header + tensor.nbytes());
  if (tensor.nbytes()) std::memcpy(bytes.data() + header, hb.data, tensor.nbytes());
  byteswap_in_place(bytes.data() + header, static_cast<size_t>(tensor.num_elements()),
                    dtype_size(tensor.dtype()));

  // Compressed in memory, then written atomically (temporary file, fsync, rename): a failed
  // or interrupted write leaves the previous file as it was (gzopen "wb" truncated it first).
  std::vector<uint8_t> packed;
  if (compress) packed = gzip_bytes(bytes, path);
  const std::vector<uint8_t>& out = compress ? packed : bytes;
  tapeflow::detail::write_file_atomically(kWrite, path, {{out.data(), out.size()}});
}

}  // namespace tapeflow::data
