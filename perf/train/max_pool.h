// 2x2 max pooling, stride 2: [batch][channels][side][side] -> [..][side/2][side/2]; backward
// sends each gradient to the input that won its window.
#pragma once

#include <vector>

namespace terse {
namespace train {

class MaxPool2x2 {
 public:
  MaxPool2x2(int channels, int side) : channels_(channels), side_(side) {}

  void forward(const std::vector<float>& x, int batch, std::vector<float>* y);
  void backward(const std::vector<float>& dy, int batch, std::vector<float>* dx);

 private:
  int channels_, side_;
  std::vector<int> winners_;  // per output element, the index of its input in x
};

}  // namespace train
}  // namespace terse
