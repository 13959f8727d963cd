// The host execution backend: the steps of contribution.h on host memory, done when they return
// (execution_backend.h). Stateless: the scratch is the call's (CompressedContext::scratch).
#include <cstring>

#include "codecs/dtype.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "common/result.h"

namespace terse {
namespace {

class HostBackend final : public ExecutionBackend {
 public:
  Memory memory() const override { return Memory::kHost; }

  float* floats(const CompressedContext& context, ScratchSlot slot, size_t count) override {
    return context.scratch->floats(slot, count);
  }
  uint8_t* message_buffer(const CompressedContext& context, ScratchSlot slot,
                          size_t bytes) override {
    return context.scratch->bytes(slot, bytes);
  }

  ncclResult_t encode_contribution(const CompressedArgs& args, const CompressedContext& context,
                                   float* values, const ElementRange& range, uint8_t* message,
                                   size_t capacity, size_t* message_bytes) override {
    // Fused where the codec compensates inside its encode on the host (Top-K): the same
    // message and residual as the two steps, in one pass over send and the residual.
    return compensate_and_encode(args, context, values, range, message, capacity, message_bytes);
  }
  bool fuses_contribution(const CompressedArgs& args) const override {
    return fused_contribution(args);
  }
  ncclResult_t make_contribution(const CompressedArgs& args, const CompressedContext& context,
                                 float* values, const ElementRange& range) override {
    bool finite = false;  // only encode_contribution's scan uses it
    return make_contribution_range(args, context, values, range, &finite);
  }
  ncclResult_t encode_partial(const CompressedArgs& args, const CompressedContext& context,
                              const float* values, const ElementRange& range, float* error,
                              uint8_t* message, size_t capacity, size_t* message_bytes) override {
    return terse::encode_partial(args, context, values, range, error, message, capacity,
                                 message_bytes);
  }
  ncclResult_t wait_messages() override { return ncclSuccess; }

  ncclResult_t decode(const CompressedArgs& args, const CompressedContext& context,
                      const uint8_t* message, size_t message_bytes, float* output, size_t count,
                      bool accumulate) override {
    return decode_message(args, context, message, message_bytes, output, count, accumulate);
  }

  ncclResult_t copy_bytes_from_host(const CompressedContext&, void* values, const uint8_t* host,
                                    size_t bytes) override {
    if (values != host) std::memcpy(values, host, bytes);
    return ncclSuccess;
  }
  ncclResult_t copy_bytes_to_host(const CompressedContext&, uint8_t* host, const void* values,
                                  size_t bytes) override {
    if (values != host) std::memcpy(host, values, bytes);
    return ncclSuccess;
  }
  ncclResult_t load(DType type, const void* input, float* values, size_t count,
                    bool accumulate) override {
    dispatch_dtype(type, [&](auto tag) {
      using T = decltype(tag);
      const auto* typed = static_cast<const typename T::Storage*>(input);
      if (accumulate) {
        for (size_t i = 0; i < count; ++i) values[i] += T::load(typed[i]);
      } else {
        for (size_t i = 0; i < count; ++i) values[i] = T::load(typed[i]);
      }
    });
    return ncclSuccess;
  }
  ncclResult_t load_from_host(const CompressedContext&, DType type, const uint8_t* host_input,
                              float* values, size_t count, bool accumulate) override {
    return load(type, host_input, values, count, accumulate);
  }
  ncclResult_t clear(float* values, size_t count) override {
    std::memset(values, 0, count * sizeof(float));
    return ncclSuccess;
  }
  ncclResult_t low_rank(const LowRankStep& step) override {
    return run_low_rank_step(step, Memory::kHost, nullptr);
  }
  ncclResult_t add(float* sum, const float* addend, size_t count) override {
    for (size_t i = 0; i < count; ++i) sum[i] += addend[i];
    return ncclSuccess;
  }
  ncclResult_t write_result(const CompressedArgs& args, const float* sum,
                            const ElementRange& range) override {
    terse::write_result(args, sum, range);
    return ncclSuccess;
  }

  ncclResult_t finish() override { return ncclSuccess; }
};

}  // namespace

ExecutionBackend& host_backend() {
  static HostBackend backend;
  return backend;
}

}  // namespace terse
