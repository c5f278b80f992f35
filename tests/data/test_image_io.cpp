// tf::io's files and image codecs (data/image_io.h): files written by TF 2.21's encoders decode
// to TF's values (a 16-bit gray PNG, a color JPEG with TF's accurate IDCT), PNG round trips
// for every channel count and the channel conversions against TF's, JPEG round trips within
// the codec's error, decode_image's sniffing, atomic write_file, and the errors.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/image_io.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// tf.io.encode_png of the uint16 image [[0, 255, 256], [4095, 65535, 30000]] (2, 3, 1).
const std::string kPng16 = from_hex(
    "89504e470d0a1a0a0000000d4948445200000003000000021000000000e88fe58500000016494441"
    "54089963606060f8cfc8c0ccffff07c3d78d0015f204b07fee32530000000049454e44ae426082");
// tf.io.encode_jpeg(quality=90) of the 8 x 8 RGB image (30 x, 30 y, 15 (x + y)).
const std::string kJpeg = from_hex(
    "ffd8ffe000104a46494600010101012c012c0000ffdb004300030202030202030303030403030405"
    "0805050404050a070706080c0a0c0c0b0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f"
    "171816141812141514ffdb00430103040405040509050509140d0b0d141414141414141414141414"
    "1414141414141414141414141414141414141414141414141414141414141414141414141414ffc0"
    "0011080008000803012200021101031101ffc4001f00000105010101010101000000000000000001"
    "02030405060708090a0bffc400b5100002010303020403050504040000017d010203000411051221"
    "31410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a2526272829"
    "2a3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a"
    "838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6"
    "c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc4001f010003"
    "0101010101010101010000000000000102030405060708090a0bffc400b511000201020404030407"
    "05040400010277000102031104052131061241510761711322328108144291a1b1c109233352f015"
    "6272d10a162434e125f11718191a262728292a35363738393a434445464748494a53545556575859"
    "5a636465666768696a737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6"
    "a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9ea"
    "f2f3f4f5f6f7f8f9faffda000c03010002110311003f00e0be0f7ec9ff00ea3fd0fd3f868a28a785"
    "c4d4f66b53a781b8cb39fec6a7fbdfebef3fffd9");
// tf.io.decode_jpeg(kJpeg, dct_method="INTEGER_ACCURATE"), channels 3 and 1.
const std::vector<double> kJpegRgb = {
    1,   0,   0,   21,  6,   13,  49,  7,   27,  78,  7,   41,  114, 5,   60,  144, 5,   73,
    171, 5,   87,  190, 12,  100, 11,  24,  17,  30,  30,  30,  58,  32,  45,  87,  31,  58,
    122, 29,  76,  152, 28,  90,  180, 30,  104, 199, 36,  117, 10,  55,  32,  29,  62,  45,
    58,  62,  61,  88,  62,  75,  123, 59,  93,  152, 59,  106, 180, 61,  119, 200, 67,  132,
    9,   85,  47,  28,  91,  60,  57,  91,  74,  86,  90,  89,  122, 89,  106, 152, 89,  120,
    178, 89,  133, 199, 97,  147, 9,   116, 62,  29,  122, 75,  57,  122, 88,  87,  121, 104,
    122, 120, 121, 152, 120, 135, 180, 121, 149, 199, 128, 162, 8,   145, 75,  27,  151, 88,
    56,  152, 104, 86,  151, 119, 122, 150, 136, 151, 149, 150, 178, 150, 164, 198, 156, 176,
    9,   175, 93,  29,  181, 106, 57,  183, 122, 86,  182, 136, 122, 181, 153, 152, 180, 166,
    179, 181, 180, 198, 187, 193, 19,  199, 110, 38,  205, 123, 66,  207, 139, 95,  206, 153,
    130, 204, 169, 160, 203, 183, 188, 205, 197, 207, 211, 210};
const std::vector<double> kJpegGray = {
    0,   11,  22,  32,  44,  54,  64,  75,  19,  30,  41,  51,  62,  72,  83,  94,
    39,  50,  61,  71,  82,  92,  103, 114, 58,  69,  79,  89,  101, 111, 121, 133,
    78,  89,  99,  109, 121, 131, 142, 153, 96,  107, 118, 128, 140, 150, 160, 171,
    116, 127, 138, 148, 160, 170, 180, 191, 135, 146, 157, 167, 178, 188, 199, 210};

tf::Tensor bytes(const std::vector<double>& v, const tf::TensorShape& shape) {
  return tf::cast(tf::constant(v, shape), tf::uint8);
}

}  // namespace

TEST_CASE("io: TF's PNG and JPEG files decode to TF's values", "[cpu][io]") {
  // TF 2.21: decode_png(dtype=uint8) keeps the high byte: [0, 0, 1, 15, 255, 117].
  const tf::Tensor p = tf::io::decode_png(kPng16);
  CHECK(p.dtype() == tf::uint8);
  CHECK(p.shape() == tf::TensorShape{2, 3, 1});
  check_values(p, {0, 0, 1, 15, 255, 117}, 0, 0);
  check_values(tf::io::decode_png(kPng16, 3),
               {0, 0, 0, 0, 0, 0, 1, 1, 1, 15, 15, 15, 255, 255, 255, 117, 117, 117}, 0, 0);
  // float32: the 16-bit values over 65535.
  check_values(tf::io::decode_png(kPng16, 0, tf::float32),
               {0, 255 / 65535.0, 256 / 65535.0, 4095 / 65535.0, 1, 30000 / 65535.0}, 1e-7, 0);
  const tf::Tensor j = tf::io::decode_jpeg(kJpeg);
  CHECK(j.shape() == tf::TensorShape{8, 8, 3});
  check_values(j, kJpegRgb, 0, 0);
  check_values(tf::io::decode_jpeg(kJpeg, 1), kJpegGray, 0, 0);
  check_values(tf::io::decode_image(kJpeg), kJpegRgb, 0, 0);
  check_values(tf::io::decode_image(kPng16), {0, 0, 1, 15, 255, 117}, 0, 0);
}

TEST_CASE("io: PNG round trips and channel conversions", "[cpu][io]") {
  const std::vector<double> v = tf::testing::random_values(5 * 7 * 4, 0, 256, 3);
  for (int c = 1; c <= 4; ++c) {
    INFO("channels " << c);
    std::vector<double> px;
    for (size_t i = 0; i < 5 * 7; ++i)
      for (int k = 0; k < c; ++k) px.push_back(std::floor(v[i * 4 + static_cast<size_t>(k)]));
    const tf::Tensor image = bytes(px, {5, 7, c});
    for (int level : {-1, 0, 9}) {
      const std::string png = tf::io::encode_png(image, level);
      check_values(tf::io::decode_png(png), px, 0, 0);
      check_values(
          tf::io::decode_image(png, 0, tf::float32),
          [&] {
            std::vector<double> f(px);
            for (double& x : f) x /= 255;
            return f;
          }(),
          1e-7, 0);
    }
  }
  // TF 2.21 for [[10, 200, 30], [255, 0, 128]], [[0, 0, 0], [90, 60, 250]]: gray [123, 90, 0,
  // 90] and RGBA with an opaque alpha.
  const tf::Tensor rgb = bytes({10, 200, 30, 255, 0, 128, 0, 0, 0, 90, 60, 250}, {2, 2, 3});
  const std::string png = tf::io::encode_png(rgb);
  check_values(tf::io::decode_png(png, 1), {123, 90, 0, 90}, 0, 0);
  check_values(tf::io::decode_png(png, 4),
               {10, 200, 30, 255, 255, 0, 128, 255, 0, 0, 0, 255, 90, 60, 250, 255}, 0, 0);
  const tf::Tensor rgba = tf::io::decode_png(tf::io::encode_png(tf::io::decode_png(png, 4)), 3);
  check_values(rgba, rgb.numpy<double>(), 0, 0);
  check_values(tf::io::decode_png(tf::io::encode_png(bytes({7, 9}, {1, 2, 1})), 2),
               {7, 255, 9, 255}, 0, 0);
}

TEST_CASE("io: JPEG round trips within the codec's error", "[cpu][io]") {
  std::vector<double> px;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 48; ++x)
      for (int c = 0; c < 3; ++c)
        px.push_back(std::floor(127.5 + 120 * std::sin(0.1 * x + 0.07 * y + c)));
  const tf::Tensor image = bytes(px, {32, 48, 3});
  const std::string jpeg = tf::io::encode_jpeg(image);
  const std::vector<double> back = tf::io::decode_jpeg(jpeg).numpy<double>();
  double mse = 0;
  for (size_t i = 0; i < px.size(); ++i) mse += (back[i] - px[i]) * (back[i] - px[i]);
  mse /= static_cast<double>(px.size());
  CHECK(10 * std::log10(255.0 * 255.0 / mse) > 35);  // PSNR of quality 95
  const std::string low = tf::io::encode_jpeg(image, 10);
  CHECK(low.size() < jpeg.size());
  CHECK(tf::io::decode_jpeg(tf::io::encode_jpeg(bytes({0, 128, 255, 64}, {2, 2, 1}))).shape() ==
        tf::TensorShape{2, 2, 1});
}

TEST_CASE("io: read_file and write_file, and the errors", "[cpu][io]") {
  tf::testing::TempDir dir;
  const std::string path = (std::filesystem::path(dir.path()) / "image.png").string();
  const std::string png = tf::io::encode_png(bytes({1, 2, 3, 4}, {2, 2, 1}));
  tf::io::write_file(path, png);
  CHECK(tf::io::read_file(path) == png);
  tf::io::write_file(path, "replaced");
  CHECK(tf::io::read_file(path) == "replaced");
  TF_REQUIRE_THROWS_CONTAINING(tf::io::read_file(path + ".missing"), tf::NotFoundError,
                               "[read_file]");
  require_error([&] { tf::io::decode_png("not a png"); },
                {"[decode_png] the data is not a PNG (no PNG signature in its 9 bytes)"});
  require_error([&] { tf::io::decode_png(png.substr(0, png.size() / 2)); },
                {"[decode_png] invalid PNG data:"});
  require_error([&] { tf::io::decode_jpeg(kJpeg.substr(0, 200)); },
                {"[decode_jpeg] invalid JPEG data:"});
  require_error([&] { tf::io::decode_image("GIF89a......"); },
                {"[decode_gif] truncated GIF: the data ends in the screen descriptor"});
  require_error([&] { tf::io::decode_image("??"); }, {"unknown image format"});
  require_error([&] { tf::io::decode_png(png, 5); },
                {"channels must be one of [0, 1, 2, 3, 4], got 5"});
  require_error([&] { tf::io::decode_jpeg(kJpeg, 4); },
                {"channels must be one of [0, 1, 3], got 4"});
  require_error(
      [&] {
        tf::io::encode_png(tf::zeros({2, 2, 3}));
      },
      {"[encode_png] the image must be uint8, got float32"});
  require_error(
      [&] {
        tf::io::encode_jpeg(bytes({1, 2}, {1, 1, 2}));
      },
      {"[encode_jpeg] channels must be one of [1, 3], got 2"});
  require_error(
      [&] {
        tf::io::encode_png(bytes({1}, {1, 1, 1}), 10);
      },
      {"compression must be -1 (the default) or 0 to 9, got 10"});
  require_error(
      [&] {
        tf::io::encode_jpeg(bytes({1}, {1, 1, 1}), 101);
      },
      {"quality must be in [0, 100], got 101"});
}
