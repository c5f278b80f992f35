// IDX reading and writing on small files in a temporary folder (good, corrupt, truncated and
// missing files), fashion_mnist::load_data on fake files, and on the real Fashion-MNIST when the
// Debian package's files are installed.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/tensor.h"
#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
namespace fmnist = tf::keras::datasets::fashion_mnist;
using tf::testing::check_values;

using tf::testing::TempDir;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

using EnvVar = tf::testing::EnvScope;

tf::Tensor iota_u8(tf::TensorShape shape, int mod) {
  std::vector<uint8_t> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i % static_cast<size_t>(mod));
  return tf::convert_to_tensor(v, shape);
}

// A miniature Fashion-MNIST (n_train and n_test images) in dir.
void write_fake_fashion(const TempDir& dir, int64_t n_train, int64_t n_test) {
  tf::data::write_idx(dir.file("train-images-idx3-ubyte.gz"), iota_u8({n_train, 28, 28}, 256));
  tf::data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), iota_u8({n_train}, 10));
  tf::data::write_idx(dir.file("t10k-images-idx3-ubyte.gz"), iota_u8({n_test, 28, 28}, 251));
  tf::data::write_idx(dir.file("t10k-labels-idx1-ubyte.gz"), iota_u8({n_test}, 7));
}

// One gzip member holding `data` in a stored (uncompressed) deflate block, with its CRC-32 and
// length trailer.
std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t b : data) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  crc = ~crc;
  const auto n = static_cast<uint16_t>(data.size());
  std::vector<uint8_t> gz = {0x1f,
                             0x8b,
                             8,
                             0,
                             0,
                             0,
                             0,
                             0,
                             0,
                             3,
                             0x01,
                             static_cast<uint8_t>(n),
                             static_cast<uint8_t>(n >> 8),
                             static_cast<uint8_t>(~n),
                             static_cast<uint8_t>(~n >> 8)};
  for (uint8_t b : data) gz.push_back(b);
  for (uint32_t v : {crc, static_cast<uint32_t>(data.size())})
    for (int s = 0; s < 32; s += 8) gz.push_back(static_cast<uint8_t>(v >> s));
  return gz;
}

}  // namespace

TEST_CASE("write_idx and read_idx round-trip every IDX dtype", "[cpu][data][idx]") {
  TempDir dir;
  const std::vector<double> vals = {0, 1, -2.5, 300, 7, -1e6};
  for (bool compress : {true, false}) {
    for (tf::DType d : {tf::uint8, tf::int32, tf::float32, tf::float64}) {
      std::vector<double> want = vals;
      if (d == tf::uint8) want = {0, 1, 2, 255, 7, 128};
      if (d == tf::int32) want = {0, 1, -2, 300, 7, -1000000};
      tf::Tensor t = tf::cast(tf::convert_to_tensor(want, {2, 3}), d);
      const std::string path =
          dir.file(std::string("t_") + std::string(tf::dtype_name(d)) + (compress ? ".gz" : ""));
      tf::data::write_idx(path, t, compress);
      tf::Tensor r = tf::data::read_idx(path);
      CHECK(r.dtype() == d);
      CHECK(r.shape() == tf::TensorShape({2, 3}));
      CHECK(r.device() == "/device:CPU:0");
      check_values(r, want, 0, 0);
    }
  }
  // The header is big-endian as the format says: 0x00 0x00 0x0C 0x01, then the dimension.
  tf::data::write_idx(dir.file("plain"), tf::convert_to_tensor(std::vector<int32_t>{258}, {1}),
                      false);
  std::ifstream f(dir.file("plain"), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(bytes == std::vector<uint8_t>{0, 0, 0x0C, 1, 0, 0, 0, 1, 0, 0, 1, 2});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::write_idx(dir.file("x"), tf::zeros({2}, tf::int64)),
                               tf::InvalidArgumentError, "no type for dtype int64");
}

TEST_CASE("read_idx widens signed bytes and shorts to int32", "[cpu][data][idx]") {
  TempDir dir;
  write_bytes(dir.file("i8"), {0, 0, 0x09, 1, 0, 0, 0, 3, 0xFF, 0x80, 0x05});
  tf::Tensor a = tf::data::read_idx(dir.file("i8"));
  CHECK(a.dtype() == tf::int32);
  check_values(a, {-1, -128, 5}, 0, 0);
  write_bytes(dir.file("i16"), {0, 0, 0x0B, 1, 0, 0, 0, 2, 0xFF, 0xFE, 0x01, 0x00});
  tf::Tensor b = tf::data::read_idx(dir.file("i16"));
  CHECK(b.dtype() == tf::int32);
  check_values(b, {-2, 256}, 0, 0);
  // A zero-size dimension is a valid, empty tensor.
  write_bytes(dir.file("empty"), {0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 5});
  CHECK(tf::data::read_idx(dir.file("empty")).shape() == tf::TensorShape({0, 5}));
}

TEST_CASE("read_idx reports corrupt and missing files with their path", "[cpu][data][idx]") {
  TempDir dir;
  const std::string missing = dir.file("nope-idx1-ubyte.gz");
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(missing), tf::NotFoundError, missing);

  const std::string magic = dir.file("magic");
  write_bytes(magic, {0x1F, 0x00, 0x08, 0x01, 0, 0, 0, 1, 7});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(magic), tf::InvalidArgumentError,
                               magic + ": bad magic number 0x1f000801");

  const std::string code = dir.file("code");
  write_bytes(code, {0, 0, 0x07, 1, 0, 0, 0, 1, 7});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(code), tf::InvalidArgumentError,
                               code + ": unknown IDX type code 0x07");

  const std::string rank = dir.file("rank");
  write_bytes(rank, {0, 0, 0x08, 0});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(rank), tf::InvalidArgumentError,
                               "rank 0 in the header is outside 1..8");

  const std::string tiny = dir.file("tiny");
  write_bytes(tiny, {0, 0});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(tiny), tf::InvalidArgumentError,
                               tiny + ": truncated: the file has 2 byte(s)");

  const std::string header = dir.file("header");
  write_bytes(header, {0, 0, 0x08, 2, 0, 0, 0, 1});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(header), tf::InvalidArgumentError,
                               header + ": truncated header");

  const std::string data = dir.file("data");
  write_bytes(data, {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(data), tf::InvalidArgumentError,
                               data +
                                   ": truncated: the header's shape (2,) of int needs 8 data "
                                   "bytes, the file has 6");

  const std::string trailing = dir.file("trailing");
  write_bytes(trailing, {0, 0, 0x08, 1, 0, 0, 0, 1, 5, 6});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(trailing), tf::InvalidArgumentError,
                               trailing + ": trailing data");

  const std::string huge = dir.file("huge");
  write_bytes(huge, {0, 0, 0x0E, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                     0xFF, 0xFF});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(huge), tf::InvalidArgumentError,
                               "the header is corrupt");

  // A gzip file cut short: zlib reports the early end of the compressed stream.
  const std::string cut = dir.file("cut.gz");
  tf::data::write_idx(cut, iota_u8({64, 64}, 256));
  fs::resize_file(cut, fs::file_size(cut) / 2);
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(cut), tf::InvalidArgumentError, cut + ": ");
  // A gzip file with a damaged body: the CRC or the inflate step fails.
  const std::string bad = dir.file("bad.gz");
  tf::data::write_idx(bad, iota_u8({64, 64}, 256));
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    const char junk[8] = {'\x55', '\x55', '\x55', '\x55', '\x55', '\x55', '\x55', '\x55'};
    f.write(junk, 8);
  }
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(bad), tf::InvalidArgumentError, bad + ": ");
}

TEST_CASE("fashion_mnist::load_data reads the four files and checks them", "[cpu][data][idx]") {
  TempDir dir;
  write_fake_fashion(dir, 12, 5);
  auto [train, test] = fmnist::load_data(dir.path().string());
  auto [x_train, y_train] = train;
  auto [x_test, y_test] = test;
  CHECK(x_train.shape() == tf::TensorShape({12, 28, 28}));
  CHECK(y_train.shape() == tf::TensorShape({12}));
  CHECK(x_test.shape() == tf::TensorShape({5, 28, 28}));
  CHECK(y_test.shape() == tf::TensorShape({5}));
  CHECK(x_train.dtype() == tf::uint8);
  CHECK(y_test.dtype() == tf::uint8);
  CHECK(y_train.numpy<int>() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1});
  CHECK(x_test.numpy<int>()[300] == 300 % 251);

  // TAPEFLOW_DATA_DIR names the folder (or a parent holding fashion-mnist/).
  {
    EnvVar env("TAPEFLOW_DATA_DIR", dir.path().string());
    CHECK(fmnist::default_data_dir() == dir.path().string());
    CHECK(fmnist::load_data().first.first.shape()[0] == 12);
  }
  {
    TempDir parent;
    fs::create_directories(parent.path() / "fashion-mnist");
    fs::copy(dir.path(), parent.path() / "fashion-mnist");
    EnvVar env("TAPEFLOW_DATA_DIR", parent.path().string());
    CHECK(fmnist::default_data_dir() == (parent.path() / "fashion-mnist").string());
    CHECK(fmnist::load_data().second.first.shape()[0] == 5);
  }

  // Uncompressed files are found too.
  TempDir plain;
  tf::data::write_idx(plain.file("train-images-idx3-ubyte"), iota_u8({3, 28, 28}, 256), false);
  tf::data::write_idx(plain.file("train-labels-idx1-ubyte"), iota_u8({3}, 10), false);
  tf::data::write_idx(plain.file("t10k-images-idx3-ubyte"), iota_u8({2, 28, 28}, 256), false);
  tf::data::write_idx(plain.file("t10k-labels-idx1-ubyte"), iota_u8({2}, 10), false);
  CHECK(fmnist::load_data(plain.path().string()).first.second.shape()[0] == 3);
}

TEST_CASE("fashion_mnist::load_data errors name the file", "[cpu][data][idx]") {
  {
    TempDir dir;
    write_fake_fashion(dir, 4, 2);
    fs::remove(dir.file("t10k-labels-idx1-ubyte.gz"));
    TF_REQUIRE_THROWS_CONTAINING(fmnist::load_data(dir.path().string()), tf::NotFoundError,
                                 dir.file("t10k-labels-idx1-ubyte.gz") + " not found");
    TF_REQUIRE_THROWS_CONTAINING(fmnist::load_data(dir.path().string()), tf::NotFoundError,
                                 "dataset-fashion-mnist");
  }
  {
    TempDir dir;
    write_fake_fashion(dir, 4, 2);
    tf::data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), iota_u8({3}, 10));
    TF_REQUIRE_THROWS_CONTAINING(fmnist::load_data(dir.path().string()), tf::InvalidArgumentError,
                                 dir.file("train-images-idx3-ubyte.gz") + " holds 4 images but " +
                                     dir.file("train-labels-idx1-ubyte.gz") + " holds 3 labels");
  }
  {
    TempDir dir;
    write_fake_fashion(dir, 4, 2);
    tf::data::write_idx(dir.file("t10k-images-idx3-ubyte.gz"), iota_u8({2, 27, 28}, 256));
    TF_REQUIRE_THROWS_CONTAINING(
        fmnist::load_data(dir.path().string()), tf::InvalidArgumentError,
        "expected uint8 images of shape (N, 28, 28), got uint8 (2, 27, 28)");
  }
  {
    TempDir dir;
    write_fake_fashion(dir, 4, 2);
    tf::data::write_idx(dir.file("t10k-labels-idx1-ubyte.gz"), iota_u8({2}, 256) + uint8_t{10});
    TF_REQUIRE_THROWS_CONTAINING(fmnist::load_data(dir.path().string()), tf::InvalidArgumentError,
                                 "label 10 at index 0 is outside 0..9");
  }
  {
    TempDir dir;
    write_fake_fashion(dir, 4, 2);
    write_bytes(dir.file("train-images-idx3-ubyte.gz"), {0xAB, 0xCD, 0x08, 3});
    TF_REQUIRE_THROWS_CONTAINING(fmnist::load_data(dir.path().string()), tf::InvalidArgumentError,
                                 dir.file("train-images-idx3-ubyte.gz") + ": bad magic number");
  }
}

TEST_CASE("the real Fashion-MNIST loads with its known facts", "[cpu][data][idx][fashion_mnist]") {
  const std::string dir = fmnist::default_data_dir();
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz")) {
    WARN("skipped: Fashion-MNIST not found in " << dir
                                                << " (apt-get install dataset-fashion-mnist)");
    SUCCEED();
    return;
  }
  auto [train, test] = fmnist::load_data();
  const auto& [x_train, y_train] = train;
  const auto& [x_test, y_test] = test;
  CHECK(x_train.shape() == tf::TensorShape({60000, 28, 28}));
  CHECK(y_train.shape() == tf::TensorShape({60000}));
  CHECK(x_test.shape() == tf::TensorShape({10000, 28, 28}));
  CHECK(y_test.shape() == tf::TensorShape({10000}));
  CHECK(x_train.dtype() == tf::uint8);
  CHECK(y_train.dtype() == tf::uint8);
  const auto labels = y_train.numpy<int>();
  std::vector<int> counts(10, 0);
  for (int l : labels) ++counts.at(static_cast<size_t>(l));
  CHECK(counts == std::vector<int>(10, 6000));
  CHECK(labels[0] == 9);  // an ankle boot
  CHECK(y_test.numpy<int>()[0] == 9);
  const auto pixels = x_train.numpy<int>();
  CHECK(*std::max_element(pixels.begin(), pixels.end()) == 255);
  CHECK(*std::min_element(pixels.begin(), pixels.end()) == 0);
}

TEST_CASE("read_idx checks the header's claimed size against the file before allocating",
          "[cpu][data][idx]") {
  TempDir dir;
  // 12 bytes claiming 65536 x 262144 unsigned bytes (16 GiB).
  const std::vector<uint8_t> header = {0, 0, 0x08, 2, 0, 1, 0, 0, 0, 4, 0, 0};
  const std::string plain = dir.file("claims-16g");
  write_bytes(plain, header);
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(plain), tf::InvalidArgumentError,
                               "[read_idx] " + plain +
                                   ": truncated: the header's shape (65536, "
                                   "262144) of unsigned byte needs "
                                   "17179869184 data bytes, the file has 0 "
                                   "after the 12-byte header");
  // The same header alone in a gzip file (one stored deflate block, then the CRC-32 and length
  // of those 12 bytes): more than deflate can expand the file to.
  std::vector<uint8_t> gz = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x01, 12, 0, 0xf3, 0xff};
  gz.insert(gz.end(), header.begin(), header.end());
  gz.insert(gz.end(), {0x75, 0x0d, 0x8a, 0xe7, 12, 0, 0, 0});
  const std::string packed = dir.file("claims-16g.gz");
  write_bytes(packed, gz);
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(packed), tf::InvalidArgumentError,
                               "[read_idx] " + packed + ": truncated or corrupt");
}

TEST_CASE("read_idx rejects gzip files cut before their trailer or followed by junk",
          "[cpu][data][idx]") {
  TempDir dir;
  // A (4,) unsigned byte IDX file: header then 1 2 3 4.
  const std::vector<uint8_t> idx = {0, 0, 0x08, 1, 0, 0, 0, 4, 1, 2, 3, 4};
  const std::vector<uint8_t> gz = gzip_stored(idx);

  const std::string good = dir.file("good.gz");
  write_bytes(good, gz);
  check_values(tf::data::read_idx(good), {1, 2, 3, 4});

  // Concatenated members are one gzip stream (as gzip -d reads them).
  const std::string two = dir.file("two.gz");
  std::vector<uint8_t> both = gzip_stored({idx.begin(), idx.begin() + 6});
  const std::vector<uint8_t> rest = gzip_stored({idx.begin() + 6, idx.end()});
  both.insert(both.end(), rest.begin(), rest.end());
  write_bytes(two, both);
  check_values(tf::data::read_idx(two), {1, 2, 3, 4});

  // The CRC-32 and length cut off, and a data byte changed: zlib's gzread returned the bytes.
  const std::string cut = dir.file("cut.gz");
  std::vector<uint8_t> cut_bytes(gz.begin(), gz.end() - 8);
  cut_bytes[cut_bytes.size() - 1] = 99;
  write_bytes(cut, cut_bytes);
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(cut), tf::InvalidArgumentError,
                               cut + ": truncated: the gzip stream ends before its end marker");
  // Only part of the trailer cut: still truncated.
  const std::string part = dir.file("part.gz");
  write_bytes(part, {gz.begin(), gz.end() - 3});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(part), tf::InvalidArgumentError,
                               part + ": truncated");
  // A changed data byte with the trailer intact: the CRC does not match.
  const std::string crc = dir.file("crc.gz");
  std::vector<uint8_t> crc_bytes = gz;
  crc_bytes[crc_bytes.size() - 9] = 99;
  write_bytes(crc, crc_bytes);
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(crc), tf::InvalidArgumentError,
                               crc + ": corrupt gzip data: incorrect data check");

  // Junk (or zero padding) after the last member.
  for (const std::vector<uint8_t>& junk :
       {std::vector<uint8_t>{'j', 'u', 'n', 'k'}, std::vector<uint8_t>{0}}) {
    const std::string trailing = dir.file("trailing.gz");
    std::vector<uint8_t> bytes = gz;
    bytes.insert(bytes.end(), junk.begin(), junk.end());
    write_bytes(trailing, bytes);
    TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(trailing), tf::InvalidArgumentError,
                                 trailing + ": trailing data after the end of the gzip stream");
  }
  // A file write_idx compressed, with junk appended.
  const std::string written = dir.file("written.gz");
  tf::data::write_idx(written, iota_u8({64, 64}, 256));
  {
    std::ofstream f(written, std::ios::binary | std::ios::app);
    f << "garbage";
  }
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(written), tf::InvalidArgumentError,
                               "trailing data after the end of the gzip stream");
}

TEST_CASE("write_idx that fails part-way leaves the previous file intact", "[cpu][data][idx]") {
  // On the CPU: the forked child below cannot use CUDA (a GPU tensor's copy to the host failed
  // there, not the write).
  tf::DeviceScope cpu("/CPU:0");
  TempDir dir;
  const std::string plain = dir.file("plain-idx1-ubyte");
  const std::string packed = dir.file("packed-idx1-ubyte.gz");
  tf::data::write_idx(plain, iota_u8({10}, 7), false);
  tf::data::write_idx(packed, iota_u8({10}, 5), true);
  // 1 MiB of bytes that do not compress: both writes need far more than the 64 KiB allowed.
  std::vector<uint8_t> noise(1 << 20);
  uint32_t state = 12345;
  for (auto& b : noise) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(state >> 24);
  }
  const tf::Tensor big = tf::convert_to_tensor(noise, {int64_t{1} << 20});
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A file size limit makes write(2) fail with EFBIG (SIGXFSZ ignored), as a full disk would.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int failed = 0;
    for (const auto& [path, compress] : {std::pair{plain, false}, std::pair{packed, true}}) {
      try {
        tf::data::write_idx(path, big, compress);
      } catch (const tf::InternalError& e) {
        if (std::string(e.what()).find("[write_idx]") != std::string::npos) ++failed;
      } catch (...) {
      }
    }
    ::_exit(failed == 2 ? 0 : 1);
  }
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  // gzopen("wb") used to truncate the target first: a torn file was left in its place.
  check_values(tf::data::read_idx(plain), {0, 1, 2, 3, 4, 5, 6, 0, 1, 2});
  check_values(tf::data::read_idx(packed), {0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
  for (const auto& e : fs::directory_iterator(dir.path()))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  // And a successful write replaces the file.
  tf::data::write_idx(packed, big, true);
  CHECK(tf::data::read_idx(packed).shape() == tf::TensorShape({int64_t{1} << 20}));
}

TEST_CASE("read_idx names the file for a zero dimension next to huge ones", "[cpu][data][idx]") {
  TempDir dir;
  // (0, 2^32-1, 2^32-1): no data, but the shape's strides overflow int64.
  const std::string path = dir.file("zero-huge");
  write_bytes(path, {0, 0, 0x08, 3, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
  TF_REQUIRE_THROWS_CONTAINING(tf::data::read_idx(path), tf::InvalidArgumentError,
                               "[read_idx] " + path + ": the header's dimensions");
  // A zero dimension with ordinary ones is an empty tensor.
  const std::string empty = dir.file("empty");
  write_bytes(empty, {0, 0, 0x08, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28});
  CHECK(tf::data::read_idx(empty).shape() == tf::TensorShape({0, 28, 28}));
}

TEST_CASE("write_idx saves a file whose name is 255 bytes long", "[cpu][data][idx]") {
  TempDir dir;
  // "<name>.tmp-<pid>" exceeded NAME_MAX: the temporary file could not be created.
  const std::string name = std::string(255 - 3, 'n') + ".gz";
  const std::string path = dir.file(name);
  tf::data::write_idx(path, iota_u8({6}, 4));
  check_values(tf::data::read_idx(path), {0, 1, 2, 3, 0, 1});
  tf::data::write_idx(path, iota_u8({3}, 9), false);  // over the first one
  check_values(tf::data::read_idx(path), {0, 1, 2});
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  CHECK(names == std::vector<std::string>{name});
}
