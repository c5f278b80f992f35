// TF's tf.io file and image functions: read_file, write_file, decode_png, decode_jpeg,
// decode_image, encode_png and encode_jpeg (libpng and libjpeg-turbo, Debian's libpng-dev and
// libjpeg62-turbo-dev). tapeflow has no string tensors: the bytes TF keeps in a tf.string
// scalar are a std::string here. Images are (height, width, channels) uint8 tensors on the CPU,
// as TF's decoders return them. See docs/data.md.
#pragma once

#include <string>

#include "core/tensor.h"

namespace tapeflow::io {

// The whole file (TF's tf.io.read_file). NotFoundError when it cannot be opened.
std::string read_file(const std::string& filename);
// Writes contents to filename atomically (a temporary file renamed over it: a failed write
// leaves no torn file), as TF's tf.io.write_file writes it.
void write_file(const std::string& filename, const std::string& contents);

// TF's tf.io.decode_png: (height, width, channels) with channels 0 (the file's: 1 gray, 2 gray
// and alpha, 3 RGB, 4 RGBA), 1, 2, 3 or 4 (converted: gray to RGB by repetition, RGB to gray by
// libpng's luminance, alpha added as opaque or dropped). dtype uint8 (16-bit files keep their
// high byte, as TF's uint8 decode) or float32 (TF's convert_image_dtype: value / 255, or /
// 65535 for 16-bit files). Malformed data is an InvalidArgumentError naming libpng's reason.
Tensor decode_png(const std::string& contents, int channels = 0, DType dtype = uint8);
// TF's tf.io.decode_jpeg: uint8 (height, width, channels), channels 0 (the file's: 1 or 3), 1
// or 3 (libjpeg's color conversion), libjpeg's accurate integer IDCT and fancy upsampling.
// CMYK files are refused.
Tensor decode_jpeg(const std::string& contents, int channels = 0);
// TF's tf.io.decode_image for PNG and JPEG (by their signatures; GIF and BMP are refused with
// a message that says so), as decode_png / decode_jpeg; dtype uint8 or float32 (/ 255).
Tensor decode_image(const std::string& contents, int channels = 0, DType dtype = uint8);
// TF's tf.io.encode_png: a (height, width, 1 to 4) uint8 image as PNG bytes; compression -1
// (zlib's default) or 0 to 9.
std::string encode_png(const Tensor& image, int compression = -1);
// TF's tf.io.encode_jpeg: a (height, width, 1 or 3) uint8 image as baseline JPEG bytes, quality
// 0 to 100 (TF's default 95), 4:2:0 chroma subsampling for color as TF's default.
std::string encode_jpeg(const Tensor& image, int quality = 95);

}  // namespace tapeflow::io
