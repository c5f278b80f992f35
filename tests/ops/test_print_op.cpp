// tf::print: TF's tf.print text (Tensor::SummarizeValue with print_v2), the Print primitive, and
// its place in traced graphs.
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "core/tensor.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/hooks.h"
#include "ops/print.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::detail::print_v2_text;

namespace {

// Sends tf::print's output to a string while it lives.
class CapturePrint {
 public:
  CapturePrint() { tf::detail::set_print_stream(&os_); }
  ~CapturePrint() { tf::detail::set_print_stream(nullptr); }
  std::string text() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

tf::Tensor iota(int n, const tf::TensorShape& shape) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return tf::constant(v, shape);
}

// A stand-in for jit's tracer: records each node and hands back symbolic outputs.
struct RecordingTrace final : tf::detail::TraceObserver {
  std::vector<std::shared_ptr<tf::Primitive>> prims;
  std::vector<std::vector<tf::Tensor>> inputs;
  void add_node(const tf::Primitive& prim, std::span<const tf::Tensor> in,
                std::span<const tf::TensorMeta> metas, tf::Device device,
                std::span<tf::Tensor> outputs) override {
    prims.push_back(prim.clone());
    inputs.emplace_back(in.begin(), in.end());
    for (size_t i = 0; i < metas.size(); ++i)
      outputs[i] = tf::detail::symbolic(metas[i].shape, metas[i].dtype, device);
  }
};

}  // namespace

TEST_CASE("print_v2_text: TF's tf.print layout", "[cpu][print]") {
  CHECK(print_v2_text(tf::constant(std::vector<int32_t>{1, 2, 3})) == "[1 2 3]");
  CHECK(print_v2_text(tf::constant({{1.5f, 2.f}, {3.f, 4.f}})) == "[[1.5 2]\n [3 4]]");
  CHECK(print_v2_text(tf::constant(tf::Tensor(14.0f))) == "14");
  CHECK(print_v2_text(tf::constant(tf::Tensor(int64_t{-7}))) == "-7");
  // summarize=3: three items at each end of every dimension longer than 6.
  CHECK(print_v2_text(iota(10, {10})) == "[0 1 2 ... 7 8 9]");
  CHECK(print_v2_text(iota(6, {6})) == "[0 1 2 3 4 5]");
  CHECK(print_v2_text(iota(7, {7})) == "[0 1 2 ... 4 5 6]");
  CHECK(print_v2_text(iota(10, {10}), 2) == "[0 1 ... 8 9]");
  CHECK(print_v2_text(iota(10, {10}), -1) == "[0 1 2 3 4 5 6 7 8 9]");
  CHECK(print_v2_text(iota(8, {2, 2, 2})) == "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]");
  CHECK(print_v2_text(iota(80, {8, 10})) ==
        "[[0 1 2 ... 7 8 9]\n"
        " [10 11 12 ... 17 18 19]\n"
        " [20 21 22 ... 27 28 29]\n"
        " ...\n"
        " [50 51 52 ... 57 58 59]\n"
        " [60 61 62 ... 67 68 69]\n"
        " [70 71 72 ... 77 78 79]]");
  CHECK(print_v2_text(tf::zeros({0})) == "[]");
}

TEST_CASE("print_v2_text: element text follows TF's StrCat", "[cpu][print]") {
  // Six significant digits, nine (float) or seventeen (double) when six do not round-trip.
  CHECK(print_v2_text(tf::constant(std::vector<float>{0.1f, 1.f / 3.f, 1e-5f, 1234567.f})) ==
        "[0.1 0.333333343 1e-05 1234567]");
  CHECK(print_v2_text(tf::constant(std::vector<double>{0.5, 1.0 / 3.0})) ==
        "[0.5 0.33333333333333331]");
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(print_v2_text(tf::constant(std::vector<float>{NAN, inf, -inf})) == "[nan inf -inf]");
  CHECK(print_v2_text(tf::constant(tf::Tensor(0.1f), tf::float16)) == "0.0999755859");
  CHECK(print_v2_text(tf::constant(tf::Tensor(1.5f), tf::bfloat16)) == "1.5");
  // TF prints bools as 1 and 0.
  CHECK(print_v2_text(tf::constant({true, false})) == "[1 0]");
  CHECK(print_v2_text(tf::constant(std::vector<uint8_t>{0, 255})) == "[0 255]");
}

TEST_CASE("tf::print joins its arguments with spaces and ends the line", "[cpu][cuda][print]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    CapturePrint cap;
    const tf::Tensor t = tf::constant(std::vector<int32_t>{1, 2});
    tf::print("loss:", t, 3);
    CHECK(cap.text() == "loss: [1 2] 3\n");
  }
  CapturePrint cap;
  tf::print(tf::constant({{1.5f, 2.f}, {3.f, 4.f}}));
  tf::print("step", int64_t{7}, 0.5, 1e-5f, true, std::string("done"));
  tf::print(tf::Tensor(), "x");
  tf::print();
  CHECK(cap.text() ==
        "[[1.5 2]\n [3 4]]\n"
        "step 7 0.5 1e-05 True done\n"
        "None x\n"
        "\n");
}

TEST_CASE("tf::print writes to std::cerr by default", "[cpu][print]") {
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  tf::print("to", tf::constant(std::vector<int32_t>{4}));
  std::cerr.rdbuf(old);
  CHECK(captured.str() == "to [4]\n");
}

TEST_CASE("Print primitive: attributes and side effects", "[cpu][print]") {
  tf::prims::Print p;
  p.pieces.emplace_back(std::string("loss \"x\":"));
  p.pieces.emplace_back(std::monostate{});
  CHECK(std::string(p.name()) == "print");
  CHECK(p.num_outputs() == 0);
  CHECK(p.has_side_effects());
  CHECK(p.attributes() == "pieces=[\"loss \\\"x\\\":\", <tensor>]");
  auto copy = p.clone();
  CHECK(copy->attributes() == p.attributes());
}

TEST_CASE("tf::print under a trace adds a Print node that prints when run", "[cpu][print]") {
  RecordingTrace trace;
  auto& ctx = tf::detail::thread_context();
  CapturePrint cap;
  const tf::Tensor x = tf::detail::symbolic({2}, tf::int32, tf::Device{});
  ctx.trace = &trace;
  tf::print("x =", x, 2);
  ctx.trace = nullptr;
  CHECK(cap.text().empty());  // nothing happens while tracing
  REQUIRE(trace.prims.size() == 1);
  CHECK(std::string(trace.prims[0]->name()) == "print");
  CHECK(trace.prims[0]->attributes() == "pieces=[\"x =\", <tensor>, \"2\"]");
  REQUIRE(trace.inputs[0].size() == 1);
  CHECK(trace.inputs[0][0].is_same(x));
  // Replaying the node with a value prints at every run.
  const tf::Tensor value = tf::constant(std::vector<int32_t>{5, 6});
  for (int run = 0; run < 2; ++run)
    tf::detail::run_kernel(*trace.prims[0], tf::Device{}, std::span<const tf::Tensor>(&value, 1), {});
  CHECK(cap.text() == "x = [5 6] 2\nx = [5 6] 2\n");
}
