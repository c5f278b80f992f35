// The TF2 basics of the seed tutorial, line by line in C++ (see README.md beside this file).
#include <iostream>
#include <vector>

#include <tapeflow/tapeflow.h>

#include "../common/args.h"

namespace tf = tapeflow;

int main(int argc, char** argv) {
  samples::Args(argc, argv,
                "The TF2 basics of the seed tutorial in C++: tensors, variables, reductions, "
                "a traced function;\nprints what the tutorial prints (takes no arguments).")
      .done();
  tf::random::set_seed(2018);  // fixed, so that the output below is reproducible

  // Tensors: zeros and ones (float32 unless a dtype is given).
  tf::Tensor a = tf::zeros({2, 2});
  tf::Tensor b = tf::ones({2, 2});
  std::cout << a << "\n" << b << "\n";

  // Reductions along each axis, the static shape, and reshaping.
  std::cout << tf::reduce_sum(b, 0) << "\n";
  std::cout << tf::reduce_sum(b, 1) << "\n";
  std::cout << a.shape() << "\n";
  std::cout << tf::reshape(b, {1, 4}) << "\n";
  try {
    std::cout << tf::reshape(b, {1, 3}) << "\n";
  } catch (const tf::InvalidArgumentError& e) {
    std::cout << "InvalidArgumentError: " << e.what() << "\n";
  }

  // Variables: named, mutable state.
  tf::Variable W(tf::zeros({2, 2}), "weights");
  tf::Variable R(tf::random::normal({2, 2}), "random_weights");
  std::cout << W << "\n" << R << "\n";

  // From host memory: the dtype follows the element type (double gives float64).
  std::vector<double> host(9, 0.0);
  tf::Tensor t_a = tf::convert_to_tensor(host, {3, 3});
  std::cout << t_a << "\n";

  // A function of tensors; C++ scalars convert to tensors.
  auto multiply = tf::function([](tf::Tensor x, tf::Tensor y) { return tf::multiply(x, y); });
  std::cout << multiply(7.0f, 2.0f) << "\n";

  // Integer overflow: int32 wraps around as in TF, int64 holds the product.
  std::cout << tf::constant(9999999) * 111111111 << "\n";
  std::cout << tf::constant(int64_t{9999999}) * 111111111 << "\n";
  return 0;
}
