// tf.debugging.assert_shapes (ops/debugging.h): checks of the shapes when called.
#include <fmt/format.h>

#include <charconv>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "ops/debugging.h"

namespace tapeflow::debugging {

ShapeDim::ShapeDim(std::string text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (!text.empty() && ec == std::errc() && ptr == end)
    size = v;  // "10": an explicit size, as TF's int(entry)
  else
    name = std::move(text);
}

namespace {

constexpr const char* kOp = "assert_shapes";

std::string describe(const Tensor& t) {
  return fmt::format("shape={} dtype={}", t.shape().to_string(), dtype_name(t.dtype()));
}

// One dimension of one tensor: its size (None when unknown) and where it comes from.
struct Size {
  int64_t known = None;
  std::string tensor;  // describe() of its tensor
  int dim = 0;         // as TF reports it: from the end after an ellipsis
};

Size size_of(const Tensor& x, int index, int reported) {
  return {x.rank() == 0 ? 1 : x.shape()[index], describe(x), reported};  // a scalar: (1,)
}

// Checks `got` against the size `want` when both are known; `head` starts the message ("" or
// "<message>.  ").
void check_size(const Size& got, const Size& want, const std::string& specified, const Tensor& x,
                const std::string& head) {
  if (got.known == None || want.known == None) return;  // a symbolic (Keras) dimension
  TF_CHECK_ARG(got.known == want.known, kOp,
               "{}{}.  Tensor {} dimension {} must have size {}.  Received size {}, shape {}", head,
               specified, got.tensor, got.dim, want.known, got.known, x.shape().to_string());
}

}  // namespace

void assert_shapes(const std::vector<std::pair<Tensor, std::vector<ShapeDim>>>& shapes,
                   const std::string& message) {
  const std::string head = message.empty() ? "" : message + ".  ";
  std::map<std::string, Size> named;  // the first size seen for each name
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto& [x, spec_in] = shapes[k];
    TF_CHECK_ARG(x.defined(), kOp, "tensor {} is an undefined tensor (TF's None)", k);
    std::vector<ShapeDim> spec = spec_in;
    const bool ellipsis =
        !spec.empty() && !spec[0].size && (spec[0].name == "*" || spec[0].name == "...");
    if (ellipsis) spec.erase(spec.begin());
    for (const ShapeDim& d : spec)
      TF_CHECK_ARG(d.size || (d.name != "*" && d.name != "..."), kOp,
                   "\"{}\" may only be the first entry of a shape", d.name);
    const int want_rank = static_cast<int>(spec.size()), rank = x.rank();
    if (ellipsis) {
      TF_CHECK_ARG(rank >= want_rank, kOp,
                   "{}Tensor  must have rank at least {}.  Received rank {}, shape {}", head,
                   want_rank, rank, x.shape().to_string());
    } else if (want_rank <= 1) {
      TF_CHECK_ARG(rank <= 1, kOp,
                   "{}Tensor  must have rank in (0, 1).  Received rank {}, shape {}", head, rank,
                   x.shape().to_string());
      if (spec.empty()) spec.emplace_back(int64_t{1});  // () counts as (1,)
    } else {
      TF_CHECK_ARG(rank == want_rank, kOp,
                   "{}Tensor  must have rank {}.  Received rank {}, shape {}", head, want_rank,
                   rank, x.shape().to_string());
    }
    const int n = static_cast<int>(spec.size());
    for (int i = 0; i < n; ++i) {
      const ShapeDim& d = spec[static_cast<size_t>(i)];
      if (!d.size && (d.name.empty() || d.name == ".")) continue;  // any size
      const int index = ellipsis ? rank - n + i : i;
      const Size got = size_of(x, rank == 0 ? 0 : index, ellipsis ? i - n : i);
      if (d.size) {
        check_size(got, Size{*d.size, "", 0}, "Specified explicitly", x, head);
        continue;
      }
      const auto it = named.find(d.name);
      if (it == named.end() || it->second.known == None) {  // a known size replaces an unknown
        named.insert_or_assign(d.name, got);
        continue;
      }
      check_size(
          got, it->second,
          fmt::format("Specified by tensor {} dimension {}", it->second.tensor, it->second.dim), x,
          head);
    }
  }
}

}  // namespace tapeflow::debugging
