// Shared helpers for codec tests: random inputs, dtype conversion, and running a codec on the
// GPU when one exists (tests that need it skip with the reason otherwise).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codecs/codec.h"

namespace terse::testing {

// The codec `spec` names, failing the test (and returning null) when it cannot be made.
std::unique_ptr<Codec> make_codec(const std::string& spec);

// n samples of N(0, 1) from a fixed seed (deterministic across runs and machines).
std::vector<float> random_normal(size_t n, uint64_t seed);

// A tensor of `dtype` holding `values` (rounded to nearest even for 16-bit types), as bytes.
std::vector<uint8_t> to_dtype(const std::vector<float>& values, DType dtype);

// The fp32 values of a tensor of `dtype`.
std::vector<float> from_dtype(const std::vector<uint8_t>& bytes, DType dtype);

// Bytes every capacity bound adds for non-finite escapes (nonfinite_escapes.h: a 2-bit map and
// a 16-byte trailer at most), as the format documents it.
inline size_t escape_room(size_t count) {
  return (count + 3) / 4 + 16;
}

// Encodes on the host and returns the message, failing the test on error.
std::vector<uint8_t> encode_host(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                                 const EncodeContext& context = {});

// Decodes on the host into fp32 values, failing the test on error.
std::vector<float> decode_host(const Codec& codec, const std::vector<uint8_t>& message,
                               size_t count, DType dtype);

// True when a CUDA device can run kernels; otherwise `why` says what is missing.
bool gpu_available(std::string* why);

// Copies `input` to the GPU, encodes there, and copies the message (and `error`, when asked
// for) back. Returns the codec's result.
ncclResult_t encode_device(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                           EncodeContext context, std::vector<uint8_t>* message,
                           std::vector<float>* error = nullptr);

// Copies `input` and `residual` to the GPU, runs encode_compensated there (device memory), and
// copies the message and the new residual back. Returns the codec's result.
ncclResult_t encode_compensated_device(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                                       std::vector<float>* residual, EncodeContext context,
                                       std::vector<uint8_t>* message);

// Copies `message` to the GPU and decodes there into `count` elements of `dtype`, starting from
// `initial` when `accumulate` (so accumulation is checked too); returns the result as fp32.
// `with_host_message`: the decode is also given the host's copy of the message (as the
// collectives give it), else it reads what it validates from the device.
ncclResult_t decode_device(const Codec& codec, const std::vector<uint8_t>& message, size_t count,
                           DType dtype, bool accumulate, const std::vector<uint8_t>& initial,
                           std::vector<float>* output, bool with_host_message = false);

}  // namespace terse::testing

// Skips the current test, saying why, when no GPU can run kernels.
#define TERSE_REQUIRE_GPU()                                   \
  do {                                                        \
    std::string terse_gpu_why_;                               \
    if (!::terse::testing::gpu_available(&terse_gpu_why_)) {  \
      GTEST_SKIP() << "needs a CUDA GPU: " << terse_gpu_why_; \
    }                                                         \
  } while (0)
