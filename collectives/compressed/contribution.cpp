#include "collectives/compressed/contribution.h"

#include <chrono>
#include <cstring>

#include "codecs/dtype.h"
#include "common/host_device.h"
#include "common/result.h"

namespace terse {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void add_encode_time(const CompressedContext& context, Clock::time_point start) {
  if (context.counters != nullptr) context.counters->encode_seconds += seconds_since(start);
}

// The codec's temporaries come from the communicator's scratch: no allocation once warm.
EncodeWorkspace* encode_workspace(const CompressedContext& context) {
  return context.scratch != nullptr ? context.scratch->encode_workspace() : nullptr;
}

// values[i] = In(send[i]) + residual[i] for i in [first, first + count), and whether every value
// is finite: the largest magnitude bit pattern, tracked in the same vectorised loop (a
// max-reduction), is below infinity's.
template <typename In, bool kResidual>
TERSE_CPU_DISPATCH bool compensate_typed(const typename In::Storage* send, const float* residual,
                                         size_t first, size_t count, float* values) {
  uint32_t largest = 0;
  for (size_t i = first; i < first + count; ++i) {
    const float value = kResidual ? In::load(send[i]) + residual[i] : In::load(send[i]);
    values[i] = value;
    const uint32_t magnitude = float_bits(value) & 0x7fffffffu;
    largest = magnitude > largest ? magnitude : largest;
  }
  return largest < 0x7f800000u;
}

bool compensate(const void* send, DType dtype, const float* residual, size_t first, size_t count,
                float* values) {
  return dispatch_dtype(dtype, [&](auto type) {
    using In = decltype(type);
    const auto* typed = static_cast<const typename In::Storage*>(send);
    return residual != nullptr ? compensate_typed<In, true>(typed, residual, first, count, values)
                               : compensate_typed<In, false>(typed, residual, first, count, values);
  });
}

}  // namespace

ncclResult_t make_contribution(const CompressedArgs& args, const CompressedContext& context,
                               float* values, bool* finite) {
  return make_contribution_range(args, context, values, ElementRange{0, args.count}, finite);
}

ncclResult_t make_contribution_range(const CompressedArgs& args, const CompressedContext& context,
                                     float* values, const ElementRange& range, bool* finite) {
  const Clock::time_point start = Clock::now();
  const float* residual = call_residual(args);
  // Not ResidualEntry::compensate: a hierarchical leader compensates an fp32 node sum with the
  // residual of a tensor whose own dtype may be 16-bit.
  *finite = compensate(args.send, args.dtype, residual, range.offset, range.count, values);
  add_encode_time(context, start);
  return ncclSuccess;
}

ncclResult_t make_contribution_in_place(const CompressedArgs& args,
                                        const CompressedContext& context, const ElementRange& range,
                                        bool* finite) {
  const Clock::time_point start = Clock::now();
  float* residual = call_residual(args);
  if (residual == nullptr) {
    return fail(ncclInternalError, "compensation in place without a residual");
  }
  // compensate() reads residual[i] before it writes values[i], element by element, so the
  // two may be one buffer here.
  *finite = compensate(args.send, args.dtype, residual, range.offset, range.count, residual);
  add_encode_time(context, start);
  return ncclSuccess;
}

ncclResult_t encode_contribution(const CompressedArgs& args, const CompressedContext& context,
                                 const float* values, const ElementRange& range, bool finite,
                                 void* message, size_t capacity, size_t* message_bytes) {
  const Clock::time_point start = Clock::now();
  EncodeContext encode = args.encode;
  encode.input_finite = finite;
  encode.seed = range_seed(args.encode.seed, range.offset);
  encode.memory = Memory::kHost;
  encode.error = nullptr;
  encode.state = nullptr;
  encode.workspace = encode_workspace(context);
  if (args.entry != nullptr) {
    if (args.entry->residual() != nullptr) encode.error = call_residual(args) + range.offset;
    if (range.offset == 0 && range.count == args.count) encode.state = args.entry->state();
  }
  const ncclResult_t result =
      args.codec->encode(values + range.offset, range.count, DType::kFloat32, encode, message,
                         capacity, message_bytes);
  add_encode_time(context, start);
  return result;
}

bool fused_contribution(const CompressedArgs& args) {
  return call_residual(args) != nullptr && args.codec->fuses_compensation();
}

ncclResult_t compensate_and_encode(const CompressedArgs& args, const CompressedContext& context,
                                   float* values, const ElementRange& range, void* message,
                                   size_t capacity, size_t* message_bytes) {
  if (!fused_contribution(args)) {
    bool finite = false;
    TERSE_CHECK(make_contribution_range(args, context, values, range, &finite));
    return encode_contribution(args, context, values, range, finite, message, capacity,
                               message_bytes);
  }
  const Clock::time_point start = Clock::now();
  EncodeContext encode = args.encode;
  encode.seed = range_seed(args.encode.seed, range.offset);
  encode.memory = Memory::kHost;
  encode.error = nullptr;
  encode.state = range.offset == 0 && range.count == args.count ? args.entry->state() : nullptr;
  encode.workspace = encode_workspace(context);
  const void* send = static_cast<const uint8_t*>(args.send) + range.offset * dtype_size(args.dtype);
  const ncclResult_t result =
      args.codec->encode_compensated(send, args.dtype, call_residual(args) + range.offset,
                                     range.count, encode, message, capacity, message_bytes);
  add_encode_time(context, start);
  return result;
}

uint64_t range_seed(uint64_t call_seed, size_t offset) {
  return call_seed ^ (static_cast<uint64_t>(offset) * 0x9e3779b97f4a7c15ull);
}

ncclResult_t encode_partial(const CompressedArgs& args, const CompressedContext& context,
                            const float* values, const ElementRange& range, float* error,
                            void* message, size_t capacity, size_t* message_bytes) {
  const Clock::time_point start = Clock::now();
  EncodeContext encode = args.encode;
  encode.seed = range_seed(args.encode.seed, range.offset);
  encode.memory = Memory::kHost;
  encode.error = error;
  encode.state = nullptr;
  encode.workspace = encode_workspace(context);
  const ncclResult_t result = args.codec->encode(values, range.count, DType::kFloat32, encode,
                                                 message, capacity, message_bytes);
  add_encode_time(context, start);
  return result;
}

ncclResult_t decode_message(const CompressedArgs& args, const CompressedContext& context,
                            const void* message, size_t message_bytes, float* output, size_t count,
                            bool accumulate) {
  const Clock::time_point start = Clock::now();
  const ncclResult_t result = args.codec->decode(message, message_bytes, output, count,
                                                 DType::kFloat32, accumulate, DecodeContext{});
  if (context.counters != nullptr) context.counters->decode_seconds += seconds_since(start);
  return result;
}

size_t message_capacity(const CompressedArgs& args, size_t count) {
  const size_t bytes = args.codec->max_encoded_bytes(count, DType::kFloat32);
  return (bytes + kMessageAlignment - 1) / kMessageAlignment * kMessageAlignment;
}

float* result_buffer(const CompressedArgs& args, const CompressedContext& context,
                     ScratchSlot slot) {
  if (args.dtype == DType::kFloat32 && args.result_scale == 1.0) {
    return static_cast<float*>(args.recv);
  }
  return context.scratch->floats(slot, args.count);
}

void write_result(const CompressedArgs& args, const float* sum, const ElementRange& range) {
  const float scale = static_cast<float>(args.result_scale);
  if (args.dtype == DType::kFloat32) {
    float* out = static_cast<float*>(args.recv) + range.offset;
    if (args.result_scale == 1.0) {
      if (out != sum) std::memcpy(out, sum, range.count * sizeof(float));
    } else {
      for (size_t i = 0; i < range.count; ++i) out[i] = sum[i] * scale;
    }
    return;
  }
  for (size_t i = 0; i < range.count; ++i) {
    store_element(args.recv, args.dtype, range.offset + i,
                  args.result_scale == 1.0 ? sum[i] : sum[i] * scale);
  }
}

ncclResult_t copy_single_rank(const CompressedArgs& args) {
  if (args.result_scale == 1.0) {
    if (args.recv != args.send)
      std::memmove(args.recv, args.send, args.count * dtype_size(args.dtype));
    return ncclSuccess;
  }
  const float scale = static_cast<float>(args.result_scale);
  for (size_t i = 0; i < args.count; ++i) {
    store_element(args.recv, args.dtype, i, load_element(args.send, args.dtype, i) * scale);
  }
  return ncclSuccess;
}

ncclResult_t stage_residual(const CompressedArgs& args, size_t count, float** residual) {
  *residual = nullptr;
  if (args.entry == nullptr || args.entry->residual() == nullptr) return ncclSuccess;
  if (args.entry->stage_count() < count) {
    return fail(ncclInternalError,
                "residual entry of %s holds a stage residual of %zu elements, the algorithm needs "
                "%zu (its entry was made for another algorithm or group)",
                args.entry->key().describe().c_str(), args.entry->stage_count(), count);
  }
  *residual = args.entry->stage_residual();
  return ncclSuccess;
}

}  // namespace terse
