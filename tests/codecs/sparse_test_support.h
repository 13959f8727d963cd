// Helpers for the sparsifier tests (topk, randomk, threshold, dgc): building codecs, reading a
// sparse message back (sparse_message.h) and brute-force references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "codec_test_support.h"
#include "codecs/codec_registry.h"
#include "codecs/sparse_math.h"
#include "codecs/sparse_message.h"
#include "codecs/wire_format.h"
#include "common/result.h"

namespace terse::testing {

inline std::unique_ptr<Codec> make_sparse(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

// Expects create_codec(spec) to fail with a message containing `needle`.
inline void expect_refused(const std::string& spec, const std::string& needle) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclInvalidArgument) << spec;
  EXPECT_NE(std::string(last_error()).find(needle), std::string::npos)
      << spec << " -> " << last_error();
}

// A sparse message taken apart; `indices` is empty when the message leaves them implicit.
struct SparseView {
  WireHeader header;
  std::vector<uint32_t> indices;
  std::vector<float> values;
  size_t kept() const { return header.param0; }
};

inline SparseView view_sparse(const std::vector<uint8_t>& message) {
  SparseView view;
  EXPECT_GE(message.size(), kWireHeaderBytes);
  if (message.size() < kWireHeaderBytes) return view;
  memcpy(&view.header, message.data(), sizeof(view.header));
  size_t kept = view.header.param0;
  size_t offset = kWireHeaderBytes;
  if ((view.header.flags & kSparseImplicitIndices) == 0) {
    view.indices.resize(kept);
    if (kept > 0) memcpy(view.indices.data(), message.data() + offset, kept * sizeof(uint32_t));
    offset += kept * sizeof(uint32_t);
  }
  DType value_type = static_cast<DType>(view.header.param1);
  view.values.resize(kept);
  for (size_t j = 0; j < kept; ++j) {
    view.values[j] = load_element(message.data() + offset, value_type, j);
  }
  return view;
}

inline uint32_t key_of(float value) {
  return magnitude_key(value);
}

// The k largest magnitudes, ties to the lower index, as increasing indices: by sorting.
inline std::vector<uint32_t> brute_force_top_k(const std::vector<float>& values, size_t k) {
  std::vector<uint32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return key_of(values[a]) > key_of(values[b]); });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

// Decodes `message` (host) into fp32.
inline std::vector<float> decode_f32(const Codec& codec, const std::vector<uint8_t>& message,
                                     size_t count) {
  return decode_host(codec, message, count, DType::kFloat32);
}

// Result of decoding `message` into a fresh fp32 output (for refusal tests).
inline ncclResult_t try_decode(const Codec& codec, const std::vector<uint8_t>& message,
                               size_t count) {
  std::vector<float> output(count + 1);
  return codec.decode(message.data(), message.size(), output.data(), count, DType::kFloat32, false,
                      DecodeContext{});
}

// Overwrites the header of `message`.
inline void put_header(std::vector<uint8_t>* message, const WireHeader& header) {
  memcpy(message->data(), &header, sizeof(header));
}

inline void put_index(std::vector<uint8_t>* message, size_t j, uint32_t index) {
  memcpy(message->data() + kWireHeaderBytes + j * sizeof(uint32_t), &index, sizeof(index));
}

}  // namespace terse::testing
