// tf::nn::conv3d, max_pool3d and avg_pool3d: values against TF 2.21 literals and against a
// float64 reference loop (VALID / SAME, strides, dilations, groups, odd sizes) on every device of
// devices_under_test() and in every floating dtype; gradients against central differences in
// float64 (the depth-folded kernels), the other dtypes' gradients (oneDNN on the CPU) against
// those, second order through nested tapes; the depth folding's element functions against their
// definitions; traced equals eager and is one conv3d op; the errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/conv3d.h"
#include "ops/cuda/conv3d_element.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::central_differences;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

// The inputs the TF literals were computed on: numpy's ((arange(n) * a + b) % m - off) / den
// reshaped, with x = pattern(7, 3, 11, 4, 5) and f = pattern(5, 1, 13, 8, 6). Dilated TF
// values come from tf.nn.conv3d with the filter's taps spread out by zeros (TF's CPU Conv3D
// refuses dilations), pooling ones from float32 inputs (TF's MaxPool3D has no float64).
std::vector<double> pattern(int64_t n, int a, int b, int m, double den, int off) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (((i * a + b) % m) - off) / den;
  return v;
}
std::vector<double> pat_x(const tf::TensorShape& s) {
  return pattern(s.num_elements(), 7, 3, 11, 4.0, 5);
}
std::vector<double> pat_f(const tf::TensorShape& s) {
  return pattern(s.num_elements(), 5, 1, 13, 8.0, 6);
}

// TF 2.21 tf.nn.conv3d x(1, 4, 5, 6, 2) f(2, 3, 2, 2, 3) s(1, 1, 1) VALID d(1, 1, 1) -> (1, 3, 3,
// 5, 3)
const std::vector<double> kConvValid = {
    1.71875,  -3.96875, -1.125,   2.84375,  0.03125,  -1.15625, -2.90625, 3.34375,  -0.15625,
    -1.09375, -0.90625, 0.5,      1.40625,  -2.75,    0.8125,   -3.90625, 2.15625,  2.125,
    -0.03125, -2.78125, -0.65625, 1.78125,  -0.84375, -1.03125, 0.84375,  1.09375,  1.34375,
    -2.5,     2.34375,  0.28125,  2.84375,  0.03125,  -1.15625, -2.90625, 3.34375,  -0.15625,
    -1.09375, -0.90625, 0.5,      1.40625,  -2.75,    0.8125,   1.84375,  2.28125,  -0.9375,
    1.78125,  -0.84375, -1.03125, 0.84375,  1.09375,  1.34375,  -2.5,     2.34375,  0.28125,
    1.71875,  -3.96875, -1.125,   2.84375,  0.03125,  -1.15625, -1.09375, -0.90625, 0.5,
    1.40625,  -2.75,    0.8125,   1.84375,  2.28125,  -0.9375,  -3.90625, 2.15625,  2.125,
    -0.03125, -2.78125, -0.65625, 0.84375,  1.09375,  1.34375,  -2.5,     2.34375,  0.28125,
    1.71875,  -3.96875, -1.125,   2.84375,  0.03125,  -1.15625, -2.90625, 3.34375,  -0.15625,
    1.84375,  2.28125,  -0.9375,  -3.90625, 2.15625,  2.125,    -0.03125, -2.78125, -0.65625,
    1.78125,  -0.84375, -1.03125, 0.84375,  1.09375,  1.34375,  1.71875,  -3.96875, -1.125,
    2.84375,  0.03125,  -1.15625, -2.90625, 3.34375,  -0.15625, -1.09375, -0.90625, 0.5,
    1.40625,  -2.75,    0.8125,   -3.90625, 2.15625,  2.125,    -0.03125, -2.78125, -0.65625,
    1.78125,  -0.84375, -1.03125, 0.84375,  1.09375,  1.34375,  -2.5,     2.34375,  0.28125,
};
// TF 2.21 tf.nn.conv3d x(2, 5, 4, 5, 2) f(3, 2, 3, 2, 2) s(2, 1, 2) SAME d(1, 1, 1) -> (2, 3, 4, 3,
// 2)
const std::vector<double> kConvSameStrided = {
    -0.625,   1.65625,  0.625,    -2.71875, -2.09375, 2.78125,  1.8125,   -1.5,     -2.40625,
    -1.25,    3.96875,  -1.125,   -1.59375, -1.5625,  2.46875,  1.9375,   -1.65625, -0.5625,
    -1.25,    2.34375,  -0.125,   -1.34375, -1.125,   0.5625,   -1,       -2.6875,  4.0625,
    -1.125,   -2.09375, -0.65625, 1.65625,  2.75,     -2.5,     -1.75,    3,        1.125,
    -1.875,   -0.75,    1.9375,   5.1875,   -1.1875,  -1.90625, 0.65625,  -0.5,     2.3125,
    -3,       -1.4375,  -0.0625,  -0.34375, -0.40625, 1.125,    1.46875,  -0.53125, -1.96875,
    2.9375,   1.75,     -1.84375, -0.34375, -1.09375, 3.65625,  -1.6875,  0.46875,  0,
    0.9375,   0.75,     -1.71875, 1.5,      -1.5625,  1.0625,   0.375,    -0.375,   -1.6875,
    1.71875,  1.78125,  -1.90625, -1.875,   3.65625,  -1.09375, -0.65625, -1.71875, 0.90625,
    3.71875,  -1.96875, -0.53125, -0.625,   1.65625,  0.625,    -2.71875, -2.09375, 2.78125,
    1.09375,  0.125,    -0.25,    -1.40625, 2.21875,  0.5625,   2.28125,  3.96875,  -3.09375,
    -1.59375, 1.125,    3,        -0.90625, -0.90625, -0.71875, 3.28125,  -0.65625, -2.09375,
    -1,       -2.6875,  4.0625,   -1.125,   -2.09375, -0.65625, -0.5,     3.1875,   -1.65625,
    -0.53125, 1.3125,   1.53125,  1.6875,   -0.59375, -1.1875,  -0.40625, -1.125,   3.96875,
    -0.53125, 0.53125,  -0.375,   -2.90625, 2.78125,  -2.09375, -0.34375, -0.40625, 1.125,
    1.46875,  -0.53125, -1.96875, 0.59375,  1.90625,  -0.5,     -0.625,   -1.65625, 1.40625,
};
// TF 2.21 tf.nn.conv3d x(1, 5, 4, 5, 2) f(2, 2, 2, 2, 2) s(1, 1, 1) SAME d(2, 1, 2) -> (1, 5, 4, 5,
// 2)
const std::vector<double> kConvSameDilated = {
    -1.03125, 2.03125,  -0.21875, 1.21875,  1.8125,   -1.8125,  -0.28125, -1.0625,  0,
    0.625,    0.125,    -0.90625, -0.03125, -0.875,   1.65625,  -0.8125,  -0.09375, 1.3125,
    -1.3125,  0.09375,  -0.09375, -0.75,    -0.53125, 2.53125,  -0.21875, 1.21875,  1.8125,
    -1.8125,  -0.5625,  -0.09375, -0.40625, 1.0625,   -0.65625, -0.5625,  0,        -0.96875,
    1.6875,   -0.34375, 0.1875,   0.1875,   1.125,    -2.3125,  0.28125,  -0.90625, -1.9375,
    3.40625,  0.65625,  -0.1875,  1.28125,  -0.5,     0.375,    -0.6875,  -0.5,     2.78125,
    0.375,    -2.53125, 0.21875,  -0.625,   -0.125,   0.875,    -0.375,   1.96875,  0.09375,
    -2.125,   0.28125,  -0.90625, -1.9375,  3.40625,  0.1875,   -0.5,     0.21875,  -1.3125,
    -0.59375, -1.125,   -0.875,   2.46875,  -1.15625, -1.15625, 0.90625,  -0.71875, 0.1875,
    -0.625,   0.25,     1.46875,  0.09375,  -2.125,   0.28125,  -0.90625, -0.5625,  0.875,
    0.46875,  0.3125,   1.875,    -1.375,   -1.375,   -0.15625, -0.5,     2.78125,  -0.25,
    -0.5,     -0.625,   -0.125,   0.0625,   0.25,     0.25,     1.46875,  0.09375,  -2.125,
    0.40625,  -0.5,     -0.90625, 2.125,    -0.71875, 0.96875,  1.40625,  -1.96875, -0.59375,
    -1.125,   -0.15625, 0.34375,  0.625,    -2.03125, 0.21875,  -0.625,   0.0625,   0.25,
    0.25,     1.46875,  -1.03125, 0.1875,   -0.125,   -0.40625, -1.9375,  3.40625,  0.65625,
    -0.1875,  1.875,    -1.375,   -1.75,    0.53125,  -0.875,   2.25,     0.375,    -2.53125,
    0.21875,  -0.625,   0.0625,   0.25,     0.625,    -0.5,     0.03125,  -1.3125,  1.21875,
    -2.09375, -0.78125, 2.53125,  -0.71875, 0.96875,  1.1875,   -0.65625, 0.09375,  0.28125,
    0.15625,  0.34375,  1.0625,   -1.59375, 0.25,     0.25,     -1.125,   0.5,      -0.09375,
    0.375,    0.90625,  -1.09375, 0.4375,   0.0625,   -1.40625, 0.875,    0.5,      -0.34375,
    -0.28125, 0.46875,  -1.09375, 0.90625,  0.15625,  0.34375,  1.0625,   -1.59375, 0.40625,
    -0.15625, -0.375,   1.1875,   -0.90625, 1.09375,  1.25,     -0.75,    1.34375,  -1.21875,
    -0.625,   0.28125,
};
// TF 2.21 tf.nn.conv3d x(1, 3, 3, 3, 1) f(3, 3, 3, 1, 1) s(3, 3, 3) SAME d(1, 1, 1) -> (1, 1, 1, 1,
// 1)
const std::vector<double> kConvSingle = {
    1.15625,
};
// TF 2.21 tf.nn.max_pool3d x(1, 5, 4, 5, 2) k(2, 3, 2) s(2, 2, 1) SAME -> (1, 3, 2, 5, 2)
const std::vector<double> kMaxSame = {
    1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1,    1,    1,   1.25, 1.25, 1.25, 1.25,
    1.25, 1.25, 1.25, 1.25, 0.75, 1.25, 1.25, 1.25, 1.25, 1.25, 1,   1,    1.25, 0.75, 1.25,
    1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1,    1,    1,    0.5,  1,   0.75, 0.75, 0.75, 1.25,
    1.25, 1.25, 1.25, 1.25, 1,    1,    1,    0.75, 0.75, 0.75, 0.5, 1.25, 1.25, 1.25, 1.25,
};
// TF 2.21 tf.nn.avg_pool3d x(1, 5, 4, 5, 2) k(2, 3, 2) s(2, 2, 1) SAME -> (1, 3, 2, 5, 2)
const std::vector<double> kAvgSame = {
    -0.1041666641831398,
    0.041666667908430099,
    -0.041666667908430099,
    0.1041666641831398,
    0.02083333395421505,
    0.1666666716337204,
    0.083333335816860199,
    0,
    0,
    -0.083333335816860199,
    -0.09375,
    -0.0625,
    -0.03125,
    0,
    0.03125,
    0.0625,
    0.09375,
    0.125,
    0.125,
    -0.1875,
    0.1041666641831398,
    0.02083333395421505,
    0.1666666716337204,
    0.083333335816860199,
    0,
    -0.083333335816860199,
    -0.1666666716337204,
    -0.02083333395421505,
    -0.25,
    0.125,
    0,
    0.03125,
    0.0625,
    0.09375,
    0.125,
    0.15625,
    -0.15625,
    -0.125,
    -0.125,
    -0.4375,
    -0.083333335816860199,
    -0.1666666716337204,
    -0.25,
    -0.3333333432674408,
    0.041666667908430099,
    -0.041666667908430099,
    0.3333333432674408,
    0.25,
    0.25,
    0.1666666716337204,
    -0.1875,
    0.1875,
    -0.125,
    -0.4375,
    -0.0625,
    -0.375,
    0,
    0.375,
    0.375,
    0.75,
};
// TF 2.21 tf.nn.max_pool3d x(1, 5, 5, 4, 2) k(2, 2, 2) s(2, 2, 2) VALID -> (1, 2, 2, 2, 2)
const std::vector<double> kMaxValid = {
    1, 1.25, 1.25, 1.25, 1.25, 1.25, 1, 1.25, 1.25, 1.25, 1, 1.25, 1.25, 1, 1.25, 1.25,
};
// TF 2.21 tf.nn.avg_pool3d x(1, 5, 5, 4, 2) k(2, 2, 2) s(2, 2, 2) VALID -> (1, 2, 2, 2, 2)
const std::vector<double> kAvgValid = {
    -0.0625, -0.03125, 0.0625,  0.09375, 0.09375, 0.125,  -0.125,   -0.09375,
    0.03125, 0.0625,   -0.1875, 0.1875,  0.1875,  -0.125, -0.03125, 0,
};
// TF 2.21 tf.nn.max_pool3d x(2, 3, 4, 5, 1) k(3, 3, 3) s(1, 2, 2) SAME -> (2, 3, 2, 3, 1)
const std::vector<double> kMaxSame3 = {
    1.25, 1.25, 1.25, 1,    1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25,
    1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1,    1.25, 1.25, 1,    1.25, 1.25,
    1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1,
};
// TF 2.21 tf.nn.avg_pool3d x(2, 3, 4, 5, 1) k(3, 3, 3) s(1, 2, 2) SAME -> (2, 3, 2, 3, 1)
const std::vector<double> kAvgSame3 = {
    -0.1875,
    0.069444447755813599,
    0.02083333395421505,
    -0.125,
    -0.02083333395421505,
    -0.03125,
    -0.02777777798473835,
    0,
    0.02777777798473835,
    -0.041666667908430099,
    -0.013888888992369175,
    -0.0625,
    -0.02083333395421505,
    -0.069444447755813599,
    0.1875,
    -0.1875,
    -0.083333335816860199,
    -0.09375,
    -0.1458333283662796,
    -0.041666667908430099,
    -0.1666666716337204,
    0.03125,
    0.02083333395421505,
    0.125,
    0.013888888992369175,
    -0.0092592593282461166,
    -0.083333335816860199,
    0,
    0.02777777798473835,
    -0.02083333395421505,
    0.02083333395421505,
    -0.02777777798473835,
    0,
    -0.03125,
    -0.041666667908430099,
    -0.28125,
};

// TF 2.21 tf.nn.conv3d_transpose x(1, 2, 3, 2, 3) f(2, 2, 3, 2, 3) output_shape (1, 3, 4, 4, 2)
// strides (1, 1, 1) VALID dilations (1, 1, 1) (filter taps spread out by zeros)
const std::vector<double> kTransValid = {
    0.46875,  0.3125,   1.03125,  1.34375,  -0.375,   -0.0625,  -0.90625, -0.84375, 0.8125,
    1.34375,  1.96875,  2.65625,  -0.71875, -0.84375, -1.71875, -1.96875, -0.71875, 0.5625,
    0.40625,  1.78125,  0.71875,  0.46875,  -0.25,    -0.5625,  -1.34375, -1.15625, -1,
    -0.8125,  0.59375,  0.78125,  0.375,    0.375,    -1.84375, 1.0625,   0.375,    0,
    0.84375,  -0.75,    1.15625,  -0.09375, -2.4375,  -1.5625,  -0.375,   1.3125,   1.78125,
    -1.40625, 1.9375,   -0.5,     0.5,      -0.78125, -1,       -0.78125, 2.6875,   1.6875,
    0.5625,   -0.375,   1.09375,  -1,       -1.15625, -1.375,   0.4375,   1.84375,  -0.71875,
    -0.46875, 0.15625,  -1.25,    1.5625,   0.875,    -1.03125, -0.5,     -0.625,   0.5,
    1,        -0.6875,  -1.03125, 0.375,    -0.65625, -0.875,   -1.71875, 0.96875,  1,
    0.875,    -0.09375, -0.84375, -1.1875,  0.90625,  -0.09375, -0.3125,  0.4375,   0.59375,
    -0.375,   -0.375,   -0.375,   1.25,     0.6875,   -1.09375,
};
// TF 2.21 tf.nn.conv3d_transpose x(2, 2, 3, 2, 2) f(3, 2, 2, 3, 2) output_shape (2, 4, 6, 2, 3)
// strides (2, 2, 1) SAME dilations (1, 1, 1) (filter taps spread out by zeros)
const std::vector<double> kTransSameStrided = {
    0.3125,   -0.78125, -1.0625,  0.53125,  0.84375,  -0.0625,  -0.96875, 0.78125,  0.5,
    0.78125,  -1.34375, 0.59375,  -0.625,   0.625,    0.25,     0.5,      -1.40625, -0.0625,
    0.375,    0,        -0.375,   -1.59375, 0.96875,  0.6875,   0.15625,  0.3125,   0.875,
    -0.90625, 0.46875,  0.625,    0.6875,   -0.78125, -0.21875, 0.84375,  0.1875,   -1.28125,
    0.59375,  0.3125,   -0.78125, -1.40625, 0.53125,  0.84375,  -0.6875,  -0.96875, 0.78125,
    0.875,    0.78125,  -1.34375, -0.25,    -0.625,   0.625,    0.78125,  0.5,      -1.40625,
    0.75,     0.375,    0,        -1.3125,  -1.59375, 0.96875,  -0.40625, 0.15625,  0.3125,
    0.5625,   -0.90625, 0.46875,  0.125,    0.6875,   -0.78125, 0.28125,  0.84375,  0.1875,
    0.09375,  1.28125,  0.4375,   -0.875,   -2.84375, 0.46875,  0.71875,  -0.53125, -1.375,
    -1.3125,  2,        1.65625,  0.125,    0.125,    0.125,    0.09375,  1.21875,  1.125,
    0.125,    0.125,    0.125,    1.15625,  -0.96875, -2.6875,  -0.1875,  -1.375,   -0.53125,
    0.71875,  0.46875,  -3.03125, -0.8125,  0.4375,   1.28125,  -1.1875,  0.1875,   1.5625,
    -0.21875, -0.78125, 0.6875,   0.6875,   0.4375,   -1.4375,  0.875,    0.3125,   0.15625,
    -1.21875, -1.875,   1.125,    -0.375,   0,        0.375,    0.46875,  -0.96875, 0.4375,
    0.25,     0.625,    -0.625,   0.375,    0.5625,   0.34375,  0.5,      0.78125,  -0.96875,
    -0.09375, 0.71875,  -0.09375, -1.0625,  -0.78125, 0.3125,   -0.09375, -0.09375, -0.09375,
    -0.15625, 0.4375,   0.625,    -1.03125, 0.40625,  0.625,    0.5625,   -0.46875, -0.28125,
    0.28125,  0.5,      -0.90625, 0.625,    -0.90625, -0.8125,  0.65625,  0.90625,  -0.0625,
    -0.84375, 0.46875,  0.5625,   1.34375,  -1.65625, 0.21875,  -0.3125,  0.5,      0.5,
    -1.09375, 0.375,    0.625,    0.5,      -0.3125,  -0.3125,  0,        0.65625,  -0.71875,
    -0.34375, -0.15625, 0.4375,   0.375,    -1.03125, 0.40625,  0.375,    0.5625,   -0.46875,
    0.46875,  0.28125,  0.5,      0.53125,  0.625,    -0.90625, -1.21875, 0.65625,  0.90625,
    -0.9375,  -0.84375, 0.46875,  0.6875,   1.34375,  -1.65625, -0.3125,  -0.3125,  0.5,
    0.28125,  -1.09375, 0.375,    0.5,      0.5,      -0.3125,  0.5625,   0,        0.65625,
    -0.0625,  -1.1875,  -1.09375, 1.15625,  1.25,     -1.09375, -1.125,   1,        1.09375,
    0.09375,  -1.03125, 0.6875,   -0.03125, 1.09375,  1,        -1.3125,  -2.59375, 0.59375,
    1.03125,  -1.09375, -1.1875,  -0.875,   1.5,      1.84375,  0,        -1.09375, -1.375,
    1.375,    1.125,    -1.15625, -1.28125, 1.28125,  1,        -0.125,   -0.78125, 0.59375,
    0.5625,   0.46875,  -0.84375, -1.3125,  0.59375,  0.875,    -0.8125,  -0.90625, 0.625,
    0.78125,  1.0625,   -1.5,     -0.28125, -0.46875, 0.5625,   0.875,    0.5625,   -1.375,
    0.625,    0.4375,   -0.15625, -1.40625, -1.3125,  0.8125,   0.59375,  0.3125,   -0.78125,
    -1.40625, 0.53125,  0.84375,  -0.6875,  -0.96875, 0.78125,  0.875,    0.78125,  -1.34375,
};
// TF 2.21 tf.nn.conv3d_transpose x(1, 2, 2, 2, 1) f(2, 3, 2, 2, 1) output_shape (1, 5, 4, 5, 2)
// strides (2, 1, 2) VALID dilations (1, 1, 1) (filter taps spread out by zeros)
const std::vector<double> kTransValidOdd = {
    0.3125,   0,        -0.3125,  0.1875,   -0.78125, 0,        0.78125,  -0.46875, 0, 0,
    -0.28125, 0.375,    0.21875,  -0.34375, 0.78125,  -0.9375,  -0.625,   0.90625,  0, 0,
    0.3125,   -0.25,    -0.40625, 0.25,     -0.8125,  0.71875,  1.03125,  -0.6875,  0, 0,
    -0.125,   0.03125,  0.1875,   -0.0625,  0.375,    -0.09375, -0.5625,  0.1875,   0, 0,
    -0.1875,  0.3125,   0,        -0.3125,  0.46875,  -0.78125, 0,        0.78125,  0, 0,
    0.28125,  -0.28125, 0.375,    0.21875,  -0.75,    0.78125,  -0.9375,  -0.625,   0, 0,
    -0.34375, 0.3125,   -0.25,    -0.40625, 0.90625,  -0.8125,  0.71875,  1.03125,  0, 0,
    0.125,    -0.125,   0.03125,  0.1875,   -0.375,   0.375,    -0.09375, -0.5625,  0, 0,
    -0.625,   0,        0.625,    -0.375,   0,        0,        0,        0,        0, 0,
    0.875,    -0.75,    -0.75,    0.875,    -0.46875, 0,        0.46875,  -0.28125, 0, 0,
    -0.75,    0.875,    0.875,    -0.75,    0.1875,   -0.5625,  -0.09375, 0.375,    0, 0,
    0.5,      -0.125,   -0.75,    0.25,     -0.375,   0.09375,  0.5625,   -0.1875,  0, 0,
    0.375,    -0.625,   0,        0.625,    0,        0,        0,        0,        0, 0,
    -0.75,    0.875,    -0.75,    -0.75,    0.28125,  -0.46875, 0,        0.46875,  0, 0,
    0.875,    -0.75,    0.875,    0.875,    -0.28125, 0.1875,   -0.5625,  -0.09375, 0, 0,
    -0.5,     0.5,      -0.125,   -0.75,    0.375,    -0.375,   0.09375,  0.5625,   0, 0,
    0,        0,        0,        0,        0,        0,        0,        0,        0, 0,
    0,        0,        0,        0,        0,        0,        0,        0,        0, 0,
    0,        0,        0,        0,        0,        0,        0,        0,        0, 0,
    0,        0,        0,        0,        0,        0,        0,        0,        0, 0,
};
// TF 2.21 tf.nn.conv3d_transpose x(1, 4, 3, 3, 2) f(2, 2, 2, 2, 2) output_shape (1, 4, 3, 3, 2)
// strides (1, 1, 1) SAME dilations (2, 1, 1) (filter taps spread out by zeros)
const std::vector<double> kTransSameDilated = {
    -0.46875, 0.5625,   1.15625,  -1.1875, -0.375,   -0.375,   -0.5625,  1.0625,   1.125,
    -1,       0.5,      -1.40625, -0.0625, 0.6875,   0.625,    0.1875,   0.6875,   -0.5625,
    0.96875,  -0.625,   -2.09375, 1.75,    0.40625,  -1.21875, 2.4375,   -0.8125,  -3.625,
    0.0625,   -0.625,   -0.15625, 0.1875,  -0.78125, 0.21875,  -1.28125, -2.96875, 3.3125,
    -0.65625, -0.03125, 0.8125,   1.15625, 0.21875,  -0.4375,  -0.875,   0.3125,   1.375,
    0.5,      2.65625,  -1.4375,  -0.375,  -0.34375, -0.625,   -0.15625, 2.375,    -1.40625,
    0.53125,  0.4375,   -1.125,   0.78125, 0.15625,  -1.28125, 1.15625,  1.34375,  -1.59375,
    -0.5,     -1.0625,  1.0625,   0.125,   0.03125,  0.6875,   0.40625,  -2.21875, -0.4375,
};

struct ConvCase {
  std::vector<int64_t> x, f;  // NDHWC input, (KD, KH, KW, C / G, O) filters
  std::vector<int> s, d;      // depth, height, width
  std::string padding;
};

std::string describe(const ConvCase& c) {
  std::ostringstream o;
  o << tf::TensorShape(c.x).to_string() << " * " << tf::TensorShape(c.f).to_string() << " s "
    << c.s[0] << c.s[1] << c.s[2] << " d " << c.d[0] << c.d[1] << c.d[2] << " " << c.padding;
  return o.str();
}

const ConvCase kConvCases[] = {
    {{1, 4, 5, 6, 2}, {2, 3, 2, 2, 3}, {1, 1, 1}, {1, 1, 1}, "VALID"},
    {{2, 5, 4, 5, 2}, {3, 2, 3, 2, 2}, {2, 1, 2}, {1, 1, 1}, "SAME"},
    {{1, 5, 4, 5, 2}, {2, 2, 2, 2, 2}, {1, 1, 1}, {2, 1, 2}, "SAME"},
    {{1, 3, 3, 3, 1}, {3, 3, 3, 1, 1}, {3, 3, 3}, {1, 1, 1}, "SAME"},
    // Two groups of two channels, three outputs each; odd sizes, strides and a VALID dilation.
    {{1, 3, 4, 4, 4}, {2, 2, 2, 2, 6}, {1, 1, 1}, {1, 1, 1}, "VALID"},
    {{2, 3, 5, 4, 3}, {2, 3, 3, 3, 2}, {1, 2, 1}, {1, 1, 1}, "SAME"},
    {{1, 6, 4, 5, 2}, {2, 2, 2, 2, 1}, {1, 1, 1}, {3, 2, 1}, "VALID"},
    {{1, 5, 3, 4, 2}, {3, 1, 2, 2, 2}, {3, 2, 2}, {1, 1, 1}, "VALID"},
};

struct Geom {
  int64_t out, pad;
};
Geom geom(int64_t in, int64_t k, int s, int d, bool same) {
  const int64_t eff = (k - 1) * d + 1;
  if (!same) return {(in - eff) / s + 1, 0};
  const int64_t out = (in + s - 1) / s;
  return {out, std::max<int64_t>((out - 1) * s + eff - in, 0) / 2};
}

// The plain definition: y[n, od, oh, ow, o] = sum over the window and the group's channels of
// x[n, od * sd - pd + kd * dd, ..., g * C / G + ci] * f[kd, kh, kw, ci, o] with g the group of o.
struct Ref {
  std::vector<int64_t> out;
  std::vector<double> y;
};
Ref conv_ref(const ConvCase& c, const std::vector<double>& x, const std::vector<double>& f) {
  const bool same = c.padding == "SAME";
  Geom g[3];
  for (int i = 0; i < 3; ++i) g[i] = geom(c.x[1 + i], c.f[i], c.s[i], c.d[i], same);
  const int64_t n = c.x[0], cin = c.x[4], fc = c.f[3], oc = c.f[4], per = oc / (cin / fc);
  Ref r{{n, g[0].out, g[1].out, g[2].out, oc}, {}};
  r.y.assign(static_cast<size_t>(tf::TensorShape(r.out).num_elements()), 0.0);
  auto xi = [&](int64_t b, int64_t i, int64_t j, int64_t k, int64_t ch) {
    return (((b * c.x[1] + i) * c.x[2] + j) * c.x[3] + k) * cin + ch;
  };
  size_t at = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t od = 0; od < g[0].out; ++od)
      for (int64_t oh = 0; oh < g[1].out; ++oh)
        for (int64_t ow = 0; ow < g[2].out; ++ow)
          for (int64_t o = 0; o < oc; ++o, ++at) {
            double s = 0;
            for (int64_t kd = 0; kd < c.f[0]; ++kd)
              for (int64_t kh = 0; kh < c.f[1]; ++kh)
                for (int64_t kw = 0; kw < c.f[2]; ++kw) {
                  const int64_t i = od * c.s[0] - g[0].pad + kd * c.d[0];
                  const int64_t j = oh * c.s[1] - g[1].pad + kh * c.d[1];
                  const int64_t k = ow * c.s[2] - g[2].pad + kw * c.d[2];
                  if (i < 0 || i >= c.x[1] || j < 0 || j >= c.x[2] || k < 0 || k >= c.x[3])
                    continue;
                  for (int64_t ci = 0; ci < fc; ++ci)
                    s += x[static_cast<size_t>(xi(b, i, j, k, (o / per) * fc + ci))] *
                         f[static_cast<size_t>((((kd * c.f[1] + kh) * c.f[2] + kw) * fc + ci) * oc +
                                               o)];
                }
            r.y[at] = s;
          }
  return r;
}

struct TransCase {
  std::vector<int64_t> x, f, out;  // NDHWC input, (KD, KH, KW, O, C) filters, NDHWC output
  std::vector<int> s, d;
  std::string padding;
};

const TransCase kTransCases[] = {
    {{1, 2, 3, 2, 3}, {2, 2, 3, 2, 3}, {1, 3, 4, 4, 2}, {1, 1, 1}, {1, 1, 1}, "VALID"},
    {{2, 2, 3, 2, 2}, {3, 2, 2, 3, 2}, {2, 4, 6, 2, 3}, {2, 2, 1}, {1, 1, 1}, "SAME"},
    {{1, 2, 2, 2, 1}, {2, 3, 2, 2, 1}, {1, 5, 4, 5, 2}, {2, 1, 2}, {1, 1, 1}, "VALID"},
    {{1, 4, 3, 3, 2}, {2, 2, 2, 2, 2}, {1, 4, 3, 3, 2}, {1, 1, 1}, {2, 1, 1}, "SAME"},
    {{1, 3, 2, 3, 2}, {3, 2, 3, 1, 2}, {1, 7, 4, 3, 1}, {3, 2, 1}, {1, 1, 1}, "SAME"},
};

// The plain definition: every input element x[n, i, j, k, c] adds x * f[kd, kh, kw, o, c] to
// y[n, i * sd - pd + kd * dd, ..., o] where that lies inside the output.
std::vector<double> trans_ref(const TransCase& c, const std::vector<double>& x,
                              const std::vector<double>& f) {
  const bool same = c.padding == "SAME";
  int64_t pad[3];
  for (int i = 0; i < 3; ++i) pad[i] = geom(c.out[1 + i], c.f[i], c.s[i], c.d[i], same).pad;
  const int64_t oc = c.f[3], ic = c.f[4];
  std::vector<double> y(static_cast<size_t>(tf::TensorShape(c.out).num_elements()), 0.0);
  for (int64_t b = 0; b < c.x[0]; ++b)
    for (int64_t i = 0; i < c.x[1]; ++i)
      for (int64_t j = 0; j < c.x[2]; ++j)
        for (int64_t k = 0; k < c.x[3]; ++k)
          for (int64_t kd = 0; kd < c.f[0]; ++kd)
            for (int64_t kh = 0; kh < c.f[1]; ++kh)
              for (int64_t kw = 0; kw < c.f[2]; ++kw) {
                const int64_t p = i * c.s[0] - pad[0] + kd * c.d[0];
                const int64_t q = j * c.s[1] - pad[1] + kh * c.d[1];
                const int64_t r = k * c.s[2] - pad[2] + kw * c.d[2];
                if (p < 0 || p >= c.out[1] || q < 0 || q >= c.out[2] || r < 0 || r >= c.out[3])
                  continue;
                for (int64_t o = 0; o < oc; ++o)
                  for (int64_t ci = 0; ci < ic; ++ci)
                    y[static_cast<size_t>(
                        (((b * c.out[1] + p) * c.out[2] + q) * c.out[3] + r) * oc + o)] +=
                        x[static_cast<size_t>((((b * c.x[1] + i) * c.x[2] + j) * c.x[3] + k) * ic +
                                              ci)] *
                        f[static_cast<size_t>((((kd * c.f[1] + kh) * c.f[2] + kw) * oc + o) * ic +
                                              ci)];
              }
  return y;
}

tf::Tensor run_trans(const TransCase& c, const tf::Tensor& x, const tf::Tensor& f) {
  return tf::nn::conv3d_transpose(x, f, tf::TensorShape(c.out), c.s, c.padding, c.d);
}

struct PoolCase {
  std::vector<int64_t> x;
  std::vector<int> k, s;
  std::string padding;
};

const PoolCase kPoolCases[] = {
    {{1, 5, 4, 5, 2}, {2, 3, 2}, {2, 2, 1}, "SAME"},
    {{1, 5, 5, 4, 2}, {2, 2, 2}, {2, 2, 2}, "VALID"},
    {{2, 3, 4, 5, 1}, {3, 3, 3}, {1, 2, 2}, "SAME"},
    {{1, 4, 3, 3, 2}, {1, 2, 2}, {1, 1, 2}, "VALID"},
    {{1, 7, 3, 2, 1}, {4, 1, 2}, {3, 1, 1}, "SAME"},
};

// The maximum or the mean of the window's valid elements.
Ref pool_ref(const PoolCase& c, const std::vector<double>& x, bool max) {
  const bool same = c.padding == "SAME";
  Geom g[3];
  for (int i = 0; i < 3; ++i) g[i] = geom(c.x[1 + i], c.k[i], c.s[i], 1, same);
  const int64_t n = c.x[0], ch = c.x[4];
  Ref r{{n, g[0].out, g[1].out, g[2].out, ch}, {}};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t od = 0; od < g[0].out; ++od)
      for (int64_t oh = 0; oh < g[1].out; ++oh)
        for (int64_t ow = 0; ow < g[2].out; ++ow)
          for (int64_t cc = 0; cc < ch; ++cc) {
            double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
            int64_t count = 0;
            for (int64_t kd = 0; kd < c.k[0]; ++kd)
              for (int64_t kh = 0; kh < c.k[1]; ++kh)
                for (int64_t kw = 0; kw < c.k[2]; ++kw) {
                  const int64_t i = od * c.s[0] - g[0].pad + kd;
                  const int64_t j = oh * c.s[1] - g[1].pad + kh;
                  const int64_t k = ow * c.s[2] - g[2].pad + kw;
                  if (i < 0 || i >= c.x[1] || j < 0 || j >= c.x[2] || k < 0 || k >= c.x[3])
                    continue;
                  const double v = x[static_cast<size_t>(
                      (((b * c.x[1] + i) * c.x[2] + j) * c.x[3] + k) * ch + cc)];
                  acc = max ? std::max(acc, v) : acc + v;
                  ++count;
                }
            r.y.push_back(max ? acc : acc / static_cast<double>(count));
          }
  return r;
}

tf::Tensor run_pool(const PoolCase& c, const tf::Tensor& x, bool max) {
  return max ? tf::nn::max_pool3d(x, c.k, c.s, c.padding)
             : tf::nn::avg_pool3d(x, c.k, c.s, c.padding);
}

const std::vector<tf::DType> kFloating = {tf::float16, tf::bfloat16, tf::float32, tf::float64};

}  // namespace

TEST_CASE("conv3d gives TF 2.21's values", "[cpu][cuda][nn]") {
  const std::vector<double>* want[] = {&kConvValid, &kConvSameStrided, &kConvSameDilated,
                                       &kConvSingle};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int i = 0; i < 4; ++i) {
      const ConvCase& c = kConvCases[i];
      INFO(describe(c));
      for (tf::DType d : {tf::float32, tf::float64}) {
        const tf::Tensor x = tf::detail::from_doubles(pat_x(c.x), c.x, d);
        const tf::Tensor f = tf::detail::from_doubles(pat_f(c.f), c.f, d);
        const tf::Tensor y = tf::nn::conv3d(x, f, c.s, c.padding, c.d);
        CHECK(y.shape() == tf::TensorShape(conv_ref(c, pat_x(c.x), pat_f(c.f)).out));
        check_values(y, *want[i], 1e-6, 1e-6);
      }
    }
    // TF's 5-value strides and dilations.
    const ConvCase& c = kConvCases[1];
    const tf::Tensor y = tf::nn::conv3d(tf::detail::from_doubles(pat_x(c.x), c.x, tf::float32),
                                        tf::detail::from_doubles(pat_f(c.f), c.f, tf::float32),
                                        {1, 2, 1, 2, 1}, "SAME", {1, 1, 1, 1, 1});
    check_values(y, kConvSameStrided, 1e-6, 1e-6);
  }
}

TEST_CASE("conv3d matches a float64 reference loop in every dtype", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const ConvCase& c : kConvCases) {
      INFO(describe(c));
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 4);
      const Ref want = conv_ref(c, xv, fv);
      for (tf::DType d : kFloating) {
        INFO("dtype " << tf::dtype_name(d));
        const tf::Tensor y =
            tf::nn::conv3d(tf::detail::from_doubles(xv, c.x, d),
                           tf::detail::from_doubles(fv, c.f, d), c.s, c.padding, c.d);
        CHECK(y.dtype() == d);
        CHECK(y.shape() == tf::TensorShape(want.out));
        // Inputs rounded to the dtype, sums of up to 54 products of magnitude < 1.
        const double tol = d == tf::float64   ? 1e-12
                           : d == tf::float32 ? 1e-5
                           : d == tf::float16 ? 3e-2
                                              : 2e-1;
        check_values(y, want.y, tol, tol);
      }
    }
  }
}

TEST_CASE("max_pool3d and avg_pool3d give TF 2.21's values", "[cpu][cuda][nn]") {
  const std::vector<double>* want_max[] = {&kMaxSame, &kMaxValid, &kMaxSame3};
  const std::vector<double>* want_avg[] = {&kAvgSame, &kAvgValid, &kAvgSame3};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int i = 0; i < 3; ++i) {
      const PoolCase& c = kPoolCases[i];
      for (tf::DType d : {tf::float32, tf::float64}) {
        const tf::Tensor x = tf::detail::from_doubles(pat_x(c.x), c.x, d);
        check_values(tf::nn::max_pool3d(x, c.k, c.s, c.padding), *want_max[i], 0, 0);
        check_values(tf::nn::avg_pool3d(x, c.k, c.s, c.padding), *want_avg[i], 1e-6, 1e-7);
      }
    }
    // A single ksize and stride, and TF's 5-value forms.
    const tf::Tensor x =
        tf::detail::from_doubles(pat_x({1, 5, 5, 4, 2}), {1, 5, 5, 4, 2}, tf::float32);
    check_values(tf::nn::max_pool3d(x, {2}, {2}, "VALID"), kMaxValid, 0, 0);
    check_values(tf::nn::avg_pool3d(x, {1, 2, 2, 2, 1}, {1, 2, 2, 2, 1}, "VALID"), kAvgValid, 1e-6,
                 1e-7);
  }
}

TEST_CASE("max_pool3d and avg_pool3d match a reference loop in every dtype", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const PoolCase& c : kPoolCases) {
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      for (bool max : {true, false}) {
        const Ref want = pool_ref(c, xv, max);
        for (tf::DType d : kFloating) {
          INFO("dtype " << tf::dtype_name(d) << (max ? " max" : " avg"));
          const tf::Tensor y = run_pool(c, tf::detail::from_doubles(xv, c.x, d), max);
          CHECK(y.dtype() == d);
          CHECK(y.shape() == tf::TensorShape(want.out));
          const double tol = d == tf::float64 ? 1e-12 : d == tf::float32 ? 1e-6 : 2e-2;
          check_values(y, want.y, tol, tol);
        }
      }
    }
  }
}

TEST_CASE("conv3d gradients match central differences", "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const ConvCase& c : kConvCases) {
      INFO(describe(c));
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const Ref base = conv_ref(c, xv, fv);
      const auto wv = random_values(base.y.size(), -1, 1, 9);
      auto loss_of = [&](const std::vector<double>& xs, const std::vector<double>& fs) {
        const auto y = conv_ref(c, xs, fs).y;
        double s = 0;
        for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
        return s;
      };
      const tf::Tensor x = tf::detail::from_doubles(xv, c.x, tf::float64);
      const tf::Tensor f = tf::detail::from_doubles(fv, c.f, tf::float64);
      const tf::Tensor w = tf::detail::from_doubles(wv, base.out, tf::float64);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor loss = tf::reduce_sum(tf::nn::conv3d(x, f, c.s, c.padding, c.d) * w);
      const double h = 1e-6;
      const std::vector<double> gx =
          central_differences([&](const std::vector<double>& v) { return loss_of(v, fv); }, xv, h);
      const std::vector<double> gf =
          central_differences([&](const std::vector<double>& v) { return loss_of(xv, v); }, fv, h);
      check_values(tape.gradient(loss, x), gx, 1e-7, 1e-8);
      check_values(tape.gradient(loss, f), gf, 1e-7, 1e-8);
    }
  }
}

TEST_CASE("max_pool3d and avg_pool3d gradients match central differences",
          "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const PoolCase& c : kPoolCases) {
      // Distinct values (a shuffled ramp) so that no window's maximum is tied.
      const size_t n = static_cast<size_t>(tf::TensorShape(c.x).num_elements());
      std::vector<double> xv(n);
      for (size_t i = 0; i < n; ++i) xv[i] = static_cast<double>((i * 37 + 11) % n) / n - 0.5;
      for (bool max : {true, false}) {
        INFO((max ? "max " : "avg ") << tf::TensorShape(c.x).to_string() << " " << c.padding);
        const Ref base = pool_ref(c, xv, max);
        const auto wv = random_values(base.y.size(), -1, 1, 9);
        auto loss_of = [&](const std::vector<double>& xs) {
          const auto y = pool_ref(c, xs, max).y;
          double s = 0;
          for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
          return s;
        };
        const tf::Tensor x = tf::detail::from_doubles(xv, c.x, tf::float64);
        const tf::Tensor w = tf::detail::from_doubles(wv, base.out, tf::float64);
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor loss = tf::reduce_sum(run_pool(c, x, max) * w);
        const double h = 1e-7;  // below half the gap between distinct values
        const std::vector<double> gx =
            central_differences([&](const std::vector<double>& v) { return loss_of(v); }, xv, h);
        check_values(tape.gradient(loss, x), gx, 1e-6, 1e-7);
      }
    }
  }
}

TEST_CASE("conv3d and 3-D pooling inside a traced function equal eager", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const ConvCase& c = kConvCases[1];
    const tf::Tensor x = tf::detail::from_doubles(random_values(400), c.x, tf::float32);
    const tf::Tensor f = tf::detail::from_doubles(random_values(72, -1, 1, 3), c.f, tf::float32);
    // The forward values and the gradients, traced and eager.
    auto step = [&](const tf::Tensor& xi, const tf::Tensor& fi) {
      tf::GradientTape t({.persistent = true});
      t.watch(xi);
      t.watch(fi);
      const tf::Tensor y = tf::nn::conv3d(xi, fi, c.s, c.padding, c.d);
      const tf::Tensor p = tf::nn::max_pool3d(xi, {2, 3, 2}, {2, 2, 1}, "SAME");
      const tf::Tensor a = tf::nn::avg_pool3d(xi, {3}, {2}, "SAME");
      const tf::Tensor l =
          tf::reduce_sum(y * y) + tf::reduce_sum(p * p) + tf::reduce_sum(a * a * a);
      return tf::concat(
          {tf::reshape(y, {-1}), tf::reshape(p, {-1}), tf::reshape(a, {-1}),
           tf::reshape(t.gradient(l, xi), {-1}), tf::reshape(t.gradient(l, fi), {-1})},
          0);
    };
    auto g = tf::function([&](const tf::Tensor& xi, const tf::Tensor& fi) { return step(xi, fi); });
    const tf::Tensor eager = step(x, f);
    for (int rep = 0; rep < 2; ++rep) tf::testing::check_close(g(x, f), eager, 1e-6, 1e-6);
  }
}

TEST_CASE("3-D pooling with a huge SAME window pools the whole valid window", "[cpu][cuda][nn]") {
  // ksize 2^30 in every dimension: each SAME window covers the whole input, as ksize 9 does here
  // (the reference loop runs the latter).
  const PoolCase small{{1, 3, 4, 5, 2}, {9, 9, 9}, {1, 2, 3}, "SAME"};
  const auto xv = random_values(120);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::detail::from_doubles(xv, small.x, tf::float64);
    const std::vector<int> huge{1 << 30};
    check_values(tf::nn::max_pool3d(x, huge, small.s, "SAME"), pool_ref(small, xv, true).y, 0, 0);
    check_values(tf::nn::avg_pool3d(x, huge, small.s, "SAME"), pool_ref(small, xv, false).y, 1e-12,
                 1e-12);
    // An empty depth has no windows (it padded 2^30 empty slices: a 32 GiB allocation).
    const tf::Tensor empty = tf::zeros({1, 0, 4, 5, 2}, tf::float64);
    CHECK(tf::nn::max_pool3d(empty, huge, small.s, "SAME").shape() ==
          tf::TensorShape{1, 0, 2, 2, 2});
    CHECK(tf::nn::avg_pool3d(empty, huge, small.s, "SAME").shape() ==
          tf::TensorShape{1, 0, 2, 2, 2});
  }
}

TEST_CASE("conv3d_transpose gives TF 2.21's values and matches a reference loop",
          "[cpu][cuda][nn]") {
  const std::vector<double>* want[] = {&kTransValid, &kTransSameStrided, &kTransValidOdd,
                                       &kTransSameDilated};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int i = 0; i < 4; ++i) {
      const TransCase& c = kTransCases[i];
      INFO(tf::TensorShape(c.out).to_string() << " " << c.padding);
      CHECK_THAT(trans_ref(c, pat_x(c.x), pat_f(c.f)),
                 Catch::Matchers::Approx(*want[i]).epsilon(1e-12).margin(1e-12));
      for (tf::DType d : {tf::float32, tf::float64}) {
        const tf::Tensor y = run_trans(c, tf::detail::from_doubles(pat_x(c.x), c.x, d),
                                       tf::detail::from_doubles(pat_f(c.f), c.f, d));
        CHECK(y.shape() == tf::TensorShape(c.out));
        check_values(y, *want[i], 1e-6, 1e-6);
      }
    }
    for (const TransCase& c : kTransCases) {
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 4);
      const auto want_y = trans_ref(c, xv, fv);
      for (tf::DType d : kFloating) {
        INFO(tf::TensorShape(c.out).to_string() << " dtype " << tf::dtype_name(d));
        const tf::Tensor y = run_trans(c, tf::detail::from_doubles(xv, c.x, d),
                                       tf::detail::from_doubles(fv, c.f, d));
        CHECK(y.dtype() == d);
        const double tol = d == tf::float64   ? 1e-12
                           : d == tf::float32 ? 1e-5
                           : d == tf::float16 ? 3e-2
                                              : 2e-1;
        check_values(y, want_y, tol, tol);
      }
    }
  }
}

TEST_CASE("conv3d_transpose gradients match central differences", "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const TransCase& c : kTransCases) {
      INFO(tf::TensorShape(c.out).to_string() << " " << c.padding);
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const auto wv =
          random_values(static_cast<size_t>(tf::TensorShape(c.out).num_elements()), -1, 1, 9);
      auto loss_of = [&](const std::vector<double>& xs, const std::vector<double>& fs) {
        const auto y = trans_ref(c, xs, fs);
        double s = 0;
        for (size_t i = 0; i < y.size(); ++i) s += y[i] * wv[i];
        return s;
      };
      const tf::Tensor x = tf::detail::from_doubles(xv, c.x, tf::float64);
      const tf::Tensor f = tf::detail::from_doubles(fv, c.f, tf::float64);
      const tf::Tensor w = tf::detail::from_doubles(wv, c.out, tf::float64);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor loss = tf::reduce_sum(run_trans(c, x, f) * w);
      const double h = 1e-6;
      const std::vector<double> gx =
          central_differences([&](const std::vector<double>& v) { return loss_of(v, fv); }, xv, h);
      const std::vector<double> gf =
          central_differences([&](const std::vector<double>& v) { return loss_of(xv, v); }, fv, h);
      check_values(tape.gradient(loss, x), gx, 1e-7, 1e-8);
      check_values(tape.gradient(loss, f), gf, 1e-7, 1e-8);
    }
  }
}

TEST_CASE("conv3d_transpose inside a traced function equals eager", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const TransCase& c = kTransCases[1];
    const tf::Tensor x = tf::detail::from_doubles(random_values(48), c.x, tf::float32);
    const tf::Tensor f = tf::detail::from_doubles(random_values(72, -1, 1, 3), c.f, tf::float32);
    auto step = [&](const tf::Tensor& xi, const tf::Tensor& fi) {
      tf::GradientTape t({.persistent = true});
      t.watch(xi);
      t.watch(fi);
      const tf::Tensor y = run_trans(c, xi, fi);
      const tf::Tensor l = tf::reduce_sum(y * y);
      return tf::concat({tf::reshape(y, {-1}), tf::reshape(t.gradient(l, xi), {-1}),
                         tf::reshape(t.gradient(l, fi), {-1})},
                        0);
    };
    auto g = tf::function([&](const tf::Tensor& xi, const tf::Tensor& fi) { return step(xi, fi); });
    const tf::Tensor eager = step(x, f);
    for (int rep = 0; rep < 2; ++rep) tf::testing::check_close(g(x, f), eager, 1e-6, 1e-6);
  }
}

TEST_CASE("conv3d_transpose rejects bad arguments", "[cpu][nn]") {
  const tf::Tensor x = tf::zeros({1, 2, 2, 2, 3});
  const tf::Tensor f = tf::zeros({2, 2, 2, 4, 3});
  const tf::TensorShape out{1, 3, 3, 3, 4};
  require_error(
      [&] {
        tf::nn::conv3d_transpose(tf::zeros({2, 2, 2, 3}), f, out, {1}, "VALID");
      },
      {"conv3d_transpose", "rank 5", "(2, 2, 2, 3)"});
  require_error(
      [&] {
        tf::nn::conv3d_transpose(x, tf::zeros({2, 2, 4, 3}), out, {1}, "VALID");
      },
      {"conv3d_transpose", "filters must be", "rank 5"});
  require_error(
      [&] {
        tf::nn::conv3d_transpose(x, tf::zeros({2, 2, 2, 4, 2}), out, {1}, "VALID");
      },
      {"conv3d_transpose", "the input has 3 channels", "expect 2"});
  require_error(
      [&] {
        tf::nn::conv3d_transpose(x, f, {1, 3, 3, 3, 5}, {1}, "VALID");
      },
      {"conv3d_transpose", "has 5 channels", "give 4"});
  require_error(
      [&] {
        tf::nn::conv3d_transpose(x, f, {1, 4, 3, 3, 4}, {1}, "VALID");
      },
      {"conv3d_transpose", "does not fit the input", "gives depth 3, not 2"});
  require_error(
      [&] {
        tf::nn::conv3d_transpose(x, f, {2, 3, 3, 3, 4}, {1}, "VALID");
      },
      {"conv3d_transpose", "batch 2", "has 1"});
  require_error(
      [&] {
        tf::nn::conv3d_transpose(x, f, {1, 3, 3, 4}, {1}, "VALID");
      },
      {"conv3d_transpose", "output_shape must be NDHWC of rank 5"});
  require_error([&] { tf::nn::conv3d_transpose(x, f, out, {2}, "VALID", {2}); },
                {"conv3d_transpose", "cannot be combined with dilations"});
  require_error([&] { tf::nn::conv3d_transpose(x, f, out, {1}, "valid"); },
                {"conv3d_transpose", "padding"});
}

TEST_CASE("conv3d and 3-D pooling reject bad arguments", "[cpu][nn]") {
  const tf::Tensor x = tf::zeros({1, 4, 4, 4, 2});
  const tf::Tensor f = tf::zeros({2, 2, 2, 2, 3});
  require_error(
      [&] {
        tf::nn::conv3d(tf::zeros({4, 4, 4, 2}), f, {1}, "SAME");
      },
      {"conv3d", "rank 5", "(4, 4, 4, 2)"});
  require_error(
      [&] {
        tf::nn::conv3d(x, tf::zeros({2, 2, 2, 3}), {1}, "SAME");
      },
      {"conv3d", "filters must be rank 5", "(2, 2, 2, 3)"});
  require_error(
      [&] {
        tf::nn::conv3d(x, tf::zeros({2, 2, 2, 3, 3}), {1}, "SAME");
      },
      {"conv3d", "input depth 2 does not match filter depth 3", "(1, 4, 4, 4, 2)"});
  require_error(
      [&] {
        tf::nn::conv3d(tf::zeros({1, 4, 4, 4, 4}), tf::zeros({2, 2, 2, 2, 3}), {1}, "SAME");
      },
      {"conv3d", "input depth 4", "filter depth 2", "3 output channels"});
  require_error(
      [&] {
        tf::nn::conv3d(x, tf::zeros({5, 2, 2, 2, 3}), {1}, "VALID");
      },
      {"conv3d", "effective depth 5", "exceeds the input depth 4", "VALID"});
  require_error(
      [&] {
        tf::nn::conv3d(x, f, {1}, "VALID", {1, 4, 1});
      },
      {"conv3d", "effective height 5", "dilation 4"});
  require_error(
      [&] {
        tf::nn::conv3d(x, f, {1, 2}, "SAME");
      },
      {"conv3d", "strides must have 1, 3 or 5 values", "[1, 2]"});
  require_error(
      [&] {
        tf::nn::conv3d(x, f, {1, 0, 1}, "SAME");
      },
      {"conv3d", "strides must be positive"});
  require_error(
      [&] {
        tf::nn::conv3d(x, f, {2, 1, 1, 1, 1}, "SAME");
      },
      {"conv3d", "must be 1 in the batch and channel dimensions"});
  require_error([&] { tf::nn::conv3d(x, f, {2}, "SAME", {2}); },
                {"conv3d", "strides [2] above 1 cannot be combined with dilations [2]"});
  require_error([&] { tf::nn::conv3d(x, f, {1}, "FULL"); }, {"conv3d", "padding", "FULL"});
  require_error(
      [&] {
        tf::nn::conv3d(x, tf::zeros({2, 2, 2, 2, 3}, tf::float64), {1}, "SAME");
      },
      {"conv3d", "dtypes differ", "float32", "float64"});
  require_error(
      [&] {
        tf::nn::conv3d(tf::zeros({1, 4, 4, 4, 2}, tf::int32), tf::zeros({2, 2, 2, 2, 3}, tf::int32),
                       {1}, "SAME");
      },
      {"conv3d", "int32"});
  for (const char* op : {"max_pool3d", "avg_pool3d"}) {
    const bool max = std::string(op) == "max_pool3d";
    auto pool = [&](const tf::Tensor& t, const std::vector<int>& k, const std::vector<int>& s,
                    const std::string& p) {
      return max ? tf::nn::max_pool3d(t, k, s, p) : tf::nn::avg_pool3d(t, k, s, p);
    };
    require_error(
        [&] {
          pool(tf::zeros({4, 4, 4, 2}), {2}, {2}, "SAME");
        },
        {op, "rank 5", "(4, 4, 4, 2)"});
    require_error(
        [&] {
          pool(x, {2, 5, 2}, {1}, "VALID");
        },
        {op, "effective height 5", "exceeds the input height 4", "(1, 4, 4, 4, 2)"});
    require_error([&] { pool(x, {2, 2}, {1}, "VALID"); }, {op, "ksize must have 1, 3 or 5"});
    require_error([&] { pool(x, {2}, {0}, "VALID"); }, {op, "strides must be positive"});
    require_error([&] { pool(x, {2}, {1}, "same"); }, {op, "padding"});
    require_error(
        [&] {
          pool(tf::zeros({1, 4, 4, 4, 2}, tf::int32), {2}, {1}, "SAME");
        },
        {op, "int32"});
  }
}

namespace {

// X' of conv3d_element.h by its definition: row (n, od), pixel p, channel (group, kd, ci).
std::vector<double> fold_by_definition(const tf::detail::Conv3DFold& g,
                                       const std::vector<double>& x) {
  const int64_t ci = g.c / g.groups;
  std::vector<double> out;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t od = 0; od < g.od; ++od)
      for (int64_t p = 0; p < g.hw; ++p)
        for (int64_t q = 0; q < g.groups; ++q)
          for (int64_t kd = 0; kd < g.kd; ++kd)
            for (int64_t c = 0; c < ci; ++c) {
              const int64_t id = od * g.sd - g.pf + kd * g.dd;
              out.push_back(
                  id < 0 || id >= g.d
                      ? 0.0
                      : x[static_cast<size_t>(((n * g.d + id) * g.hw + p) * g.c + q * ci + c)]);
            }
  return out;
}

}  // namespace

TEST_CASE("conv3d depth folding: the element functions against their definitions", "[cpu][nn]") {
  // (n, d, hw, c, groups, kd, od, sd, dd, pf): plain, SAME-like padding, strided, dilated,
  // grouped, a stride longer than the window.
  const tf::detail::Conv3DFold cases[] = {
      {2, 4, 3, 2, 1, 2, 3, 1, 1, 0}, {1, 5, 2, 3, 1, 3, 5, 1, 1, 1},
      {2, 5, 2, 2, 1, 3, 3, 2, 1, 1}, {1, 6, 2, 2, 1, 2, 4, 1, 2, 0},
      {1, 4, 3, 4, 2, 2, 4, 1, 1, 0}, {2, 7, 1, 2, 1, 2, 2, 4, 1, 0},
  };
  for (const auto& g : cases) {
    INFO("n " << g.n << " d " << g.d << " c " << g.c << " groups " << g.groups << " kd " << g.kd
              << " od " << g.od << " sd " << g.sd << " dd " << g.dd << " pf " << g.pf);
    const int64_t xn = g.n * g.d * g.hw * g.c, fn = g.n * g.od * g.hw * g.kd * g.c;
    const auto x = random_values(static_cast<size_t>(xn));
    const auto want = fold_by_definition(g, x);
    REQUIRE(static_cast<int64_t>(want.size()) == fn);
    std::vector<double> folded(static_cast<size_t>(fn));
    for (int64_t i = 0; i < fn; ++i) {
      const int64_t s = tf::detail::conv3d_fold_source(g, i);
      folded[static_cast<size_t>(i)] = s < 0 ? 0.0 : x[static_cast<size_t>(s)];
    }
    CHECK(folded == want);
    // The unfold is the fold's adjoint: <fold(x), y> = <x, unfold(y)> for any y.
    const auto y = random_values(static_cast<size_t>(fn), -1, 1, 3);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += folded[i] * y[i];
    for (int64_t j = 0; j < xn; ++j) {
      double sum = 0;
      tf::detail::conv3d_unfold_sources(g, j, [&](int64_t k) { sum += y[static_cast<size_t>(k)]; });
      rhs += x[static_cast<size_t>(j)] * sum;
    }
    CHECK(std::abs(lhs - rhs) <= 1e-12 * (1 + std::abs(lhs)));
  }
  // Filters (KD, KH * KW, CI * O) -> F' (KH * KW, KD, CI * O) and back.
  const int64_t kd = 3, khw = 4, cio = 5, total = kd * khw * cio;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t co = i % cio, k1 = (i / cio) % kd, k2 = i / cio / kd;  // i = (k2, k1, co)
    CHECK(tf::detail::conv3d_filter_source(kd, khw, cio, i, true) == (k1 * khw + k2) * cio + co);
    const int64_t back = tf::detail::conv3d_filter_source(kd, khw, cio, i, false);
    CHECK(tf::detail::conv3d_filter_source(kd, khw, cio, back, true) == i);
  }
}

TEST_CASE("conv3d gradients in every dtype agree with float64's", "[cpu][cuda][nn][autograd]") {
  // float64 runs the depth-folded kernels (checked against central differences above); float32
  // runs oneDNN's 3-D convolution gradients on the CPU, the half types through float32 copies.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const ConvCase& c : kConvCases) {
      INFO(describe(c));
      const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
      const auto fv =
          random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
      const auto wv = random_values(
          static_cast<size_t>(tf::TensorShape(conv_ref(c, xv, fv).out).num_elements()), -1, 1, 9);
      std::vector<double> want_x, want_f;
      for (tf::DType d : {tf::float64, tf::float32, tf::float16, tf::bfloat16}) {
        INFO("dtype " << tf::dtype_name(d));
        const tf::Tensor x = tf::detail::from_doubles(xv, c.x, d);
        const tf::Tensor f = tf::detail::from_doubles(fv, c.f, d);
        tf::GradientTape tape({.persistent = true});
        tape.watch(x);
        tape.watch(f);
        const tf::Tensor y = tf::nn::conv3d(x, f, c.s, c.padding, c.d);
        const tf::Tensor loss = tf::reduce_sum(y * tf::detail::from_doubles(wv, y.shape(), d));
        const tf::Tensor gx = tape.gradient(loss, x), gf = tape.gradient(loss, f);
        CHECK(gx.dtype() == d);
        CHECK(gf.dtype() == d);
        if (d == tf::float64) {
          want_x = tf::detail::to_double_vector(gx);
          want_f = tf::detail::to_double_vector(gf);
          continue;
        }
        // Sums of up to 54 (input) and 80 (filter) products of magnitude < 1, the products
        // rounded to the dtype.
        const double tol = d == tf::float32 ? 2e-5 : d == tf::float16 ? 6e-2 : 5e-1;
        check_values(gx, want_x, tol, tol);
        check_values(gf, want_f, tol, tol);
      }
    }
  }
}

TEST_CASE("conv3d second order through nested tapes", "[cpu][cuda][nn][autograd]") {
  // L = sum(y^2 * w): d/dx and d/df of <gx, a> + <gf, b> run the vjps of both gradient
  // primitives, checked against central differences of the (already checked) first order.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const ConvCase& c : {kConvCases[1], kConvCases[4], kConvCases[6]}) {
      INFO(describe(c));
      const tf::TensorShape xs(c.x), fs(c.f);
      const auto xv = random_values(static_cast<size_t>(xs.num_elements()));
      const auto fv = random_values(static_cast<size_t>(fs.num_elements()), -1, 1, 5);
      const tf::Tensor a =
          tf::detail::from_doubles(random_values(xv.size(), -1, 1, 7), xs, tf::float64);
      const tf::Tensor b =
          tf::detail::from_doubles(random_values(fv.size(), -1, 1, 8), fs, tf::float64);
      const tf::TensorShape ys(conv_ref(c, xv, fv).out);
      const tf::Tensor w = tf::detail::from_doubles(
          random_values(static_cast<size_t>(ys.num_elements()), -1, 1, 9), ys, tf::float64);
      // <gx, a> + <gf, b> at (x, f), the first-order gradients from one tape.
      auto first = [&](const tf::Tensor& x, const tf::Tensor& f) {
        tf::GradientTape t({.persistent = true});
        t.watch(x);
        t.watch(f);
        const tf::Tensor y = tf::nn::conv3d(x, f, c.s, c.padding, c.d);
        const tf::Tensor l = tf::reduce_sum(y * y * w);
        return tf::reduce_sum(t.gradient(l, x) * a) + tf::reduce_sum(t.gradient(l, f) * b);
      };
      auto first_at = [&](const std::vector<double>& xs_, const std::vector<double>& fs_) {
        return first(tf::detail::from_doubles(xs_, xs, tf::float64),
                     tf::detail::from_doubles(fs_, fs, tf::float64))
            .item<double>();
      };
      const tf::Tensor x = tf::detail::from_doubles(xv, xs, tf::float64);
      const tf::Tensor f = tf::detail::from_doubles(fv, fs, tf::float64);
      tf::GradientTape outer({.persistent = true});
      outer.watch(x);
      outer.watch(f);
      const tf::Tensor s = first(x, f);
      const tf::Tensor hx = outer.gradient(s, x), hf = outer.gradient(s, f);
      REQUIRE(hx.defined());
      REQUIRE(hf.defined());
      const double h = 1e-5;
      const std::vector<double> want_x =
          central_differences([&](const std::vector<double>& v) { return first_at(v, fv); }, xv, h);
      const std::vector<double> want_f =
          central_differences([&](const std::vector<double>& v) { return first_at(xv, v); }, fv, h);
      check_values(hx, want_x, 1e-6, 1e-7);
      check_values(hf, want_f, 1e-6, 1e-7);
    }
  }
}

TEST_CASE("conv3d traces to one conv3d op whose gradients are single ops", "[cpu][nn]") {
  const ConvCase& c = kConvCases[5];  // strided, SAME
  auto step = [&](const tf::Tensor& x, const tf::Tensor& f) {
    tf::GradientTape t({.persistent = true});
    t.watch(x);
    t.watch(f);
    const tf::Tensor y = tf::nn::conv3d(x, f, c.s, c.padding, c.d);
    const tf::Tensor l = tf::reduce_sum(y);
    return std::vector<tf::Tensor>{y, t.gradient(l, x), t.gradient(l, f)};
  };
  auto g = tf::function(step);
  const std::string text =
      g.get_concrete_function(tf::TensorSpec(c.x), tf::TensorSpec(c.f)).graph().to_string();
  INFO(text);
  CHECK(text.find("conv3d") != std::string::npos);
  CHECK(text.find("conv3d_backprop_input") != std::string::npos);
  CHECK(text.find("conv3d_backprop_filter") != std::string::npos);
  CHECK(text.find("{strides=[1, 2, 1], dilations=[1, 1, 1], padding=SAME}") != std::string::npos);
  CHECK(text.find("conv2d") == std::string::npos);
  const ConvCase& gc = kConvCases[4];  // two groups
  auto fwd = tf::function([&](const tf::Tensor& x, const tf::Tensor& f) {
    return tf::nn::conv3d(x, f, gc.s, gc.padding, gc.d);
  });
  CHECK(fwd.get_concrete_function(tf::TensorSpec(gc.x), tf::TensorSpec(gc.f))
            .graph()
            .to_string()
            .find("padding=VALID, groups=2") != std::string::npos);
}

TEST_CASE("conv3d with a dilation longer than the input runs the taps that reach it",
          "[cpu][cuda][nn]") {
  // SAME with dilations of 2^30 and 2^29: every output reads the centre taps only (oneDNN would
  // walk the whole padded extent; cuDNN takes 32-bit padding). Values and gradients against
  // the reference loop and central differences.
  const ConvCase c{{1, 3, 4, 4, 2}, {3, 3, 3, 2, 2}, {1, 1, 1}, {1 << 30, 1 << 29, 1}, "SAME"};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const auto xv = random_values(static_cast<size_t>(tf::TensorShape(c.x).num_elements()));
    const auto fv =
        random_values(static_cast<size_t>(tf::TensorShape(c.f).num_elements()), -1, 1, 5);
    const Ref want = conv_ref(c, xv, fv);
    for (tf::DType d : {tf::float32, tf::float64}) {
      const tf::Tensor x = tf::detail::from_doubles(xv, c.x, d);
      const tf::Tensor f = tf::detail::from_doubles(fv, c.f, d);
      tf::GradientTape tape;
      tape.watch(f);
      const tf::Tensor y = tf::nn::conv3d(x, f, c.s, c.padding, c.d);
      CHECK(y.shape() == tf::TensorShape(want.out));
      check_values(y, want.y, 1e-5, 1e-5);
      // d sum(y) / df: each tap's sum of the inputs it reads; taps that read padding get 0.
      const tf::Tensor gf = tape.gradient(tf::reduce_sum(y), f);
      std::vector<double> gw(fv.size());
      for (size_t i = 0; i < fv.size(); ++i) {
        auto p = fv, m = fv;
        p[i] += 0.5;
        m[i] -= 0.5;
        double sp = 0, sm = 0;
        for (double v : conv_ref(c, xv, p).y) sp += v;
        for (double v : conv_ref(c, xv, m).y) sm += v;
        gw[i] = sp - sm;  // exact: the sum is linear in f
      }
      check_values(gf, gw, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("conv3d's primitives reject bad arguments", "[cpu][nn]") {
  // An input without channels (a filter depth cannot divide 0 into groups).
  require_error(
      [&] {
        tf::nn::conv3d(tf::zeros({1, 2, 2, 2, 0}), tf::zeros({1, 1, 1, 1, 2}), {1}, "SAME");
      },
      {"conv3d", "input depth 0 does not match filter depth 1"});
  tf::detail::Conv3DWindow win;
  win.same = true;
  const tf::Tensor f = tf::zeros({2, 2, 2, 3, 4});
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv3DBackpropInput(tf::TensorShape{1, 4, 4, 4, 3}, win),
                             {f, tf::zeros({1, 4, 4, 3, 4})});
      },
      {"conv3d_backprop_input", "dy shape (1, 4, 4, 3, 4)", "output shape (1, 4, 4, 4, 4)"});
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv3DBackpropFilter(tf::TensorShape{2, 2, 2, 3, 4}, win),
                             {tf::zeros({1, 4, 4, 4, 3}), tf::zeros({1, 4, 4, 4, 4}, tf::float64)});
      },
      {"conv3d_backprop_filter", "dtypes differ", "float32", "float64"});
  win.groups = 2;
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv3D(win), {tf::zeros({1, 4, 4, 4, 4}), f});
      },
      {"conv3d", "input depth 4 does not match filter depth 3 times 2 groups"});
  win.groups = 1;
  win.strides = {1, 0, 1};
  require_error(
      [&] {
        tf::detail::dispatch(tf::prims::Conv3D(win), {tf::zeros({1, 4, 4, 4, 3}), f});
      },
      {"conv3d", "strides and dilations must be positive"});
}
