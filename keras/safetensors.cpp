#include "keras/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/tape.h"
#include "core/check.h"
#include "core/context.h"
#include "core/file.h"

namespace tapeflow::keras::safetensors {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; big-endian hosts would need byte swaps");

namespace {

constexpr const char* kOp = "safetensors";
// As the reference implementation: a larger header is rejected rather than allocated.
constexpr uint64_t kMaxHeader = 100'000'000;
// Deepest JSON nesting accepted in a header.
constexpr int kMaxJsonDepth = 8;

[[noreturn]] void throw_io(const std::string& what, const std::string& path) {
  const int e = errno;
  if (e == ENOENT)
    TF_THROW(NotFoundError, kOp, "{} '{}': {}", what, path, std::strerror(e));
  TF_THROW(InternalError, kOp, "{} '{}': {}", what, path, std::strerror(e));
}

// Reads exactly n bytes at offset; false when the file ends first.
bool pread_all(int fd, void* data, size_t n, uint64_t offset) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

namespace detail {

std::string printable(std::string_view text, size_t max_chars) {
  std::string out;
  size_t shown = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (shown == max_chars) return out + "...";
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
    ++shown;
  }
  return out;
}

void write_atomically(const std::string& path,
                      const std::vector<std::pair<const void*, size_t>>& chunks) {
  tapeflow::detail::write_file_atomically(kOp, path, chunks);
}

void check_fits(const char* op, const std::string& path, std::string_view name,
                const TensorShape& shape, DType dtype, const Variable& v) {
  TF_CHECK_ARG(shape == v.shape() && dtype == v.dtype(), op,
               "'{}': tensor '{}' has shape {} and dtype {}, the variable '{}' has shape {} and "
               "dtype {}",
               path, printable(name), shape.to_string(), dtype_name(dtype), v.name(),
               v.shape().to_string(), dtype_name(v.dtype()));
}

}  // namespace detail

std::string_view dtype_code(DType d) {
  switch (d.id) {
    case DTypeId::Float16: return "F16";
    case DTypeId::BFloat16: return "BF16";
    case DTypeId::Float32: return "F32";
    case DTypeId::Float64: return "F64";
    case DTypeId::Int32: return "I32";
    case DTypeId::Int64: return "I64";
    case DTypeId::UInt8: return "U8";
    case DTypeId::Bool: return "BOOL";
  }
  TF_THROW(InvalidArgumentError, kOp, "no safetensors code for dtype {}", dtype_name(d));
}

DType dtype_from_code(std::string_view code, std::string_view context) {
  static const std::pair<std::string_view, DType> table[] = {
      {"F16", float16}, {"BF16", bfloat16}, {"F32", float32}, {"F64", float64},
      {"I32", int32},   {"I64", int64},     {"U8", uint8},    {"BOOL", bool_}};
  for (const auto& [c, d] : table)
    if (c == code) return d;
  TF_THROW(InvalidArgumentError, kOp,
           "{}: unsupported dtype '{}' (tapeflow reads F16, BF16, F32, F64, I32, I64, U8, BOOL)",
           context, detail::printable(code));
}

void save_file(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
               const std::map<std::string, std::string>& metadata) {
  // Largest elements first, then by name (the reference writer's order): with the data section
  // 8-aligned, every tensor starts at a multiple of its element size.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    TF_CHECK_ARG(!name.empty() && name != "__metadata__", kOp,
                 "'{}': invalid tensor name '{}'", path, name);
    TF_CHECK_ARG(seen.insert(name).second, kOp, "'{}': the tensor name '{}' appears twice", path,
                 name);
    TF_CHECK_ARG(t.defined(), kOp, "'{}': tensor '{}' is undefined", path, name);
    TF_CHECK_ARG(!t.is_symbolic(), kOp,
                 "'{}': tensor '{}' is symbolic (saving inside a traced function is not "
                 "supported; save outside it)",
                 path, name);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t sa = dtype_size(tensors[a].second.dtype());
    const size_t sb = dtype_size(tensors[b].second.dtype());
    if (sa != sb) return sa > sb;
    return tensors[a].first < tensors[b].first;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::vector<tapeflow::detail::HostBytes> bytes;
  std::vector<std::pair<const void*, size_t>> chunks;
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    nlohmann::ordered_json entry;
    entry["dtype"] = std::string(dtype_code(t.dtype()));
    entry["shape"] = t.shape().dims();
    entry["data_offsets"] = {offset, offset + t.nbytes()};
    header[name] = entry;
    offset += t.nbytes();
    bytes.push_back(tapeflow::detail::host_bytes(t));
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    TF_THROW(InvalidArgumentError, kOp, "'{}': tensor names and metadata must be valid UTF-8 ({})",
             path, e.what());
  }
  const size_t padded = (json.size() + 7) / 8 * 8;
  json.append(padded - json.size(), ' ');
  const uint64_t n = json.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  chunks.emplace_back(len, 8);
  chunks.emplace_back(json.data(), json.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const Tensor& t = tensors[order[k]].second;
    if (t.nbytes() > 0) chunks.emplace_back(bytes[k].data, t.nbytes());
  }
  detail::write_atomically(path, chunks);
}

// ---- reading ----

Reader::Reader(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a named pipe would wait for a writer; it is refused below instead.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw_io("cannot open", path_);
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_io("cannot stat", path_);
    TF_CHECK_ARG(S_ISREG(st.st_mode), kOp, "'{}' is not a regular file ({})", path_,
                 S_ISDIR(st.st_mode)    ? "a directory"
                 : S_ISFIFO(st.st_mode) ? "a named pipe"
                                        : "a device or socket");
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    TF_CHECK_ARG(size >= 8, kOp, "'{}' is {} bytes long, too short for the 8-byte header length",
                 path_, size);
    unsigned char len[8];
    TF_CHECK_ARG(pread_all(fd_, len, 8, 0), kOp, "'{}': cannot read the header length", path_);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
    TF_CHECK_ARG(n <= size - 8 && n <= kMaxHeader && n >= 2, kOp,
                 "'{}': invalid header length {} for a file of {} bytes (truncated or not a "
                 "safetensors file)",
                 path_, n, size);
    std::string text(n, '\0');
    TF_CHECK_ARG(pread_all(fd_, text.data(), n, 8), kOp, "'{}': cannot read the {}-byte header",
                 path_, n);
    data_start_ = 8 + n;
    const uint64_t data_size = size - data_start_;
    nlohmann::json header;
    try {
      // The depth bound keeps hostile nesting from exhausting the stack (a valid header nests
      // four levels); untrusted values are never dumped into messages.
      header = nlohmann::json::parse(
          text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
            if ((event == nlohmann::json::parse_event_t::object_start ||
                 event == nlohmann::json::parse_event_t::array_start) &&
                depth > kMaxJsonDepth)
              TF_THROW(InvalidArgumentError, kOp, "'{}': the header nests deeper than {} levels",
                       path_, kMaxJsonDepth);
            return true;
          });
    } catch (const nlohmann::json::parse_error& e) {
      // Only the position: nlohmann's message quotes the text it last read, which can be the
      // whole header (up to 100 MB of the file's bytes).
      TF_THROW(InvalidArgumentError, kOp,
               "'{}': the header is not valid JSON (parse error at byte {} of the {}-byte header)",
               path_, e.byte, n);
    } catch (const nlohmann::json::exception& e) {
      TF_THROW(InvalidArgumentError, kOp, "'{}': the header is not valid JSON (json error {})",
               path_, e.id);
    }
    TF_CHECK_ARG(header.is_object(), kOp, "'{}': the header is not a JSON object", path_);
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const auto& v = it.value();
      if (name == "__metadata__") {
        TF_CHECK_ARG(v.is_object(), kOp, "'{}': __metadata__ is not an object", path_);
        for (auto m = v.begin(); m != v.end(); ++m) {
          TF_CHECK_ARG(m.value().is_string(), kOp, "'{}': __metadata__ entry '{}' is not a string",
                       path_, detail::printable(m.key()));
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      // Names from the file are echoed shortened and escaped.
      const std::string where = fmt::format("'{}': tensor '{}'", path_, detail::printable(name));
      TF_CHECK_ARG(v.is_object() && v.contains("dtype") && v.contains("shape") &&
                       v.contains("data_offsets"),
                   kOp, "{}: the entry needs dtype, shape and data_offsets", where);
      TF_CHECK_ARG(v["dtype"].is_string(), kOp, "{}: dtype is not a string", where);
      TensorInfo info;
      info.name = name;
      info.dtype = dtype_from_code(v["dtype"].get<std::string>(), where);
      const auto& shape = v["shape"];
      TF_CHECK_ARG(shape.is_array() && shape.size() <= TensorShape::kMaxRank, kOp,
                   "{}: shape must be an array of at most {} sizes", where, TensorShape::kMaxRank);
      uint64_t numel = 1;
      // The non-zero sizes are bounded too: a zero next to huge sizes holds no data, but the
      // shape's strides would overflow (a TensorShape error naming neither file nor tensor).
      uint64_t nonzero = 1;
      for (const auto& d : shape) {
        TF_CHECK_ARG(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                     kOp, "{}: shape has a negative or non-integer size (a {})", where,
                     d.type_name());
        const uint64_t dim = d.get<uint64_t>();
        TF_CHECK_ARG(
            dim < (uint64_t{1} << 40) && (dim == 0 || nonzero <= (uint64_t{1} << 50) / dim), kOp,
            "{}: shape is too large (a size of {})", where, dim);
        numel *= dim;
        if (dim != 0) nonzero *= dim;
        info.shape.push_back(static_cast<int64_t>(dim));
      }
      const auto& off = v["data_offsets"];
      TF_CHECK_ARG(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                       off[1].is_number_unsigned(),
                   kOp, "{}: data_offsets must be two non-negative integers, got a {}", where,
                   off.is_array() ? fmt::format("{}-element array", off.size())
                                  : std::string(off.type_name()));
      info.begin = off[0].get<uint64_t>();
      info.end = off[1].get<uint64_t>();
      TF_CHECK_ARG(info.begin <= info.end && info.end <= data_size, kOp,
                   "{}: data_offsets [{}, {}] are outside the {} bytes of data (truncated file?)",
                   where, info.begin, info.end, data_size);
      TF_CHECK_ARG(info.end - info.begin == numel * dtype_size(info.dtype), kOp,
                   "{}: data_offsets [{}, {}] hold {} bytes, but dtype {} and shape {} need {}",
                   where, info.begin, info.end, info.end - info.begin, dtype_code(info.dtype),
                   info.shape.to_string(), numel * dtype_size(info.dtype));
      infos_.push_back(std::move(info));
    }
    std::sort(infos_.begin(), infos_.end(), [](const TensorInfo& a, const TensorInfo& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    // As the reference reader: the tensors tile the data section exactly.
    uint64_t expect = 0;
    for (const auto& info : infos_) {
      TF_CHECK_ARG(info.begin == expect, kOp,
                   "'{}': tensor '{}' starts at byte {} of the data, expected {} (overlapping or "
                   "missing data)",
                   path_, detail::printable(info.name), info.begin, expect);
      expect = info.end;
    }
    TF_CHECK_ARG(expect == data_size, kOp,
                 "'{}': the tensors cover {} bytes of data but the file holds {}", path_, expect,
                 data_size);
    for (size_t i = 0; i < infos_.size(); ++i) index_.emplace(infos_[i].name, i);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* Reader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &infos_[it->second];
}

Tensor Reader::read(const std::string& name) const {
  const TensorInfo* info = find(name);
  TF_CHECK_T(NotFoundError, info != nullptr, kOp, "'{}' has no tensor '{}'", path_, name);
  Tensor t = tapeflow::detail::empty(info->shape, info->dtype, Device{});
  const size_t n = static_cast<size_t>(info->end - info->begin);
  if (n > 0)
    TF_CHECK_ARG(pread_all(fd_, t.raw_data(), n, data_start_ + info->begin), kOp,
                 "'{}': cannot read the data of tensor '{}' (the file changed or is truncated)",
                 path_, name);
  if (info->dtype == bool_) {
    // Any nonzero byte is true; a bool holding another value would be undefined behaviour.
    auto* p = static_cast<unsigned char*>(t.raw_data());
    for (size_t i = 0; i < n; ++i) p[i] = p[i] != 0;
  }
  return t;
}

std::vector<std::pair<std::string, Tensor>> load_file(const std::string& path,
                                                      std::map<std::string, std::string>* metadata) {
  Reader r(path);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& info : r.tensors()) out.emplace_back(info.name, r.read(info.name));
  if (metadata) *metadata = r.metadata();
  return out;
}

// ---- variables ----

void save_variables(const std::string& path,
                    const std::vector<std::pair<std::string, Variable>>& variables,
                    const std::map<std::string, std::string>& metadata) {
  TF_CHECK_T(FailedPreconditionError, tapeflow::detail::thread_context().trace == nullptr, kOp,
             "cannot save '{}' inside a traced tf::function; save outside it", path);
  tapeflow::detail::PauseTapes pause;
  tapeflow::detail::ReplicaComponentScope cross_replica(-1);  // the first copy of mirrors
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, v] : variables) tensors.emplace_back(name, v.value());
  save_file(path, tensors, metadata);
}

std::vector<std::pair<std::string, Variable>> assign_present(
    const Reader& reader, const std::vector<std::pair<std::string, Variable>>& variables) {
  TF_CHECK_T(FailedPreconditionError, tapeflow::detail::thread_context().trace == nullptr, kOp,
             "cannot restore from '{}' inside a traced tf::function; restore outside it",
             reader.path());
  std::vector<std::pair<std::string, Variable>> absent;
  std::vector<std::pair<const TensorInfo*, Variable>> present;
  for (const auto& [name, v] : variables) {
    const TensorInfo* info = reader.find(name);
    if (!info) {
      absent.emplace_back(name, v);
      continue;
    }
    detail::check_fits(kOp, reader.path(), name, info->shape, info->dtype, v);
    present.emplace_back(info, v);
  }
  // Read everything before assigning anything: a read error leaves every variable unchanged.
  std::vector<Tensor> values;
  for (const auto& [info, v] : present) values.push_back(reader.read(info->name));
  tapeflow::detail::PauseTapes pause;
  tapeflow::detail::ReplicaComponentScope cross_replica(-1);  // assign writes every copy
  for (size_t i = 0; i < present.size(); ++i) present[i].second.assign(values[i]);
  return absent;
}

std::vector<std::string> load_variables(
    const std::string& path, const std::vector<std::pair<std::string, Variable>>& variables) {
  Reader reader(path);
  std::vector<std::string> missing;
  for (const auto& [name, v] : variables)
    if (!reader.find(name)) missing.push_back("'" + name + "'");
  if (!missing.empty()) {
    std::vector<std::string> have;
    for (const auto& info : reader.tensors()) {
      if (have.size() == 20) {
        have.push_back(fmt::format("... ({} in all)", reader.tensors().size()));
        break;
      }
      have.push_back(detail::printable(info.name));
    }
    TF_THROW(NotFoundError, kOp, "'{}' has no tensor {} (it holds: {})", path,
             fmt::join(missing, ", "), fmt::join(have, ", "));
  }
  assign_present(reader, variables);
  std::set<std::string> asked;
  for (const auto& [name, v] : variables) asked.insert(name);
  std::vector<std::string> unused;
  for (const auto& info : reader.tensors())
    if (!asked.count(info.name)) unused.push_back(info.name);
  return unused;
}

}  // namespace tapeflow::keras::safetensors
