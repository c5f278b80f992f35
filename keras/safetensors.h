// The safetensors format (https://github.com/huggingface/safetensors), read and written exactly:
// an 8-byte little-endian header length N, N bytes of JSON (padded with spaces to a multiple of
// 8) mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an
// optional "__metadata__" object of strings, then the tensors' bytes, contiguous, in the order of
// their offsets (largest element size first, then by name, so every tensor is aligned to its
// element size). Dtypes: F16 BF16 F32 F64 I32 I64 U8 BOOL.
//
// Writes are atomic: the bytes go to "<path>.tmp-<pid>" (shortened for a name near NAME_MAX,
// see core/file.h), which is fsync'ed and renamed over the target, then the directory is
// fsync'ed; a process killed mid-save leaves the old file intact.
// Reading validates everything before use (header length, JSON, dtypes, shapes, offsets inside
// the file and contiguous); a bad file is an InvalidArgumentError naming the file and the
// tensor, a missing one a NotFoundError. Messages never quote the header's JSON (a parse error
// gives its byte position), and names from the file are escaped and cut to 64 characters. No shared
// state: distinct files may be used from several threads; a Reader is used from one thread at a
// time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace tapeflow::keras::safetensors {

struct TensorInfo {
  std::string name;
  DType dtype;
  TensorShape shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

// "F32" for float32, etc.; InvalidArgumentError for a code tapeflow has no dtype for.
std::string_view dtype_code(DType d);
DType dtype_from_code(std::string_view code, std::string_view context);

// Writes `tensors` (unique, non-empty names) and the metadata atomically to `path`.
void save_file(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
               const std::map<std::string, std::string>& metadata = {});

// An open, validated safetensors file; tensors are read on demand into CPU tensors.
class Reader {
 public:
  explicit Reader(std::string path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::string& path() const { return path_; }
  // In the order of their data offsets.
  const std::vector<TensorInfo>& tensors() const { return infos_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;
  // NotFoundError naming the file when absent.
  Tensor read(const std::string& name) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> infos_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a file, in offset order.
std::vector<std::pair<std::string, Tensor>> load_file(const std::string& path,
                                                      std::map<std::string, std::string>* metadata =
                                                          nullptr);

// Saves variables (their first copy when mirrored) under the given names.
void save_variables(const std::string& path,
                    const std::vector<std::pair<std::string, Variable>>& variables,
                    const std::map<std::string, std::string>& metadata = {});
// Assigns each named variable (every copy when mirrored) from the file. Everything is checked
// before anything is assigned: a missing name is a NotFoundError, a shape or dtype mismatch an
// InvalidArgumentError naming the file, the tensor and both shapes. Returns the names in the
// file that no variable asked for.
std::vector<std::string> load_variables(const std::string& path,
                                        const std::vector<std::pair<std::string, Variable>>& variables);
// The same from an open reader: only the variables whose names are in the file are assigned;
// the others are returned (in order) instead of raising.
std::vector<std::pair<std::string, Variable>> assign_present(
    const Reader& reader, const std::vector<std::pair<std::string, Variable>>& variables);

namespace detail {
// `text` (a name read from a file) for an error message: bytes outside printable ASCII and '\'
// as \xNN, cut after max_chars characters with "...".
std::string printable(std::string_view text, size_t max_chars = 64);
// Throws InvalidArgumentError (op `op`) unless the tensor `name` of the file `path`, of `shape` and
// `dtype`, fits the variable `v` (same shape and dtype); the message names both sides.
void check_fits(const char* op, const std::string& path, std::string_view name,
                const TensorShape& shape, DType dtype, const Variable& v);
// Writes the chunks to tapeflow::detail::temporary_path_for(path) ("<path>.tmp-<writer>-<token>"),
// fsyncs, renames over path, fsyncs the directory.
void write_atomically(const std::string& path,
                      const std::vector<std::pair<const void*, size_t>>& chunks);
}  // namespace detail

}  // namespace tapeflow::keras::safetensors
