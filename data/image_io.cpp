// tf.io's files and image codecs (data/image_io.h) on libpng and libjpeg. Both libraries report
// errors through longjmp: each codec call runs in one function whose C++ objects are all made
// before its setjmp, and turns a jump into an InvalidArgumentError after the library's state is
// released.
#include "data/image_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <jpeglib.h>
#include <png.h>

#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "core/file.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::io {

bool is_jpeg(const std::string& s) {
  return s.size() >= 3 && static_cast<unsigned char>(s[0]) == 0xff &&
         static_cast<unsigned char>(s[1]) == 0xd8 && static_cast<unsigned char>(s[2]) == 0xff;
}

namespace {

bool is_png(const std::string& s) {
  return s.size() >= 8 && std::memcmp(s.data(), "\x89PNG\r\n\x1a\n", 8) == 0;
}

void check_channels(const char* op, int channels, std::initializer_list<int> allowed) {
  bool ok = false;
  for (int c : allowed) ok = ok || c == channels;
  TF_CHECK_ARG(ok, op, "channels must be one of [{}], got {}", fmt::join(allowed, ", "), channels);
}

// ---- PNG

struct PngSource {
  const unsigned char* data;
  size_t size, pos;
};
struct PngError {
  char message[256] = "";
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* e = static_cast<PngError*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "the data ends inside the image");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

// The image in its own layout after libpng's expansions (palette and low bit depths to 8 bits,
// transparency to alpha): `channels` 1 to 4, 8 or 16 bits (16-bit samples in host order).
struct RawImage {
  uint32_t height = 0, width = 0;
  int channels = 0, bits = 8;
  std::vector<unsigned char> pixels;
};

// False with err.message set when libpng refuses the data.
bool png_decode_raw(const std::string& contents, RawImage& img, PngError& err) {
  PngSource src{reinterpret_cast<const unsigned char*>(contents.data()), contents.size(), 0};
  std::vector<png_bytep> rows;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_on_error, png_on_warning);
  if (!png) {
    std::snprintf(err.message, sizeof err.message, "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    if (!err.message[0]) std::snprintf(err.message, sizeof err.message, "libpng failed");
    return false;
  }
  png_set_read_fn(png, &src, png_read_bytes);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16) png_set_swap(png);  // host (little-endian) order
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  img.height = png_get_image_height(png, info);
  img.width = png_get_image_width(png, info);
  img.channels = png_get_channels(png, info);
  img.bits = png_get_bit_depth(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  img.pixels.resize(row_bytes * img.height);
  rows.resize(img.height);
  for (uint32_t y = 0; y < img.height; ++y) rows[y] = img.pixels.data() + y * row_bytes;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// Converts samples between channel layouts (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA): gray to RGB
// by repetition, RGB to gray by ITU-R BT.601 luminance as libpng computes it for TF, alpha
// added as opaque (`full`) or dropped.
template <class S>
std::vector<double> convert_channels(const S* in, size_t pixels, int from, int to, double full) {
  std::vector<double> out(pixels * static_cast<size_t>(to));
  for (size_t p = 0; p < pixels; ++p) {
    const S* s = in + p * static_cast<size_t>(from);
    double r, g, b, a = full;
    if (from <= 2) {
      r = g = b = s[0];
      if (from == 2) a = s[1];
    } else {
      r = s[0];
      g = s[1];
      b = s[2];
      if (from == 4) a = s[3];
    }
    double* o = out.data() + p * static_cast<size_t>(to);
    if (to <= 2) {
      // libpng's rgb_to_gray with TF's (0.299, 0.587) weights: 15-bit fixed point, truncated.
      o[0] = from <= 2 ? r : std::floor((9798 * r + 19235 * g + 3735 * b) / 32768);
      if (to == 2) o[1] = a;
    } else {
      o[0] = r;
      o[1] = g;
      o[2] = b;
      if (to == 4) o[3] = a;
    }
  }
  return out;
}

// 8-bit pixels as they are: a uint8 tensor (one copy), or float32 over 255.
Tensor pixel_tensor(const RawImage& img, DType dtype) {
  const Tensor t = constant(img.pixels, TensorShape{static_cast<int64_t>(img.height),
                                                    static_cast<int64_t>(img.width), img.channels});
  return dtype == float32 ? cast(t, float32) / 255.0f : t;
}

// Converted samples (channel conversions, 16-bit files) as uint8, or float32 over `scale`.
Tensor image_tensor(const std::vector<double>& values, uint32_t height, uint32_t width,
                    int channels, DType dtype, double scale) {
  const TensorShape shape{static_cast<int64_t>(height), static_cast<int64_t>(width), channels};
  if (dtype == float32) {
    std::vector<double> v(values);
    for (double& x : v) x /= scale;
    return detail::from_doubles(v, shape, float32);
  }
  return detail::from_doubles(values, shape, uint8);
}

// ---- JPEG

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}
void jpeg_on_message(j_common_ptr) {}

bool jpeg_decode_raw(const std::string& contents, int channels, RawImage& img, JpegError& err,
                     bool& cmyk) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.output_message = jpeg_on_message;
  err.message[0] = 0;
  std::vector<JSAMPROW> rows(1);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(contents.data()),
               static_cast<unsigned long>(contents.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    cmyk = true;
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const int want = channels != 0 ? channels : (cinfo.num_components == 1 ? 1 : 3);
  cinfo.out_color_space = want == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  img.height = cinfo.output_height;
  img.width = cinfo.output_width;
  img.channels = cinfo.output_components;
  img.bits = 8;
  const size_t row_bytes = static_cast<size_t>(img.width) * static_cast<size_t>(img.channels);
  img.pixels.resize(row_bytes * img.height);
  while (cinfo.output_scanline < cinfo.output_height) {
    rows[0] = img.pixels.data() + static_cast<size_t>(cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&cinfo, rows.data(), 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// The (height, width, channels) uint8 pixels of `image` on the host, checked for `op`.
std::vector<unsigned char> image_bytes(const char* op, const Tensor& image,
                                       std::initializer_list<int> channels) {
  TF_CHECK_ARG(image.defined(), op, "the image is an undefined tensor (TF's None)");
  TF_CHECK_ARG(image.dtype() == uint8, op, "the image must be uint8, got {}",
               dtype_name(image.dtype()));
  TF_CHECK_ARG(image.rank() == 3, op, "the image must be (height, width, channels), got shape {}",
               image.shape().to_string());
  check_channels(op, static_cast<int>(image.shape()[2]), channels);
  TF_CHECK_ARG(image.shape()[0] >= 1 && image.shape()[1] >= 1 && image.shape()[0] < (1 << 30) &&
                   image.shape()[1] < (1 << 30),
               op, "the image must have rows and columns, got shape {}", image.shape().to_string());
  return image.numpy<uint8_t>();
}

struct PngSink {
  std::string* out;
};
void png_write_bytes(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngSink*>(png_get_io_ptr(png))->out->append(reinterpret_cast<const char*>(data), n);
}
void png_flush_nothing(png_structp) {}

bool png_encode_raw(const std::vector<unsigned char>& pixels, uint32_t height, uint32_t width,
                    int channels, int compression, std::string& out, PngError& err) {
  PngSink sink{&out};
  std::vector<png_bytep> rows(height);
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  for (uint32_t y = 0; y < height; ++y)
    rows[y] = const_cast<png_bytep>(pixels.data() + y * row_bytes);
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, png_on_error, png_on_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, &sink, png_write_bytes, png_flush_nothing);
  static constexpr int kColor[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                   PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_IHDR(png, info, width, height, 8, kColor[channels], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (compression >= 0) png_set_compression_level(png, compression);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

bool jpeg_encode_raw(const std::vector<unsigned char>& pixels, uint32_t height, uint32_t width,
                     int channels, int quality, std::string& out, JpegError& err) {
  jpeg_compress_struct cinfo;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.output_message = jpeg_on_message;
  err.message[0] = 0;
  // libjpeg's output buffer (malloc'ed by it), reached through memory after a jump.
  struct Dest {
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
  };
  Dest dest;
  Dest* const d = &dest;
  std::vector<JSAMPROW> rows(1);
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(d->buffer);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &d->buffer, &d->size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = channels;
  cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  while (cinfo.next_scanline < cinfo.image_height) {
    rows[0] = const_cast<JSAMPROW>(pixels.data() + cinfo.next_scanline * row_bytes);
    jpeg_write_scanlines(&cinfo, rows.data(), 1);
  }
  jpeg_finish_compress(&cinfo);
  out.assign(reinterpret_cast<const char*>(d->buffer), d->size);
  jpeg_destroy_compress(&cinfo);
  std::free(d->buffer);
  return true;
}

}  // namespace

std::string read_file(const std::string& filename) {
  std::ifstream in(filename, std::ios::binary);
  TF_CHECK_T(NotFoundError, in.good(), "read_file", "{}: cannot open the file", filename);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TF_CHECK_T(InternalError, !in.bad(), "read_file", "{}: reading failed", filename);
  return bytes;
}

void write_file(const std::string& filename, const std::string& contents) {
  detail::write_file_atomically("write_file", filename, {{contents.data(), contents.size()}});
}

Tensor decode_png(const std::string& contents, int channels, DType dtype) {
  const char* op = "decode_png";
  check_channels(op, channels, {0, 1, 2, 3, 4});
  TF_CHECK_ARG(dtype == uint8 || dtype == float32, op, "dtype must be uint8 or float32, got {}",
               dtype_name(dtype));
  TF_CHECK_ARG(is_png(contents), op, "the data is not a PNG (no PNG signature in its {} bytes)",
               contents.size());
  RawImage img;
  PngError err;
  TF_CHECK_ARG(png_decode_raw(contents, img, err), op, "invalid PNG data: {}", err.message);
  const int to = channels == 0 ? img.channels : channels;
  if (img.bits == 8 && to == img.channels) return pixel_tensor(img, dtype);
  const size_t pixels = static_cast<size_t>(img.height) * img.width;
  std::vector<double> v;
  double scale = 255.0;
  if (img.bits == 16) {
    std::vector<uint16_t> s(pixels * static_cast<size_t>(img.channels));
    std::memcpy(s.data(), img.pixels.data(), s.size() * sizeof(uint16_t));
    v = convert_channels(s.data(), pixels, img.channels, to, 65535.0);
    if (dtype == uint8)
      for (double& x : v) x = std::floor(x / 256.0);  // the high byte
    else
      scale = 65535.0;
  } else {
    v = convert_channels(img.pixels.data(), pixels, img.channels, to, 255.0);
  }
  return image_tensor(v, img.height, img.width, to, dtype, scale);
}

Tensor decode_jpeg(const std::string& contents, int channels) {
  const char* op = "decode_jpeg";
  check_channels(op, channels, {0, 1, 3});
  TF_CHECK_ARG(is_jpeg(contents), op, "the data is not a JPEG (no JPEG signature in its {} bytes)",
               contents.size());
  RawImage img;
  JpegError err;
  bool cmyk = false;
  const bool ok = jpeg_decode_raw(contents, channels, img, err, cmyk);
  TF_CHECK_ARG(!cmyk, op, "CMYK JPEG files are not supported");
  TF_CHECK_ARG(ok, op, "invalid JPEG data: {}", err.message);
  return pixel_tensor(img, uint8);
}

ImageFormat image_format(const std::string& contents) {
  if (is_png(contents)) return ImageFormat::png;
  if (is_jpeg(contents)) return ImageFormat::jpeg;
  if (contents.rfind("GIF8", 0) == 0) return ImageFormat::gif;
  if (contents.rfind("BM", 0) == 0) return ImageFormat::bmp;
  return ImageFormat::unknown;
}

Tensor decode_image(const std::string& contents, int channels, DType dtype,
                    bool expand_animations) {
  const char* op = "decode_image";
  TF_CHECK_ARG(dtype == uint8 || dtype == float32, op, "dtype must be uint8 or float32, got {}",
               dtype_name(dtype));
  const ImageFormat format = image_format(contents);
  if (format == ImageFormat::png) return decode_png(contents, channels, dtype);
  Tensor image;
  switch (format) {
    case ImageFormat::jpeg:
      image = decode_jpeg(contents, channels);
      break;
    case ImageFormat::gif:
      TF_CHECK_ARG(channels == 0 || channels == 3, op, "channels must be 0 or 3 for GIF, got {}",
                   channels);
      image = decode_gif(contents);
      if (!expand_animations) {
        const TensorShape& sh = image.shape();
        image = squeeze(slice(image, {0, 0, 0, 0}, {1, sh[1], sh[2], 3}), {0});
      }
      break;
    case ImageFormat::bmp:
      image = decode_bmp(contents, channels);
      break;
    default:
      TF_THROW(InvalidArgumentError, op,
               "unknown image format: the data starts with none of the PNG, JPEG, GIF and BMP "
               "signatures");
  }
  return dtype == float32 ? cast(image, float32) / 255.0f : image;
}

std::string encode_png(const Tensor& image, int compression) {
  const char* op = "encode_png";
  TF_CHECK_ARG(compression >= -1 && compression <= 9, op,
               "compression must be -1 (the default) or 0 to 9, got {}", compression);
  const std::vector<unsigned char> pixels = image_bytes(op, image, {1, 2, 3, 4});
  std::string out;
  PngError err;
  TF_CHECK_T(InternalError,
             png_encode_raw(pixels, static_cast<uint32_t>(image.shape()[0]),
                            static_cast<uint32_t>(image.shape()[1]),
                            static_cast<int>(image.shape()[2]), compression, out, err),
             op, "libpng failed: {}", err.message);
  return out;
}

std::string encode_jpeg(const Tensor& image, int quality) {
  const char* op = "encode_jpeg";
  TF_CHECK_ARG(quality >= 0 && quality <= 100, op, "quality must be in [0, 100], got {}", quality);
  const std::vector<unsigned char> pixels = image_bytes(op, image, {1, 3});
  TF_CHECK_ARG(image.shape()[0] <= 65535 && image.shape()[1] <= 65535, op,
               "JPEG images are at most 65535 pixels on a side, got shape {}",
               image.shape().to_string());
  std::string out;
  JpegError err;
  TF_CHECK_T(InternalError,
             jpeg_encode_raw(pixels, static_cast<uint32_t>(image.shape()[0]),
                             static_cast<uint32_t>(image.shape()[1]),
                             static_cast<int>(image.shape()[2]), quality, out, err),
             op, "libjpeg failed: {}", err.message);
  return out;
}

}  // namespace tapeflow::io
