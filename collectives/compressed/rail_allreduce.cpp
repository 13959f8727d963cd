// Rail-aligned compressed allreduce: uncompressed inside each node, compressed between nodes, with
// every rank of a node carrying its own share across the network. For communicators whose nodes
// hold the same number L > 1 of ranks (group positions in node order, topology/node_layout.h):
//
//   1. reduce-scatter inside the node: the tensor is cut into L near-equal chunks; local rank i
//      receives chunk i from every other rank of its node (in their own dtype: lossless) and
//      adds them in local-index order in fp32, its own included at its place: the node's sum of
//      chunk i;
//   2. local rank i of every node runs the planner's inner algorithm (CompressedContext::inner;
//      without one the table's default for the codec and chunk) over its rail: the group of
//      local rank i of each node, in node order. On a node with one NIC per local rank
//      (transport/nic_binding.h) each rail stays on its own NIC; on one with a single NIC the L
//      rails share it, and the codec work is still spread over L ranks instead of one leader;
//   3. allgather inside the node: local rank i sends its finished chunk, in the output dtype, to
//      every other rank of its node.
// Every rank of a rail ends with the same bits (the inner algorithm's guarantee), and the ranks
// of a node copy each other's chunks, so every rank holds identical results.
//
// Error feedback: local rank i keeps the residual of chunk i, at the chunk's own offset of the
// tensor's residual (CompressedArgs::residual_offset), so residual index = tensor element. The
// codec must keep no per-tensor state (its state would describe the whole tensor, and each rank
// encodes one chunk of it).
//
// Device buffers (execution_backend.h): the node chunk, the inner algorithm and the result stay
// in the backend's memory; what the intra-node phases exchange goes through host memory, the
// transport's, and so crosses PCIe: every rank copies the chunks it sends to its node's other
// ranks (the reduce-scatter: all but its own) and its finished chunk (the allgather) to the
// host, the tensor's bytes in all, and to the device the chunks it receives (local ranks - 1 of
// its own for the sums, then every other chunk of the result); the inner algorithm adds only its
// encoded messages. The host backend copies nothing, as before.
//
// Bound: the inner algorithm's over the node sums of each chunk; lossy_steps covers every inner
// choice, as for the hierarchical algorithm.
//
// Uneven layouts (nodes of different sizes), one node, or one rank per node: the inner algorithm
// runs on the whole group, as a flat call would.
//
// Steps: 0 the reduce-scatter, 1 the allgather, from kInnerFirstStep the inner algorithm (phases
// 1 and 3 only join ranks of one node, the inner algorithm only ranks of one rail).
#include <algorithm>
#include <chrono>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/compressed/node_groups.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

constexpr uint32_t kReduceScatterStep = 0;
constexpr uint32_t kAllgatherStep = 1;
constexpr uint32_t kInnerFirstStep = 2;

using Clock = std::chrono::steady_clock;

const CompressedAlgorithmInfo& inner_for(const CompressedArgs& args,
                                         const CompressedContext& context, size_t count) {
  return context.inner != nullptr
             ? *context.inner
             : *default_compressed_algorithm(*args.codec, count, dtype_size(args.dtype));
}

class RailAllreduce {
 public:
  RailAllreduce(const CompressedArgs& args, const CompressedContext& context,
                const NodeLayout& layout)
      : args_(args),
        context_(context),
        backend_(backend_of(context)),
        layout_(layout),
        node_(layout.node_of[static_cast<size_t>(context.group.index)]),
        members_(layout.members[static_cast<size_t>(node_)]),
        local_(layout.local_index(context.group.index)),
        element_bytes_(dtype_size(args.dtype)) {}

  ncclResult_t run() {
    const ncclResult_t result = run_phases();
    // Before the call returns, also on failure: nothing enqueued may outlive it.
    const ncclResult_t finished = backend_.finish();
    return result != ncclSuccess ? result : finished;
  }

 private:
  int local_count() const { return static_cast<int>(members_.size()); }
  ElementRange chunk(int local) const { return rail_chunk(args_.count, local_count(), local); }
  int member_rank(int local) const {
    return context_.group.rank_at(members_[static_cast<size_t>(local)]);
  }
  uint32_t operation(uint32_t step) const {
    return make_operation(context_.sequence, context_.first_step + step);
  }
  void add_dense_time(Clock::time_point start) const {
    if (context_.counters == nullptr) return;
    context_.counters->dense_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  uint8_t* at(const void* base, const ElementRange& range) const {
    return static_cast<uint8_t*>(const_cast<void*>(base)) + range.offset * element_bytes_;
  }

  ncclResult_t run_phases() {
    const ElementRange mine = chunk(local_);
    float* node_chunk = backend_.floats(context_, ScratchSlot::kHierarchy, mine.count);
    if (node_chunk == nullptr) return ncclSystemError;  // an allocation failed (the last error)
    auto start = Clock::now();
    TERSE_CHECK(reduce_scatter(node_chunk));
    add_dense_time(start);
    TERSE_CHECK(run_inner(node_chunk, mine));
    start = Clock::now();
    TERSE_CHECK(allgather());
    add_dense_time(start);
    return ncclSuccess;
  }

  // node_chunk = the node's sum of this rank's chunk, members added in local-index order.
  ncclResult_t reduce_scatter(float* node_chunk) {
    const int local = local_count();
    const ElementRange mine = chunk(local_);
    const size_t others = static_cast<size_t>(local - 1);
    uint8_t* incoming = backend_.message_buffer(context_, ScratchSlot::kIncoming,
                                                others * mine.count * element_bytes_);
    uint8_t* send = backend_.host_bytes(context_, ScratchSlot::kOutgoing, args_.send,
                                        args_.count * element_bytes_);
    if (incoming == nullptr || send == nullptr) return ncclSystemError;
    const auto slot_of = [&](int member) {
      return static_cast<size_t>(member < local_ ? member : member - 1);
    };
    // Receives first, then every other member's chunk from this rank's send buffer (through the
    // host on a device backend).
    InFlightTransfers transfers(context_.transport, 2 * others, context_.deadline);
    for (int member = 0; member < local; ++member) {
      if (member == local_) continue;
      TERSE_CHECK(transfers.recv(
          slot_of(member), member_rank(member), operation(kReduceScatterStep),
          incoming + slot_of(member) * mine.count * element_bytes_, mine.count * element_bytes_));
    }
    for (int member = 0; member < local; ++member) {
      if (member == local_) continue;
      const ElementRange theirs = chunk(member);
      TERSE_CHECK(backend_.copy_bytes_to_host(context_, at(send, theirs), at(args_.send, theirs),
                                              theirs.count * element_bytes_));
    }
    TERSE_CHECK(backend_.wait_messages());
    for (int member = 0; member < local; ++member) {
      if (member == local_) continue;
      const ElementRange theirs = chunk(member);
      const size_t bytes = theirs.count * element_bytes_;
      TERSE_CHECK(transfers.send(others + slot_of(member), member_rank(member),
                                 operation(kReduceScatterStep), at(send, theirs), bytes));
      count_sent(context_, bytes);
    }
    for (int member = 0; member < local; ++member) {
      const bool first = member == 0;
      if (member == local_) {
        TERSE_CHECK(
            backend_.load(args_.dtype, at(args_.send, mine), node_chunk, mine.count, !first));
        continue;
      }
      TERSE_CHECK(transfers.wait(slot_of(member)));
      TERSE_CHECK(backend_.load_from_host(context_, args_.dtype,
                                          incoming + slot_of(member) * mine.count * element_bytes_,
                                          node_chunk, mine.count, !first));
    }
    // recv may be send: the sends must have left before the allgather writes recv.
    TERSE_CHECK(transfers.wait_all());
    // The inner algorithm receives into the same message buffers.
    return backend_.finish();
  }

  // The inner algorithm on this rank's rail; an fp32 result goes straight into recv (scaled
  // there), a 16-bit one is summed in place in the node chunk and written after.
  ncclResult_t run_inner(float* node_chunk, const ElementRange& mine) {
    CompressedArgs inner = args_;
    inner.send = node_chunk;
    inner.count = mine.count;
    inner.dtype = DType::kFloat32;
    inner.residual_offset = args_.residual_offset + mine.offset;
    const bool direct = args_.dtype == DType::kFloat32;
    inner.recv = direct ? static_cast<void*>(static_cast<float*>(args_.recv) + mine.offset)
                        : static_cast<void*>(node_chunk);
    inner.result_scale = direct ? args_.result_scale : 1.0;

    CompressedContext context = context_;
    context.first_step = context_.first_step + kInnerFirstStep;
    context.inner = nullptr;
    PeerGroup& rail = context.group;
    rail.ranks.clear();
    rail.hosts.clear();
    for (const std::vector<int>& members : layout_.members) {
      const int position = members[static_cast<size_t>(local_)];
      rail.ranks.push_back(context_.group.rank_at(position));
      rail.hosts.push_back(context_.group.hosts[static_cast<size_t>(position)]);
    }
    rail.index = node_;
    TERSE_CHECK(inner_for(args_, context_, mine.count).run(inner, context));
    if (direct) return ncclSuccess;
    return backend_.write_result(args_, node_chunk, mine);
  }

  // This rank's finished chunk to every other member; theirs into recv (each through the host on
  // a device backend; the host backend sends and receives in recv itself).
  ncclResult_t allgather() {
    const int local = local_count();
    const size_t others = static_cast<size_t>(local - 1);
    const ElementRange mine = chunk(local_);
    const size_t bytes = args_.count * element_bytes_;
    uint8_t* outgoing = backend_.host_bytes(context_, ScratchSlot::kOutgoing, args_.recv, bytes);
    uint8_t* incoming = backend_.host_bytes(context_, ScratchSlot::kIncoming, args_.recv, bytes);
    if (outgoing == nullptr || incoming == nullptr) return ncclSystemError;
    TERSE_CHECK(backend_.copy_bytes_to_host(context_, at(outgoing, mine), at(args_.recv, mine),
                                            mine.count * element_bytes_));
    TERSE_CHECK(backend_.wait_messages());
    InFlightTransfers transfers(context_.transport, 2 * others, context_.deadline);
    size_t slot = 0;
    for (int member = 0; member < local; ++member) {
      if (member == local_) continue;
      const ElementRange theirs = chunk(member);
      TERSE_CHECK(transfers.recv(slot++, member_rank(member), operation(kAllgatherStep),
                                 at(incoming, theirs), theirs.count * element_bytes_));
    }
    for (int member = 0; member < local; ++member) {
      if (member == local_) continue;
      const size_t chunk_bytes = mine.count * element_bytes_;
      TERSE_CHECK(transfers.send(slot++, member_rank(member), operation(kAllgatherStep),
                                 at(outgoing, mine), chunk_bytes));
      count_sent(context_, chunk_bytes);
    }
    TERSE_CHECK(transfers.wait_all());
    for (int member = 0; member < local; ++member) {
      if (member == local_) continue;
      const ElementRange theirs = chunk(member);
      TERSE_CHECK(backend_.copy_bytes_from_host(
          context_, at(args_.recv, theirs), at(incoming, theirs), theirs.count * element_bytes_));
    }
    return ncclSuccess;
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  ExecutionBackend& backend_;
  const NodeLayout& layout_;
  const int node_;
  const std::vector<int>& members_;
  const int local_;
  const size_t element_bytes_;
};

}  // namespace

bool rail_applies(const GroupShape& shape, bool equal_nodes) {
  return shape.nodes > 1 && shape.most_ranks_per_node > 1 && equal_nodes;
}

size_t rail_stage_residual_elements(const CompressedAlgorithmInfo* inner, const Codec& codec,
                                    size_t count, DType dtype, const PeerGroup& group) {
  if (!group.hosts.empty() && group.hosts.size() != group.ranks.size()) return 0;  // refused
  const NodeLayout layout = layout_of(group);
  if (inner == nullptr) inner = default_compressed_algorithm(codec, count, dtype_size(dtype));
  if (!rails_apply(layout)) return inner->stage_elements(codec, count, dtype, group);
  // The largest chunk any rank reduces, over a rail of one rank per node.
  const int local = static_cast<int>(layout.members.front().size());
  const size_t largest = rail_chunk(count, local, 0).count;
  PeerGroup rail;
  rail.ranks.resize(layout.members.size());
  return inner->stage_elements(codec, largest, DType::kFloat32, rail);
}

ncclResult_t rail_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  const PeerGroup& group = context.group;
  if (group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  if (!group.hosts.empty() && group.hosts.size() != group.ranks.size()) {
    return fail(ncclInternalError,
                "rail allreduce on rank %d: %zu host identities for a group of %d ranks",
                group.rank_at(group.index), group.hosts.size(), group.size());
  }
  const NodeLayout layout = layout_of(group);
  if (!rails_apply(layout)) return inner_for(args, context, args.count).run(args, context);
  RailAllreduce rail(args, context, layout);
  return rail.run();
}

}  // namespace terse
