#include <iostream>
#include <tapeflow/tapeflow.h>

namespace tf = tapeflow;

int main() {
  tf::Tensor a = tf::constant({{1.f, 2.f}, {3.f, 4.f}});
  tf::Tensor b = tf::ones({2, 2});
  std::cout << tf::matmul(a, b) + 1.0f << "\n";
  std::cout << tf::reduce_sum(a, 0) << "\n";
  return 0;
}
