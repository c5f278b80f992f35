// The README's example, built against an installed tapeflow with find_package(tapeflow).
#include <iostream>

#include <tapeflow/tapeflow.h>
namespace tf = tapeflow;

int main() {
  tf::Tensor b = tf::ones({2, 2});
  std::cout << tf::reduce_sum(b, 1) << "\n";   // tf.Tensor([2. 2.], shape=(2,), dtype=float32)
  std::cout << tf::reshape(b, {1, 4}).shape() << "\n";           // (1, 4)
  tf::Variable W(tf::random::normal({2, 2}), "weights");
  tf::GradientTape tape;                                  // records while in scope
  tf::Tensor loss = tf::reduce_sum(tf::matmul(W, b) * 2.0f);
  std::cout << tape.gradient(loss, W) << "\n";            // d loss / d W: all 4.0
  auto multiply = tf::function([](tf::Tensor x, tf::Tensor y) { return tf::multiply(x, y); });
  std::cout << multiply(7.0f, 2.0f) << "\n";   // traced once: tf.Tensor(14.0, shape=(), ...)
}
