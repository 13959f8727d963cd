#include "perf/train/fashion_mnist.h"

#include <zlib.h>

#include <sys/stat.h>
#include <cerrno>
#include <cstring>

namespace terse {
namespace train {
namespace {

// The training set's pixel mean and standard deviation (of values in [0, 1]): centred inputs
// let plain SGD use one learning rate for every layer.
constexpr float kPixelMean = 0.2860f;
constexpr float kPixelStd = 0.3530f;

// IDX magic numbers: 0x0000 08 dd, unsigned bytes with dd dimensions.
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr uint32_t kImageMagic = 0x00000803;

bool read_exactly(gzFile file, void* out, size_t bytes) {
  char* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    const int chunk = static_cast<int>(bytes < (1u << 30) ? bytes : (1u << 30));
    const int got = gzread(file, cursor, static_cast<unsigned>(chunk));
    if (got <= 0) return false;
    cursor += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

bool read_big_endian(gzFile file, uint32_t* value) {
  unsigned char bytes[4];
  if (!read_exactly(file, bytes, 4)) return false;
  *value = (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
           uint32_t{bytes[3]};
  return true;
}

// The IDX file's payload after checking its magic and dimensions against `expected`
// (0 accepts any count in the first dimension).
bool read_idx(const std::string& path, uint32_t magic, std::vector<uint32_t> expected,
              std::vector<uint8_t>* payload, uint32_t* count, std::string* error) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    *error = path + ": " + strerror(errno) + " (Fashion-MNIST comes from the Debian package " +
             kFashionMnistPackage + ": apt-get install " + kFashionMnistPackage +
             ", which cmake/install_deps.sh installs)";
    return false;
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = path + ": cannot be opened";
    return false;
  }
  bool ok = true;
  uint32_t found_magic = 0;
  ok = read_big_endian(file, &found_magic) && found_magic == magic;
  size_t bytes = 1;
  for (size_t d = 0; ok && d < expected.size(); ++d) {
    uint32_t extent = 0;
    ok =
        read_big_endian(file, &extent) && extent > 0 && (expected[d] == 0 || extent == expected[d]);
    if (d == 0) *count = extent;
    bytes *= extent;
  }
  if (ok) {
    payload->resize(bytes);
    ok = read_exactly(file, payload->data(), bytes);
  }
  gzclose(file);
  if (!ok) *error = path + ": not an IDX file of the expected kind and size (truncated or corrupt)";
  return ok;
}

bool load_set(const std::string& dir, const std::string& prefix, ImageSet* set,
              std::string* error) {
  std::vector<uint8_t> pixels, labels;
  uint32_t images = 0, label_count = 0;
  if (!read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", kImageMagic,
                {0, kImageSide, kImageSide}, &pixels, &images, error) ||
      !read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", kLabelMagic, {0}, &labels,
                &label_count, error)) {
    return false;
  }
  if (images != label_count) {
    *error = dir + "/" + prefix + "-*: " + std::to_string(images) + " images but " +
             std::to_string(label_count) + " labels";
    return false;
  }
  for (uint8_t label : labels) {
    if (label >= kClasses) {
      *error = dir + "/" + prefix + "-labels-idx1-ubyte.gz: label " + std::to_string(label) +
               " is not a class 0-9";
      return false;
    }
  }
  set->count = static_cast<int>(images);
  set->labels = std::move(labels);
  set->pixels.resize(pixels.size());
  for (size_t i = 0; i < pixels.size(); ++i) {
    set->pixels[i] = (static_cast<float>(pixels[i]) / 255.0f - kPixelMean) / kPixelStd;
  }
  return true;
}

}  // namespace

bool load_fashion_mnist(const std::string& dir, ImageSet* train, ImageSet* test,
                        std::string* error) {
  return load_set(dir, "train", train, error) && load_set(dir, "t10k", test, error);
}

}  // namespace train
}  // namespace terse
