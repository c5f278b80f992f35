// Writing a file atomically: the bytes go to a temporary file in the target's folder, which is
// fsync'ed and renamed over the target, then the folder is fsync'ed; a process killed mid-write
// leaves the previous file intact. Safe from any thread, also for one path (each write has a
// temporary file of its own; the last rename wins).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::detail {

// The temporary file write_file_atomically uses for `path`: "<path>.tmp-<writer>-<token>", with
// <writer> this process's temporary_writer_tag() and <token> 8 random hex digits, so that no two
// writers share a temporary file: not two processes of one host, nor processes of different
// hosts or PID namespaces (containers) that write into one shared folder with the same pid, nor
// two writes of one process. When that name would exceed NAME_MAX: the start of the file name,
// "~" and a hash of it, then the suffix.
std::string temporary_path_for(const std::string& path);

// "<host>-<pid namespace>-<pid>": the host name (characters other than letters, digits and '-'
// replaced by '_'), the inode of /proc/self/ns/pid (0 where there is none) and `pid` (this
// process's when negative).
std::string temporary_writer_tag(long pid = -1);

// True when `file_name` (a name, without folder) is a temporary file of write_file_atomically
// whose writer was a process of this host and PID namespace that no longer exists (killed
// mid-write). Never for another host's or namespace's file, whose writer cannot be checked from
// here, nor for other names (an older "<path>.tmp-<pid>" of an unknown host among them).
bool is_stale_temporary(const std::string& file_name);

// Writes the chunks to temporary_path_for(path), fsyncs, renames over path, fsyncs the folder.
// Errors are "[op] ..." messages naming the file: a NotFoundError when the folder does not
// exist, an InternalError otherwise; the temporary file is removed and `path` left as it was.
void write_file_atomically(const char* op, const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& chunks);

}  // namespace tapeflow::detail
