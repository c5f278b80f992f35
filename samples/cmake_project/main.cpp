// The README's example, built against an installed tapeflow with find_package(tapeflow).
#include <iostream>

#include <tapeflow/tapeflow.h>
namespace tf = tapeflow;

int main() {
  tf::Tensor b = tf::ones({2, 2});
  std::cout << tf::reduce_sum(b, 1) << "\n";   // tf.Tensor([2. 2.], shape=(2,), dtype=float32)
  std::cout << tf::reshape(b, {1, 4}).shape() << "\n";           // (1, 4)
  tf::Variable W(tf::random::normal({2, 2}), "weights");
  std::cout << tf::matmul(W, b) * 2.0f << "\n";
  auto multiply = tf::function([](tf::Tensor x, tf::Tensor y) { return tf::multiply(x, y); });
  std::cout << multiply(7.0f, 2.0f) << "\n";   // tf.Tensor(14.0, shape=(), dtype=float32)
}
