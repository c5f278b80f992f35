// CPU kernel of Special: one float64 evaluation per element (ops/cpu/special_math.h), split
// over the thread pool.
#include "ops/special.h"

#include <algorithm>

#include "core/parallel.h"
#include "ops/cpu/special_apply.h"

namespace tapeflow::prims {

void Special::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    const T* a = in[0].data<T>();
    const T* b = in.size() > 1 ? in[1].data<T>() : nullptr;
    const T* c = in.size() > 2 ? in[2].data<T>() : nullptr;
    T* y = out[0].data<T>();
    auto load = [](const T* p, int64_t i) {
      return p ? static_cast<double>(static_cast<compute_t<T>>(p[i])) : 0.0;
    };
    detail::parallel_for(n, 1024, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        y[i] = static_cast<T>(apply_special(fn, load(a, i), load(b, i), load(c, i)));
    });
  });
}

}  // namespace tapeflow::prims
