// codec_gpu_perf: every codec's device kernels (Memory::kDevice) on one tensor in GPU memory,
// next to a device-to-device copy of the same bytes measured in the same run: issue 12's figure,
// encode and decode throughput as a fraction of the copy's, against its targets (0.7x for the
// casts and quantizers, 0.3x for top-k; other codecs are reported without one).
//
//   codec_gpu_perf [-n elements] [-i iterations] [-c spec[;spec...]]
//
// Throughput counts input bytes (elements * 4, fp32) per second, for the copy as for the codecs;
// each figure is the median of the timed iterations, timed with CUDA events on one stream. The
// decode accumulates into fp32 and validates the message on the host from a host copy
// (DecodeContext::host_message) where the codec can, as the device execution backend does.
// Without a GPU it says so and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "common/env.h"
#include "common/result.h"

namespace terse {
namespace {

struct Options {
  size_t elements = 64u << 20;
  int iterations = 10;
  std::vector<std::string> specs = {
      "fp16",  "bf16",  "int8", "int4", "int2", "qsgd", "terngrad", "sign", "topk:ratio=0.01",
      "mxfp8", "mxfp4", "nvfp4"};
};

bool parse_options(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "-n" && value != nullptr && parse_bytes(value, &options->elements)) {
      ++i;
    } else if (arg == "-i" && value != nullptr && std::atoi(value) > 0) {
      options->iterations = std::atoi(value);
      ++i;
    } else if (arg == "-c" && value != nullptr) {
      options->specs.clear();
      std::string list = value;
      for (size_t start = 0; start <= list.size();) {
        const size_t end = std::min(list.find(';', start), list.size());
        if (end > start) options->specs.push_back(list.substr(start, end - start));
        start = end + 1;
      }
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

// Median seconds of `iterations` runs of `body` (which enqueues on `stream`), after one warm-up.
template <typename Body>
double median_seconds(cudaStream_t stream, int iterations, Body body) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  body();
  cudaStreamSynchronize(stream);
  std::vector<double> seconds;
  for (int i = 0; i < iterations; ++i) {
    cudaEventRecord(start, stream);
    body();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

double target_for(const Codec& codec) {
  if (codec.family() == CodecFamily::kDense) return 0.7;
  if (codec.id() == CodecId::kTopK) return 0.3;
  return 0;
}

int run(const Options& options) {
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  if (probe != cudaSuccess || devices == 0) {
    printf("# no CUDA device: %s; nothing measured\n",
           probe != cudaSuccess ? cudaGetErrorString(probe) : "none present");
    return 0;
  }
  const size_t n = options.elements, bytes = n * sizeof(float);
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    fprintf(stderr, "codec_gpu_perf: cannot create a stream: %s\n",
            cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::vector<float> host(n);
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  for (float& value : host) value = normal(random);
  void *input = nullptr, *copy = nullptr, *output = nullptr;
  if (cudaMalloc(&input, bytes) != cudaSuccess || cudaMalloc(&copy, bytes) != cudaSuccess ||
      cudaMalloc(&output, bytes) != cudaSuccess) {
    fprintf(stderr, "codec_gpu_perf: cannot allocate 3 x %zu bytes of device memory\n", bytes);
    return 1;
  }
  if (cudaMemcpy(input, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "codec_gpu_perf: copying the input to the device failed: %s\n",
            cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  const double copy_gbps =
      bytes /
      median_seconds(stream, options.iterations,
                     [&] {
                       if (cudaMemcpyAsync(copy, input, bytes, cudaMemcpyDeviceToDevice, stream) !=
                           cudaSuccess) {
                         fprintf(stderr, "codec_gpu_perf: the reference copy failed: %s\n",
                                 cudaGetErrorString(cudaGetLastError()));
                         exit(1);
                       }
                     }) /
      1e9;
  printf("# %zu fp32 elements, %d iterations; device-to-device copy %.1f GB/s\n", n,
         options.iterations, copy_gbps);
  printf("%-18s %8s %8s %8s %8s %7s %s\n", "codec", "ratio", "enc_GBps", "dec_GBps", "enc/copy",
         "target", "verdict");
  int failures = 0;
  for (const std::string& spec : options.specs) {
    std::string name;
    CodecParams params;
    std::unique_ptr<Codec> codec;
    if (parse_codec_spec(spec, &name, &params) != ncclSuccess ||
        create_codec(name, params, &codec) != ncclSuccess) {
      fprintf(stderr, "codec_gpu_perf: %s: %s\n", spec.c_str(), last_error());
      return 2;
    }
    const size_t capacity = codec->max_encoded_bytes(n, DType::kFloat32);
    void* message = nullptr;
    if (cudaMalloc(&message, capacity) != cudaSuccess) {
      fprintf(stderr, "codec_gpu_perf: %s: cannot allocate a %zu-byte message: %s\n", spec.c_str(),
              capacity, cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    EncodeContext encode;
    encode.memory = Memory::kDevice;
    encode.stream = stream;
    encode.seed = 1;
    size_t message_bytes = 0;
    ncclResult_t result = ncclSuccess;
    const double encode_seconds = median_seconds(stream, options.iterations, [&] {
      if (result == ncclSuccess) {
        result =
            codec->encode(input, n, DType::kFloat32, encode, message, capacity, &message_bytes);
      }
    });
    std::vector<uint8_t> host_message(message_bytes);
    if (cudaMemcpy(host_message.data(), message, message_bytes, cudaMemcpyDeviceToHost) !=
        cudaSuccess) {
      fprintf(stderr, "codec_gpu_perf: %s: copying the message back failed: %s\n", spec.c_str(),
              cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    DecodeContext decode;
    decode.memory = Memory::kDevice;
    decode.stream = stream;
    decode.host_message = host_message.data();
    const double decode_seconds = median_seconds(stream, options.iterations, [&] {
      if (result == ncclSuccess) {
        result = codec->decode(message, message_bytes, output, n, DType::kFloat32, true, decode);
      }
    });
    cudaFree(message);
    if (result != ncclSuccess) {
      printf("%-18s failed: %s\n", spec.c_str(), last_error());
      ++failures;
      continue;
    }
    const double encode_gbps = bytes / encode_seconds / 1e9;
    const double decode_gbps = bytes / decode_seconds / 1e9;
    const double fraction = std::min(encode_gbps, decode_gbps) / copy_gbps;
    const double target = target_for(*codec);
    const bool met = target == 0 || fraction >= target;
    if (!met) ++failures;
    printf("%-18s %8.4f %8.1f %8.1f %8.2f %7s %s\n", spec.c_str(),
           static_cast<double>(message_bytes) / bytes, encode_gbps, decode_gbps, fraction,
           target == 0 ? "-" : (target == 0.7 ? "0.7" : "0.3"),
           target == 0 ? "reported" : (met ? "meets" : "BELOW"));
  }
  printf("# enc/copy: the slower of encode and decode over the copy's throughput\n");
  return failures == 0 ? 0 : 3;
}

}  // namespace
}  // namespace terse

int main(int argc, char** argv) {
  terse::Options options;
  if (!terse::parse_options(argc, argv, &options)) {
    fprintf(stderr, "usage: %s [-n elements] [-i iterations] [-c spec;spec...]\n", argv[0]);
    return 1;
  }
  return terse::run(options);
}
