// Random-K with a shared seed: every rank draws the same k positions (the seed of the call is
// the same on every rank, compression_engine.cpp), so the k kept values of all ranks line up
// and an exact, dense sum of just those k values is the whole allreduce. Each rank sends
// 2 (n-1)/n * k * 4 bytes (group_allreduce_sum's ring), with no indices and no header.
//
// The message of randomk with shared_seed (sparse_message.h) is the 32-byte header (k, the seed,
// flags kSparseImplicitIndices and maybe kSparseStratumScaled) and then the k values in the
// encoder's input type. The contribution is fp32 (make_contribution), so they are fp32 and are
// summed in place, at full precision. The summed message, same header, is then decoded as any
// randomk message: the decoder draws the same positions from the seed and applies the unbiased
// stratum scaling, which is linear, so scaling the sum equals summing the scaled values. One
// lossy step (the selection); the sum is exact in fp32 arithmetic, and every rank decodes the
// same bytes, so every rank ends with the same bits.
//
// The header is checked before anything is sent: a message with explicit indices (shared_seed
// false) or 16-bit values would otherwise be summed as if it were k fp32 values. Ranks that
// disagree on k (different counts or warm-up) fail in the ring with a size mismatch.
#include "codecs/sparse_message.h"
#include "codecs/wire_format.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/group_allreduce.h"
#include "common/result.h"

namespace terse {
namespace {

// The layout of this rank's encoded message, refused unless it is k fp32 values with implicit
// indices, exactly `bytes` long.
ncclResult_t shared_values_layout(const CompressedArgs& args, const void* message, size_t bytes,
                                  SparseLayout* layout) {
  WireHeader header;
  TERSE_CHECK(read_header(message, bytes, CodecId::kRandomK, args.count, DecodeContext{}, &header));
  layout->kept = header.param0;
  layout->value_type = DType::kFloat32;
  layout->explicit_indices = (header.flags & kSparseImplicitIndices) == 0;
  if (layout->explicit_indices || header.param1 != static_cast<uint32_t>(DType::kFloat32) ||
      layout->bytes() != bytes) {
    return fail(ncclInvalidUsage,
                "randomk allreduce: this rank's %zu-byte message is not k=%u fp32 values with "
                "indices drawn from the shared seed; codec %s needs shared_seed=true (the "
                "sparse_allgather algorithm runs it otherwise)",
                bytes, header.param0, args.codec->spec().c_str());
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t randomk_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  const int n = context.group.size();
  if (n == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  CompressionScratch& scratch = *context.scratch;
  uint8_t* message = nullptr;
  size_t bytes = 0;
  TERSE_CHECK(encode_whole_contribution(args, context, &message, &bytes));
  SparseLayout layout;
  TERSE_CHECK(shared_values_layout(args, message, bytes, &layout));

  // values_offset() is 32: the fp32 values are 4-byte aligned in the 64-byte aligned scratch.
  float* kept_values = reinterpret_cast<float*>(message + layout.values_offset());
  float* ring_scratch =
      scratch.floats(ScratchSlot::kTertiary, group_allreduce_scratch(layout.kept, n));
  TERSE_CHECK(
      group_allreduce_sum(kept_values, layout.kept, context, context.first_step, ring_scratch));
  float* sum = result_buffer(args, context, ScratchSlot::kAccumulator);
  TERSE_CHECK(decode_message(args, context, message, bytes, sum, args.count, false));
  write_result(args, sum, ElementRange{0, args.count});
  return ncclSuccess;
}

}  // namespace terse
