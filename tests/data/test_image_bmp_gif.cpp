// tf.io.decode_bmp, decode_gif and decode_image on BMP and GIF files (data/image_io.h). The files
// are written here: BMP by a small writer, GIF by an LZW encoder of the usual kind (strings of
// any length, code sizes growing to 12 bits, a clear code when the table is full), so decoding
// recovers the pixels written. The channel rules, errors and the composition of animated GIFs
// are TF 2.21's (its outputs for the same files, crafted byte for byte in Python, are quoted).
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/image_io.h"
#include "ops/factory.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::require_error;

namespace {

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

// A BMP of `pixel_values` at `bpp` bits: little-endian pixel words for 16, 24 and 32 bits
// (BITFIELDS `masks` with compression 3), palette indices for 1, 4 and 8.
std::string bmp(int width, int height, int bpp, const std::vector<uint32_t>& pixel_values,
                bool top_down = false, const std::vector<std::array<uint8_t, 3>>& palette = {},
                uint32_t header = 40, const std::vector<uint32_t>& masks = {},
                uint32_t compression = 0) {
  const uint32_t stride = (static_cast<uint32_t>(width) * bpp + 31) / 32 * 4;
  std::string data;
  for (int r = 0; r < height; ++r) {
    const int y = top_down ? r : height - 1 - r;
    std::string line(stride, '\0');
    for (int x = 0; x < width; ++x) {
      const uint32_t v = pixel_values[static_cast<size_t>(y * width + x)];
      if (bpp <= 8) {
        const int bit = x * bpp;
        line[bit / 8] =
            static_cast<char>(static_cast<uint8_t>(line[bit / 8]) | (v << (8 - bpp - bit % 8)));
      } else {
        for (int b = 0; b < bpp / 8; ++b) line[x * bpp / 8 + b] = static_cast<char>(v >> (8 * b));
      }
    }
    data += line;
  }
  std::string table;
  if (header == 40)
    for (uint32_t m : masks) put32(table, m);
  for (const auto& c : palette) {
    table += static_cast<char>(c[2]);
    table += static_cast<char>(c[1]);
    table += static_cast<char>(c[0]);
    table += '\0';
  }
  std::string ih;
  put32(ih, header);
  put32(ih, static_cast<uint32_t>(width));
  put32(ih, static_cast<uint32_t>(top_down ? -height : height));
  put16(ih, 1);
  put16(ih, static_cast<uint32_t>(bpp));
  put32(ih, compression);
  put32(ih, static_cast<uint32_t>(data.size()));
  put32(ih, 2835);
  put32(ih, 2835);
  put32(ih, static_cast<uint32_t>(palette.size()));
  put32(ih, 0);
  if (header > 40) {
    for (size_t i = 0; i < 4; ++i) put32(ih, i < masks.size() ? masks[i] : 0);
    ih.resize(header, '\0');
  }
  const uint32_t offset = 14 + header + static_cast<uint32_t>(table.size());
  std::string out = "BM";
  put32(out, offset + static_cast<uint32_t>(data.size()));
  put32(out, 0);
  put32(out, offset);
  return out + ih + table + data;
}

// LZW as GIF encoders write it: the longest known string, a new code per step, growing code
// sizes, a clear code when the 4096-entry table is full.
std::string lzw(const std::vector<uint8_t>& indices, int min_code_size) {
  const int clear = 1 << min_code_size, end = clear + 1;
  std::string out;
  uint64_t acc = 0;
  int nacc = 0, size = min_code_size + 1, next = end + 1;
  auto emit = [&](int code) {
    acc |= static_cast<uint64_t>(code) << nacc;
    nacc += size;
    while (nacc >= 8) {
      out += static_cast<char>(acc & 0xff);
      acc >>= 8;
      nacc -= 8;
    }
  };
  std::map<std::pair<int, uint8_t>, int> dict;
  emit(clear);
  int w = indices[0];
  for (size_t i = 1; i < indices.size(); ++i) {
    const uint8_t k = indices[i];
    if (auto it = dict.find({w, k}); it != dict.end()) {
      w = it->second;
      continue;
    }
    emit(w);
    dict[{w, k}] = next++;
    if (next > (1 << size) && size < 12) ++size;
    if (next == 4096) {
      emit(clear);
      dict.clear();
      size = min_code_size + 1;
      next = end + 1;
    }
    w = k;
  }
  emit(w);
  emit(end);
  if (nacc > 0) out += static_cast<char>(acc & 0xff);
  return out;
}

struct GifFrame {
  int left = 0, top = 0, width = 0, height = 0;
  std::vector<uint8_t> indices;               // row-major, display order
  std::vector<std::array<uint8_t, 3>> local;  // empty: the global table
  int transparent = -1;
  bool interlace = false;
};

// A GIF89a with a global table of 2^bits colors (palette padded with black).
std::string gif(int width, int height, const std::vector<std::array<uint8_t, 3>>& palette, int bits,
                const std::vector<GifFrame>& frames) {
  auto table = [&](const std::vector<std::array<uint8_t, 3>>& p) {
    std::string t;
    for (size_t i = 0; i < (size_t{1} << bits); ++i)
      for (int c = 0; c < 3; ++c) t += static_cast<char>(i < p.size() ? p[i][c] : 0);
    return t;
  };
  std::string out = "GIF89a";
  put16(out, static_cast<uint32_t>(width));
  put16(out, static_cast<uint32_t>(height));
  out += static_cast<char>(0x80 | (bits - 1));
  out += '\0';
  out += '\0';
  out += table(palette);
  for (const GifFrame& f : frames) {
    if (f.transparent >= 0) {
      out += std::string("\x21\xf9\x04\x01\x00\x00", 6);
      out += static_cast<char>(f.transparent);
      out += '\0';
    }
    out += '\x2c';
    put16(out, static_cast<uint32_t>(f.left));
    put16(out, static_cast<uint32_t>(f.top));
    put16(out, static_cast<uint32_t>(f.width));
    put16(out, static_cast<uint32_t>(f.height));
    out += static_cast<char>((f.local.empty() ? 0 : 0x80 | (bits - 1)) | (f.interlace ? 0x40 : 0));
    if (!f.local.empty()) out += table(f.local);
    std::vector<uint8_t> stored;
    std::vector<int> rows;
    if (f.interlace) {
      for (auto [start, step] : {std::pair<int, int>{0, 8}, {4, 8}, {2, 4}, {1, 2}})
        for (int y = start; y < f.height; y += step) rows.push_back(y);
    } else {
      for (int y = 0; y < f.height; ++y) rows.push_back(y);
    }
    for (int y : rows)
      stored.insert(stored.end(), f.indices.begin() + y * f.width,
                    f.indices.begin() + (y + 1) * f.width);
    const int min_code = std::max(bits, 2);
    out += static_cast<char>(min_code);
    const std::string data = lzw(stored, min_code);
    for (size_t i = 0; i < data.size(); i += 255) {
      const std::string block = data.substr(i, 255);
      out += static_cast<char>(block.size());
      out += block;
    }
    out += '\0';
  }
  return out + ';';
}

std::vector<double> doubles(const tf::Tensor& t) {
  std::vector<double> out;
  for (uint8_t v : t.numpy<uint8_t>()) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("decode_bmp: TF's files and channels, and palettes, 16-bit and BITFIELDS files",
          "[cpu][data][image_io]") {
  // 3 x 2 RGBA pixels, as 0xAARRGGBB.
  const std::vector<uint32_t> argb = {0xd95f82c2, 0xa3cfeb0f, 0x10203040,
                                      0xff000000, 0x00ffffff, 0x807f8081};
  std::vector<uint32_t> bgr24, bgra32;
  std::vector<double> rgb, rgba;
  for (uint32_t v : argb) {
    bgr24.push_back(v & 0xffffff);
    bgra32.push_back(v);
    for (int c : {16, 8, 0}) rgb.push_back((v >> c) & 0xff);
    for (int c : {16, 8, 0, 24}) rgba.push_back((v >> c) & 0xff);
  }
  std::vector<double> rgb_opaque;
  for (size_t i = 0; i < rgb.size(); ++i) {
    rgb_opaque.push_back(rgb[i]);
    if (i % 3 == 2) rgb_opaque.push_back(255);
  }
  // TF 2.21: 24-bit files give 3 channels, 32-bit ones 4 (the fourth byte as alpha); rows
  // bottom-up or top-down; channels 3 drops alpha, 4 adds an opaque one.
  for (bool top_down : {false, true}) {
    const std::string b24 = bmp(3, 2, 24, bgr24, top_down);
    CHECK(tf::io::decode_bmp(b24).shape() == tf::TensorShape({2, 3, 3}));
    CHECK(doubles(tf::io::decode_bmp(b24)) == rgb);
    CHECK(doubles(tf::io::decode_bmp(b24, 4)) == rgb_opaque);
    const std::string b32 = bmp(3, 2, 32, bgra32, top_down);
    CHECK(doubles(tf::io::decode_bmp(b32)) == rgba);
    CHECK(doubles(tf::io::decode_bmp(b32, 3)) == rgb);
    // The 124-byte (V5) header.
    CHECK(doubles(tf::io::decode_bmp(bmp(3, 2, 32, bgra32, top_down, {}, 124))) == rgba);
  }
  // BITFIELDS: R 5, G 6, B 5 bits; 32-bit with an alpha mask in a V5 header.
  const std::vector<uint32_t> p565 = {0xf800, 0x07e0, 0x001f, 0x8410, 0xffff, 0x0000};
  CHECK(
      doubles(
          tf::io::decode_bmp(bmp(3, 2, 16, p565, false, {}, 40, {0xf800, 0x07e0, 0x001f}, 3))) ==
      std::vector<double>{255, 0, 0, 0, 255, 0, 0, 0, 255, 132, 130, 132, 255, 255, 255, 0, 0, 0});
  // 16-bit without masks: 5-5-5.
  CHECK(doubles(tf::io::decode_bmp(bmp(2, 1, 16, {0x7c00, 0x03ff}))) ==
        std::vector<double>{255, 0, 0, 0, 255, 255});
  CHECK(doubles(tf::io::decode_bmp(bmp(3, 2, 32, bgra32, false, {}, 124,
                                       {0x00ff0000, 0x0000ff00, 0x000000ff, 0xff000000}, 3))) ==
        rgba);
  // Palettes: a color one gives RGB (TF 2.21 returns the indices as gray: [[1], [1], ...]), a
  // gray one one channel, 1- and 4-bit files too.
  const std::vector<std::array<uint8_t, 3>> colors = {
      {255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 20, 30}};
  const std::vector<uint32_t> idx = {1, 1, 3, 0, 2, 3};
  std::vector<double> want;
  for (uint32_t i : idx)
    for (int c = 0; c < 3; ++c) want.push_back(colors[i][c]);
  for (int bpp : {8, 4}) {
    CAPTURE(bpp);
    CHECK(doubles(tf::io::decode_bmp(bmp(3, 2, bpp, idx, false, colors))) == want);
  }
  CHECK(doubles(tf::io::decode_bmp(
            bmp(5, 1, 1, {1, 0, 0, 1, 1}, false, {{0, 0, 0}, {200, 100, 50}}))) ==
        std::vector<double>{200, 100, 50, 0, 0, 0, 0, 0, 0, 200, 100, 50, 200, 100, 50});
  const std::vector<std::array<uint8_t, 3>> grays = {{0, 0, 0}, {7, 7, 7}, {250, 250, 250}};
  const tf::Tensor g = tf::io::decode_bmp(bmp(3, 1, 8, {2, 0, 1}, false, grays));
  CHECK(g.shape() == tf::TensorShape({1, 3, 1}));
  CHECK(doubles(g) == std::vector<double>{250, 0, 7});
  CHECK(doubles(tf::io::decode_bmp(bmp(3, 1, 8, {2, 0, 1}, false, grays), 3)) ==
        std::vector<double>{250, 250, 250, 0, 0, 0, 7, 7, 7});
  // decode_image sniffs BMP; float32 is / 255.
  CHECK(doubles(tf::io::decode_image(bmp(3, 2, 24, bgr24))) == rgb);
  CHECK(tf::io::decode_image(bmp(3, 2, 24, bgr24), 0, tf::float32).numpy<float>()[0] ==
        static_cast<float>(0x5f) / 255.0f);
}

TEST_CASE("image_format and is_jpeg tell the four formats apart by their signatures",
          "[cpu][data][image_io]") {
  using tf::io::ImageFormat;
  const tf::Tensor pixels =
      tf::fill(tf::TensorShape{2, 2, 3}, tf::constant(tf::Tensor(9.0), tf::uint8));
  CHECK(tf::io::image_format(tf::io::encode_png(pixels)) == ImageFormat::png);
  CHECK(tf::io::image_format(tf::io::encode_jpeg(pixels)) == ImageFormat::jpeg);
  CHECK(tf::io::image_format(bmp(2, 2, 24, {0, 0, 0, 0})) == ImageFormat::bmp);
  CHECK(tf::io::image_format("GIF89a") == ImageFormat::gif);
  CHECK(tf::io::image_format("GIF7") == ImageFormat::unknown);
  CHECK(tf::io::image_format("") == ImageFormat::unknown);
  CHECK(tf::io::image_format("\x89PNG\r\n") == ImageFormat::unknown);  // truncated signature
  CHECK(tf::io::is_jpeg(tf::io::encode_jpeg(pixels)));
  CHECK_FALSE(tf::io::is_jpeg(tf::io::encode_png(pixels)));
  CHECK_FALSE(tf::io::is_jpeg("\xff\xd8"));
}

TEST_CASE("decode_bmp: bad files and channels are named errors", "[cpu][data][image_io]") {
  const std::string ok = bmp(2, 2, 24, {0, 0, 0, 0});
  // TF 2.21's message.
  require_error([&] { tf::io::decode_bmp(ok, 1); },
                {"[decode_bmp] `channels` must be 0, 3 or 4 for BMP, but got 1"});
  require_error([&] { tf::io::decode_image(ok, 1); },
                {"[decode_bmp] `channels` must be 0, 3 or 4 for BMP, but got 1"});
  require_error([] { tf::io::decode_bmp("PK\x03\x04"); }, {"[decode_bmp] not a BMP file"});
  require_error([&] { tf::io::decode_bmp(ok.substr(0, ok.size() - 3)); },
                {"[decode_bmp] truncated BMP: 2 x 2 pixels of 24 bits need 2 rows of 8 bytes from "
                 "offset 54"});
  require_error(
      [] {
        tf::io::decode_bmp(bmp(2, 1, 8, {0, 1}, false, {{1, 2, 3}, {4, 5, 6}}, 40, {}, 1));
      },
      {"[decode_bmp] RLE-compressed BMP files (compression 1) are not supported"});
  require_error(
      [] {
        tf::io::decode_bmp(bmp(2, 1, 8, {0, 3}, false, {{1, 2, 3}, {4, 5, 6}}));
      },
      {"[decode_bmp] pixel (0, 1) has palette index 3, the palette has 2 colors"});
  require_error(
      [] {
        tf::io::decode_bmp(bmp(2, 1, 12, {0, 0}));
      },
      {"[decode_bmp] 12 bits per pixel is not a BMP depth"});
  std::string zero = ok;
  zero[18] = zero[19] = zero[20] = zero[21] = '\0';
  require_error([&] { tf::io::decode_bmp(zero); },
                {"[decode_bmp] the image must have a positive size, got 0 x 2"});
}

TEST_CASE("decode_gif: LZW frames, palettes, interlacing and TF's composition",
          "[cpu][data][image_io]") {
  // 256 colors, 120 x 90 pixels: random runs and noise, so the codes reach 12 bits and the table
  // fills (clear codes) and strings of every length (KwKwK included) occur.
  std::vector<std::array<uint8_t, 3>> pal256;
  for (int i = 0; i < 256; ++i)
    pal256.push_back({static_cast<uint8_t>(i), static_cast<uint8_t>(255 - i),
                      static_cast<uint8_t>(i * 7 % 256)});
  GifFrame big;
  big.width = 120, big.height = 90;
  uint32_t state = 12345;
  for (int i = 0; i < big.width * big.height; ++i) {
    state = state * 1103515245u + 12345u;
    const uint32_t r = (state >> 16) & 0x7fff;
    big.indices.push_back(i % 97 < 30 ? static_cast<uint8_t>(i / 97 % 256)
                                      : static_cast<uint8_t>(r % 256));
  }
  const tf::Tensor decoded = tf::io::decode_gif(gif(120, 90, pal256, 8, {big}));
  REQUIRE(decoded.shape() == tf::TensorShape({1, 90, 120, 3}));
  std::vector<double> want;
  for (uint8_t i : big.indices)
    for (int c = 0; c < 3; ++c) want.push_back(pal256[i][c]);
  CHECK(doubles(decoded) == want);
  // Interlaced rows come back in display order.
  GifFrame inter = big;
  inter.interlace = true;
  CHECK(doubles(tf::io::decode_gif(gif(120, 90, pal256, 8, {inter}))) == want);

  // TF 2.21's tf.io.decode_gif of the same two-frame file (the second frame (3, 4) at (2, 1)
  // with its own palette and transparent index 3): the second frame starts from the first, and
  // its transparent pixels keep the first's.
  const std::vector<std::array<uint8_t, 3>> pal = {
      {255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {9, 99, 199}};
  GifFrame f1, f2;
  f1.width = 7, f1.height = 6;
  f1.indices = {1, 2, 3, 3, 0, 0, 3, 3, 0, 1, 3, 1, 1, 3, 1, 1, 2, 2, 0, 0, 3,
                3, 3, 2, 3, 1, 1, 3, 0, 1, 0, 1, 3, 0, 1, 1, 3, 0, 2, 1, 0, 3};
  f2.left = 2, f2.top = 1, f2.width = 4, f2.height = 3, f2.transparent = 3;
  f2.indices = {0, 1, 1, 1, 0, 3, 2, 3, 0, 2, 1, 2};
  f2.local = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
  const tf::Tensor anim = tf::io::decode_gif(gif(7, 6, pal, 2, {f1, f2}));
  REQUIRE(anim.shape() == tf::TensorShape({2, 6, 7, 3}));
  const std::vector<double> all = doubles(anim);
  const std::vector<double> tf_output = {
      0,   255, 0,   0,   0,   255, 9,   99,  199, 9,   99,  199, 255, 0,   0,   255, 0,   0,
      9,   99,  199, 9,   99,  199, 255, 0,   0,   0,   255, 0,   9,   99,  199, 0,   255, 0,
      0,   255, 0,   9,   99,  199, 0,   255, 0,   0,   255, 0,   0,   0,   255, 0,   0,   255,
      255, 0,   0,   255, 0,   0,   9,   99,  199, 9,   99,  199, 9,   99,  199, 0,   0,   255,
      9,   99,  199, 0,   255, 0,   0,   255, 0,   9,   99,  199, 255, 0,   0,   0,   255, 0,
      255, 0,   0,   0,   255, 0,   9,   99,  199, 255, 0,   0,   0,   255, 0,   0,   255, 0,
      9,   99,  199, 255, 0,   0,   0,   0,   255, 0,   255, 0,   255, 0,   0,   9,   99,  199,
      0,   255, 0,   0,   0,   255, 9,   99,  199, 9,   99,  199, 255, 0,   0,   255, 0,   0,
      9,   99,  199, 9,   99,  199, 255, 0,   0,   1,   2,   3,   4,   5,   6,   4,   5,   6,
      4,   5,   6,   9,   99,  199, 0,   255, 0,   0,   255, 0,   1,   2,   3,   0,   0,   255,
      7,   8,   9,   255, 0,   0,   9,   99,  199, 9,   99,  199, 9,   99,  199, 1,   2,   3,
      7,   8,   9,   4,   5,   6,   7,   8,   9,   9,   99,  199, 255, 0,   0,   0,   255, 0,
      255, 0,   0,   0,   255, 0,   9,   99,  199, 255, 0,   0,   0,   255, 0,   0,   255, 0,
      9,   99,  199, 255, 0,   0,   0,   0,   255, 0,   255, 0,   255, 0,   0,   9,   99,  199};
  CHECK(all == tf_output);
  // A lone frame smaller than the screen: TF 2.21 sizes the result by the frame ((3, 4)), paints
  // it at its offset (1, 2) clipped, black elsewhere.
  GifFrame small = f2;
  small.left = 1, small.top = 2, small.transparent = -1, small.local.clear();
  const tf::Tensor s = tf::io::decode_gif(gif(7, 6, pal, 2, {small}));
  CHECK(s.shape() == tf::TensorShape({1, 3, 4, 3}));
  std::vector<double> want_small(36, 0.0);
  for (int x = 1; x < 4; ++x)
    for (int c = 0; c < 3; ++c) want_small[(2 * 4 + x) * 3 + c] = pal[f2.indices[x - 1]][c];
  CHECK(doubles(s) == want_small);

  // decode_image: 4-D, or the first frame with expand_animations false; TF's channel rule.
  CHECK(tf::io::decode_image(gif(7, 6, pal, 2, {f1, f2})).shape() == tf::TensorShape({2, 6, 7, 3}));
  const tf::Tensor first = tf::io::decode_image(gif(7, 6, pal, 2, {f1, f2}), 3, tf::uint8, false);
  CHECK(first.shape() == tf::TensorShape({6, 7, 3}));
  CHECK(doubles(first) == std::vector<double>(all.begin(), all.begin() + 126));
  require_error([&] { tf::io::decode_image(gif(7, 6, pal, 2, {f1}), 1); },
                {"[decode_image] channels must be 0 or 3 for GIF, got 1"});
}

TEST_CASE("decode_gif: malformed files are named errors", "[cpu][data][image_io]") {
  const std::vector<std::array<uint8_t, 3>> pal = {{1, 2, 3}, {4, 5, 6}};
  GifFrame f;
  f.width = 4, f.height = 2;
  f.indices = {0, 1, 1, 0, 1, 0, 0, 1};
  const std::string ok = gif(4, 2, pal, 1, {f});
  CHECK(tf::io::decode_gif(ok).shape() == tf::TensorShape({1, 2, 4, 3}));
  require_error([] { tf::io::decode_gif("GIF90a_______"); }, {"[decode_gif] not a GIF file"});
  require_error([&] { tf::io::decode_gif(ok.substr(0, ok.size() - 6)); },
                {"[decode_gif] truncated GIF"});
  require_error([&] { tf::io::decode_gif(ok.substr(0, 19) + ";"); },
                {"[decode_gif] the GIF holds no image"});
  std::string bad_block = ok;
  bad_block[19] = '\x99';
  require_error([&] { tf::io::decode_gif(bad_block); },
                {"[decode_gif] unknown GIF block 0x99 at byte 19"});
  // An index past a 2-color table (the table holds 2 entries; 3 is coded).
  GifFrame wide = f;
  wide.indices[5] = 3;
  require_error([&] { tf::io::decode_gif(gif(4, 2, pal, 1, {wide})); },
                {"[decode_gif] frame 0: color index 3 is outside the 2-color table"});
  std::string lzw_size = ok;
  lzw_size[19 + 10] = '\x0b';
  require_error([&] { tf::io::decode_gif(lzw_size); },
                {"[decode_gif] frame 0: LZW minimum code size 11 is outside 2..8"});
}

TEST_CASE("decode_bmp and decode_gif: every truncation and random corruptions fail cleanly",
          "[cpu][data][image_io][adversarial]") {
  std::vector<std::array<uint8_t, 3>> pal = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
  GifFrame f1, f2;
  f1.width = 9, f1.height = 7, f1.interlace = true;
  for (int i = 0; i < 63; ++i) f1.indices.push_back(static_cast<uint8_t>(i * 7 % 4));
  f2 = f1;
  f2.left = 3, f2.top = 2, f2.width = 5, f2.height = 4, f2.transparent = 1, f2.interlace = false;
  f2.indices.resize(20);
  f2.local = pal;
  const std::vector<std::string> files = {
      gif(9, 7, pal, 2, {f1, f2}), bmp(5, 3, 24, std::vector<uint32_t>(15, 0x123456)),
      bmp(5, 3, 4, std::vector<uint32_t>(15, 2), true, {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}}),
      bmp(4, 2, 16, std::vector<uint32_t>(8, 0xf81f), false, {}, 40, {0xf800, 0x07e0, 0x001f}, 3)};
  auto decodes_or_refuses = [](const std::string& data) {
    try {
      (void)tf::io::decode_image(data);
    } catch (const tf::InvalidArgumentError&) {
    }
  };
  uint32_t state = 7;
  for (const std::string& file : files) {
    for (size_t n = 0; n < file.size(); ++n) decodes_or_refuses(file.substr(0, n));
    for (int trial = 0; trial < 400; ++trial) {
      std::string bad = file;
      for (int k = 0; k < 3; ++k) {
        state = state * 1103515245u + 12345u;
        bad[(state >> 8) % bad.size()] = static_cast<char>(state >> 24);
      }
      decodes_or_refuses(bad);
    }
  }
}
