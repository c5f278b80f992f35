#include "core/file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "core/check.h"
#include "core/hash.h"

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

std::string temporary_writer_tag(long pid) {
  // The host and namespace are fixed for the process's life; the pid changes in a forked child.
  static const std::string host_and_namespace = [] {
    char name[256] = {};
    std::string host = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "";
    if (host.empty()) host = "unknown";
    if (host.size() > 64) host.resize(64);
    for (char& c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
    // A container's processes have pids of their own: "pid:[4026531836]" names the namespace.
    std::error_code ec;
    const std::string ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec).string();
    std::string digits;
    for (char c : ns)
      if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
    return host + "-" + (digits.empty() ? "0" : digits);
  }();
  return fmt::format("{}-{}", host_and_namespace, pid < 0 ? static_cast<long>(::getpid()) : pid);
}

bool is_stale_temporary(const std::string& file_name) {
  // "...tmp-<host>-<namespace>-<pid>-<token>"; the host may hold '-', the other fields do not.
  const size_t start = file_name.rfind(".tmp-");
  if (start == std::string::npos) return false;
  const std::string suffix = file_name.substr(start + 5);
  const size_t token = suffix.rfind('-');
  if (token == std::string::npos || token == 0) return false;
  const size_t pid_at = suffix.rfind('-', token - 1);
  if (pid_at == std::string::npos) return false;
  const std::string pid_text = suffix.substr(pid_at + 1, token - pid_at - 1);
  if (pid_text.empty() || pid_text.size() > 9 ||
      !std::all_of(pid_text.begin(), pid_text.end(), ::isdigit))
    return false;
  const long pid = std::stol(pid_text);
  // Only this host's and namespace's writers can be looked up here.
  if (suffix.substr(0, token) != temporary_writer_tag(pid)) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string temporary_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  // Random per process (seeded once), and never the same twice within it.
  static const uint64_t seed = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  const uint64_t token = tapeflow::detail::fnv1a(fmt::format("{}-{}", seed, counter++));
  const std::string suffix =
      fmt::format(".tmp-{}-{:08x}", temporary_writer_tag(), token & 0xffffffffu);
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
