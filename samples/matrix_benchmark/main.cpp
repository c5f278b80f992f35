// The seed tutorial's two benchmarks done right: N x N matrix multiplication and inversion for
// N = 2^0 ... 2^15 on the CPU (all cores and one thread), one GPU and every GPU, with and without
// host-device transfers, plus `seed_faithful`, which times what the 2018 GPU curve really timed.
// Prints a table on stdout, progress on stderr, and writes a CSV for plot.py (see README.md).
//
//   build/samples/matrix_benchmark --help
//
// Threading: the main thread drives everything; `all_gpus` runs through a MirroredStrategy over
// every GPU (one replica thread per GPU, each under its GPU's device scope) for the life of that
// series.
#include <tapeflow/tapeflow.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/allocator.h"  // allocator_for: cached bytes count as free memory
#include "core/parallel.h"   // detail::set_num_threads: the library has no public thread setter yet

#ifdef MATRIX_BENCHMARK_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>
// cusolverMg is marked deprecated in CUDA 13's header; it is still shipped and is cuSOLVER's
// multi-GPU LU. Only its types come from the header: the library is opened with dlopen.
#define DISABLE_CUSOLVERMG_DEPRECATED
#include <cusolverMg.h>
#endif

namespace tf = tapeflow;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// Options

const char* const kUsage =
    R"(matrix_benchmark: N x N matrix multiplication and inversion, N = 2^0 ... 2^15

Usage: matrix_benchmark [options]
  --ops LIST          matmul,inverse (default: both)
  --modes LIST        cpu,cpu_1thread,gpu,all_gpus,seed_faithful (default: all)
                        cpu            tapeflow on the CPU with all cores (--threads)
                        cpu_1thread    tapeflow on the CPU with one thread
                        gpu            one GPU (/GPU:0)
                        all_gpus       multiplication split by row blocks through a
                                       MirroredStrategy over every GPU; inversion through
                                       cuSOLVER's multi-GPU solver (cusolverMg)
                        seed_faithful  the work of one run of the seed's GPU curve: a float64
                                       host feed converted to float32 every run, an
                                       ELEMENTWISE product (or the inverse), the result
                                       copied back to the host; on /GPU:0, or on the CPU
                                       when there is no GPU (it says so). Timed, and fed,
                                       like every other mode (see README.md)
  --dtypes LIST       float32,float64,tf32,bfloat16 or all (default: float32). The CPU runs
                      float32 and float64 only; tf32 and bfloat16 need a GPU of compute
                      capability 8.0 or newer; inversion runs float32 and float64 only
  --transfers WHICH   gpu and all_gpus: without, with or both (default: both). "with" copies
                      the inputs from host memory and the result back in every timed run
  --min-n N           smallest N, a power of two (default 1)
  --max-n N           largest N, a power of two up to 32768 (default 32768)
  --time-budget S     seconds per series (op, mode, dtype, transfers); a size whose predicted
                      time would exceed it is not started, and once it is spent a size makes
                      no more runs after its first timed one (default 60)
  --repeats R         timed runs per size, at least, 1 to 100000, unless the time budget is
                      spent first (default 5)
  --min-time S        more timed runs (up to 1000) until they add up to S seconds (default 0.2)
  --warmup W          untimed runs before the timed ones, 0 to 1000 (default 1)
  --threads T         threads of the cpu mode, 0 to 4096; 0: OMP_NUM_THREADS, else all cores
                      (default 0)
  --check-max-n N     check results (sampled entries against float64) up to this N (default
                      2048; 0: never)
  --split-gpu K       split GPU 0 into K logical GPUs (each with 90% / K of its memory) before
                      anything runs, 1 to 16 (default 1: no split). all_gpus then mirrors over
                      K devices on one GPU: a check of the multi-GPU path (row blocks, replica
                      threads, one stream each) on a one-GPU machine, not a speed-up (the K
                      replicas share the GPU, and cusolverMg still sees one physical GPU)
  --csv PATH          write the results as CSV to PATH
  --help              this text

GFLOP/s: 2 N^3 per product; 8 N^3 / 3 per inverse (LU 2/3 N^3 plus two triangular solves
against the identity, 2 N^3: the nominal count of an LU-based inverse); seed_faithful's
elementwise product does N^2 multiplications and is counted as such.
Exit status: 0, or 1 when a result check failed, a series stopped on an unexpected error or
the CSV could not be written, 2 on bad options.
)";

struct Options {
  std::vector<std::string> ops{"matmul", "inverse"};
  std::vector<std::string> modes{"cpu", "cpu_1thread", "gpu", "all_gpus", "seed_faithful"};
  std::vector<std::string> dtypes{"float32"};
  std::string transfers = "both";
  int64_t min_n = 1, max_n = 32768;
  double time_budget = 60, min_time = 0.2;
  int repeats = 5, warmup = 1, threads = 0;
  int64_t check_max_n = 2048;
  int split_gpu = 1;
  std::string csv;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "matrix_benchmark: %s (see --help)\n", msg.c_str());
  std::exit(2);
}

void check_members(const std::vector<std::string>& got, const std::vector<std::string>& allowed,
                   const char* flag) {
  for (const std::string& g : got)
    if (std::find(allowed.begin(), allowed.end(), g) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ",") + a;
      usage_error(std::string(flag) + ": unknown value '" + g + "' (one of " + list + ")");
    }
  if (got.empty()) usage_error(std::string(flag) + ": empty list");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) usage_error("unexpected argument '" + a + "'");
    if (i + 1 >= argc) usage_error("option " + a + " needs a value");
    const std::string v = argv[++i];
    auto to_int = [&](const std::string& s) -> int64_t {
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (end == s.c_str() || *end != '\0' || errno == ERANGE)
        usage_error(a + ": not an integer: '" + s + "'");
      return x;
    };
    // An int option: checked against its range before the cast.
    auto to_int_in = [&](const std::string& s, int lo, int hi) -> int {
      const int64_t x = to_int(s);
      if (x < lo || x > hi)
        usage_error(a + " must be an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got '" + s + "'");
      return static_cast<int>(x);
    };
    auto to_double = [&](const std::string& s) -> double {
      char* end = nullptr;
      const double x = std::strtod(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0' || !(x >= 0)) usage_error(a + ": not a number >= 0: '" + s + "'");
      return x;
    };
    if (a == "--ops") o.ops = split_list(v);
    else if (a == "--modes") o.modes = split_list(v);
    else if (a == "--dtypes") o.dtypes = v == "all" ? std::vector<std::string>{"float32", "float64", "tf32", "bfloat16"} : split_list(v);
    else if (a == "--transfers") o.transfers = v;
    else if (a == "--min-n") o.min_n = to_int(v);
    else if (a == "--max-n") o.max_n = to_int(v);
    else if (a == "--time-budget") o.time_budget = to_double(v);
    else if (a == "--repeats")
      o.repeats = to_int_in(v, 1, 100000);
    else if (a == "--min-time") o.min_time = to_double(v);
    else if (a == "--warmup")
      o.warmup = to_int_in(v, 0, 1000);
    else if (a == "--threads")
      o.threads = to_int_in(v, 0, 4096);  // 0: the default count
    else if (a == "--check-max-n") o.check_max_n = to_int(v);
    else if (a == "--split-gpu")
      o.split_gpu = to_int_in(v, 1, 16);
    else if (a == "--csv") o.csv = v;
    else usage_error("unknown option '" + a + "'");
  }
  check_members(o.ops, {"matmul", "inverse"}, "--ops");
  check_members(o.modes, {"cpu", "cpu_1thread", "gpu", "all_gpus", "seed_faithful"}, "--modes");
  check_members(o.dtypes, {"float32", "float64", "tf32", "bfloat16"}, "--dtypes");
  check_members({o.transfers}, {"without", "with", "both"}, "--transfers");
  if (!is_power_of_two(o.min_n) || !is_power_of_two(o.max_n) || o.max_n > 32768 || o.min_n > o.max_n)
    usage_error("--min-n and --max-n must be powers of two with 1 <= min <= max <= 32768");
  return o;
}

// ---------------------------------------------------------------------------------------------
// Memory: what is free for a new allocation on the host and on a GPU.

// MemAvailable from /proc/meminfo plus the CPU allocator's cache (reused before asking the OS).
double host_bytes_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (f >> key) {
    if (key == "MemAvailable:") {
      f >> kb;
      break;
    }
    std::string rest;
    std::getline(f, rest);
  }
  if (kb <= 0) return std::numeric_limits<double>::infinity();  // unknown: let the allocator decide
  return kb * 1024.0 + static_cast<double>(tf::cpu_allocator().stats().bytes_cached);
}

#ifdef MATRIX_BENCHMARK_CUDA
// The CUDA runtime's current device is per thread and tapeflow caches it: restore it so that
// the library's cache stays true.
double gpu_bytes_available(int logical) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return 0;
  size_t free_b = 0, total_b = 0;
  const bool ok = cudaSetDevice(tf::detail::physical_gpu_of(logical)) == cudaSuccess &&
                  cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
  (void)cudaSetDevice(previous);
  if (!ok) return 0;
  double avail = static_cast<double>(free_b);
  const tf::Device dev{tf::DeviceType::GPU, logical};
  avail += static_cast<double>(tf::allocator_for(dev).stats().bytes_cached);
  if (auto limit = tf::detail::logical_gpu_memory_limit(logical))
    avail = std::min(avail, static_cast<double>(*limit) * 1024.0 * 1024.0);
  return avail;
}
std::string gpu_name(int logical) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, tf::detail::physical_gpu_of(logical)) != cudaSuccess) return "?";
  return p.name;
}
// TF32 and bfloat16 tensor-core GEMMs: compute capability 8.0 (Ampere) or newer.
bool gpu_has_tensor_float(int logical) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, tf::detail::physical_gpu_of(logical)) != cudaSuccess) return false;
  return p.major >= 8;
}
const char* const kNoGpu = "no GPU (tf::config::list_logical_devices(\"GPU\") is empty)";
#else
const char* const kNoGpu = "no GPU (this build of tapeflow has no CUDA backend)";
double gpu_bytes_available(int) { return 0; }
std::string gpu_name(int) { return "?"; }
bool gpu_has_tensor_float(int) { return false; }
#endif

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// ---------------------------------------------------------------------------------------------
// Data types: the storage dtype of the tensors, the host element type, check tolerances.

struct DTypeInfo {
  std::string name;  // float32, float64, tf32, bfloat16
  tf::DType storage;
  size_t bytes;
  bool tf32;             // float32 storage with TF32 matrix products
  double matmul_tol;     // max |C - C_ref| / (|A| |B|)_ij over sampled entries
  double inverse_tol;    // max |A X - I| over sampled rows
};

DTypeInfo dtype_info(const std::string& name) {
  if (name == "float64") return {name, tf::float64, 8, false, 1e-12, 1e-9};
  if (name == "tf32") return {name, tf::float32, 4, true, 5e-3, 1e-3};
  if (name == "bfloat16") return {name, tf::bfloat16, 2, false, 3e-2, 1e-1};
  return {"float32", tf::float32, 4, false, 1e-5, 1e-3};
}

// Host element type per storage dtype, for transfers: the bytes a user would hold.
template <class F>
void with_host_type(tf::DType dt, F&& f) {
  if (dt == tf::float64) f(double{});
  else if (dt == tf::bfloat16) f(tf::bfloat16_t{});
  else f(float{});
}

// Sets TF32 for one series and restores the previous setting.
class Tf32Guard {
 public:
  explicit Tf32Guard(bool on)
      : previous_(tf::config::experimental::tensor_float_32_execution_enabled()) {
    tf::config::experimental::enable_tensor_float_32_execution(on);
  }
  ~Tf32Guard() { tf::config::experimental::enable_tensor_float_32_execution(previous_); }
  Tf32Guard(const Tf32Guard&) = delete;
  Tf32Guard& operator=(const Tf32Guard&) = delete;

 private:
  bool previous_;
};

// Sets tapeflow's CPU thread count (OpenMP, OpenBLAS and oneDNN together) for one series.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : previous_(tf::detail::num_threads()) { tf::detail::set_num_threads(n); }
  ~ThreadsGuard() { tf::detail::set_num_threads(previous_); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;

 private:
  int previous_;
};

// ---------------------------------------------------------------------------------------------
// Inputs and result checks

enum class Op { MatMul, Inverse };

// A well-conditioned matrix for inversion: uniform [-1, 1) plus sqrt(n) on the diagonal.
tf::Tensor make_input(Op op, int64_t n, tf::DType dt, int64_t seed) {
  tf::Tensor a = tf::random::uniform({n, n}, -1.0, 1.0, dt, seed);
  if (op == Op::Inverse) a = a + tf::eye(n, dt) * static_cast<float>(std::sqrt(static_cast<double>(n)));
  return a;
}

// A one-element read of a result: on a GPU this waits for the stream, so the timed run ends when
// the work is done (the read costs a few microseconds, included in every GPU time).
void synchronise(const tf::Tensor& c) {
  if (c.placement().is_gpu()) (void)tf::slice(c, {0, 0}, {1, 1}).item<double>();
}

// Sampled entries (i, j) of a product: max |C_ij - sum_k A_ik B_kj| / sum_k |A_ik| |B_kj|.
double check_matmul(const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<double>& c, int64_t n) {
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  double worst = 0;
  for (int s = 0; s < 32; ++s) {
    const int64_t i = pick(gen), j = pick(gen);
    double ref = 0, mag = 0;
    for (int64_t k = 0; k < n; ++k) {
      ref += a[i * n + k] * b[k * n + j];
      mag += std::abs(a[i * n + k] * b[k * n + j]);
    }
    worst = std::max(worst, std::abs(c[i * n + j] - ref) / std::max(mag, 1e-300));
  }
  return worst;
}

// Sampled rows i of A X - I: max |sum_k A_ik X_kj - delta_ij|.
double check_inverse(const std::vector<double>& a, const std::vector<double>& x, int64_t n) {
  std::mt19937_64 gen(11);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  double worst = 0;
  std::vector<double> row(n);
  for (int s = 0; s < 8; ++s) {
    const int64_t i = pick(gen);
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < n; ++k) {
      const double aik = a[i * n + k];
      const double* xk = &x[k * n];
      for (int64_t j = 0; j < n; ++j) row[j] += aik * xk[j];
    }
    row[i] -= 1.0;
    for (double r : row) worst = std::max(worst, std::abs(r));
  }
  return worst;
}

// Sampled entries of an elementwise product, relative to |a b|.
double check_elementwise(const std::vector<double>& a, const std::vector<double>& b,
                         const std::vector<double>& c, int64_t n) {
  std::mt19937_64 gen(13);
  std::uniform_int_distribution<int64_t> pick(0, n * n - 1);
  double worst = 0;
  for (int s = 0; s < 64; ++s) {
    const int64_t i = pick(gen);
    const double ref = a[i] * b[i];
    worst = std::max(worst, std::abs(c[i] - ref) / std::max(std::abs(ref), 1e-30));
  }
  return worst;
}

template <class T>
std::vector<double> to_doubles(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, double>) out[i] = v[i];
    else out[i] = static_cast<float>(v[i]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// One way of running one op: inputs prepared untimed, then timed runs that return only when the
// result is complete.

struct Bytes {
  double host = 0;    // host memory
  double device = 0;  // per GPU (0 for CPU cases)
};

class Case {
 public:
  virtual ~Case() = default;
  virtual Bytes bytes_needed(int64_t n) const = 0;
  virtual void prepare(int64_t n) = 0;
  virtual void run() = 0;
  // Error measure of the last run (see check_*), NaN when not applicable.
  virtual double check() = 0;
  virtual void release() = 0;
};

// cpu, cpu_1thread, gpu without transfers: inputs and result stay on one device.
class ResidentCase final : public Case {
 public:
  ResidentCase(Op op, tf::Device dev, tf::DType dt) : op_(op), dev_(dev), dt_(dt) {}
  Bytes bytes_needed(int64_t n) const override {
    // matmul: A, B, C; inverse: A, X, the LU copy, the identity and a temporary. run() frees the
    // previous result before making the next, so it never adds one more.
    const double mats = op_ == Op::MatMul ? 3 : 5;
    const double b = mats * static_cast<double>(n * n) * static_cast<double>(tf::dtype_size(dt_));
    return dev_.is_gpu() ? Bytes{0, b} : Bytes{b, 0};
  }
  void prepare(int64_t n) override {
    n_ = n;
    tf::DeviceScope scope(dev_);
    a_ = make_input(op_, n, dt_, 1);
    if (op_ == Op::MatMul) b_ = make_input(op_, n, dt_, 2);
  }
  void run() override {
    c_ = tf::Tensor();  // the last run's result: freed first, not alive beside the new one
    tf::DeviceScope scope(dev_);
    c_ = op_ == Op::MatMul ? tf::matmul(a_, b_) : tf::linalg::inv(a_);
    synchronise(c_);
  }
  double check() override {
    const std::vector<double> a = a_.numpy<double>(), c = c_.numpy<double>();
    return op_ == Op::MatMul ? check_matmul(a, b_.numpy<double>(), c, n_) : check_inverse(a, c, n_);
  }
  void release() override { a_ = b_ = c_ = tf::Tensor(); }

 private:
  Op op_;
  tf::Device dev_;
  tf::DType dt_;
  int64_t n_ = 0;
  tf::Tensor a_, b_, c_;
};

// gpu with transfers: every run copies the host inputs to the GPU and the result back, as a
// program that keeps its matrices in host memory must.
template <class T>
class TransferCase final : public Case {
 public:
  TransferCase(Op op, tf::Device dev, tf::DType dt) : op_(op), dev_(dev), dt_(dt) {}
  Bytes bytes_needed(int64_t n) const override {
    const double e = static_cast<double>(n * n) * sizeof(T);
    // host: A, B, the result and the staging copy of numpy(); device as ResidentCase.
    return {4 * e, (op_ == Op::MatMul ? 3 : 5) * e};
  }
  void prepare(int64_t n) override {
    n_ = n;
    tf::DeviceScope scope("/cpu:0");
    ha_ = make_input(op_, n, dt_, 1).numpy<T>();
    if (op_ == Op::MatMul) hb_ = make_input(op_, n, dt_, 2).numpy<T>();
  }
  void run() override {
    hc_ = std::vector<T>();  // the last run's result: freed first
    const tf::TensorShape shape{n_, n_};
    const tf::Tensor a = tf::detail::from_host<T>(ha_.data(), shape, dev_);
    tf::DeviceScope scope(dev_);
    if (op_ == Op::MatMul) {
      const tf::Tensor b = tf::detail::from_host<T>(hb_.data(), shape, dev_);
      hc_ = tf::matmul(a, b).numpy<T>();  // waits for the GPU
    } else {
      hc_ = tf::linalg::inv(a).numpy<T>();
    }
  }
  double check() override {
    return op_ == Op::MatMul ? check_matmul(to_doubles(ha_), to_doubles(hb_), to_doubles(hc_), n_)
                             : check_inverse(to_doubles(ha_), to_doubles(hc_), n_);
  }
  void release() override {
    ha_ = hb_ = hc_ = std::vector<T>();
  }

 private:
  Op op_;
  tf::Device dev_;
  tf::DType dt_;
  int64_t n_ = 0;
  std::vector<T> ha_, hb_, hc_;
};

// seed_faithful: what the seed's GPU curve timed. Every run converts float64 host matrices to
// float32 (as a TF1 feed_dict into a float32 placeholder does, on the host), copies them to the
// device, multiplies them ELEMENTWISE (the seed's "matrix multiplication" was x * y) or inverts,
// and copies the result back.
class SeedFaithfulCase final : public Case {
 public:
  SeedFaithfulCase(Op op, tf::Device dev) : op_(op), dev_(dev) {}
  Bytes bytes_needed(int64_t n) const override {
    const double e = static_cast<double>(n * n);
    // host: two float64 feeds, two float32 conversions, the result and its staging copy.
    const double host = 16 * e + 16 * e;
    const double device = (op_ == Op::MatMul ? 3 : 5) * 4 * e;
    return dev_.is_gpu() ? Bytes{host, device} : Bytes{host + device, 0};
  }
  void prepare(int64_t n) override {
    n_ = n;
    tf::DeviceScope scope("/cpu:0");
    fa_ = make_input(op_, n, tf::float64, 1).numpy<double>();
    fb_ = make_input(op_, n, tf::float64, 2).numpy<double>();
  }
  void run() override {
    hc_ = std::vector<float>();  // the last run's result: freed first
    std::vector<float> a32(fa_.begin(), fa_.end()), b32;
    if (op_ == Op::MatMul) b32.assign(fb_.begin(), fb_.end());
    tf::DeviceScope scope(dev_);
    const tf::Tensor a = tf::convert_to_tensor(a32, {n_, n_});
    if (op_ == Op::MatMul) {
      hc_ = tf::multiply(a, tf::convert_to_tensor(b32, {n_, n_})).numpy<float>();
    } else {
      hc_ = tf::linalg::inv(a).numpy<float>();
    }
  }
  double check() override {
    auto rounded = [](const std::vector<double>& v) {
      std::vector<double> out(v.size());
      for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
      return out;
    };
    const std::vector<double> c(hc_.begin(), hc_.end());
    return op_ == Op::MatMul ? check_elementwise(rounded(fa_), rounded(fb_), c, n_)
                             : check_inverse(rounded(fa_), c, n_);
  }
  void release() override {
    fa_ = fb_ = std::vector<double>();
    hc_ = std::vector<float>();
  }

 private:
  Op op_;
  tf::Device dev_;
  int64_t n_ = 0;
  std::vector<double> fa_, fb_;
  std::vector<float> hc_;
};

// all_gpus, multiplication: C = A B with A split into G row blocks through a MirroredStrategy
// over every GPU: strategy.run runs the replica step on each GPU's replica thread at once
// (under that GPU's device scope) and returns when every replica has queued its work; the run
// then waits for every GPU. Replica i computes A_i B with its own copy of B. Without transfers
// the blocks and the copies of B already live on their GPUs and the product blocks stay there;
// with transfers every run copies A_i and B from host memory to GPU i and C_i back to host
// memory (as G row blocks).
template <class T>
class AllGpusMatMulCase final : public Case {
 public:
  AllGpusMatMulCase(tf::DType dt, bool transfers)
      : dt_(dt), transfers_(transfers), g_(static_cast<int>(strategy_.devices().size())), hc_(g_) {}
  Bytes bytes_needed(int64_t n) const override {
    const double e = static_cast<double>(n * n) * sizeof(T);
    // per GPU: all of B, an A block and a C block (the largest block has ceil(n / g) rows).
    const double block = std::ceil(static_cast<double>(n) / g_) / static_cast<double>(n);
    return {4 * e, e * (1 + 2 * block)};
  }
  void prepare(int64_t n) override {
    n_ = n;
    {
      tf::DeviceScope scope("/cpu:0");
      ha_ = make_input(Op::MatMul, n, dt_, 1).numpy<T>();
      hb_ = make_input(Op::MatMul, n, dt_, 2).numpy<T>();
    }
    if (!transfers_) {
      a_ = strategy_.run([&] { return host_block(ha_.data(), replica()); });
      b_ = strategy_.run([&] {
        tf::Tensor b = tf::detail::from_host<T>(hb_.data(), {n_, n_}, device(replica()));
        synchronise(b);
        return b;
      });
    }
  }
  void run() override {
    for (auto& h : hc_) h = std::vector<T>();  // the last run's results: freed first
    c_ = tf::distribute::PerReplica<tf::Tensor>();
    if (transfers_) {
      strategy_.run([&] {
        const int i = replica();
        const tf::Tensor a = host_block(ha_.data(), i);
        if (a.shape()[0] == 0) return;
        const tf::Tensor b = tf::detail::from_host<T>(hb_.data(), {n_, n_}, device(i));
        hc_[static_cast<size_t>(i)] = tf::matmul(a, b).numpy<T>();  // waits for GPU i
      });
    } else {
      c_ = strategy_.run([](const tf::Tensor& a, const tf::Tensor& b) {
        if (a.shape()[0] == 0) return a;  // N < G: no rows here
        tf::Tensor c = tf::matmul(a, b);
        synchronise(c);
        return c;
      }, a_, b_);
    }
  }
  double check() override {
    std::vector<double> c;
    c.reserve(static_cast<size_t>(n_ * n_));
    for (int i = 0; i < g_; ++i) {
      if (block(i).second == 0) continue;
      const size_t r = static_cast<size_t>(i);
      const std::vector<double> v = transfers_ ? to_doubles(hc_[r]) : c_[r].numpy<double>();
      c.insert(c.end(), v.begin(), v.end());
    }
    return check_matmul(to_doubles(ha_), to_doubles(hb_), c, n_);
  }
  void release() override {
    ha_ = hb_ = std::vector<T>();
    a_ = b_ = c_ = tf::distribute::PerReplica<tf::Tensor>();
    for (auto& h : hc_) h = std::vector<T>();
  }

 private:
  std::pair<int64_t, int64_t> block(int i) const {
    const int64_t r0 = n_ * i / g_, r1 = n_ * (i + 1) / g_;
    return {r0, r1 - r0};
  }
  // Inside a replica step: this replica's index and device.
  static int replica() { return tf::distribute::get_replica_context()->replica_id_in_sync_group(); }
  tf::Device device(int i) const { return strategy_.devices()[static_cast<size_t>(i)]; }
  // Rows of replica i's block of a host matrix, on its GPU (no rows when N < G).
  tf::Tensor host_block(const T* host, int i) const {
    const auto [r0, rows] = block(i);
    if (rows == 0) return tf::zeros({0, n_}, dt_);
    return tf::detail::from_host<T>(host + r0 * n_, {rows, n_}, device(i));
  }

  tf::distribute::MirroredStrategy strategy_;  // every GPU
  tf::DType dt_;
  bool transfers_;
  int g_;
  int64_t n_ = 0;
  std::vector<T> ha_, hb_;                           // host inputs
  tf::distribute::PerReplica<tf::Tensor> a_, b_, c_;  // resident
  std::vector<std::vector<T>> hc_;                   // per GPU, result blocks in host memory
};

#ifdef MATRIX_BENCHMARK_CUDA
// cuSOLVER's multi-GPU solver, opened at run time (libcusolverMg is 100 MB and optional: without
// it all_gpus inversion says so and the benchmark goes on).
struct CusolverMg {
  decltype(&cusolverMgCreate) create = nullptr;
  decltype(&cusolverMgDestroy) destroy = nullptr;
  decltype(&cusolverMgDeviceSelect) device_select = nullptr;
  decltype(&cusolverMgCreateDeviceGrid) create_grid = nullptr;
  decltype(&cusolverMgDestroyGrid) destroy_grid = nullptr;
  decltype(&cusolverMgCreateMatrixDesc) create_desc = nullptr;
  decltype(&cusolverMgDestroyMatrixDesc) destroy_desc = nullptr;
  decltype(&cusolverMgGetrf_bufferSize) getrf_buffer = nullptr;
  decltype(&cusolverMgGetrf) getrf = nullptr;
  decltype(&cusolverMgGetrs_bufferSize) getrs_buffer = nullptr;
  decltype(&cusolverMgGetrs) getrs = nullptr;
  std::string error;  // why it is unavailable

  static const CusolverMg& get() {
    static const CusolverMg lib = [] {
      CusolverMg m;
      void* h = dlopen("libcusolverMg.so.12", RTLD_NOW | RTLD_LOCAL);
      if (!h) h = dlopen("libcusolverMg.so", RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = dlerror();
        m.error = std::string("cannot load libcusolverMg.so.12: ") + (e ? e : "not found");
        return m;
      }
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        if (!fn && m.error.empty()) m.error = std::string("libcusolverMg lacks ") + name;
      };
      sym(m.create, "cusolverMgCreate");
      sym(m.destroy, "cusolverMgDestroy");
      sym(m.device_select, "cusolverMgDeviceSelect");
      sym(m.create_grid, "cusolverMgCreateDeviceGrid");
      sym(m.destroy_grid, "cusolverMgDestroyGrid");
      sym(m.create_desc, "cusolverMgCreateMatrixDesc");
      sym(m.destroy_desc, "cusolverMgDestroyMatrixDesc");
      sym(m.getrf_buffer, "cusolverMgGetrf_bufferSize");
      sym(m.getrf, "cusolverMgGetrf");
      sym(m.getrs_buffer, "cusolverMgGetrs_bufferSize");
      sym(m.getrs, "cusolverMgGetrs");
      return m;
    }();
    return lib;
  }
};

void mg_ok(cusolverStatus_t st, const char* what) {
  if (st != CUSOLVER_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed (cusolverStatus " +
                             std::to_string(static_cast<int>(st)) + ")");
}
void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
      throw tf::ResourceExhaustedError(std::string(what) + ": out of GPU memory");
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e));
  }
}

// Restores the thread's current CUDA device on scope exit (tapeflow caches it per thread).
struct CurrentDeviceGuard {
  int previous = 0;
  CurrentDeviceGuard() { (void)cudaGetDevice(&previous); }
  ~CurrentDeviceGuard() { (void)cudaSetDevice(previous); }
};

// The physical GPUs behind the logical ones, each once.
std::vector<int> physical_gpus(int logical_gpus) {
  std::vector<int> ids;
  for (int g = 0; g < logical_gpus; ++g) {
    const int p = tf::detail::physical_gpu_of(g);
    if (std::find(ids.begin(), ids.end(), p) == ids.end()) ids.push_back(p);
  }
  return ids;
}

// all_gpus, inversion: cuSOLVER's multi-GPU LU (cusolverMgGetrf) and solve against the identity
// (cusolverMgGetrs) over every physical GPU. cusolverMg keeps a matrix in its own layout: the
// columns in blocks of kTile, block b on GPU b mod G, each GPU's blocks packed in one column-major
// array of its own (allocated here, outside tapeflow's tensors). The row-major host matrix A is
// the column-major matrix A^T: inverting that gives (A^T)^-1 = (A^-1)^T column-major, which read
// back row-major is A^-1. Resident: A and the identity already sit in the layout on the GPUs,
// and each run copies them into the working arrays (getrf overwrites A, getrs the right-hand
// side), factors and solves. +transfers: each run copies A from host memory into the layout,
// factors, solves, and copies A^-1 back.
template <class T>
class AllGpusInverseCase final : public Case {
 public:
  static constexpr int64_t kTile = 256;  // columns per block

  AllGpusInverseCase(std::vector<int> devices, bool transfers)
      : lib_(CusolverMg::get()), devices_(std::move(devices)), transfers_(transfers) {
    if (!lib_.error.empty()) throw std::runtime_error(lib_.error);
    CurrentDeviceGuard guard;
    const int g = static_cast<int>(devices_.size());
    // cusolverMg moves panels between the GPUs directly.
    for (int i = 0; i < g; ++i) {
      cuda_ok(cudaSetDevice(devices_[i]), "cudaSetDevice");
      for (int j = 0; j < g; ++j) {
        if (i == j) continue;
        int can = 0;
        cuda_ok(cudaDeviceCanAccessPeer(&can, devices_[i], devices_[j]), "cudaDeviceCanAccessPeer");
        if (!can)
          throw std::runtime_error("GPUs " + std::to_string(devices_[i]) + " and " +
                                   std::to_string(devices_[j]) +
                                   " have no peer access, which cusolverMg needs");
        const cudaError_t e = cudaDeviceEnablePeerAccess(devices_[j], 0);
        if (e != cudaErrorPeerAccessAlreadyEnabled) cuda_ok(e, "cudaDeviceEnablePeerAccess");
        (void)cudaGetLastError();
      }
    }
    mg_ok(lib_.create(&handle_), "cusolverMgCreate");
    mg_ok(lib_.device_select(handle_, g, devices_.data()), "cusolverMgDeviceSelect");
    mg_ok(lib_.create_grid(&grid_, 1, g, devices_.data(), CUDALIBMG_GRID_MAPPING_COL_MAJOR),
          "cusolverMgCreateDeviceGrid");
  }
  ~AllGpusInverseCase() override {
    release();
    if (grid_) lib_.destroy_grid(grid_);
    if (handle_) lib_.destroy(handle_);
  }
  Bytes bytes_needed(int64_t n) const override {
    // Per GPU: A, the right-hand side, (resident) their pristine copies, the workspace (about
    // one more array); host: A and the result.
    const double local = static_cast<double>(n) * static_cast<double>(local_columns(n)) * sizeof(T);
    return {2.0 * static_cast<double>(n * n) * sizeof(T), local * (transfers_ ? 3 : 5)};
  }
  void prepare(int64_t n) override {
    n_ = n;
    {
      tf::DeviceScope scope("/cpu:0");
      ha_ = make_input(Op::Inverse, n, dtype(), 1).numpy<T>();
    }
    hx_.assign(static_cast<size_t>(n * n), T(0));
    CurrentDeviceGuard guard;
    const int g = static_cast<int>(devices_.size());
    const cudaDataType dt = std::is_same_v<T, double> ? CUDA_R_64F : CUDA_R_32F;
    mg_ok(lib_.create_desc(&desc_, n, n, n, kTile, dt, grid_), "cusolverMgCreateMatrixDesc");
    // cusolverMg's buffers come from cudaMalloc: give it what tapeflow's allocators keep cached
    // (the input made above, earlier series).
    const int logical = static_cast<int>(tf::config::list_logical_devices("GPU").size());
    for (int l = 0; l < logical; ++l)
      tf::allocator_for(tf::Device{tf::DeviceType::GPU, l}).release_cached_memory();
    const size_t local = static_cast<size_t>(n * local_columns(n));
    for (auto* arrays : {&a_, &b_, &a0_, &b0_}) arrays->assign(static_cast<size_t>(g), nullptr);
    ipiv_.assign(static_cast<size_t>(g), nullptr);
    work_.assign(static_cast<size_t>(g), nullptr);
    for (int i = 0; i < g; ++i) {
      cuda_ok(cudaSetDevice(devices_[i]), "cudaSetDevice");
      cuda_ok(cudaMalloc(&a_[i], local * sizeof(T)), "cudaMalloc");
      cuda_ok(cudaMalloc(&b_[i], local * sizeof(T)), "cudaMalloc");
      cuda_ok(cudaMalloc(&ipiv_[i], static_cast<size_t>(local_columns(n)) * sizeof(int)),
              "cudaMalloc");
      if (!transfers_) {
        cuda_ok(cudaMalloc(&a0_[i], local * sizeof(T)), "cudaMalloc");
        cuda_ok(cudaMalloc(&b0_[i], local * sizeof(T)), "cudaMalloc");
      }
    }
    int64_t lw_getrf = 0, lw_getrs = 0;
    mg_ok(lib_.getrf_buffer(handle_, static_cast<int>(n), static_cast<int>(n), a_.data(), 1, 1,
                            desc_, ipiv_.data(), dt, &lw_getrf),
          "cusolverMgGetrf_bufferSize");
    mg_ok(lib_.getrs_buffer(handle_, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n),
                            a_.data(), 1, 1, desc_, ipiv_.data(), b_.data(), 1, 1, desc_, dt,
                            &lw_getrs),
          "cusolverMgGetrs_bufferSize");
    lwork_ = std::max(lw_getrf, lw_getrs);
    for (int i = 0; i < g; ++i) {
      cuda_ok(cudaSetDevice(devices_[i]), "cudaSetDevice");
      cuda_ok(cudaMalloc(&work_[i], static_cast<size_t>(std::max<int64_t>(lwork_, 1)) * sizeof(T)),
              "cudaMalloc");
    }
    if (!transfers_) {
      upload(ha_.data(), a0_);
      identity(b0_);
      synchronize_all();
    }
  }
  void run() override {
    CurrentDeviceGuard guard;
    if (transfers_) {
      upload(ha_.data(), a_);
      identity(b_);
    } else {
      const size_t bytes = static_cast<size_t>(n_ * local_columns(n_)) * sizeof(T);
      for (size_t i = 0; i < devices_.size(); ++i) {
        cuda_ok(cudaSetDevice(devices_[i]), "cudaSetDevice");
        cuda_ok(cudaMemcpy(a_[i], a0_[i], bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
        cuda_ok(cudaMemcpy(b_[i], b0_[i], bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
      }
    }
    // The copies above ran on each device's default stream (pageable uploads and memsets may
    // still be in flight); cusolverMg does not say that its own streams wait for them.
    synchronize_all();
    const cudaDataType dt = std::is_same_v<T, double> ? CUDA_R_64F : CUDA_R_32F;
    const int n = static_cast<int>(n_);
    int info = 0;
    mg_ok(lib_.getrf(handle_, n, n, a_.data(), 1, 1, desc_, ipiv_.data(), dt, work_.data(),
                     lwork_, &info),
          "cusolverMgGetrf");
    synchronize_all();
    if (info != 0)
      throw std::runtime_error("cusolverMgGetrf: info " + std::to_string(info) +
                               " (a zero pivot: the matrix is singular)");
    mg_ok(lib_.getrs(handle_, CUBLAS_OP_N, n, n, a_.data(), 1, 1, desc_, ipiv_.data(),
                     b_.data(), 1, 1, desc_, dt, work_.data(), lwork_, &info),
          "cusolverMgGetrs");
    synchronize_all();
    if (info != 0) throw std::runtime_error("cusolverMgGetrs: info " + std::to_string(info));
    if (transfers_) download(b_, hx_.data());
  }
  double check() override {
    if (!transfers_) {
      CurrentDeviceGuard guard;
      download(b_, hx_.data());
    }
    return check_inverse(to_doubles(ha_), to_doubles(hx_), n_);
  }
  void release() override {
    CurrentDeviceGuard guard;
    for (size_t i = 0; i < a_.size(); ++i) {
      (void)cudaSetDevice(devices_[i]);
      for (void* p : {a_[i], b_[i], a0_[i], b0_[i], work_[i], static_cast<void*>(ipiv_[i])})
        if (p) (void)cudaFree(p);
    }
    a_.clear();
    b_.clear();
    a0_.clear();
    b0_.clear();
    work_.clear();
    ipiv_.clear();
    if (desc_) lib_.destroy_desc(desc_);
    desc_ = nullptr;
    ha_ = hx_ = std::vector<T>();
  }

 private:
  static tf::DType dtype() { return std::is_same_v<T, double> ? tf::float64 : tf::float32; }
  // Columns of the largest per-GPU array (whole blocks).
  int64_t local_columns(int64_t n) const {
    const int64_t blocks = (n + kTile - 1) / kTile;
    const int64_t g = static_cast<int64_t>(devices_.size());
    return std::max<int64_t>((blocks + g - 1) / g, 1) * kTile;
  }
  // Global column block b: its GPU, and where it starts in that GPU's array.
  std::pair<size_t, size_t> place(int64_t b) const {
    const int64_t g = static_cast<int64_t>(devices_.size());
    return {static_cast<size_t>(b % g), static_cast<size_t>((b / g) * kTile * n_)};
  }
  // Copies an n x n column-major host matrix into the layout (a block's columns are contiguous
  // on both sides).
  void upload(const T* host, std::vector<void*>& arrays) {
    for (int64_t b = 0; b * kTile < n_; ++b) {
      const int64_t cols = std::min(kTile, n_ - b * kTile);
      const auto [dev, offset] = place(b);
      cuda_ok(cudaSetDevice(devices_[dev]), "cudaSetDevice");
      cuda_ok(cudaMemcpy(static_cast<T*>(arrays[dev]) + offset, host + b * kTile * n_,
                         static_cast<size_t>(cols * n_) * sizeof(T), cudaMemcpyHostToDevice),
              "cudaMemcpy");
    }
  }
  void download(const std::vector<void*>& arrays, T* host) {
    for (int64_t b = 0; b * kTile < n_; ++b) {
      const int64_t cols = std::min(kTile, n_ - b * kTile);
      const auto [dev, offset] = place(b);
      cuda_ok(cudaSetDevice(devices_[dev]), "cudaSetDevice");
      cuda_ok(cudaMemcpy(host + b * kTile * n_, static_cast<T*>(arrays[dev]) + offset,
                         static_cast<size_t>(cols * n_) * sizeof(T), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
    }
  }
  // The identity in the layout: zeros, then each block's diagonal run (global column j of the
  // block holds its one at row j: stride n + 1 elements within the block).
  void identity(std::vector<void*>& arrays) {
    const size_t bytes = static_cast<size_t>(n_ * local_columns(n_)) * sizeof(T);
    for (size_t i = 0; i < devices_.size(); ++i) {
      cuda_ok(cudaSetDevice(devices_[i]), "cudaSetDevice");
      cuda_ok(cudaMemset(arrays[i], 0, bytes), "cudaMemset");
    }
    const std::vector<T> ones(static_cast<size_t>(kTile), T(1));
    for (int64_t b = 0; b * kTile < n_; ++b) {
      const int64_t cols = std::min(kTile, n_ - b * kTile);
      const auto [dev, offset] = place(b);
      cuda_ok(cudaSetDevice(devices_[dev]), "cudaSetDevice");
      // Row b * kTile of global column b * kTile: the block's first diagonal element.
      T* first = static_cast<T*>(arrays[dev]) + offset + b * kTile;
      cuda_ok(cudaMemcpy2D(first, static_cast<size_t>(n_ + 1) * sizeof(T), ones.data(), sizeof(T),
                           sizeof(T), static_cast<size_t>(cols), cudaMemcpyHostToDevice),
              "cudaMemcpy2D");
    }
  }
  void synchronize_all() {
    for (int d : devices_) {
      cuda_ok(cudaSetDevice(d), "cudaSetDevice");
      cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

  const CusolverMg& lib_;
  std::vector<int> devices_;  // physical GPUs
  bool transfers_;
  int64_t n_ = 0;
  cusolverMgHandle_t handle_ = nullptr;
  cudaLibMgGrid_t grid_ = nullptr;
  cudaLibMgMatrixDesc_t desc_ = nullptr;
  std::vector<void*> a_, b_, a0_, b0_, work_;
  std::vector<int*> ipiv_;
  int64_t lwork_ = 0;
  std::vector<T> ha_, hx_;
};
#endif  // MATRIX_BENCHMARK_CUDA

// ---------------------------------------------------------------------------------------------
// Series: one op, mode, dtype and transfer setting over the sizes.

struct Series {
  Op op;
  std::string op_name, mode, dtype;
  bool transfers = false;
  std::string device;  // for the CSV: "CPU:0", "GPU:0", "GPU:0-1"
  int threads = 0;     // CPU threads (0 for GPU series)
};

struct Row {
  int64_t n;
  int runs;
  double median, min, max, gflops, flops, check;
};

class Output {
 public:
  explicit Output(const std::string& csv_path) : csv_path_(csv_path) {
    if (!csv_path.empty()) {
      csv_.open(csv_path);
      if (!csv_) {
        std::fprintf(stderr, "matrix_benchmark: cannot write %s: %s\n", csv_path.c_str(),
                     std::strerror(errno));
        std::exit(2);
      }
    }
  }
  void header_comment(const std::string& line) {
    std::printf("# %s\n", line.c_str());
    if (csv_.is_open()) csv_ << "# " << line << "\n";
  }
  void begin_table() {
    std::printf("%-8s %-14s %-9s %-5s %-8s %3s %6s %5s %12s %12s %12s %10s %9s\n", "op", "mode",
                "dtype", "xfer", "device", "thr", "N", "runs", "median_s", "min_s", "max_s",
                "GFLOP/s", "check");
    if (csv_.is_open()) {
      csv_ << "op,mode,dtype,transfers,device,threads,n,runs,median_s,min_s,max_s,gflops,"
              "flops_per_run,check_err\n";
      flush_csv();  // a full disk or a bad path fails here, before any series runs
    }
  }
  void row(const Series& s, const Row& r) {
    char check[32] = "-";
    if (!std::isnan(r.check)) std::snprintf(check, sizeof check, "%.1e", r.check);
    std::printf("%-8s %-14s %-9s %-5s %-8s %3d %6lld %5d %12.4e %12.4e %12.4e %10.3f %9s\n",
                s.op_name.c_str(), s.mode.c_str(), s.dtype.c_str(), s.transfers ? "yes" : "no",
                s.device.c_str(), s.threads, static_cast<long long>(r.n), r.runs, r.median, r.min,
                r.max, r.gflops, check);
    std::fflush(stdout);
    if (csv_.is_open()) {
      char line[512];
      std::snprintf(line, sizeof line, "%s,%s,%s,%s,%s,%d,%lld,%d,%.6e,%.6e,%.6e,%.6g,%.6e,%s\n",
                    s.op_name.c_str(), s.mode.c_str(), s.dtype.c_str(), s.transfers ? "yes" : "no",
                    s.device.c_str(), s.threads, static_cast<long long>(r.n), r.runs, r.median,
                    r.min, r.max, r.gflops, r.flops, std::isnan(r.check) ? "" : check);
      csv_ << line;
      flush_csv();
    }
  }
  // A line for the reader between table rows (skips, stops, failures), on stdout and as a
  // comment in the CSV.
  void note(const std::string& msg) {
    progress_clear();
    std::printf("  -- %s\n", msg.c_str());
    std::fflush(stdout);
    if (csv_.is_open()) {
      csv_ << "# " << msg << "\n";
      flush_csv();
    }
  }
  // Closes the CSV; false (with a message on stderr) when it could not be written completely.
  bool finish_csv() {
    if (!csv_.is_open()) return true;
    flush_csv();
    csv_.close();
    if (csv_.fail()) {
      const int err = errno;
      std::fprintf(stderr, "matrix_benchmark: writing %s failed: %s\n", csv_path_.c_str(),
                   err ? std::strerror(err) : "close failed");
      return false;
    }
    return true;
  }
  void progress(const std::string& msg) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", msg.c_str());
      dirty_ = true;
    } else {
      std::fprintf(stderr, "%s\n", msg.c_str());
    }
    std::fflush(stderr);
  }
  void progress_clear() {
    if (dirty_) std::fprintf(stderr, "\r\033[K");
    dirty_ = false;
  }

 private:
  // Every CSV write is flushed and checked: a write error (a full disk, /dev/full) stops the
  // program with status 1 at once instead of after a long benchmark with nothing written.
  void flush_csv() {
    errno = 0;
    csv_.flush();
    if (!csv_) {
      const int err = errno;
      progress_clear();
      std::fprintf(stderr, "matrix_benchmark: writing %s failed: %s\n", csv_path_.c_str(),
                   err ? std::strerror(err) : "write error");
      std::exit(1);
    }
  }

  std::string csv_path_;
  std::ofstream csv_;
  bool tty_ = isatty(STDERR_FILENO) != 0;
  bool dirty_ = false;
};

double flops_of(Op op, const std::string& mode, int64_t n) {
  const double d = static_cast<double>(n);
  if (op == Op::MatMul) return mode == "seed_faithful" ? d * d : 2 * d * d * d;
  return 8.0 / 3.0 * d * d * d;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Runs one series over the sizes; returns false if a check failed or an unexpected error
// stopped it.
bool run_series(const Series& s, Case& c, const Options& o, const std::string& tag, Output& out,
                const DTypeInfo& dti, const std::vector<int>& gpus_used) {
  const Clock::time_point start = Clock::now();
  bool ok = true;
  double prev_per_run = 0;
  for (int64_t n = o.min_n; n <= o.max_n; n *= 2) {
    // Memory: a clean skip, before anything is allocated.
    const Bytes need = c.bytes_needed(n);
    const double check_bytes = n <= o.check_max_n ? 4.0 * static_cast<double>(n * n) * 8 : 0;
    const double host_avail = host_bytes_available();
    if (need.host + check_bytes > 0.9 * host_avail) {
      out.note(tag + ": N=" + std::to_string(n) + " skipped: needs about " +
               gib(need.host + check_bytes) + " of host memory, " + gib(host_avail) +
               " available; going on with the next series");
      break;
    }
    bool fits = true;
    for (int g : gpus_used) {
      if (need.device <= 0) break;
      const double avail = gpu_bytes_available(g);
      if (need.device > 0.9 * avail) {
        out.note(tag + ": N=" + std::to_string(n) + " skipped: needs about " + gib(need.device) +
                 " on /GPU:" + std::to_string(g) + ", " + gib(avail) +
                 " free; going on with the next series");
        fits = false;
        break;
      }
    }
    if (!fits) break;
    // Time: the next size costs about 8x the last (N^3), times the runs it will make.
    const double elapsed = seconds_since(start);
    const double predicted = prev_per_run * 8 * (o.warmup + 1) +
                             std::max(prev_per_run * 8 * o.repeats, std::min(o.min_time, prev_per_run * 8 * 1000));
    if (prev_per_run > 0 && elapsed + predicted > o.time_budget) {
      char msg[256];
      std::snprintf(msg, sizeof msg,
                    "%s: stopping before N=%lld: about %.1f s more would pass the %g s time "
                    "budget (--time-budget)",
                    tag.c_str(), static_cast<long long>(n), predicted, o.time_budget);
      out.note(msg);
      break;
    }
    Row r{n, 0, 0, 0, 0, 0, flops_of(s.op, s.mode, n), std::nan("")};
    try {
      out.progress(tag + ": N=" + std::to_string(n) + " preparing");
      c.prepare(n);
      // Once the series' time budget is spent, a size makes one warm-up run (if any) and one
      // timed run, and no more.
      auto budget_spent = [&] { return seconds_since(start) > o.time_budget; };
      for (int w = 0; w < o.warmup; ++w) {
        if (w > 0 && budget_spent()) break;
        out.progress(tag + ": N=" + std::to_string(n) + " warm-up");
        c.run();
      }
      if (n <= o.check_max_n) {
        if (o.warmup == 0) c.run();
        r.check = c.check();
        const double tol = s.mode == "seed_faithful" ? 1e-6
                           : s.op == Op::MatMul      ? dti.matmul_tol
                                                     : dti.inverse_tol;
        if (!(r.check <= tol)) {
          char msg[256];
          std::snprintf(msg, sizeof msg, "%s: N=%lld CHECK FAILED: error %.3e above %.1e", tag.c_str(),
                        static_cast<long long>(n), r.check, tol);
          out.note(msg);
          ok = false;
        }
      }
      std::vector<double> times;
      double total = 0;
      bool cut = false;  // stopped by the time budget before --repeats and --min-time were met
      Clock::time_point last_progress = Clock::now();
      while (static_cast<int>(times.size()) < o.repeats ||
             (total < o.min_time && times.size() < 1000)) {
        if (!times.empty() && budget_spent()) {
          cut = true;
          break;
        }
        const Clock::time_point t0 = Clock::now();
        c.run();
        const double t = seconds_since(t0);
        times.push_back(t);
        total += t;
        if (seconds_since(last_progress) > 0.25) {
          last_progress = Clock::now();
          char msg[256];
          std::snprintf(msg, sizeof msg, "%s: N=%lld run %zu, %.1f s of %g s budget used",
                        tag.c_str(), static_cast<long long>(n), times.size() + 1,
                        seconds_since(start), o.time_budget);
          out.progress(msg);
        }
      }
      c.release();
      out.progress_clear();
      r.runs = static_cast<int>(times.size());
      r.median = median_of(times);
      r.min = *std::min_element(times.begin(), times.end());
      r.max = *std::max_element(times.begin(), times.end());
      r.gflops = r.flops / r.median / 1e9;
      prev_per_run = r.median;
      if (cut) {
        char msg[256];
        std::snprintf(msg, sizeof msg,
                      "%s: N=%lld: the %g s time budget (--time-budget) was spent after %zu timed "
                      "run%s (--repeats %d, --min-time %g); its row is over %zu run%s",
                      tag.c_str(), static_cast<long long>(n), o.time_budget, times.size(),
                      times.size() == 1 ? "" : "s", o.repeats, o.min_time, times.size(),
                      times.size() == 1 ? "" : "s");
        out.note(msg);
      }
      out.row(s, r);
    } catch (const tf::ResourceExhaustedError& e) {
      c.release();
      out.note(tag + ": N=" + std::to_string(n) + " out of memory (" + e.what() +
               "); going on with the next series");
      break;
    } catch (const std::bad_alloc&) {
      c.release();
      out.note(tag + ": N=" + std::to_string(n) +
               " out of host memory (std::bad_alloc); going on with the next series");
      break;
    } catch (const std::exception& e) {
      c.release();
      out.note(tag + ": N=" + std::to_string(n) + " FAILED: " + e.what());
      ok = false;
      break;
    }
  }
  return ok;
}

}  // namespace

// --split-gpu: GPU 0 as K logical GPUs, before any op touches a GPU. Exits with status 2 when
// there is no GPU to split (or no CUDA in this build).
void split_gpu(int k) {
  if (k <= 1) return;
#ifdef MATRIX_BENCHMARK_CUDA
  const auto gpus = tf::config::list_physical_devices("GPU");
  cudaDeviceProp p{};
  if (gpus.empty() || cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    usage_error("--split-gpu: there is no GPU to split");
  const int64_t each_mib =
      static_cast<int64_t>(0.9 * static_cast<double>(p.totalGlobalMem) / static_cast<double>(k)) >>
      20;
  tf::config::set_logical_device_configuration(
      gpus[0], std::vector<tf::config::LogicalDeviceConfiguration>(
                   static_cast<size_t>(k),
                   tf::config::LogicalDeviceConfiguration{.memory_limit = each_mib}));
#else
  usage_error("--split-gpu: this build has no CUDA");
#endif
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  split_gpu(o.split_gpu);
  Output out(o.csv);

  const int cpu_threads = o.threads > 0 ? o.threads : tf::detail::num_threads();
  const int gpus = static_cast<int>(tf::config::list_logical_devices("GPU").size());
  out.header_comment("matrix_benchmark: tapeflow, CPU threads " + std::to_string(cpu_threads) +
                     " (hardware " + std::to_string(std::thread::hardware_concurrency()) +
                     "), GPUs " + std::to_string(gpus));
  out.header_comment("gemm backends: " + tf::detail::gemm_backend_info());
  for (int g = 0; g < gpus; ++g)
    out.header_comment("GPU:" + std::to_string(g) + " " + gpu_name(g));
  out.header_comment(
      "flops: matmul 2 N^3, inverse 8 N^3 / 3 (LU-based), seed_faithful matmul N^2 "
      "(elementwise); check: matmul max |C - C_ref| / (|A||B|), inverse max |A X - I| "
      "(sampled, float64 reference)");
  out.begin_table();

  bool ok = true;
  for (const std::string& op_name : o.ops) {
    const Op op = op_name == "matmul" ? Op::MatMul : Op::Inverse;
    for (const std::string& mode : o.modes) {
      const bool gpu_mode = mode == "gpu" || mode == "all_gpus";
      std::vector<bool> transfer_settings{false};
      if (gpu_mode && o.transfers == "with") transfer_settings = {true};
      if (gpu_mode && o.transfers == "both") transfer_settings = {false, true};
      if (gpu_mode && gpus == 0) {
        out.note(op_name + " " + mode + ": skipped: " + kNoGpu);
        continue;
      }
#ifdef MATRIX_BENCHMARK_CUDA
      if (op == Op::Inverse && mode == "all_gpus" && !CusolverMg::get().error.empty()) {
        out.note(op_name + " " + mode + ": not available: " + CusolverMg::get().error);
        continue;
      }
#endif
      const bool on_gpu = gpu_mode || (mode == "seed_faithful" && gpus > 0);
      if (mode == "seed_faithful" && !on_gpu)
        out.note(op_name + " seed_faithful: runs on the CPU because there is " + kNoGpu +
                 "; its transfers (xfer yes) are the float64-to-float32 conversion and host "
                 "copies into and out of CPU tensors");
      for (const std::string& dname : o.dtypes) {
        const DTypeInfo dti = dtype_info(dname);
        const std::string dtag = op_name + " " + mode + " " + dname;
        if (mode == "seed_faithful" && dname != "float32") {
          out.note(dtag + ": skipped: seed_faithful feeds float32 only, as the seed did");
          continue;
        }
        if (!on_gpu && (dname == "tf32" || dname == "bfloat16")) {
          out.note(dtag + ": " + dname + " not supported on CPU; skipped");
          continue;
        }
        if (on_gpu && (dname == "tf32" || dname == "bfloat16") && !gpu_has_tensor_float(0)) {
          out.note(dtag + ": " + dname + " needs compute capability 8.0 or newer; skipped");
          continue;
        }
        if (op == Op::Inverse && (dname == "tf32" || dname == "bfloat16")) {
          out.note(dtag + ": skipped: inversion runs float32 and float64 only (" + dname +
                   " would be a float32 LU under another name)");
          continue;
        }
        for (bool transfers : transfer_settings) {
          const std::string tag =
              dtag + (gpu_mode ? (transfers ? " +transfers" : " resident") : "");
          Series s{op, op_name, mode, dname, transfers, "CPU:0", 0};
          std::vector<int> gpus_used;  // the logical GPUs whose memory is checked
          std::unique_ptr<Case> c;
          std::optional<ThreadsGuard> threads_guard;
          if (mode == "cpu" || mode == "cpu_1thread" || (mode == "seed_faithful" && !on_gpu)) {
            s.threads = mode == "cpu_1thread" ? 1 : cpu_threads;
            threads_guard.emplace(s.threads);
          }
          const tf::Device gpu0{tf::DeviceType::GPU, 0};
          if (mode == "cpu" || mode == "cpu_1thread") {
            c = std::make_unique<ResidentCase>(op, tf::Device{}, dti.storage);
          } else if (mode == "gpu") {
            s.device = "GPU:0";
            gpus_used = {0};
            if (transfers) {
              with_host_type(dti.storage, [&](auto zero) {
                c = std::make_unique<TransferCase<decltype(zero)>>(op, gpu0, dti.storage);
              });
            } else {
              c = std::make_unique<ResidentCase>(op, gpu0, dti.storage);
            }
          } else if (mode == "all_gpus") {
            s.device = gpus == 1 ? "GPU:0" : "GPU:0-" + std::to_string(gpus - 1);
            for (int g = 0; g < gpus; ++g) gpus_used.push_back(g);
            if (op == Op::MatMul) {
              with_host_type(dti.storage, [&](auto zero) {
                c = std::make_unique<AllGpusMatMulCase<decltype(zero)>>(dti.storage, transfers);
              });
            } else {
#ifdef MATRIX_BENCHMARK_CUDA
              // cusolverMg runs on physical GPUs: logical ones on one GPU count once.
              const std::vector<int> phys = physical_gpus(gpus);
              // Each physical GPU's memory is checked once, through its first logical GPU.
              gpus_used.clear();
              for (int g = 0; g < gpus; ++g)
                if (std::none_of(gpus_used.begin(), gpus_used.end(), [&](int u) {
                      return tf::detail::physical_gpu_of(u) == tf::detail::physical_gpu_of(g);
                    }))
                  gpus_used.push_back(g);
              try {
                if (dti.storage == tf::float64)
                  c = std::make_unique<AllGpusInverseCase<double>>(phys, transfers);
                else
                  c = std::make_unique<AllGpusInverseCase<float>>(phys, transfers);
              } catch (const std::exception& e) {
                out.note(tag + ": not available: " + e.what());
                continue;
              }
#endif
            }
          } else {  // seed_faithful
            s.transfers = true;
            if (on_gpu) {
              s.device = "GPU:0";
              gpus_used = {0};
            }
            c = std::make_unique<SeedFaithfulCase>(op, on_gpu ? gpu0 : tf::Device{});
          }
          Tf32Guard tf32(dti.tf32);
          ok = run_series(s, *c, o, tag, out, dti, gpus_used) && ok;
        }
      }
    }
  }
  out.progress_clear();
  if (!out.finish_csv()) return 1;
  if (!o.csv.empty()) std::printf("# wrote %s\n", o.csv.c_str());
  return ok ? 0 : 1;
}
