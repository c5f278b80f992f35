// tf.io.decode_bmp (data/image_io.h): a BMP reader written here (no library). It reads the
// uncompressed files TF's decoder reads (24- and 32-bit, bottom-up or top-down rows, the 40-byte
// and later headers) with TF's channels, and decodes what TF's gets wrong: palette images
// (1, 4 and 8 bits per pixel, through their palette; TF returns the 8-bit indices as gray),
// 16-bit images and BI_BITFIELDS masks, and the 12-byte OS/2 header. RLE- and JPEG/PNG-compressed
// files are refused by name. Every offset is checked against the data's size.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "data/image_io.h"
#include "ops/factory.h"

namespace tapeflow::io {

namespace {

constexpr const char* kOp = "decode_bmp";

uint32_t u16(const std::string& s, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(s[at])) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 8);
}
uint32_t u32(const std::string& s, size_t at) {
  return u16(s, at) | (u16(s, at + 2) << 16);
}

// A BITFIELDS mask: where its bits start and how many there are.
struct Mask {
  uint32_t mask = 0;
  int shift = 0, bits = 0;
  explicit Mask(uint32_t m = 0) : mask(m) {
    if (m == 0) return;
    while (((m >> shift) & 1u) == 0) ++shift;
    while (shift + bits < 32 && ((m >> (shift + bits)) & 1u) != 0) ++bits;
  }
  // The channel's value scaled to 0..255 (a 5-bit 31 is 255).
  uint8_t operator()(uint32_t pixel) const {
    if (bits == 0) return 0;
    const uint32_t v = (pixel & mask) >> shift;
    const uint32_t top = (bits >= 32) ? 0xffffffffu : ((1u << bits) - 1u);
    return static_cast<uint8_t>((static_cast<uint64_t>(v) * 255u + top / 2) / top);
  }
};

}  // namespace

Tensor decode_bmp(const std::string& s, int channels) {
  TF_CHECK_ARG(channels == 0 || channels == 3 || channels == 4, kOp,
               "`channels` must be 0, 3 or 4 for BMP, but got {}", channels);
  TF_CHECK_ARG(s.size() >= 26 && s[0] == 'B' && s[1] == 'M', kOp,
               "not a BMP file: it must start with \"BM\" and hold a header ({} bytes)", s.size());
  const uint32_t offset = u32(s, 10), header = u32(s, 14);
  TF_CHECK_ARG(header == 12 || header == 40 || header == 52 || header == 56 || header == 64 ||
                   header == 108 || header == 124,
               kOp, "unknown BMP header size {} (12, 40, 52, 56, 64, 108 or 124)", header);
  TF_CHECK_ARG(s.size() >= 14 + static_cast<size_t>(header), kOp,
               "truncated BMP: {} bytes hold no {}-byte header", s.size(), header);
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = 0, colors_used = 0;
  if (header == 12) {
    width = u16(s, 18);
    height = static_cast<int16_t>(u16(s, 20));
    bpp = u16(s, 24);
  } else {
    width = static_cast<int32_t>(u32(s, 18));
    height = static_cast<int32_t>(u32(s, 22));
    bpp = u16(s, 28);
    compression = u32(s, 30);
    colors_used = u32(s, 46);
  }
  const bool top_down = height < 0;
  if (top_down) height = -height;
  TF_CHECK_ARG(width > 0 && height > 0, kOp, "the image must have a positive size, got {} x {}",
               width, height);
  TF_CHECK_ARG(compression != 1 && compression != 2, kOp,
               "RLE-compressed BMP files (compression {}) are not supported", compression);
  TF_CHECK_ARG(compression != 4 && compression != 5, kOp,
               "BMP files holding a {} image are not supported", compression == 4 ? "JPEG" : "PNG");
  TF_CHECK_ARG(compression == 0 || compression == 3 || compression == 6, kOp,
               "unknown BMP compression {}", compression);
  TF_CHECK_ARG(bpp == 1 || bpp == 4 || bpp == 8 || bpp == 16 || bpp == 24 || bpp == 32, kOp,
               "{} bits per pixel is not a BMP depth (1, 4, 8, 16, 24 or 32)", bpp);
  TF_CHECK_ARG(compression == 0 || bpp == 16 || bpp == 32, kOp,
               "BITFIELDS masks need 16 or 32 bits per pixel, got {}", bpp);

  // The masks: in the header (52 bytes and more) or the 3 or 4 words after a 40-byte one.
  Mask r, g, b, a;
  size_t table = 14 + header;  // where the palette (or the masks of a 40-byte header) starts
  if (compression == 3 || compression == 6) {
    size_t at = 54;
    const int words = compression == 6 ? 4 : 3;
    if (header == 40) table += 4 * static_cast<size_t>(words);
    TF_CHECK_ARG(s.size() >= at + 4 * static_cast<size_t>(words), kOp,
                 "truncated BMP: the color masks are missing");
    r = Mask(u32(s, at));
    g = Mask(u32(s, at + 4));
    b = Mask(u32(s, at + 8));
    if (words == 4 || header >= 56) a = Mask(u32(s, at + 12));
  } else if (bpp == 16) {
    r = Mask(0x7c00), g = Mask(0x03e0), b = Mask(0x001f);
  } else if (bpp == 32) {
    // TF's reading of 32-bit files: B, G, R, A bytes.
    r = Mask(0x00ff0000), g = Mask(0x0000ff00), b = Mask(0x000000ff), a = Mask(0xff000000u);
  }

  // The palette (1, 4 and 8 bits per pixel): BGR0 entries, BGR in the 12-byte header.
  std::vector<uint8_t> palette;  // RGB triples
  bool gray = true;
  if (bpp <= 8) {
    const size_t entry = header == 12 ? 3 : 4;
    size_t count = colors_used != 0 ? colors_used : (size_t{1} << bpp);
    TF_CHECK_ARG(count <= (size_t{1} << bpp), kOp,
                 "a {}-bit BMP has at most {} palette colors, the header says {}", bpp,
                 size_t{1} << bpp, count);
    TF_CHECK_ARG(table + count * entry <= s.size() && table + count * entry <= offset, kOp,
                 "truncated BMP: the {}-color palette does not fit before the pixels", count);
    for (size_t i = 0; i < count; ++i) {
      const auto* e = reinterpret_cast<const unsigned char*>(s.data() + table + i * entry);
      palette.insert(palette.end(), {e[2], e[1], e[0]});
      gray = gray && e[0] == e[1] && e[1] == e[2];
    }
  }

  const uint64_t stride = (static_cast<uint64_t>(width) * bpp + 31) / 32 * 4;
  TF_CHECK_ARG(offset <= s.size() && static_cast<uint64_t>(height) <= (s.size() - offset) / stride,
               kOp,
               "truncated BMP: {} x {} pixels of {} bits need {} rows of {} bytes from offset {}, "
               "the data has {} bytes",
               width, height, bpp, height, stride, offset, s.size());

  // The file's channels: 1 for a gray palette (TF's 8-bit result), 3 for a color one, 16- and
  // 24-bit files; 4 for 32-bit files (TF's), and 16-bit ones with an alpha mask.
  const int file_channels = bpp <= 8 ? (gray ? 1 : 3) : (bpp == 32 || a.bits > 0) ? 4 : 3;
  const int out = channels == 0 ? file_channels : channels;
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height) * static_cast<size_t>(out));
  for (int64_t y = 0; y < height; ++y) {
    const int64_t file_row = top_down ? y : height - 1 - y;
    const auto* row = reinterpret_cast<const unsigned char*>(s.data()) + offset +
                      static_cast<uint64_t>(file_row) * stride;
    for (int64_t x = 0; x < width; ++x) {
      uint8_t rgba[4] = {0, 0, 0, 255};
      if (bpp <= 8) {
        const uint64_t bit = static_cast<uint64_t>(x) * bpp;
        const unsigned index = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1u);
        TF_CHECK_ARG(index * 3 < palette.size(), kOp,
                     "pixel ({}, {}) has palette index {}, the palette has {} colors", y, x, index,
                     palette.size() / 3);
        std::memcpy(rgba, &palette[index * 3], 3);
      } else if (bpp == 24) {
        const unsigned char* p = row + x * 3;
        rgba[0] = p[2], rgba[1] = p[1], rgba[2] = p[0];
      } else {
        const uint32_t p = bpp == 16 ? u16(s, offset + file_row * stride + x * 2)
                                     : u32(s, offset + file_row * stride + x * 4);
        rgba[0] = r(p), rgba[1] = g(p), rgba[2] = b(p);
        if (a.bits > 0) rgba[3] = a(p);
      }
      uint8_t* o = &pixels[static_cast<size_t>(y * width + x) * static_cast<size_t>(out)];
      if (out == 1) {
        o[0] = rgba[0];  // a gray palette: R = G = B
      } else {
        std::memcpy(o, rgba, static_cast<size_t>(out));
      }
    }
  }
  return constant(pixels, TensorShape{height, width, out});
}

}  // namespace tapeflow::io
