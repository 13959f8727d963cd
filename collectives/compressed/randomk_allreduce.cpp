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
//
// Non-finite inputs: a rank's message may end with an escape section (nonfinite_escapes.h) for
// elements that were NaN or Inf, which a sum of values cannot carry. The ring therefore sums one
// more float, 1 when the rank has escapes and 0 otherwise; when the sum is not 0 (every rank sees
// the same bits), the ranks allgather their escape sections and every rank adds all of them, in
// position order, to the decoded result, so element i is non-finite wherever any rank's was. The
// common, all-finite case costs 4 bytes.
//
// Memory: the contribution, its encode (the k values picked from the shared seed) and the
// decode of the summed message go through the call's execution backend (execution_backend.h):
// on device buffers the message alone crosses PCIe each way (k values and a header) and the
// ring sums host memory. A call where some rank had escapes (a host-buffer rank's NaN or Inf;
// device encodes carry none) decodes on the host instead, adds the escapes there, and the fp32
// result crosses to the device once (copy_from_host).
#include <cstring>
#include <vector>

#include "codecs/nonfinite_escapes.h"
#include "codecs/sparse_message.h"
#include "codecs/wire_format.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/compressed/group_allgatherv.h"
#include "collectives/compressed/group_allreduce.h"
#include "common/result.h"

namespace terse {
namespace {

// The layout of this rank's encoded message (without its escape section), refused unless it is
// k fp32 values with implicit indices, exactly `bytes` long.
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

// Splits this rank's message into the codec's bytes and its escape section (empty without one),
// clearing the escape flag so that the codec's bytes decode alone.
ncclResult_t split_escapes(uint8_t* message, size_t bytes, size_t count, size_t* finite_bytes,
                           std::vector<uint8_t>* section) {
  section->clear();
  *finite_bytes = bytes;
  if ((message[offsetof(WireHeader, flags)] & kWireEscapesFlag) == 0) return ncclSuccess;
  Escapes escapes;
  size_t section_bytes = 0;
  TERSE_CHECK(read_escapes(message, bytes, count, kWireHeaderBytes, &escapes, &section_bytes));
  *finite_bytes = bytes - section_bytes;
  section->assign(message + *finite_bytes, message + bytes);
  message[offsetof(WireHeader, flags)] &= static_cast<uint8_t>(~kWireEscapesFlag);
  return ncclSuccess;
}

// Adds every rank's escaped elements to `sum`, in group position order (after the ring).
ncclResult_t add_every_ranks_escapes(const CompressedArgs& args, const CompressedContext& context,
                                     uint32_t first_step, const std::vector<uint8_t>& own,
                                     float* sum) {
  std::vector<uint64_t> sizes(static_cast<size_t>(context.group.size()));
  TERSE_CHECK(exchange_sizes(context, first_step, own.size(), sizes.data()));
  const size_t most = max_escape_section_bytes(args.count);
  for (size_t j = 0; j < sizes.size(); ++j) {
    if (sizes[j] > most) {
      return fail(ncclInvalidUsage,
                  "randomk allreduce: rank %d announced %llu bytes of non-finite escapes, more "
                  "than the %zu a %zu-element tensor can have",
                  context.group.rank_at(static_cast<int>(j)),
                  static_cast<unsigned long long>(sizes[j]), most, args.count);
    }
  }
  std::vector<std::vector<uint8_t>> sections;
  TERSE_CHECK(gather_blocks(context, first_step, sizes, own.data(), &sections));
  for (const std::vector<uint8_t>& section : sections) {
    if (section.empty()) continue;
    Escapes escapes;
    size_t section_bytes = 0;
    TERSE_CHECK(
        read_escapes(section.data(), section.size(), args.count, 0, &escapes, &section_bytes));
    apply_escapes(escapes, sum, DType::kFloat32, /*accumulate=*/true);
  }
  return ncclSuccess;
}

// The call on `backend` (group of two or more, count > 0).
ncclResult_t run_randomk(const CompressedArgs& args, const CompressedContext& context,
                         ExecutionBackend& backend) {
  const int n = context.group.size();
  const size_t capacity = message_capacity(args, args.count);
  const bool fused = backend.fuses_contribution(args);
  float* contribution = fused ? nullptr : backend.floats(context, ScratchSlot::kValues, args.count);
  uint8_t* message = backend.message_buffer(context, ScratchSlot::kOutgoing, capacity);
  if ((!fused && contribution == nullptr) || message == nullptr) return ncclSystemError;
  const ElementRange whole{0, args.count};
  size_t bytes = 0;
  TERSE_CHECK(
      backend.encode_contribution(args, context, contribution, whole, message, capacity, &bytes));
  TERSE_CHECK(backend.wait_messages());
  std::vector<uint8_t> escapes;
  size_t finite_bytes = 0;
  TERSE_CHECK(split_escapes(message, bytes, args.count, &finite_bytes, &escapes));
  SparseLayout layout;
  TERSE_CHECK(shared_values_layout(args, message, finite_bytes, &layout));

  // The k values and the has-escapes float, summed exactly in one ring (host memory).
  const size_t summed = layout.kept + 1;
  float* values = context.scratch->floats(ScratchSlot::kSecondary, summed);
  std::memcpy(values, message + layout.values_offset(), layout.kept * sizeof(float));
  values[layout.kept] = escapes.empty() ? 0.0f : 1.0f;
  TERSE_CHECK(group_allreduce_sum(values, summed, context, context.first_step));
  std::memcpy(message + layout.values_offset(), values, layout.kept * sizeof(float));
  float* sum = backend.result_floats(args, context, ScratchSlot::kAccumulator);
  if (sum == nullptr) return ncclSystemError;
  if (values[layout.kept] == 0.0f) {
    TERSE_CHECK(backend.decode(args, context, message, finite_bytes, sum, args.count, false));
    return backend.write_result(args, sum, whole);
  }
  // On a device backend its pinned message memory (kIncoming, unused by this algorithm): the
  // result's copy to the device is then asynchronous.
  float* host_sum = backend.memory() == Memory::kHost
                        ? sum
                        : reinterpret_cast<float*>(backend.message_buffer(
                              context, ScratchSlot::kIncoming, args.count * sizeof(float)));
  if (host_sum == nullptr) return ncclSystemError;
  TERSE_CHECK(decode_message(args, context, message, finite_bytes, host_sum, args.count, false));
  TERSE_CHECK(add_every_ranks_escapes(args, context, group_allreduce_steps(n), escapes, host_sum));
  TERSE_CHECK(backend.copy_from_host(context, sum, host_sum, args.count));
  return backend.write_result(args, sum, whole);
}

}  // namespace

ncclResult_t randomk_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  if (context.group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  ExecutionBackend& backend = backend_of(context);
  const ncclResult_t result = run_randomk(args, context, backend);
  // Whatever the run returned: device work it enqueued may still read the call's buffers.
  const ncclResult_t finished = backend.finish();
  return result != ncclSuccess ? result : finished;
}

}  // namespace terse
