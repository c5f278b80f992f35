// tf::data's file-backed datasets: cache(filename), save(path) and load(path). Round trips of
// every dtype and of rank-0 and varying shapes, that a completed cache is read without running
// the input (also by another Dataset object), that an early stop leaves no file, the lockfile of
// a concurrent writer, corrupt and truncated files, and save/load with shards. Cardinalities and
// the concurrent-writer message follow TF 2.21 (tensorflow-cpu 2.21: range(5).cache(f) has
// cardinality 5, range(5).filter(...).cache(f) UNKNOWN, Dataset.load of a saved range(6) 6).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
using tf::data::Dataset;
using tf::data::Element;
using tf::data::UNKNOWN_CARDINALITY;

using tf::testing::capture_stderr;
using tf::testing::require_error;

using tf::testing::TempDir;

namespace {

std::vector<Element> collect(const Dataset& ds) {
  std::vector<Element> out;
  for (const Element& e : ds) out.push_back(e);
  return out;
}

// Same number of elements and components, and each component the same dtype, shape and values.
void require_same(const std::vector<Element>& got, const std::vector<Element>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size() == want[i].size());
    for (size_t c = 0; c < got[i].size(); ++c) {
      INFO("element " << i << " component " << c);
      REQUIRE(got[i][c].dtype() == want[i][c].dtype());
      REQUIRE(got[i][c].shape() == want[i][c].shape());
      REQUIRE(tf::detail::to_double_vector(got[i][c]) == tf::detail::to_double_vector(want[i][c]));
    }
  }
}

std::vector<int64_t> firsts(const Dataset& ds) {
  std::vector<int64_t> out;
  for (const Element& e : ds) out.push_back(e[0].item<int64_t>());
  return out;
}

// range(n) through a map that counts its calls.
Dataset counted_range(int64_t n, std::shared_ptr<std::atomic<int>> calls) {
  return Dataset::range(n).map([calls](tf::Tensor x) {
    ++*calls;
    return tf::multiply(x, tf::constant(int64_t{10}));
  });
}

// Element spec of every dtype: rank 0 to 2, float16/bfloat16/bool among them.
Dataset all_dtypes() {
  const int64_t n = 3;
  std::vector<tf::Tensor> cols;
  cols.push_back(tf::constant<float>({1.5f, -2.25f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f,
                                      12.f, 13.f, 14.f, 15.f, 16.f, 17.f, 18.f},
                                     {n, 2, 3}));
  cols.push_back(tf::constant<double>({0.1, -1e300, 3.5}, {n}));
  cols.push_back(tf::constant<int32_t>({1, -2, 3, 4, 5, -6}, {n, 2}));
  cols.push_back(tf::constant<int64_t>({INT64_MAX, INT64_MIN, 7}, {n}));
  cols.push_back(tf::constant<uint8_t>({0, 255, 17}, {n, 1}));
  cols.push_back(tf::constant<bool>({true, false, true, true, false, false}, {n, 2}));
  cols.push_back(tf::cast(tf::constant<float>({0.5f, -65504.f, 1e-4f}, {n}), tf::float16));
  cols.push_back(
      tf::cast(tf::constant<float>({1.f, 2.f, -3e38f, 4.f, 5.f, 6.f}, {n, 2}), tf::bfloat16));
  return Dataset::from_tensor_slices(cols);
}

}  // namespace

TEST_CASE("dataset files: cache(filename) round trips every dtype and shape", "[cpu][data]") {
  TempDir dir;
  const std::string f = dir.file("cache");
  Dataset ds = all_dtypes().cache(f);
  const std::vector<Element> want = collect(all_dtypes());
  require_same(collect(ds), want);  // writes the file
  REQUIRE(dir.names() == std::vector<std::string>{"cache"});
  require_same(collect(ds), want);  // reads it
  require_same(collect(all_dtypes().cache(f)), want);
  REQUIRE(ds.cardinality() == 3);

  // Elements whose shapes differ (the spec keeps tf::None there) and an empty dataset.
  auto ragged = [] {
    return Dataset::range(4).map([](tf::Tensor x) {
      const int64_t k = x.item<int64_t>();
      return std::vector<tf::Tensor>{tf::fill({k, 2}, tf::Tensor(0.5f * static_cast<float>(k))), x};
    });
  };
  const std::string g = dir.file("ragged");
  require_same(collect(ragged().cache(g)), collect(ragged()));
  require_same(collect(ragged().cache(g)), collect(ragged()));
  const std::string e = dir.file("empty");
  REQUIRE(collect(Dataset::range(0).cache(e)).empty());
  REQUIRE(fs::exists(e));
  REQUIRE(collect(Dataset::range(0).cache(e)).empty());
  // An empty filename is the in-memory cache.
  REQUIRE(firsts(Dataset::range(3).cache("")) == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("dataset files: a complete cache file is read without running the input", "[cpu][data]") {
  TempDir dir;
  const std::string f = dir.file("c");
  auto calls = std::make_shared<std::atomic<int>>(0);
  Dataset ds = counted_range(5, calls).cache(f);
  REQUIRE(ds.cardinality() == 5);  // TF: range(5).cache(f).cardinality() == 5
  REQUIRE(!fs::exists(f));         // nothing happens before an iteration
  REQUIRE(firsts(ds) == std::vector<int64_t>{0, 10, 20, 30, 40});
  REQUIRE(*calls == 5);
  REQUIRE(fs::exists(f));
  REQUIRE(firsts(ds) == std::vector<int64_t>{0, 10, 20, 30, 40});
  std::vector<std::vector<double>> batches;
  for (const Element& b : ds.batch(2)) batches.push_back(tf::detail::to_double_vector(b[0]));
  REQUIRE(batches == std::vector<std::vector<double>>{{0, 10}, {20, 30}, {40}});
  REQUIRE(*calls == 5);

  // Another Dataset object (as another process would) reads the same file.
  auto calls2 = std::make_shared<std::atomic<int>>(0);
  Dataset other = counted_range(5, calls2).cache(f);
  REQUIRE(firsts(other) == std::vector<int64_t>{0, 10, 20, 30, 40});
  REQUIRE(*calls2 == 0);

  // Over epochs (repeat, as fit does), the first epoch writes the file and the next reads it.
  auto calls3 = std::make_shared<std::atomic<int>>(0);
  REQUIRE(firsts(counted_range(3, calls3).cache(dir.file("r")).repeat(2)) ==
          std::vector<int64_t>{0, 10, 20, 0, 10, 20});
  REQUIRE(*calls3 == 3);

  // TF: a filter's cardinality is unknown, and so is the cache's.
  REQUIRE(Dataset::range(5)
              .filter([](tf::Tensor x) { return x.item<int64_t>() > 1; })
              .cache(dir.file("f"))
              .cardinality() == UNKNOWN_CARDINALITY);
}

TEST_CASE("dataset files: an iteration stopped early leaves no cache file", "[cpu][data]") {
  TempDir dir;
  const std::string f = dir.file("c");
  auto calls = std::make_shared<std::atomic<int>>(0);
  Dataset ds = counted_range(5, calls).cache(f);
  const std::string log = capture_stderr([&] {
    auto it = ds.begin();
    REQUIRE((*it)[0].item<int64_t>() == 0);
    ++it;
    REQUIRE((*it)[0].item<int64_t>() == 10);
  });
  REQUIRE(log.find("partial cache is discarded") != std::string::npos);
  REQUIRE(log.find(f) != std::string::npos);
  REQUIRE(dir.names().empty());  // no cache, no lockfile, no temporary file

  // cache(f).take(2) stops early too; take(2).cache(f) reads its whole input.
  capture_stderr([&] { REQUIRE(firsts(ds.take(2)) == std::vector<int64_t>{0, 10}); });
  REQUIRE(dir.names().empty());
  const std::string t = dir.file("t");
  // (The inner cache(f) is read partly, so it warns and discards its own file.)
  capture_stderr([&] { REQUIRE(firsts(ds.take(2).cache(t)) == std::vector<int64_t>{0, 10}); });
  REQUIRE(dir.names() == std::vector<std::string>{"t"});

  // The next complete pass writes the cache; the one after reads it.
  *calls = 0;
  REQUIRE(firsts(ds) == std::vector<int64_t>{0, 10, 20, 30, 40});
  REQUIRE(*calls == 5);
  REQUIRE(firsts(ds) == std::vector<int64_t>{0, 10, 20, 30, 40});
  REQUIRE(*calls == 5);
  REQUIRE(dir.names() == std::vector<std::string>{"c", "t"});

  // An exception in the input also discards the partial file.
  const std::string x = dir.file("x");
  Dataset failing = Dataset::range(4)
                        .map([](tf::Tensor v) {
                          if (v.item<int64_t>() == 2) throw tf::InvalidArgumentError("boom");
                          return v;
                        })
                        .cache(x);
  capture_stderr(
      [&] { TF_REQUIRE_THROWS_CONTAINING(collect(failing), tf::InvalidArgumentError, "boom"); });
  REQUIRE(!fs::exists(x));
  REQUIRE(!fs::exists(x + ".lockfile"));
}

TEST_CASE("dataset files: a second writer of the same cache file is an AlreadyExistsError",
          "[cpu][data]") {
  TempDir dir;
  const std::string f = dir.file("c");
  Dataset ds = Dataset::range(5).cache(f);
  {
    auto first = ds.begin();
    REQUIRE((*first)[0].item<int64_t>() == 0);
    REQUIRE(fs::exists(f + ".lockfile"));
    // TF: "There appears to be a concurrent caching iterator running - cache lockfile already
    // exists ('<prefix>_0.lockfile')".
    TF_REQUIRE_THROWS_CONTAINING(ds.begin(), tf::AlreadyExistsError,
                                 "There appears to be a concurrent caching iterator running - "
                                 "cache lockfile already exists ('" +
                                     f + ".lockfile')");
    // Another Dataset object with the same filename meets the same lockfile.
    TF_REQUIRE_THROWS_CONTAINING(Dataset::range(5).cache(f).begin(), tf::AlreadyExistsError,
                                 "concurrent caching iterator");
    int64_t n = 0;
    for (; first != ds.end(); ++first) ++n;
    REQUIRE(n == 5);
  }
  REQUIRE(dir.names() == std::vector<std::string>{"c"});  // complete, lockfile gone
  REQUIRE(firsts(ds) == std::vector<int64_t>{0, 1, 2, 3, 4});

  // Threads racing on a fresh file: each one reads all of it, writes it, or is refused with the
  // lockfile error; at least one succeeds and the file ends complete, without a lockfile.
  const std::string h = dir.file("h");
  Dataset shared = Dataset::range(200).cache(h);
  std::vector<int> outcome(4, -1);  // 1: got every element, 0: AlreadyExistsError, 2: other
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outcome.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        outcome[i] = firsts(shared).size() == 200 ? 1 : 2;
      } catch (const tf::AlreadyExistsError&) {
        outcome[i] = 0;
      } catch (...) {
        outcome[i] = 2;
      }
    });
  for (auto& t : threads) t.join();
  REQUIRE(std::count(outcome.begin(), outcome.end(), 2) == 0);
  REQUIRE(std::count(outcome.begin(), outcome.end(), 1) >= 1);
  REQUIRE(fs::exists(h));
  REQUIRE(!fs::exists(h + ".lockfile"));
  REQUIRE(firsts(shared).size() == 200);

  // A lockfile left behind (by a crashed process) blocks writing until it is deleted.
  const std::string g = dir.file("g");
  std::ofstream(g + ".lockfile") << "Created at: 0 by process 1\n";
  TF_REQUIRE_THROWS_CONTAINING(collect(Dataset::range(3).cache(g)), tf::AlreadyExistsError,
                               "Lockfile contents: Created at: 0 by process 1");
  fs::remove(g + ".lockfile");
  REQUIRE(firsts(Dataset::range(3).cache(g)) == std::vector<int64_t>{0, 1, 2});
  REQUIRE(fs::exists(g));
}

TEST_CASE("dataset files: corrupt truncated and mismatched cache files are clear errors",
          "[cpu][data]") {
  TempDir dir;
  const std::string f = dir.file("c");
  Dataset ds = Dataset::from_tensor_slices(tf::constant<float>({1.f, 2.f, 3.f, 4.f}, {2, 2}));
  REQUIRE(collect(ds.cache(f)).size() == 2);
  const auto size = fs::file_size(f);
  std::string bytes(size, '\0');
  std::ifstream(f, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(size));
  auto write_as = [&](const std::string& name, const std::string& content) {
    const std::string p = dir.file(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };

  // Truncated: the header points past the end.
  const std::string cut = write_as("cut", bytes.substr(0, bytes.size() - 5));
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(cut)), tf::DataLossError, "'" + cut + "'");
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(cut)), tf::DataLossError, "truncated");
  // A flipped byte in the first record's data (after the 32-byte header and 16-byte record head).
  std::string flipped = bytes;
  flipped[32 + 16 + 1 + 8 + 2] ^= 0x40;
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(write_as("flip", flipped))), tf::DataLossError,
                               "record 0 fails its checksum");
  // Not a dataset file at all.
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(write_as("text", "hello, world, not a cache"))),
                               tf::DataLossError, "no tapeflow dataset header");
  // A file whose writer died: the header has no spec block yet.
  std::string unfinished = bytes;
  for (int i = 24; i < 32; ++i) unfinished[static_cast<size_t>(i)] = 0;
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(write_as("unfinished", unfinished))),
                               tf::DataLossError, "never completed");
  // Another format version.
  std::string v2 = bytes;
  v2[8] = 2;
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(write_as("v2", v2))), tf::DataLossError,
                               "format version 2");
  // Written by a pipeline with another element count than this input's known cardinality.
  TF_REQUIRE_THROWS_CONTAINING(collect(Dataset::range(3).cache(f)), tf::InvalidArgumentError,
                               "holds 2 element(s) (float32 (2,)) but the input dataset has 3");

  // Elements must keep their components, dtypes and ranks.
  Dataset mixed = Dataset::range(3).map(
      [](tf::Tensor x) { return x.item<int64_t>() == 1 ? tf::cast(x, tf::float32) : x; });
  const std::string m = dir.file("m");
  capture_stderr([&] {
    require_error([&] { collect(mixed.cache(m)); },
                  {"Dataset.cache", "component 0 of element 1", "float32", "int64"});
  });
  REQUIRE(!fs::exists(m));
  REQUIRE(!fs::exists(m + ".lockfile"));
  // A directory that does not exist.
  TF_REQUIRE_THROWS_CONTAINING(collect(ds.cache(dir.file("no/such/dir/c"))), tf::NotFoundError,
                               "does not exist");
}

TEST_CASE("dataset files: save and load round trip with shards and cardinality", "[cpu][data]") {
  TempDir dir;
  const std::string p = dir.file("saved");
  auto pairs = [] {
    return Dataset::range(6).map([](tf::Tensor x) {
      return std::vector<tf::Tensor>{x, tf::cast(x, tf::float16)};
    });
  };
  // TF: save(p, shard_func=lambda x, y: x % 3) writes three shards; load has cardinality 6.
  pairs().save(p,
               [](tf::Tensor x, tf::Tensor) { return tf::floormod(x, tf::constant(int64_t{3})); });
  REQUIRE(dir.names() == std::vector<std::string>{"saved"});
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(p)) files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  REQUIRE(files == std::vector<std::string>{"manifest", "shard-00000000.tprec",
                                            "shard-00000001.tprec", "shard-00000002.tprec"});
  Dataset loaded = Dataset::load(p);
  REQUIRE(loaded.cardinality() == 6);
  // Shard after shard (TF's default reader interleaves them: 0, 1, 3, 4, 2, 5 there).
  REQUIRE(firsts(loaded) == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
  for (const Element& e : loaded) {
    REQUIRE(e[1].dtype() == tf::float16);
    REQUIRE(e[1].shape() == tf::TensorShape{});
    REQUIRE(tf::detail::to_double_vector(e[1]) ==
            std::vector<double>{static_cast<double>(e[0].item<int64_t>())});
  }
  const std::vector<tf::TensorSpec> spec = Dataset::saved_element_spec(p);
  REQUIRE(spec.size() == 2);
  REQUIRE(spec[0].dtype == tf::int64);
  REQUIRE(spec[1].dtype == tf::float16);
  REQUIRE(spec[0].shape == tf::TensorShape{});

  // Without shard_func: one shard, the dataset's order; saving again replaces the directory.
  all_dtypes().save(p);
  Dataset again = Dataset::load(p);
  REQUIRE(again.cardinality() == 3);
  require_same(collect(again), collect(all_dtypes()));
  REQUIRE(Dataset::saved_element_spec(p)[0].shape == tf::TensorShape{2, 3});

  // Shapes that differ are tf::None in the saved spec; a matching element_spec is accepted.
  const std::string r = dir.file("ragged");
  Dataset::range(1, 4)
      .map([](tf::Tensor x) { return tf::fill({x.item<int64_t>()}, tf::Tensor(1.0f)); })
      .save(r);
  REQUIRE(Dataset::saved_element_spec(r)[0].shape == tf::TensorShape{tf::None});
  REQUIRE(Dataset::saved_element_spec(r)[0].dtype == tf::float32);
  REQUIRE(collect(Dataset::load(r, {tf::TensorSpec({tf::None}, tf::float32)})).size() == 3);
  require_error([&] { Dataset::load(r, {tf::TensorSpec({tf::None}, tf::int64)}); },
                {"Dataset.load", "does not match", "float32 (None,)"});
  require_error([&] { Dataset::load(r, {tf::TensorSpec({3}, tf::float32)}); },
                {"Dataset.load", "does not match"});
  require_error(
      [&] {
        Dataset::load(r, {tf::TensorSpec({}, tf::float32), tf::TensorSpec()});
      },
      {"Dataset.load", "does not match"});

  // An empty dataset saves and loads as empty.
  const std::string e = dir.file("empty");
  Dataset::range(0).save(e);
  REQUIRE(Dataset::load(e).cardinality() == 0);
  REQUIRE(collect(Dataset::load(e)).empty());
}

TEST_CASE("dataset files: save and load errors", "[cpu][data]") {
  TempDir dir;
  require_error([&] { Dataset::range(3).save(dir.file("neg"), [](tf::Tensor) { return -1; }); },
                {"Dataset.save", "shard index >= 0", "-1"});
  require_error(
      [&] {
        Dataset::range(3).save(dir.file("f"),
                               [](tf::Tensor x) { return tf::cast(x, tf::float32); });
      },
      {"Dataset.save"});
  require_error([&] { Dataset::counter().save(dir.file("inf")); }, {"Dataset.save", "infinite"});
  REQUIRE(dir.names().empty());  // nothing left behind by the failed saves
  TF_REQUIRE_THROWS_CONTAINING(Dataset::load(dir.file("missing")), tf::NotFoundError, "missing");
  // save never replaces what is not a saved dataset.
  const std::string keep = dir.file("keep");
  fs::create_directories(keep);
  std::ofstream(keep + "/precious.txt") << "x";
  TF_REQUIRE_THROWS_CONTAINING(Dataset::range(2).save(keep), tf::AlreadyExistsError,
                               "not a saved dataset");
  REQUIRE(fs::exists(keep + "/precious.txt"));
  TF_REQUIRE_THROWS_CONTAINING(Dataset::load(keep), tf::NotFoundError, "no manifest");
  // A corrupt shard is a DataLossError naming it.
  const std::string p = dir.file("p");
  Dataset::range(4).save(p);
  const std::string shard = p + "/shard-00000000.tprec";
  fs::resize_file(shard, fs::file_size(shard) - 3);
  TF_REQUIRE_THROWS_CONTAINING(collect(Dataset::load(p)), tf::DataLossError, shard);
}

TEST_CASE("dataset files: tensors placed on any device are written and read back on the CPU",
          "[cpu][cuda][data]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    TempDir dir;
    // A dataset function that places its result on `dev` explicitly.
    auto placed = [dev] {
      return Dataset::range(3).map([dev](tf::Tensor x) {
        return tf::detail::copy_to_device(tf::cast(x, tf::bfloat16), dev);
      });
    };
    const std::string f = dir.file("c");
    for (int pass = 0; pass < 2; ++pass) {  // writes, then reads
      std::vector<double> got;
      for (const Element& e : placed().cache(f)) {
        REQUIRE(e[0].dtype() == tf::bfloat16);
        if (pass == 1) REQUIRE(e[0].device() == "/device:CPU:0");
        got.push_back(tf::detail::to_double_vector(e[0])[0]);
      }
      REQUIRE(got == std::vector<double>{0, 1, 2});
    }
    placed().save(dir.file("s"));
    std::vector<double> loaded;
    for (const Element& e : Dataset::load(dir.file("s")))
      loaded.push_back(tf::detail::to_double_vector(e[0])[0]);
    REQUIRE(loaded == std::vector<double>{0, 1, 2});
  }
}
