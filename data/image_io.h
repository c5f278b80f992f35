// TF's tf.io file and image functions: read_file, write_file, decode_png, decode_jpeg,
// decode_bmp, decode_gif, decode_image, encode_png and encode_jpeg (libpng and libjpeg-turbo,
// Debian's libpng-dev and libjpeg62-turbo-dev; BMP and GIF read by tapeflow's own code). tapeflow
// has no string tensors: the bytes TF keeps in a tf.string scalar are a std::string here. Images
// are (height, width, channels) uint8 tensors on the CPU, as TF's decoders return them. See
// docs/data.md.
#pragma once

#include <string>

#include "core/tensor.h"

namespace tapeflow::io {

// The whole file (TF's tf.io.read_file). NotFoundError when it cannot be opened.
std::string read_file(const std::string& filename);
// Writes contents to filename atomically (a temporary file renamed over it: a failed write
// leaves no torn file), as TF's tf.io.write_file writes it.
void write_file(const std::string& filename, const std::string& contents);

// The image formats decode_image reads, told apart by their first bytes (PNG's 8-byte signature,
// JPEG's FF D8 FF, "GIF8", "BM"); unknown for anything else.
enum class ImageFormat { unknown, png, jpeg, gif, bmp };
ImageFormat image_format(const std::string& contents);
// TF's tf.io.is_jpeg: whether the bytes start with JPEG's signature.
bool is_jpeg(const std::string& contents);

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
// TF's tf.io.decode_bmp: uint8 (height, width, channels), channels 0 (the file's), 3 or 4 (TF's
// "`channels` must be 0, 3 or 4 for BMP" otherwise). Uncompressed files of 1, 4, 8, 16, 24 and
// 32 bits per pixel, rows bottom-up or top-down, BITFIELDS masks, all header versions. The
// file's channels: 3 for 16- and 24-bit files, 4 for 32-bit ones (the fourth byte is alpha, as
// TF reads it; 255 under BITFIELDS without an alpha mask), and for palette images 1 when every
// palette color is gray, else 3. TF's decoder returns an 8-bit file's palette indices as gray
// (right only for the identity gray palette) and misreads 1-, 4- and 16-bit files; tapeflow
// looks the colors up. RLE-compressed files are an InvalidArgumentError.
Tensor decode_bmp(const std::string& contents, int channels = 0);
// TF's tf.io.decode_gif: every frame, uint8 (frames, height, width, 3), composed as TF composes
// them: the canvas is as large as the largest frame (TF's, not the screen descriptor's size),
// each frame starts from the previous one (the first from black) and its rectangle is painted
// over it, transparent pixels left as they were; disposal methods are not applied.
Tensor decode_gif(const std::string& contents);
// TF's tf.io.decode_image: PNG, JPEG, BMP and GIF by their signatures, as the decoders above,
// dtype uint8 or float32 (/ 255). A GIF gives (frames, height, width, 3), or its first frame
// (height, width, 3) with expand_animations false; channels must be 0 or 3 for a GIF and 0, 3 or
// 4 for a BMP (TF's errors).
Tensor decode_image(const std::string& contents, int channels = 0, DType dtype = uint8,
                    bool expand_animations = true);
// TF's tf.io.encode_png: a (height, width, 1 to 4) uint8 image as PNG bytes; compression -1
// (zlib's default) or 0 to 9.
std::string encode_png(const Tensor& image, int compression = -1);
// TF's tf.io.encode_jpeg: a (height, width, 1 or 3) uint8 image as baseline JPEG bytes, quality
// 0 to 100 (TF's default 95), 4:2:0 chroma subsampling for color as TF's default.
std::string encode_jpeg(const Tensor& image, int quality = 95);

}  // namespace tapeflow::io
