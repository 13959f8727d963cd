// Random-K with a shared seed: every rank draws the same k positions (the seed of the call is
// the same on every rank, compression_engine.cpp), so the k kept values of all ranks line up
// and a dense, exact sum of just those k values is the whole allreduce. Each rank sends
// 2 (n-1)/n * k * 4 bytes, with no indices at all.
//
// The message of randomk with shared_seed is the 32-byte header and then the k values, in the
// input's type: the contribution is fp32 (make_contribution), so they are fp32 and can be summed
// in place. The summed message is then decoded as any randomk message (which applies the
// unbiased stratum scaling), into the result. One lossy step (the selection); the sum is exact
// in fp32 arithmetic, and every rank decodes the same bytes.
#include "codecs/wire_format.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/group_allreduce.h"
#include "common/result.h"

namespace terse {

ncclResult_t randomk_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  const int n = context.group.size();
  if (n == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  CompressionScratch& scratch = *context.scratch;
  float* values = scratch.floats(ScratchSlot::kValues, args.count);
  TERSE_CHECK(make_contribution(args, context, values));
  const size_t capacity = message_capacity(args, args.count);
  uint8_t* message = scratch.bytes(ScratchSlot::kOutgoing, capacity);
  size_t bytes = 0;
  TERSE_CHECK(encode_contribution(args, context, values, ElementRange{0, args.count}, message,
                                  capacity, &bytes));
  if (bytes < kWireHeaderBytes || (bytes - kWireHeaderBytes) % sizeof(float) != 0) {
    return fail(ncclInternalError,
                "randomk allreduce: a %zu-byte message is not a header and fp32 values; the "
                "codec %s must keep shared_seed=true",
                bytes, args.codec->spec().c_str());
  }
  const size_t kept = (bytes - kWireHeaderBytes) / sizeof(float);
  float* kept_values = reinterpret_cast<float*>(message + kWireHeaderBytes);
  float* ring_scratch = scratch.floats(ScratchSlot::kTertiary, group_allreduce_scratch(kept, n));
  TERSE_CHECK(group_allreduce_sum(kept_values, kept, context, context.first_step, ring_scratch));
  float* sum = scratch.floats(ScratchSlot::kAccumulator, args.count);
  TERSE_CHECK(decode_message(args, context, message, bytes, sum, args.count, false));
  write_result(args, sum, ElementRange{0, args.count});
  return ncclSuccess;
}

}  // namespace terse
