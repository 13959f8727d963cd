// codec_perf: single-thread throughput, wire ratio and error of every codec on one tensor,
// next to a memcpy of the same bytes measured in the same run.
//
//   codec_perf [-n elements] [-d float|half|bfloat16] [-i iterations] [-c spec[;spec...]]
//              [--known-finite] [--csv]
//
// encode_gbps and decode_gbps count input bytes (elements * dtype size) per second, as the
// memcpy row does; ratio is message bytes / input bytes; rel_err is ||decode(encode(x)) - x|| /
// ||x|| on x ~ N(0, 1). Each figure is the median of the timed iterations. Encodes include the
// scan for NaN/Inf that Codec::encode makes of its input; --known-finite says the input is finite
// (EncodeContext::input_finite), as the collectives do after finding it in the pass that adds the
// residual, and measures the codec alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
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
  size_t elements = 16u << 20;
  DType dtype = DType::kFloat32;
  int iterations = 5;
  bool csv = false;
  bool known_finite = false;
  std::vector<std::string> specs;
};

struct Row {
  std::string codec, params;
  double ratio = 1, encode_gbps = 0, decode_gbps = 0, rel_err = 0;
};

void usage(const char* program) {
  fprintf(stderr,
          "usage: %s [-n elements] [-d float|half|bfloat16|float8e4m3|float8e5m2] [-i iterations] "
          "[-c spec;spec...] "
          "[--known-finite] [--csv]\n  elements accepts K/M/G (1024-based); default 16M float, 5 "
          "iterations,\n  every registered codec at its defaults plus a few variants. Encodes "
          "scan their input\n  for NaN/Inf unless --known-finite (what collectives do).\n"
          "codecs:\n",
          program);
  for (const CodecInfo& info : codec_table()) {
    fprintf(stderr, "  %-10s %s%s%s\n", info.name, info.description, *info.parameters ? "; " : "",
            info.parameters);
  }
}

bool parse_options(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--csv") {
      options->csv = true;
    } else if (arg == "--known-finite") {
      options->known_finite = true;
    } else if (arg == "-n" || arg == "--elements") {
      const char* text = value();
      uint64_t elements = 0;
      if (!text || !parse_bytes(text, &elements)) return false;
      options->elements = elements;
    } else if (arg == "-d" || arg == "--dtype") {
      const char* text = value();
      if (!text) return false;
      std::string name = text;
      if (name == "float")
        options->dtype = DType::kFloat32;
      else if (name == "half")
        options->dtype = DType::kFloat16;
      else if (name == "bfloat16")
        options->dtype = DType::kBFloat16;
      else if (name == "float8e4m3")
        options->dtype = DType::kFloat8E4M3;
      else if (name == "float8e5m2")
        options->dtype = DType::kFloat8E5M2;
      else
        return false;
    } else if (arg == "-i" || arg == "--iterations") {
      const char* text = value();
      if (!text || atoi(text) < 1) return false;
      options->iterations = atoi(text);
    } else if (arg == "-c" || arg == "--codecs") {
      const char* text = value();
      if (!text) return false;
      std::string list = text;
      for (size_t start = 0; start <= list.size();) {
        size_t end = list.find(';', start);
        if (end == std::string::npos) end = list.size();
        if (end > start) options->specs.push_back(list.substr(start, end - start));
        start = end + 1;
      }
    } else {
      return false;
    }
  }
  if (options->specs.empty()) {
    for (const CodecInfo& info : codec_table()) {
      // threshold's default (0.001) is for small gradients; on N(0, 1) data it would keep
      // nearly everything, so the benchmark shows it at a threshold keeping about 1.2%.
      if (std::string(info.name) == "threshold") {
        options->specs.push_back("threshold:threshold=2.5");
        continue;
      }
      options->specs.push_back(info.name);
      if (std::string(info.name) == "int8") options->specs.push_back("int8:rounding=stochastic");
      if (std::string(info.name) == "topk") options->specs.push_back("topk:method=exact");
    }
  }
  return true;
}

template <typename Fn>
double median_seconds(int iterations, Fn&& fn) {
  fn();  // warm-up: first touch, caches, lazily built state
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

bool measure(const std::string& spec, const Options& options, const std::vector<uint8_t>& input,
             const std::vector<float>& reference, Row* row) {
  std::unique_ptr<Codec> codec;
  if (create_codec(spec, &codec) != ncclSuccess) {
    fprintf(stderr, "codec_perf: %s\n", last_error());
    return false;
  }
  const size_t count = options.elements;
  std::string canonical = codec->spec();
  size_t colon = canonical.find(':');
  row->codec = canonical.substr(0, colon);
  row->params = colon == std::string::npos ? "" : canonical.substr(colon + 1);
  auto state = codec->make_state(count, options.dtype, MatrixShape{});
  std::vector<uint8_t> message(codec->max_encoded_bytes(count, options.dtype));
  std::vector<uint8_t> output(input.size());
  size_t bytes = 0;
  uint64_t step = 0;
  ncclResult_t result = ncclSuccess;
  double encode_s = median_seconds(options.iterations, [&] {
    EncodeContext context;
    context.seed = 0x5eed + step;
    context.step = step++;
    context.state = state.get();
    context.input_finite = options.known_finite;
    if (result == ncclSuccess) {
      result = codec->encode(input.data(), count, options.dtype, context, message.data(),
                             message.size(), &bytes);
    }
  });
  double decode_s = median_seconds(options.iterations, [&] {
    if (result == ncclSuccess) {
      result = codec->decode(message.data(), bytes, output.data(), count, options.dtype, false,
                             DecodeContext{});
    }
  });
  if (result != ncclSuccess) {
    fprintf(stderr, "codec_perf: %s failed: %s\n", spec.c_str(), last_error());
    return false;
  }
  double error = 0, norm = 0;
  for (size_t i = 0; i < count; ++i) {
    double x = reference[i], y = load_element(output.data(), options.dtype, i);
    error += (y - x) * (y - x);
    norm += x * x;
  }
  row->ratio = double(bytes) / input.size();
  row->encode_gbps = input.size() / encode_s / 1e9;
  row->decode_gbps = input.size() / decode_s / 1e9;
  row->rel_err = norm > 0 ? std::sqrt(error / norm) : 0;
  return true;
}

void print_row(const Row& row, const Options& options) {
  if (options.csv) {
    // params holds commas itself, so it is quoted (RFC 4180); its text never holds a quote.
    printf("%s,\"%s\",%s,%zu,%.6f,%.3f,%.3f,%.6g\n", row.codec.c_str(), row.params.c_str(),
           dtype_name(options.dtype), options.elements, row.ratio, row.encode_gbps, row.decode_gbps,
           row.rel_err);
  } else {
    printf("%-10s %-62s %9.5f %12.2f %12.2f %10.3g\n", row.codec.c_str(), row.params.c_str(),
           row.ratio, row.encode_gbps, row.decode_gbps, row.rel_err);
  }
}

int run(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, &options)) {
    usage(argv[0]);
    return 2;
  }
  // x ~ N(0, 1); the reference is the value the input type actually holds.
  std::vector<float> reference(options.elements);
  std::mt19937_64 engine(1);
  std::normal_distribution<float> normal;
  for (float& value : reference) value = normal(engine);
  std::vector<uint8_t> input(options.elements * dtype_size(options.dtype));
  for (size_t i = 0; i < options.elements; ++i) {
    store_element(input.data(), options.dtype, i, reference[i]);
    reference[i] = load_element(input.data(), options.dtype, i);
  }

  if (options.csv) {
    printf("codec,params,dtype,elements,ratio,encode_gbps,decode_gbps,rel_err\n");
  } else {
    printf("# codec_perf: %zu %s elements (%.1f MiB), single thread, median of %d\n",
           options.elements, dtype_name(options.dtype), input.size() / 1048576.0,
           options.iterations);
    printf("%-10s %-62s %9s %12s %12s %10s\n", "codec", "params", "ratio", "encode_GB/s",
           "decode_GB/s", "rel_err");
  }
  Row copy;
  copy.codec = "memcpy";
  std::vector<uint8_t> destination(input.size());
  double copy_s = median_seconds(options.iterations,
                                 [&] { memcpy(destination.data(), input.data(), input.size()); });
  copy.encode_gbps = copy.decode_gbps = input.size() / copy_s / 1e9;
  print_row(copy, options);
  int failures = 0;
  for (const std::string& spec : options.specs) {
    Row row;
    if (measure(spec, options, input, reference, &row)) {
      print_row(row, options);
    } else {
      ++failures;
    }
    fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace terse

int main(int argc, char** argv) {
  return terse::run(argc, argv);
}
