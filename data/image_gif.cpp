// tf.io.decode_gif (data/image_io.h): a GIF87a/89a reader written here (no library): the
// LZW-coded frames with their global or local palettes, interlacing, frames smaller than the
// canvas and transparent colors, composed as TF's decoder composes them (see image_io.h).
// Every read is bounds-checked; malformed data is an InvalidArgumentError naming what is wrong.
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

constexpr const char* kOp = "decode_gif";

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  size_t pos() const { return pos_; }
  bool done() const { return pos_ >= s_.size(); }
  uint8_t byte(const char* what) {
    TF_CHECK_ARG(pos_ < s_.size(), kOp, "truncated GIF: the data ends in {}", what);
    return static_cast<uint8_t>(s_[pos_++]);
  }
  uint32_t u16(const char* what) {
    const uint32_t lo = byte(what);
    return lo | (static_cast<uint32_t>(byte(what)) << 8);
  }
  void skip(size_t n, const char* what) {
    TF_CHECK_ARG(n <= s_.size() - pos_, kOp, "truncated GIF: the data ends in {}", what);
    pos_ += n;
  }
  // RGB triples of a color table of 2^(size + 1) entries.
  std::vector<uint8_t> palette(int size, const char* what) {
    const size_t n = size_t{3} << (size + 1);
    TF_CHECK_ARG(n <= s_.size() - pos_, kOp, "truncated GIF: the data ends in {}", what);
    std::vector<uint8_t> p(s_.begin() + static_cast<std::ptrdiff_t>(pos_),
                           s_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return p;
  }
  // The concatenated data sub-blocks up to the 0 terminator.
  std::string sub_blocks(const char* what) {
    std::string out;
    for (uint8_t n = byte(what); n != 0; n = byte(what)) {
      TF_CHECK_ARG(n <= s_.size() - pos_, kOp, "truncated GIF: the data ends in {}", what);
      out.append(s_, pos_, n);
      pos_ += n;
    }
    return out;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

// The `count` color indices LZW-coded in `data` with the given minimum code size.
std::vector<uint8_t> lzw_decode(const std::string& data, int min_code_size, size_t count,
                                int frame) {
  TF_CHECK_ARG(min_code_size >= 2 && min_code_size <= 8, kOp,
               "frame {}: LZW minimum code size {} is outside 2..8", frame, min_code_size);
  constexpr int kMax = 4096;
  std::vector<uint16_t> prefix(kMax);
  std::vector<uint8_t> suffix(kMax), first(kMax);
  const int clear = 1 << min_code_size, end = clear + 1;
  for (int i = 0; i < clear; ++i) suffix[i] = first[i] = static_cast<uint8_t>(i);
  int code_size = min_code_size + 1, next = end + 1, prev = -1;
  std::vector<uint8_t> out, stack;  // not reserved: `count` comes from the file
  uint64_t bits = 0;
  int nbits = 0;
  size_t at = 0;
  while (out.size() < count) {
    while (nbits < code_size && at < data.size()) {
      bits |= static_cast<uint64_t>(static_cast<uint8_t>(data[at++])) << nbits;
      nbits += 8;
    }
    if (nbits < code_size) break;  // the data ran out
    const int code = static_cast<int>(bits & ((1u << code_size) - 1u));
    bits >>= code_size;
    nbits -= code_size;
    if (code == clear) {
      code_size = min_code_size + 1, next = end + 1, prev = -1;
      continue;
    }
    if (code == end) break;
    if (prev < 0) {
      TF_CHECK_ARG(code < clear, kOp, "frame {}: invalid LZW code {} after a clear code", frame,
                   code);
      out.push_back(static_cast<uint8_t>(code));
      prev = code;
      continue;
    }
    TF_CHECK_ARG(code <= next && code < kMax, kOp, "frame {}: invalid LZW code {} (next is {})",
                 frame, code, next);
    // The string of `code` (for code == next: prev's string plus its own first index).
    int c = code == next ? prev : code;
    stack.clear();
    if (code == next) stack.push_back(first[prev]);
    while (c >= clear) {
      stack.push_back(suffix[c]);
      c = prefix[c];
    }
    stack.push_back(static_cast<uint8_t>(c));
    for (auto it = stack.rbegin(); it != stack.rend() && out.size() < count; ++it)
      out.push_back(*it);
    if (next < kMax) {
      prefix[next] = static_cast<uint16_t>(prev);
      suffix[next] = first[code == next ? prev : code];
      first[next] = first[prev];
      ++next;
      if (next == (1 << code_size) && code_size < 12) ++code_size;
    }
    prev = code;
  }
  TF_CHECK_ARG(out.size() == count, kOp, "truncated GIF: frame {} holds {} of its {} pixels", frame,
               out.size(), count);
  return out;
}

}  // namespace

Tensor decode_gif(const std::string& s) {
  TF_CHECK_ARG(s.compare(0, 6, "GIF87a") == 0 || s.compare(0, 6, "GIF89a") == 0, kOp,
               "not a GIF file: it must start with \"GIF87a\" or \"GIF89a\"");
  Reader r(s);
  r.skip(6, "the signature");
  // The screen's size is read past: TF sizes the result by the frames.
  r.skip(4, "the screen descriptor");
  const uint8_t flags = r.byte("the screen descriptor");
  r.skip(2, "the screen descriptor");  // background color index, pixel aspect ratio
  std::vector<uint8_t> global;
  if (flags & 0x80) global = r.palette(flags & 7, "the global color table");

  struct Frame {
    int64_t left, top, width, height;
    std::vector<uint8_t> colors;   // RGB triples (the local table, else the global one)
    std::vector<uint8_t> indices;  // row-major, rows in display order
    int transparent;               // -1: none
  };
  std::vector<Frame> parsed;
  int transparent = -1;  // from the graphic control extension before a frame
  for (bool trailer = false; !trailer;) {
    const uint8_t block = r.byte("a block introducer (no trailer)");
    if (block == 0x3b) {
      trailer = true;
    } else if (block == 0x21) {
      const uint8_t label = r.byte("an extension");
      if (label == 0xf9) {
        const std::string gce = r.sub_blocks("a graphic control extension");
        TF_CHECK_ARG(gce.size() >= 4, kOp, "the graphic control extension has {} bytes, not 4",
                     gce.size());
        transparent = (gce[0] & 1) ? static_cast<uint8_t>(gce[3]) : -1;
      } else {
        r.sub_blocks("an extension");
      }
    } else if (block == 0x2c) {
      const int frame = static_cast<int>(parsed.size());
      Frame f;
      f.left = r.u16("an image descriptor"), f.top = r.u16("an image descriptor");
      f.width = r.u16("an image descriptor"), f.height = r.u16("an image descriptor");
      const uint8_t flags2 = r.byte("an image descriptor");
      f.colors = (flags2 & 0x80) ? r.palette(flags2 & 7, "a local color table") : global;
      TF_CHECK_ARG(!f.colors.empty(), kOp, "frame {} has neither a local nor a global color table",
                   frame);
      const int min_code = r.byte("an image's LZW code size");
      const std::string data = r.sub_blocks("an image's data");
      const std::vector<uint8_t> coded =
          lzw_decode(data, min_code, static_cast<size_t>(f.width * f.height), frame);
      for (uint8_t index : coded)
        TF_CHECK_ARG(static_cast<size_t>(index) * 3 < f.colors.size(), kOp,
                     "frame {}: color index {} is outside the {}-color table", frame, index,
                     f.colors.size() / 3);
      // Interlaced frames store rows 0, 8, 16, ..., then 4, 12, ..., then 2, 6, ..., then 1, 3.
      if (flags2 & 0x40) {
        f.indices.resize(coded.size());
        size_t row = 0;
        for (auto [start, step] : {std::pair<int64_t, int64_t>{0, 8}, {4, 8}, {2, 4}, {1, 2}})
          for (int64_t y = start; y < f.height; y += step, ++row)
            std::memcpy(&f.indices[static_cast<size_t>(y * f.width)],
                        &coded[row * static_cast<size_t>(f.width)], static_cast<size_t>(f.width));
      } else {
        f.indices = coded;
      }
      f.transparent = transparent;
      transparent = -1;
      parsed.push_back(std::move(f));
    } else {
      TF_THROW(InvalidArgumentError, kOp, "unknown GIF block 0x{:02x} at byte {}", block,
               r.pos() - 1);
    }
  }
  TF_CHECK_ARG(!parsed.empty(), kOp, "the GIF holds no image");
  // TF's composition: the canvas is as wide and as high as the largest frame (not the screen
  // descriptor's size); a frame starts as the previous one (the first as black) and its
  // rectangle, clipped to the canvas, is painted over it, transparent pixels left as they were.
  // Disposal methods are not applied (as TF).
  int64_t cw = 0, ch = 0;
  for (const Frame& f : parsed) cw = std::max(cw, f.width), ch = std::max(ch, f.height);
  TF_CHECK_ARG(cw > 0 && ch > 0, kOp, "the GIF's frames are empty ({} x {})", cw, ch);
  const size_t plane = static_cast<size_t>(cw * ch) * 3;
  std::vector<uint8_t> frames(plane * parsed.size(), 0);
  for (size_t k = 0; k < parsed.size(); ++k) {
    const Frame& f = parsed[k];
    uint8_t* out = frames.data() + k * plane;
    if (k > 0) std::memcpy(out, out - plane, plane);
    for (int64_t i = 0; i < f.height && f.top + i < ch; ++i)
      for (int64_t j = 0; j < f.width && f.left + j < cw; ++j) {
        const uint8_t index = f.indices[static_cast<size_t>(i * f.width + j)];
        if (index == f.transparent) continue;
        std::memcpy(out + static_cast<size_t>(((f.top + i) * cw + f.left + j) * 3),
                    &f.colors[static_cast<size_t>(index) * 3], 3);
      }
  }
  return constant(frames, TensorShape{static_cast<int64_t>(parsed.size()), ch, cw, 3});
}

}  // namespace tapeflow::io
