// The net plugin's lossless coding (plugin/net/lossless_codec.h) on gradient-like bytes: for
// fp32, bf16 and fp16 values and each zstd level asked for, the ratio and the encode and decode
// speeds (median of -i runs, one thread), and the link speed below which encoding pays: the
// encoder must outrun the link (TERSE_NET_COMPRESS=auto's rule) and the effective bandwidth on a
// link of L bytes/s is about min(encode, L * ratio, decode).
//
//   net_codec_perf [-n MiB] [-i ITERS] [-l "1 3 -1"] [-d "normal mixed"]
//
// Data: "normal" is N(0, 1e-3) everywhere (every exponent byte busy: the hard case); "mixed"
// gives each 64 Ki-value block its own scale, log-uniform in [1e-6, 1e-2], as layers of a model
// differ, with no exact zeros. Both from a fixed seed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/float_convert.h"
#include "plugin/net/lossless_codec.h"

namespace {

std::vector<uint8_t> make_bytes(const std::string& dtype, const std::string& shape, size_t bytes) {
  int width = dtype == "fp32" ? 4 : 2;
  size_t count = bytes / width;
  std::vector<uint8_t> out(count * width);
  std::mt19937_64 random(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-6.0f, -2.0f);
  float scale = 1e-3f;
  for (size_t i = 0; i < count; ++i) {
    if (shape == "mixed" && i % 65536 == 0) scale = std::pow(10.0f, exponent(random));
    float value = scale * normal(random);
    if (width == 4) {
      memcpy(&out[4 * i], &value, 4);
    } else {
      uint16_t bits = dtype == "bf16" ? terse::float_to_bf16(value) : terse::float_to_half(value);
      memcpy(&out[2 * i], &bits, 2);
    }
  }
  return out;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 16;
  int iters = 5;
  std::string levels = "1 3 -1";
  std::string shapes = "normal mixed";
  int flag;
  while ((flag = getopt(argc, argv, "n:i:l:d:h")) != -1) {
    switch (flag) {
      case 'n':
        mib = strtoull(optarg, nullptr, 10);
        break;
      case 'i':
        iters = atoi(optarg);
        break;
      case 'l':
        levels = optarg;
        break;
      case 'd':
        shapes = optarg;
        break;
      default:
        fprintf(stderr, "usage: net_codec_perf [-n MiB] [-i ITERS] [-l LEVELS] [-d SHAPES]\n");
        return 2;
    }
  }
  size_t bytes = mib << 20;
  printf(
      "| data | dtype | zstd level | ratio | encode GB/s | decode GB/s | pays below (Gbit/s) |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  std::istringstream shape_list(shapes);
  for (std::string shape; shape_list >> shape;) {
    for (const char* dtype : {"fp32", "bf16", "fp16"}) {
      std::vector<uint8_t> input = make_bytes(dtype, shape, bytes);
      std::istringstream level_list(levels);
      for (int level; level_list >> level;) {
        terse::net::LosslessCodec codec(level);
        std::vector<uint8_t> encoded(terse::net::LosslessCodec::bound(input.size()));
        std::vector<uint8_t> output(input.size());
        std::vector<double> encode_s, decode_s;
        size_t encoded_bytes = 0;
        for (int i = 0; i < iters + 1; ++i) {
          auto start = std::chrono::steady_clock::now();
          encoded_bytes = codec.encode(input.data(), input.size(), encoded.data(), encoded.size());
          auto middle = std::chrono::steady_clock::now();
          if (codec.decode(encoded.data(), encoded_bytes, output.data(), output.size()) !=
                  ncclSuccess ||
              output != input) {
            fprintf(stderr, "round trip failed (%s %s level %d)\n", shape.c_str(), dtype, level);
            return 1;
          }
          auto end = std::chrono::steady_clock::now();
          if (i == 0) continue;  // warm-up
          encode_s.push_back(std::chrono::duration<double>(middle - start).count());
          decode_s.push_back(std::chrono::duration<double>(end - middle).count());
        }
        double ratio = static_cast<double>(input.size()) / encoded_bytes;
        double encode = input.size() / median(encode_s) / 1e9;
        double decode = input.size() / median(decode_s) / 1e9;
        // Encoding pays while the link moves fewer raw bytes per second than the encoder.
        printf("| %s | %s | %d | %.3f | %.2f | %.2f | %.1f |\n", shape.c_str(), dtype, level, ratio,
               encode, decode, encode * 8);
      }
    }
  }
  return 0;
}
