// Hierarchical compressed allreduce: uncompressed inside each node, where links are fast
// (shared memory, NVLink), compressed only between nodes, where the network is the bottleneck.
//
// Nodes are the distinct host identities of the group (PeerGroup::hosts; TERSE_HOSTID overrides
// a host's identity, so tests and emulated clusters can put several nodes on one machine). The
// lowest group position of each node is its leader; leaders are ordered by that position.
//   1. reduce: every member sends its tensor, in its own dtype (lossless, and half the bytes of
//      fp32 for 16-bit tensors), to its leader in pieces; the leader adds the pieces to its own
//      tensor as fp32, members in position order, while the next pieces arrive;
//   2. the leaders run the planner's inner algorithm (CompressedContext::inner; without one the
//      default for the codec and size, default_compressed_algorithm) on the node sums;
//   3. broadcast: each leader sends its finished result, in the output dtype, to its members.
// Every member ends with its leader's bits, and the leaders with identical bits (the inner
// algorithm guarantees it). With one node, or one rank per node, the default algorithm runs on
// the whole group instead: there is no intra-node traffic to spare.
//
// Device buffers (execution_backend.h): the node sums, the inner algorithm and the result stay in
// the backend's memory, and the transport moves host memory, so what the intra-node phases send
// crosses PCIe: a member copies its tensor to the host and the leader's result back (its dtype's
// bytes, each way); a leader copies each member's pieces to the device, where they are added
// (member count - 1 tensors), and its result to the host once for the broadcast; the inner
// algorithm adds only its encoded messages. The host backend copies nothing: pieces are sent
// from the caller's buffers and received into recv and the scratch, as before.
//
// Error feedback and codec state work at node level, where the compression happens: the leader
// hands its residual entry to the inner algorithm, which adds the residual to the node sum and
// keeps what the encode dropped (momentum and PowerSGD's warm start likewise). Members' entries
// stay unused: their gradients reach the leader exactly. The residual is fp32 whatever the
// tensor's dtype, and make_contribution adds it to the fp32 node sum directly.
//
// Bound: the inner algorithm's over the node sums, whose norms add up to at most the ranks'
// (the norms are subadditive); lossy_steps of the table's row covers every leader count.
//
// Steps: [0, kMaxReducePieces) the reduce's pieces, kBroadcastStep the broadcast, from
// kInnerFirstStep the inner algorithm (however many it uses; should they wrap past 4096 onto
// the first two phases' steps, tags still never collide: a tag carries its sender and a receive
// is posted by one receiver, and phases 1 and 3 only join a leader with its members while the
// inner algorithm only joins leaders).
#include <algorithm>
#include <chrono>
#include <string>
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

// The reduce cuts a tensor into at most this many pieces (larger pieces beyond it).
constexpr uint32_t kMaxReducePieces = 64;
constexpr uint32_t kBroadcastStep = kMaxReducePieces;
constexpr uint32_t kInnerFirstStep = kBroadcastStep + 1;
// Pieces of each member in flight at the leader at a time (double buffering).
constexpr size_t kPiecesInFlight = 2;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class HierarchicalAllreduce {
 public:
  HierarchicalAllreduce(const CompressedArgs& args, const CompressedContext& context,
                        const NodeLayout& layout, const CompressedAlgorithmInfo& inner)
      : args_(args),
        context_(context),
        backend_(backend_of(context)),
        layout_(layout),
        inner_(inner),
        node_(layout.node_of[static_cast<size_t>(context.group.index)]),
        members_(layout.members[static_cast<size_t>(node_)]),
        element_bytes_(dtype_size(args.dtype)) {
    piece_ = std::max<size_t>(1, context.piece_bytes / element_bytes_);
    piece_ = std::max(piece_, (args.count + kMaxReducePieces - 1) / kMaxReducePieces);
    pieces_ = pipeline_piece_count(args.count, piece_);
  }

  ncclResult_t run() {
    const ncclResult_t result = context_.group.index == members_.front() ? lead() : follow();
    // Before the call returns, also on failure: nothing enqueued may outlive it.
    const ncclResult_t finished = backend_.finish();
    return result != ncclSuccess ? result : finished;
  }

 private:
  uint32_t operation(uint32_t step) const {
    return make_operation(context_.sequence, context_.first_step + step);
  }
  int leader_rank() const { return context_.group.rank_at(members_.front()); }
  ElementRange piece(size_t k) const {
    return pipeline_piece(ElementRange{0, args_.count}, piece_, k);
  }
  void add_dense_time(Clock::time_point start) const {
    if (context_.counters != nullptr) context_.counters->dense_seconds += seconds_since(start);
  }

  // A member: its tensor to the leader, piece by piece, then the leader's result into recv
  // (posted only once the sends are done: recv may be send).
  ncclResult_t follow() {
    const auto start = Clock::now();
    const size_t bytes = args_.count * element_bytes_;
    {
      uint8_t* tensor = backend_.host_bytes(context_, ScratchSlot::kOutgoing, args_.send, bytes);
      if (tensor == nullptr) return ncclSystemError;  // an allocation failed (the last error)
      TERSE_CHECK(backend_.copy_bytes_to_host(context_, tensor, args_.send, bytes));
      TERSE_CHECK(backend_.wait_messages());
      InFlightTransfers sends(context_.transport, pieces_, context_.deadline);
      for (size_t k = 0; k < pieces_; ++k) {
        const ElementRange range = piece(k);
        const size_t piece_bytes = range.count * element_bytes_;
        TERSE_CHECK(sends.send(k, leader_rank(), operation(static_cast<uint32_t>(k)),
                               tensor + range.offset * element_bytes_, piece_bytes));
        count_sent(context_, piece_bytes);
      }
      TERSE_CHECK(sends.wait_all());
    }
    add_dense_time(start);
    uint8_t* result = backend_.host_bytes(context_, ScratchSlot::kIncoming, args_.recv, bytes);
    if (result == nullptr) return ncclSystemError;
    InFlightTransfers receive(context_.transport, 1, context_.deadline);
    TERSE_CHECK(receive.recv(0, leader_rank(), operation(kBroadcastStep), result, bytes));
    TERSE_CHECK(receive.wait(0));
    return backend_.copy_bytes_from_host(context_, args_.recv, result, bytes);
  }

  ncclResult_t lead() {
    float* node_sum = backend_.floats(context_, ScratchSlot::kHierarchy, args_.count);
    if (node_sum == nullptr) return ncclSystemError;  // an allocation failed (the last error)
    auto start = Clock::now();
    TERSE_CHECK(reduce(node_sum));
    add_dense_time(start);
    TERSE_CHECK(run_inner(node_sum));
    start = Clock::now();
    TERSE_CHECK(broadcast());
    add_dense_time(start);
    return ncclSuccess;
  }

  // node_sum = this rank's send (fp32) + every member's, added piece by piece in position order.
  ncclResult_t reduce(float* node_sum) {
    const size_t others = members_.size() - 1;
    const size_t piece_bytes = piece_ * element_bytes_;
    uint8_t* incoming = backend_.message_buffer(context_, ScratchSlot::kIncoming,
                                                kPiecesInFlight * others * piece_bytes);
    if (incoming == nullptr) return ncclSystemError;
    const auto slot = [&](size_t member, size_t k) {
      return (k % kPiecesInFlight) * others + member;
    };
    InFlightTransfers receives(context_.transport, kPiecesInFlight * others, context_.deadline);
    const auto post = [&](size_t member, size_t k) {
      const ElementRange range = piece(k);
      return receives.recv(slot(member, k), context_.group.rank_at(members_[member + 1]),
                           operation(static_cast<uint32_t>(k)),
                           incoming + slot(member, k) * piece_bytes, range.count * element_bytes_);
    };
    for (size_t k = 0; k < std::min(pieces_, kPiecesInFlight); ++k) {
      for (size_t member = 0; member < others; ++member) TERSE_CHECK(post(member, k));
    }
    // The own tensor while the first pieces arrive.
    TERSE_CHECK(backend_.load(args_.dtype, args_.send, node_sum, args_.count, false));
    for (size_t k = 0; k < pieces_; ++k) {
      const ElementRange range = piece(k);
      for (size_t member = 0; member < others; ++member) {
        TERSE_CHECK(receives.wait(slot(member, k)));
        TERSE_CHECK(backend_.load_from_host(context_, args_.dtype,
                                            incoming + slot(member, k) * piece_bytes,
                                            node_sum + range.offset, range.count, true));
      }
      if (k + kPiecesInFlight < pieces_) {
        // Piece k's slots take piece k + kPiecesInFlight next: a device backend must have
        // copied their bytes before they are overwritten.
        TERSE_CHECK(backend_.finish());
        for (size_t member = 0; member < others; ++member) {
          TERSE_CHECK(post(member, k + kPiecesInFlight));
        }
      }
    }
    // The inner algorithm receives into the same message buffers.
    return backend_.finish();
  }

  // The default algorithm among the leaders on the node sums. An fp32 result goes straight into
  // recv (scaled there); a 16-bit one is summed in place in the node sum and written after.
  ncclResult_t run_inner(float* node_sum) {
    CompressedArgs inner = args_;
    inner.send = node_sum;
    inner.dtype = DType::kFloat32;
    const bool direct = args_.dtype == DType::kFloat32;
    inner.recv = direct ? args_.recv : node_sum;
    inner.result_scale = direct ? args_.result_scale : 1.0;

    CompressedContext context = context_;
    context.first_step = context_.first_step + kInnerFirstStep;
    context.group = leaders_of(context_.group, layout_);
    TERSE_CHECK(inner_.run(inner, context));
    if (direct) return ncclSuccess;
    return backend_.write_result(args_, node_sum, ElementRange{0, args_.count});
  }

  // The finished result, in the output dtype, to every member at once.
  ncclResult_t broadcast() {
    const size_t others = members_.size() - 1;
    if (others == 0) return ncclSuccess;
    const size_t bytes = args_.count * element_bytes_;
    uint8_t* result = backend_.host_bytes(context_, ScratchSlot::kOutgoing, args_.recv, bytes);
    if (result == nullptr) return ncclSystemError;
    TERSE_CHECK(backend_.copy_bytes_to_host(context_, result, args_.recv, bytes));
    TERSE_CHECK(backend_.wait_messages());
    InFlightTransfers sends(context_.transport, others, context_.deadline);
    for (size_t member = 0; member < others; ++member) {
      TERSE_CHECK(sends.send(member, context_.group.rank_at(members_[member + 1]),
                             operation(kBroadcastStep), result, bytes));
      count_sent(context_, bytes);
    }
    return sends.wait_all();
  }

  const CompressedArgs& args_;
  const CompressedContext& context_;
  ExecutionBackend& backend_;
  const NodeLayout& layout_;
  const CompressedAlgorithmInfo& inner_;
  const int node_;
  const std::vector<int>& members_;
  const size_t element_bytes_;
  size_t piece_ = 1;
  size_t pieces_ = 1;
};

}  // namespace

bool hierarchical_applies(const GroupShape& shape, bool) {
  return shape.nodes > 1;
}

size_t hierarchical_stage_residual_elements(const CompressedAlgorithmInfo* inner,
                                            const Codec& codec, size_t count, DType dtype,
                                            const PeerGroup& group) {
  if (inner == nullptr) inner = default_compressed_algorithm(codec, count, dtype_size(dtype));
  if (!group.hosts.empty() && group.hosts.size() != group.ranks.size()) return 0;  // refused
  const NodeLayout layout = layout_of(group);
  if (!hierarchy_pays(layout)) return inner->stage_elements(codec, count, dtype, group);
  // The leaders' group, as run_inner() makes it; only its size matters to the chunks.
  return inner->stage_elements(codec, count, DType::kFloat32, leaders_of(group, layout));
}

ncclResult_t hierarchical_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  const PeerGroup& group = context.group;
  if (group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  // Every check below reads what every rank of the call holds alike, so all fail together.
  if (!group.hosts.empty() && group.hosts.size() != group.ranks.size()) {
    return fail(ncclInternalError,
                "hierarchical allreduce on rank %d: %zu host identities for a group of %d ranks",
                group.rank_at(group.index), group.hosts.size(), group.size());
  }
  const CompressedAlgorithmInfo* inner =
      context.inner != nullptr
          ? context.inner
          : default_compressed_algorithm(*args.codec, args.count, dtype_size(args.dtype));
  const NodeLayout layout = layout_of(group);
  if (!hierarchy_pays(layout)) return inner->run(args, context);
  HierarchicalAllreduce hierarchical(args, context, layout, *inner);
  return hierarchical.run();
}

}  // namespace terse
