#include "core/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/check.h"

namespace tapeflow::detail {
namespace {

[[noreturn]] void throw_io(const char* op, const std::string& what, const std::string& path) {
  const int e = errno;
  if (e == ENOENT) TF_THROW(NotFoundError, op, "{} '{}': {}", what, path, std::strerror(e));
  TF_THROW(InternalError, op, "{} '{}': {}", what, path, std::strerror(e));
}

void write_all(const char* op, int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_io(op, "cannot write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void fsync_directory_of(const char* op, const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io(op, "cannot open the directory", dir.string());
  // Some file systems refuse fsync on directories (EINVAL): the rename is then as durable as
  // they make it.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw_io(op, "cannot fsync the directory", dir.string());
  }
  ::close(fd);
}

}  // namespace

std::string temporary_path_for(const std::string& path) {
  const std::string suffix = ".tmp-" + std::to_string(::getpid());
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  // A file name at the limit (255 bytes on most file systems) leaves no room for the suffix:
  // its start then stands for it, with a hash of the whole name to keep distinct names apart.
  constexpr size_t kNameMax = NAME_MAX;
  if (name.size() + suffix.size() <= kNameMax) return path + suffix;
  const std::string hash = fmt::format("~{:016x}", std::hash<std::string>{}(name));
  const std::string shorter =
      name.substr(0, kNameMax - suffix.size() - hash.size()) + hash + suffix;
  return (p.parent_path() / shorter).string();
}

void write_file_atomically(const char* op, const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& chunks) {
  const std::string tmp = temporary_path_for(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io(op, "cannot create", tmp);
  try {
    for (const auto& [data, n] : chunks) write_all(op, fd, data, n, tmp);
    if (::fsync(fd) != 0) throw_io(op, "cannot fsync", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    errno = e;
    throw_io(op, "cannot close", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    errno = e;
    throw_io(op, "cannot rename the temporary file over", path);
  }
  fsync_directory_of(op, path);
}

}  // namespace tapeflow::detail
