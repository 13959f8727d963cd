// What one compressed allreduce runs with, in the form every compressed algorithm takes
// (docs/design.md sections 3 and 5). The compression engine (compression_engine.h) fills it from
// the policy's decision: the codec, the tensor's residual entry, the encode settings of this step.
//
// Compressed algorithms reduce a *sum* (or an average: a sum scaled by 1/n at the end) of
// fp32/fp16/bf16 tensors in host memory (or device memory, for an algorithm that runs its codec
// work through a device execution backend: CompressedContext::backend). They run over a
// PeerGroup (collectives/peer_group.h, shared with the dense allreduces): a list of transport
// ranks this call spans (all ranks of the
// communicator, or the node leaders of a hierarchical call), so the same code serves the flat
// and the hierarchical case. Every rank of the group must call
// with the same count, dtype, codec and algorithm, and every rank ends with bitwise identical
// results (the algorithms decode and add in a fixed order).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/dtype.h"
#include "collectives/compressed/compression_scratch.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "collectives/compressed/memory/residual_entry.h"
#include "collectives/compressed/memory/tensor_key.h"
#include "collectives/peer_group.h"
#include "transport/deadline.h"

namespace terse {

class Transport;
class ExecutionBackend;          // execution_backend.h
struct CompressedAlgorithmInfo;  // compressed_algorithm_table.h

// What a call did, accumulated by the algorithms (the engine adds it to the statistics).
struct CompressionCounters {
  uint64_t wire_bytes = 0;    // bytes this rank sent (messages, headers included)
  uint64_t messages = 0;      // messages this rank sent
  double encode_seconds = 0;  // time in Codec::encode (and residual compensation)
  double decode_seconds = 0;  // time in Codec::decode
  double dense_seconds = 0;   // time in uncompressed phases (hierarchical intra-node steps)
  // Bytes a device backend copied between device and host memory (cuda_backend.h): encoded
  // messages, so they stay near wire_bytes, far below the tensor's bytes, except for what a
  // hierarchical or rail call's intra-node phases exchange (execution_backend.h).
  uint64_t pcie_bytes_to_host = 0;
  uint64_t pcie_bytes_to_device = 0;
};

struct CompressedArgs {
  const void* send = nullptr;  // count elements of dtype
  void* recv = nullptr;        // count elements of dtype; may equal send
  size_t count = 0;
  DType dtype = DType::kFloat32;
  // Applied to the sum when writing recv: 1, or 1/nranks of the communicator for ncclAvg (also
  // when the call spans only part of it, as the inner step of a hierarchical call does).
  double result_scale = 1.0;

  // The codec of this call, never null. Its family decides which algorithms may run it
  // (compressed_algorithm_table.h).
  Codec* codec = nullptr;
  // The tensor's residual memory entry (error feedback, codec state, and the stage residual of
  // algorithms that keep a second one: scatter-reduce-allgather's owner residual), or null when
  // the policy asked for memory none and the codec keeps no state, or when the tensor runs
  // without memory because residual memory did not admit it.
  ResidualEntry* entry = nullptr;
  // Seed, step, warm-up progress and matrix shape for the encodes of this call; error, state
  // and memory are filled per encode (contribution.h). The seed is the same on every rank.
  EncodeContext encode;
  // Where element 0 of this call sits in the entry's residual: 0, or the offset of the chunk a
  // rail call reduces (rail_allreduce.cpp), so that residual index = tensor element everywhere.
  // Algorithms reach the residual through call_residual() (contribution.h).
  size_t residual_offset = 0;
};

struct CompressedContext {
  Transport* transport = nullptr;
  // The collective's operation number; algorithms tag their messages with
  // make_operation(sequence, first_step + their own step) so that phases of one call
  // (hierarchical) never mix. Steps wrap at 4096 (tag_layout.h).
  uint32_t sequence = 0;
  uint32_t first_step = 0;
  Deadline deadline = Deadline::at({});
  PeerGroup group;
  // The hierarchical algorithm's algorithm between node leaders, as the planner chose it; null:
  // the table's default for the codec and size.
  const CompressedAlgorithmInfo* inner = nullptr;
  // Pipeline piece size for algorithms that cut messages (TERSE_PIECE_BYTES).
  size_t piece_bytes = size_t{1} << 20;
  // Reused across calls of one communicator: no allocation on the hot path once warm.
  CompressionScratch* scratch = nullptr;
  CompressionCounters* counters = nullptr;
  // Where the codec work runs (execution_backend.h): null for host buffers (host_backend()).
  // Every compressed algorithm is written against it, so each takes a device backend too.
  ExecutionBackend* backend = nullptr;
};

using CompressedAlgorithmFunction = ncclResult_t (*)(const CompressedArgs& args,
                                                     const CompressedContext& context);

}  // namespace terse
