// Fashion-MNIST from Debian's dataset-fashion-mnist package: the four gzipped IDX files under
// /usr/share/datasets/fashion-mnist (60000 training and 10000 test images, 28x28, 10 classes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace terse {
namespace train {

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kFashionMnistPackage = "dataset-fashion-mnist";
constexpr int kImageSide = 28;
constexpr int kImagePixels = kImageSide * kImageSide;
constexpr int kClasses = 10;

struct ImageSet {
  int count = 0;
  std::vector<float> pixels;    // count x 784, standardised with the training set's mean and std
  std::vector<uint8_t> labels;  // count, 0..9

  const float* image(int index) const {
    return pixels.data() + static_cast<size_t>(index) * kImagePixels;
  }
};

// Reads train-* and t10k-* from `dir`. False with a sentence naming the file and, when the
// files are absent, the package to install.
bool load_fashion_mnist(const std::string& dir, ImageSet* train, ImageSet* test,
                        std::string* error);

}  // namespace train
}  // namespace terse
