// Writing a file atomically: the bytes go to a temporary file in the target's folder, which is
// fsync'ed and renamed over the target, then the folder is fsync'ed; a process killed mid-write
// leaves the previous file intact. No shared state; safe from any thread for distinct paths.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace tapeflow::detail {

// The temporary file write_file_atomically uses for `path`: "<path>.tmp-<pid>", or, when that
// name would exceed NAME_MAX, the start of the file name, "~" and a hash of it, ".tmp-<pid>".
std::string temporary_path_for(const std::string& path);

// Writes the chunks to temporary_path_for(path), fsyncs, renames over path, fsyncs the folder.
// Errors are "[op] ..." messages naming the file: a NotFoundError when the folder does not
// exist, an InternalError otherwise; the temporary file is removed and `path` left as it was.
void write_file_atomically(const char* op, const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& chunks);

}  // namespace tapeflow::detail
