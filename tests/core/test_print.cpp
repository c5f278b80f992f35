// Printing tensors as TF2 prints them (numpy 1.24's str/repr rules). Every expected string below
// was produced by numpy 1.24 (and ml_dtypes for bfloat16) from the same values.
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/print.h"
#include "core/tensor.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;

namespace {

std::string printed(const tf::Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

tf::Tensor f32(const std::vector<float>& v, const tf::TensorShape& shape) {
  return tf::constant(v, shape);
}
tf::Tensor f32(const std::vector<float>& v) { return tf::constant(v); }

tf::Tensor f16(const std::vector<float>& v, const tf::TensorShape& shape) {
  std::vector<tf::half_t> h(v.begin(), v.end());
  return tf::detail::from_host(h.data(), shape, tf::detail::current_device());
}

tf::Tensor bf16(const std::vector<float>& v, const tf::TensorShape& shape) {
  std::vector<tf::bfloat16_t> h(v.begin(), v.end());
  return tf::detail::from_host(h.data(), shape, tf::detail::current_device());
}

tf::Tensor arange_f32(int n, float scale, const tf::TensorShape& shape) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) * scale;
  return tf::constant(v, shape);
}

tf::Tensor arange_i32(int n, const tf::TensorShape& shape) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return tf::constant(v, shape);
}

// [i * 0.37 for i in range(30)] as float32
tf::Tensor thirty_floats() {
  std::vector<float> v;
  for (int i = 0; i < 30; ++i) v.push_back(static_cast<float>(i * 0.37));
  return f32(v);
}

}  // namespace

TEST_CASE("print: the examples of TF's documentation", "[cpu][print]") {
  CHECK(printed(tf::zeros({2, 2})) ==
        "tf.Tensor(\n"
        "[[0. 0.]\n"
        " [0. 0.]], shape=(2, 2), dtype=float32)");
  CHECK(printed(f32({2.f, 2.f})) == "tf.Tensor([2. 2.], shape=(2,), dtype=float32)");
  CHECK(printed(tf::constant(tf::Tensor(14.0f))) == "tf.Tensor(14.0, shape=(), dtype=float32)");
  CHECK(printed(tf::constant(tf::Tensor(int64_t{9999999}))) ==
        "tf.Tensor(9999999, shape=(), dtype=int64)");
}

TEST_CASE("print: float columns align on the decimal point", "[cpu][print]") {
  CHECK(printed(f32({1.5f, 2.25f, -3.f})) ==
        "tf.Tensor([ 1.5   2.25 -3.  ], shape=(3,), dtype=float32)");
  CHECK(tf::detail::numpy_str(f32({1.5f, -2.f, 3.f, 4.f, 5.25f, 6.f}, {2, 3})) ==
        "[[ 1.5  -2.    3.  ]\n"
        " [ 4.    5.25  6.  ]]");
  CHECK(tf::detail::numpy_str(f32({-0.0f, 1.f})) == "[-0.  1.]");
}

TEST_CASE("print: floats use the shortest digits of their own precision", "[cpu][print]") {
  CHECK(tf::detail::numpy_str(f32({0.1f, 0.2f})) == "[0.1 0.2]");
  CHECK(tf::detail::numpy_str(tf::constant(std::vector<double>{0.1, 0.2})) == "[0.1 0.2]");
  // Scalars show every digit; array elements stop at 8 digits after the point.
  CHECK(tf::detail::numpy_str(tf::constant(tf::Tensor(1.0f / 3.0f))) == "0.33333334");
  CHECK(tf::detail::numpy_str(tf::constant(tf::Tensor(1.0 / 3.0))) == "0.3333333333333333");
  CHECK(tf::detail::numpy_str(f32({1.0f / 3.0f})) == "[0.33333334]");
  CHECK(tf::detail::numpy_str(tf::constant(std::vector<double>{1.0 / 3.0})) == "[0.33333333]");
  CHECK(printed(tf::constant(tf::Tensor(1.0 / 3.0))) ==
        "tf.Tensor(0.3333333333333333, shape=(), dtype=float64)");
}

TEST_CASE("print: scientific notation for wide ranges", "[cpu][print]") {
  CHECK(tf::detail::numpy_str(f32({1e-5f, 1.0f})) == "[1.e-05 1.e+00]");
  CHECK(tf::detail::numpy_str(f32({1e9f, 1.0f})) == "[1.e+09 1.e+00]");
  CHECK(tf::detail::numpy_str(f32({0.3f, 1.23456789e-5f})) == "[3.0000001e-01 1.2345679e-05]");
  // Elements share the digit count; a shorter one shows its exact binary value's digits.
  CHECK(tf::detail::numpy_str(f32({1.06199084e-4f, 0.3f})) == "[1.06199084e-04 3.00000012e-01]");
  // 0-d: positional between 1e-4 and 1e16, else scientific without trailing zeros.
  CHECK(tf::detail::numpy_str(tf::constant(tf::Tensor(1e-5f))) == "1e-05");
  CHECK(tf::detail::numpy_str(tf::constant(tf::Tensor(1.5e20))) == "1.5e+20");
}

TEST_CASE("print: nan and inf are padded into the column", "[cpu][print]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(printed(f32({NAN, inf, -inf, 1.5f})) ==
        "tf.Tensor([ nan  inf -inf  1.5], shape=(4,), dtype=float32)");
  CHECK(tf::detail::numpy_str(tf::constant(tf::Tensor(NAN))) == "nan");
  CHECK(tf::detail::numpy_str(tf::constant(tf::Tensor(-std::numeric_limits<double>::infinity()))) ==
        "-inf");
}

TEST_CASE("print: integers and bools", "[cpu][print]") {
  CHECK(printed(tf::constant(std::vector<int32_t>{-5, 10, 300})) ==
        "tf.Tensor([ -5  10 300], shape=(3,), dtype=int32)");
  CHECK(printed(tf::constant(std::vector<uint8_t>{0, 7, 255})) ==
        "tf.Tensor([  0   7 255], shape=(3,), dtype=uint8)");
  CHECK(printed(tf::constant({true, false})) == "tf.Tensor([ True False], shape=(2,), dtype=bool)");
  // numpy pads True to five characters in every array, even without a False.
  CHECK(tf::detail::numpy_str(tf::constant({true, true})) == "[ True  True]");
  CHECK(printed(tf::constant(tf::Tensor(true))) == "tf.Tensor(True, shape=(), dtype=bool)");
  CHECK(printed(tf::constant(tf::Tensor(3))) == "tf.Tensor(3, shape=(), dtype=int32)");
}

TEST_CASE("print: nested dimensions are separated by blank lines", "[cpu][print]") {
  CHECK(printed(arange_f32(8, 1.f, {2, 2, 2})) ==
        "tf.Tensor(\n"
        "[[[0. 1.]\n"
        "  [2. 3.]]\n"
        "\n"
        " [[4. 5.]\n"
        "  [6. 7.]]], shape=(2, 2, 2), dtype=float32)");
  std::vector<int64_t> v;
  for (int i = 0; i < 24; ++i) v.push_back(i - 10);
  CHECK(tf::detail::numpy_str(tf::constant(v, {2, 3, 2, 2})) ==
        "[[[[-10  -9]\n"
        "   [ -8  -7]]\n"
        "\n"
        "  [[ -6  -5]\n"
        "   [ -4  -3]]\n"
        "\n"
        "  [[ -2  -1]\n"
        "   [  0   1]]]\n"
        "\n"
        "\n"
        " [[[  2   3]\n"
        "   [  4   5]]\n"
        "\n"
        "  [[  6   7]\n"
        "   [  8   9]]\n"
        "\n"
        "  [[ 10  11]\n"
        "   [ 12  13]]]]");
}

TEST_CASE("print: long rows wrap at 75 characters", "[cpu][print]") {
  CHECK(printed(thirty_floats()) ==
        "tf.Tensor(\n"
        "[ 0.    0.37  0.74  1.11  1.48  1.85  2.22  2.59  2.96  3.33  3.7   4.07\n"
        "  4.44  4.81  5.18  5.55  5.92  6.29  6.66  7.03  7.4   7.77  8.14  8.51\n"
        "  8.88  9.25  9.62  9.99 10.36 10.73], shape=(30,), dtype=float32)");
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back(static_cast<double>(i) / 7.0);
  CHECK(tf::detail::numpy_str(tf::constant(v, {4, 25})) ==
        "[[ 0.          0.14285714  0.28571429  0.42857143  0.57142857  0.71428571\n"
        "   0.85714286  1.          1.14285714  1.28571429  1.42857143  1.57142857\n"
        "   1.71428571  1.85714286  2.          2.14285714  2.28571429  2.42857143\n"
        "   2.57142857  2.71428571  2.85714286  3.          3.14285714  3.28571429\n"
        "   3.42857143]\n"
        " [ 3.57142857  3.71428571  3.85714286  4.          4.14285714  4.28571429\n"
        "   4.42857143  4.57142857  4.71428571  4.85714286  5.          5.14285714\n"
        "   5.28571429  5.42857143  5.57142857  5.71428571  5.85714286  6.\n"
        "   6.14285714  6.28571429  6.42857143  6.57142857  6.71428571  6.85714286\n"
        "   7.        ]\n"
        " [ 7.14285714  7.28571429  7.42857143  7.57142857  7.71428571  7.85714286\n"
        "   8.          8.14285714  8.28571429  8.42857143  8.57142857  8.71428571\n"
        "   8.85714286  9.          9.14285714  9.28571429  9.42857143  9.57142857\n"
        "   9.71428571  9.85714286 10.         10.14285714 10.28571429 10.42857143\n"
        "  10.57142857]\n"
        " [10.71428571 10.85714286 11.         11.14285714 11.28571429 11.42857143\n"
        "  11.57142857 11.71428571 11.85714286 12.         12.14285714 12.28571429\n"
        "  12.42857143 12.57142857 12.71428571 12.85714286 13.         13.14285714\n"
        "  13.28571429 13.42857143 13.57142857 13.71428571 13.85714286 14.\n"
        "  14.14285714]]");
}

TEST_CASE("print: more than 1000 elements are summarised", "[cpu][print]") {
  CHECK(printed(arange_f32(1600, 0.5f, {40, 40})) ==
        "tf.Tensor(\n"
        "[[0.000e+00 5.000e-01 1.000e+00 ... 1.850e+01 1.900e+01 1.950e+01]\n"
        " [2.000e+01 2.050e+01 2.100e+01 ... 3.850e+01 3.900e+01 3.950e+01]\n"
        " [4.000e+01 4.050e+01 4.100e+01 ... 5.850e+01 5.900e+01 5.950e+01]\n"
        " ...\n"
        " [7.400e+02 7.405e+02 7.410e+02 ... 7.585e+02 7.590e+02 7.595e+02]\n"
        " [7.600e+02 7.605e+02 7.610e+02 ... 7.785e+02 7.790e+02 7.795e+02]\n"
        " [7.800e+02 7.805e+02 7.810e+02 ... 7.985e+02 7.990e+02 7.995e+02]], "
        "shape=(40, 40), dtype=float32)");
  CHECK(printed(arange_i32(2000, {2000})) ==
        "tf.Tensor([   0    1    2 ... 1997 1998 1999], shape=(2000,), dtype=int32)");
  // Widths come from the shown elements only.
  CHECK(tf::detail::numpy_str(arange_i32(1331, {11, 11, 11})) ==
        "[[[   0    1    2 ...    8    9   10]\n"
        "  [  11   12   13 ...   19   20   21]\n"
        "  [  22   23   24 ...   30   31   32]\n"
        "  ...\n"
        "  [  88   89   90 ...   96   97   98]\n"
        "  [  99  100  101 ...  107  108  109]\n"
        "  [ 110  111  112 ...  118  119  120]]\n"
        "\n"
        " [[ 121  122  123 ...  129  130  131]\n"
        "  [ 132  133  134 ...  140  141  142]\n"
        "  [ 143  144  145 ...  151  152  153]\n"
        "  ...\n"
        "  [ 209  210  211 ...  217  218  219]\n"
        "  [ 220  221  222 ...  228  229  230]\n"
        "  [ 231  232  233 ...  239  240  241]]\n"
        "\n"
        " [[ 242  243  244 ...  250  251  252]\n"
        "  [ 253  254  255 ...  261  262  263]\n"
        "  [ 264  265  266 ...  272  273  274]\n"
        "  ...\n"
        "  [ 330  331  332 ...  338  339  340]\n"
        "  [ 341  342  343 ...  349  350  351]\n"
        "  [ 352  353  354 ...  360  361  362]]\n"
        "\n"
        " ...\n"
        "\n"
        " [[ 968  969  970 ...  976  977  978]\n"
        "  [ 979  980  981 ...  987  988  989]\n"
        "  [ 990  991  992 ...  998  999 1000]\n"
        "  ...\n"
        "  [1056 1057 1058 ... 1064 1065 1066]\n"
        "  [1067 1068 1069 ... 1075 1076 1077]\n"
        "  [1078 1079 1080 ... 1086 1087 1088]]\n"
        "\n"
        " [[1089 1090 1091 ... 1097 1098 1099]\n"
        "  [1100 1101 1102 ... 1108 1109 1110]\n"
        "  [1111 1112 1113 ... 1119 1120 1121]\n"
        "  ...\n"
        "  [1177 1178 1179 ... 1185 1186 1187]\n"
        "  [1188 1189 1190 ... 1196 1197 1198]\n"
        "  [1199 1200 1201 ... 1207 1208 1209]]\n"
        "\n"
        " [[1210 1211 1212 ... 1218 1219 1220]\n"
        "  [1221 1222 1223 ... 1229 1230 1231]\n"
        "  [1232 1233 1234 ... 1240 1241 1242]\n"
        "  ...\n"
        "  [1298 1299 1300 ... 1306 1307 1308]\n"
        "  [1309 1310 1311 ... 1317 1318 1319]\n"
        "  [1320 1321 1322 ... 1328 1329 1330]]]");
}

TEST_CASE("print: float16 uses half-precision digits", "[cpu][print]") {
  CHECK(printed(f16({0.1f, 0.2f, 0.3f}, {3})) ==
        "tf.Tensor([0.1 0.2 0.3], shape=(3,), dtype=float16)");
  CHECK(printed(f16({0.1f}, {})) == "tf.Tensor(0.1, shape=(), dtype=float16)");
  CHECK(tf::detail::numpy_str(f16({0.1f, 0.2f, 12048.f}, {3})) ==
        "[9.998e-02 2.000e-01 1.205e+04]");
  // Integral values print their exact digits in arrays (12048, not 12050).
  CHECK(tf::detail::numpy_str(f16({12048.f, 1000.5f}, {2})) == "[12048.   1000.5]");
  CHECK(tf::detail::numpy_str(f16({14728.f}, {})) == "14730.0");
}

TEST_CASE("print: bfloat16 prints as ml_dtypes does", "[cpu][print]") {
  CHECK(printed(bf16({1.5f, 2.f, 1e-5f, 0.1f, -3.f}, {5})) ==
        "tf.Tensor([1.5 2 1.00136e-05 0.100098 -3], shape=(5,), dtype=bfloat16)");
  CHECK(printed(bf16({0.1f}, {})) == "tf.Tensor(0.100098, shape=(), dtype=bfloat16)");
  CHECK(tf::detail::numpy_repr(bf16({1.f, 2.f, 3.f, 4.f}, {2, 2})) ==
        "\n"
        "array([[1, 2],\n"
        "       [3, 4]], dtype=bfloat16)");
}

TEST_CASE("print: empty tensors", "[cpu][print]") {
  CHECK(printed(tf::zeros({0})) == "tf.Tensor([], shape=(0,), dtype=float32)");
  CHECK(printed(tf::zeros({2, 0})) == "tf.Tensor([], shape=(2, 0), dtype=float32)");
  CHECK(tf::detail::numpy_repr(tf::zeros({0})) == "array([], dtype=float32)");
  CHECK(tf::detail::numpy_repr(tf::zeros({2, 0})) == "array([], shape=(2, 0), dtype=float32)");
  CHECK(tf::detail::numpy_repr(tf::zeros({0}, tf::int64)) == "array([], dtype=int64)");
}

TEST_CASE("print: numpy_repr as a Variable shows it", "[cpu][print]") {
  CHECK(tf::detail::numpy_repr(tf::zeros({2, 2})) ==
        "\n"
        "array([[0., 0.],\n"
        "       [0., 0.]], dtype=float32)");
  // float64, int64 and bool are numpy's default types: no dtype suffix.
  CHECK(tf::detail::numpy_repr(tf::constant(std::vector<double>{1., 2.5, -3.})) ==
        "array([ 1. ,  2.5, -3. ])");
  CHECK(tf::detail::numpy_repr(tf::constant(std::vector<int32_t>{1, 2, 3})) ==
        "array([1, 2, 3], dtype=int32)");
  CHECK(tf::detail::numpy_repr(tf::constant(std::vector<int64_t>{1, 2, 3})) == "array([1, 2, 3])");
  CHECK(tf::detail::numpy_repr(tf::constant({true, false})) == "array([ True, False])");
  CHECK(tf::detail::numpy_repr(f32({1.5f, 2.25f, -3.f})) ==
        "array([ 1.5 ,  2.25, -3.  ], dtype=float32)");
  CHECK(tf::detail::numpy_repr(f32({0.3f, 1.23456789e-5f})) ==
        "array([3.0000001e-01, 1.2345679e-05], dtype=float32)");
  CHECK(tf::detail::numpy_repr(tf::constant(tf::Tensor(1.0f))) == "1.0");
  // A scalar is repr(value.item()) in TF: the Python float that the value widens to.
  CHECK(tf::detail::numpy_repr(tf::constant(tf::Tensor(0.1f))) == "0.10000000149011612");
  CHECK(tf::detail::numpy_repr(tf::cast(tf::Tensor(0.1f), tf::float16)) == "0.0999755859375");
  CHECK(tf::detail::numpy_repr(tf::cast(tf::Tensor(0.1f), tf::bfloat16)) == "0.10009765625");
  CHECK(tf::detail::numpy_repr(tf::cast(tf::Tensor(908.0f), tf::bfloat16)) == "908.0");
  CHECK(tf::detail::numpy_repr(tf::Tensor(1e-5f)) == "9.999999747378752e-06");
  CHECK(tf::detail::numpy_repr(tf::Tensor(0.1)) == "0.1");
  CHECK(tf::detail::numpy_repr(tf::Tensor(std::nanf(""))) == "nan");
  CHECK(tf::detail::numpy_repr(tf::constant(tf::Tensor(3))) == "3");
  CHECK(tf::detail::numpy_repr(tf::constant(tf::Tensor(true))) == "True");
  // Continuation lines are indented under "array(", and the width includes the suffix.
  CHECK(tf::detail::numpy_repr(thirty_floats()) ==
        "\n"
        "array([ 0.  ,  0.37,  0.74,  1.11,  1.48,  1.85,  2.22,  2.59,  2.96,\n"
        "        3.33,  3.7 ,  4.07,  4.44,  4.81,  5.18,  5.55,  5.92,  6.29,\n"
        "        6.66,  7.03,  7.4 ,  7.77,  8.14,  8.51,  8.88,  9.25,  9.62,\n"
        "        9.99, 10.36, 10.73], dtype=float32)");
  CHECK(tf::detail::numpy_repr(arange_f32(8, 1.f, {2, 2, 2})) ==
        "\n"
        "array([[[0., 1.],\n"
        "        [2., 3.]],\n"
        "\n"
        "       [[4., 5.],\n"
        "        [6., 7.]]], dtype=float32)");
  CHECK(tf::detail::numpy_repr(arange_f32(1600, 0.5f, {40, 40})) ==
        "\n"
        "array([[0.000e+00, 5.000e-01, 1.000e+00, ..., 1.850e+01, 1.900e+01,\n"
        "        1.950e+01],\n"
        "       [2.000e+01, 2.050e+01, 2.100e+01, ..., 3.850e+01, 3.900e+01,\n"
        "        3.950e+01],\n"
        "       [4.000e+01, 4.050e+01, 4.100e+01, ..., 5.850e+01, 5.900e+01,\n"
        "        5.950e+01],\n"
        "       ...,\n"
        "       [7.400e+02, 7.405e+02, 7.410e+02, ..., 7.585e+02, 7.590e+02,\n"
        "        7.595e+02],\n"
        "       [7.600e+02, 7.605e+02, 7.610e+02, ..., 7.785e+02, 7.790e+02,\n"
        "        7.795e+02],\n"
        "       [7.800e+02, 7.805e+02, 7.810e+02, ..., 7.985e+02, 7.990e+02,\n"
        "        7.995e+02]], dtype=float32)");
  CHECK(tf::detail::numpy_repr(arange_i32(2000, {2000})) ==
        "array([   0,    1,    2, ..., 1997, 1998, 1999], dtype=int32)");
}

TEST_CASE("print: numpy_scalar_str", "[cpu][print]") {
  CHECK(tf::detail::numpy_scalar_str(14.0, tf::float32) == "14.0");
  CHECK(tf::detail::numpy_scalar_str(1e16, tf::float64) == "1e+16");
  CHECK(tf::detail::numpy_scalar_str(1e-4, tf::float64) == "0.0001");
  // float32(1e-4) is just below 1e-4.
  CHECK(tf::detail::numpy_scalar_str(static_cast<float>(1e-4), tf::float32) == "1e-04");
  CHECK(tf::detail::numpy_scalar_str(-0.0, tf::float32) == "-0.0");
  CHECK(tf::detail::numpy_scalar_str(7, tf::int64) == "7");
  CHECK(tf::detail::numpy_scalar_str(0, tf::bool_) == "False");
}

TEST_CASE("print: undefined and symbolic tensors", "[cpu][print]") {
  CHECK(printed(tf::Tensor()) == "None");
  CHECK(printed(tf::detail::symbolic({tf::None, 3}, tf::float32, tf::Device{})) ==
        "Tensor(shape=(None, 3), dtype=float32)");
}

TEST_CASE("print: tensors on every device print the same", "[cpu][cuda][print]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor t = f32({1.5f, 2.25f, -3.f});
    REQUIRE(t.placement() == tf::detail::resolve_device(dev));
    CHECK(printed(t) == "tf.Tensor([ 1.5   2.25 -3.  ], shape=(3,), dtype=float32)");
    CHECK(tf::detail::numpy_repr(f16({0.1f, 0.2f, 0.3f}, {3})) ==
          "array([0.1, 0.2, 0.3], dtype=float16)");
  }
}
