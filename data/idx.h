// The IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/): a big-endian
// header (two zero bytes, a type code, the rank, then one uint32 per dimension) followed by the
// elements in row-major order, big-endian. Files may be gzip-compressed (detected from the gzip
// magic number; every member's CRC-32 and length are checked). Stateless and thread-safe.
#pragma once

#include <string>

#include "core/tensor.h"

namespace tapeflow::data {

// Reads an IDX file (gzip-compressed or not) into a CPU tensor. Type codes map to dtypes as:
// 0x08 unsigned byte -> uint8, 0x09 signed byte -> int32, 0x0B int16 -> int32,
// 0x0C int32 -> int32, 0x0D float32 -> float32, 0x0E float64 -> float64 (tapeflow has no 8- or
// 16-bit signed integers, so those widen).
// Errors: NotFoundError when the file is missing or unreadable; InvalidArgumentError naming the
// file for a bad magic number, an unknown type code, a rank outside 1..8, truncated or trailing
// data, and corrupt compressed data.
Tensor read_idx(const std::string& path);

// Writes a uint8, int32, float32 or float64 tensor of rank 1..8 as an IDX file, gzip-compressed
// when `compress` (the usual ".gz" files). Other dtypes are an InvalidArgumentError. The write
// is atomic (a temporary file in the same folder, fsync'ed and renamed over `path`): a failed or
// interrupted write leaves the previous file intact.
void write_idx(const std::string& path, const Tensor& tensor, bool compress = true);

}  // namespace tapeflow::data
