// Ring allreduce: a ring reduce-scatter followed by a ring allgather (ring_pattern.h), each rank
// sending 2(n-1)/n of the buffer, which is optimal in bandwidth; its 2(n-1) sequential steps make
// it a poor choice for small messages (allreduce_selection.h has the measured boundary).
//
// Pipelining. Every block is cut into pieces of context.piece_bytes (TERSE_PIECE_BYTES), and of
// at most Transport::kSharedMemoryEagerBytes when the whole group runs on one host, so that
// every piece travels in UCX's eager protocol over shared memory (two copies at memory speed,
// against a cma rendezvous that runs 4x slower than memcpy: transport.h). One step of the ring
// becomes several messages ("units", numbered in the order both neighbours handle them: the
// reduce-scatter's steps, then the allgather's, pieces in order within a step). A unit's piece is
// sent once its data is final here (the previous step's unit of the same piece has been reduced
// or received) and it is at most kSendsAhead units ahead, receives are posted kReceivesAhead
// units ahead into a ring of scratch slots, and the worker is progressed between slices of every
// reduction, so the next pieces arrive while this one is reduced.
//
// Buffers. The reduce-scatter accumulates in `recv`: a received piece lands in scratch and is
// combined with this rank's own contribution into `recv` in one pass (own (op) received; a
// contribution that must be scaled, PreMulSum/average, is scaled into `recv` first). The
// allgather receives straight into `recv`, but a piece may only be overwritten once the
// reduce-scatter's send of the same region (the same step and piece, exactly (n-1) * pieces
// units earlier) has finished. `send` is only read, so send == recv (in place) needs nothing
// special.
//
// Groups. The ring runs over positions of an ordered group (GroupPhase, allreduce_algorithms.h):
// position p receives from the rank at p-1 and sends to the rank at p+1, and the whole
// communicator is the group of every rank in rank order. The tag of a unit is its ring step
// (first_step + step); pieces of one step share it, which is safe because each link's messages
// are sent and received in unit order and UCX matches a sender's messages of one tag in order.
//
// No deadlock: a rank blocks only on (a) the receive of the unit it handles, whose send the
// previous rank posts once it has handled the unit a step earlier and the units up to
// kSendsAhead before it (all numbered lower), or (b) the send of a
// unit (n-1) * pieces units before the one it handles, which the next rank receives into a
// receive it posted before waiting on anything newer. Following such waits around the ring the
// unit numbers strictly decrease, so they cannot close a cycle.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/algorithm_scratch.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/reduce_op_stages.h"
#include "collectives/reduction.h"
#include "collectives/ring_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Receives posted ahead of the unit being reduced (and so scratch slots): enough to keep the
// link busy while one piece is reduced, few enough that scratch stays a few pieces.
constexpr size_t kReceivesAhead = 4;
// Sends posted ahead of the unit being handled. A piece small enough for UCX's eager protocol
// is copied to the receiver whether or not it has posted the receive, and one it has not is
// held by the receiver's UCX until it does: sending no further ahead than the receiver posts
// (both handle units in the same order at about the same pace) keeps that memory a few pieces.
constexpr size_t kSendsAhead = kReceivesAhead;
// The worker is progressed after every slice this big of a reduction.
constexpr size_t kReduceSliceBytes = size_t{128} << 10;
// At most this many pieces per block (pieces grow beyond context.piece_bytes if needed): more
// would not pipeline any better, and every unit holds two request slots.
constexpr size_t kMaxPiecesPerBlock = 1024;

// The group's size and this rank's position in it.
int group_size(const AlgorithmContext& context, const GroupPhase& phase) {
  return phase.group != nullptr ? phase.group->size() : context.transport->nranks();
}
int group_position(const AlgorithmContext& context, const GroupPhase& phase) {
  return phase.group != nullptr ? phase.group->index : context.transport->rank();
}
int rank_at(const GroupPhase& phase, int position) {
  return phase.group != nullptr ? phase.group->rank_at(position) : position;
}
// Whether every rank of the group runs on this host (the same host identity, which every rank
// knows of every other, so all agree).
bool group_on_one_host(const AlgorithmContext& context, const GroupPhase& phase) {
  const Transport& transport = *context.transport;
  const std::string& first = transport.host_identity(rank_at(phase, 0));
  for (int position = 1; position < group_size(context, phase); ++position) {
    if (transport.host_identity(rank_at(phase, position)) != first) return false;
  }
  return true;
}

// Elements per piece: context.piece_bytes worth (at most Transport::kSharedMemoryEagerBytes when
// the group is on one host), but no more than kMaxPiecesPerBlock pieces for the largest block
// (block 0). Every rank of the group computes the same.
size_t ring_piece_elements(const AlgorithmContext& context, ncclDataType_t type,
                           size_t largest_block, bool one_host) {
  AlgorithmContext pieces = context;
  if (one_host) {
    pieces.piece_bytes = std::min(pieces.piece_bytes, Transport::kSharedMemoryEagerBytes);
  }
  const size_t fewest = (largest_block + kMaxPiecesPerBlock - 1) / kMaxPiecesPerBlock;
  return std::max(piece_elements(pieces, type), fewest);
}

class RingAllreduce {
 public:
  RingAllreduce(const CollectiveArgs& args, const AlgorithmContext& context,
                const GroupPhase& phase)
      : args_(args),
        context_(context),
        transport_(context.transport),
        ring_(group_position(context, phase), group_size(context, phase)),
        next_rank_(rank_at(phase, ring_.next())),
        previous_rank_(rank_at(phase, ring_.previous())),
        first_step_(phase.first_step),
        sent_(phase.sent),
        element_bytes_(nccl_type_size(args.type)),
        piece_elements_(ring_piece_elements(context, args.type, ring_.block(args.count, 0).count,
                                            group_on_one_host(context, phase))),
        pieces_(pipeline_piece_count(ring_.block(args.count, 0).count, piece_elements_)),
        phase_units_(static_cast<size_t>(ring_.steps()) * pieces_),
        units_(2 * phase_units_),
        slots_(std::min(kReceivesAhead, units_)),
        slot_elements_(std::min(piece_elements_, ring_.block(args.count, 0).count)),
        scratch_(slots_ * slot_elements_ * element_bytes_, context.scratch),
        transfers_(transport_, 2 * units_, context.deadline, context.transfer_slots) {}

  ncclResult_t run() {
    for (size_t unit = 0; unit < units_; ++unit) {
      TERSE_CHECK(post_ready_sends(unit));
      TERSE_CHECK(post_receives(unit));
      TERSE_CHECK(transfers_.wait(recv_slot(unit)));
      if (unit < phase_units_) reduce_received(unit);
    }
    return transfers_.wait_all();
  }

 private:
  bool in_reduce_scatter(size_t unit) const { return unit < phase_units_; }
  int step_of(size_t unit) const { return static_cast<int>((unit % phase_units_) / pieces_); }
  size_t piece_of(size_t unit) const { return unit % pieces_; }
  size_t send_slot(size_t unit) const { return unit; }
  size_t recv_slot(size_t unit) const { return units_ + unit; }
  uint32_t operation(size_t unit) const {
    return make_operation(context_.sequence, first_step_ + static_cast<uint32_t>(unit / pieces_));
  }

  ElementRange piece(int block, size_t unit) const {
    return pipeline_piece(ring_.block(args_.count, block), piece_elements_, piece_of(unit));
  }
  ElementRange send_range(size_t unit) const {
    const int step = step_of(unit);
    return piece(in_reduce_scatter(unit) ? ring_.reduce_scatter_send_block(step)
                                         : ring_.allgather_send_block(step),
                 unit);
  }
  ElementRange recv_range(size_t unit) const {
    const int step = step_of(unit);
    return piece(in_reduce_scatter(unit) ? ring_.reduce_scatter_recv_block(step)
                                         : ring_.allgather_recv_block(step),
                 unit);
  }

  uint8_t* recv_at(const ElementRange& range) const {
    return static_cast<uint8_t*>(args_.recv) + range.offset * element_bytes_;
  }
  const uint8_t* send_at(const ElementRange& range) const {
    return static_cast<const uint8_t*>(args_.send) + range.offset * element_bytes_;
  }
  uint8_t* scratch_slot(size_t unit) {
    return scratch_.data() + (unit % slots_) * slot_elements_ * element_bytes_;
  }

  // Posts, in unit order, every send whose data is final (the first step's pieces, this rank's
  // own contribution, at once; any later unit's once the unit a step before it was handled) and
  // that is at most kSendsAhead units ahead of the one about to be handled.
  ncclResult_t post_ready_sends(size_t handled_units) {
    const size_t limit = handled_units + std::min(pieces_, kSendsAhead);
    for (; next_send_ < units_ && next_send_ < limit; ++next_send_) {
      const ElementRange range = send_range(next_send_);
      const uint8_t* data = recv_at(range);
      if (next_send_ < pieces_) {
        // Out of place and unscaled, the own contribution goes out straight from `send`.
        if (args_.send == args_.recv || contribution_needs_scaling(args_.op)) {
          prepare_contribution(args_.type, args_.op, recv_at(range), send_at(range), range.count);
        } else {
          data = send_at(range);
        }
      }
      TERSE_CHECK(transfers_.send(send_slot(next_send_), next_rank_, operation(next_send_), data,
                                  range.count * element_bytes_));
      if (sent_ != nullptr) {
        sent_->bytes += range.count * element_bytes_;
        sent_->messages += 1;
      }
    }
    return ncclSuccess;
  }

  // Posts receives up to kReceivesAhead units past `unit`, the one about to be waited for. An
  // allgather receive overwrites the region the reduce-scatter sent from at the same step and
  // piece; it waits for that send only when it is the receive needed now, and otherwise stops
  // posting ahead until the send has finished.
  ncclResult_t post_receives(size_t unit) {
    for (; next_recv_ < units_ && next_recv_ < unit + slots_; ++next_recv_) {
      const ElementRange range = recv_range(next_recv_);
      if (in_reduce_scatter(next_recv_)) {
        TERSE_CHECK(transfers_.recv(recv_slot(next_recv_), previous_rank_, operation(next_recv_),
                                    scratch_slot(next_recv_), range.count * element_bytes_));
        continue;
      }
      const size_t overlapping_send = send_slot(next_recv_ - phase_units_);
      // (A send not posted yet lies ahead of the sends' front; stop here too.)
      if (!transfers_.posted(overlapping_send) || !transfers_.finished(overlapping_send)) {
        if (next_recv_ != unit) break;
        TERSE_CHECK(transfers_.wait(overlapping_send));
      }
      TERSE_CHECK(transfers_.recv(recv_slot(next_recv_), previous_rank_, operation(next_recv_),
                                  recv_at(range), range.count * element_bytes_));
    }
    return ncclSuccess;
  }

  // Combines a received reduce-scatter piece with this rank's own contribution into `recv`
  // (own (op) received, in one pass from `send` unless the contribution must be scaled first);
  // the last step's piece is then final and gets the op's finishing touch (integer average).
  void reduce_received(size_t unit) {
    const ElementRange range = recv_range(unit);
    uint8_t* accumulator = recv_at(range);
    const uint8_t* own = send_at(range);
    if (contribution_needs_scaling(args_.op)) {
      prepare_contribution(args_.type, args_.op, accumulator, own, range.count);
      own = accumulator;
    }
    const uint8_t* operand = scratch_slot(unit);
    const size_t slice = std::max<size_t>(1, kReduceSliceBytes / element_bytes_);
    for (size_t done = 0; done < range.count; done += slice) {
      const size_t n = std::min(slice, range.count - done);
      const size_t at = done * element_bytes_;
      reduce_pair(args_.type, args_.op.kind, accumulator + at, own + at, operand + at, n);
      transport_->progress();
    }
    if (step_of(unit) == ring_.steps() - 1) {
      finish_result(args_.type, args_.op, accumulator, range.count);
    }
  }

  const CollectiveArgs& args_;
  const AlgorithmContext& context_;
  Transport* transport_;
  RingPattern ring_;  // over group positions
  int next_rank_;     // transport ranks of the neighbours
  int previous_rank_;
  uint32_t first_step_;
  SentTraffic* sent_;
  size_t element_bytes_;
  size_t piece_elements_;
  size_t pieces_;       // per block, the same for every block (the last ones may be empty)
  size_t phase_units_;  // units of the reduce-scatter, and of the allgather
  size_t units_;
  size_t slots_;          // scratch slots, one per receive posted ahead
  size_t slot_elements_;  // the largest piece
  // Declared before the transfers so that it outlives any receive still being cancelled.
  AlgorithmScratch scratch_;
  InFlightTransfers transfers_;
  size_t next_send_ = 0;
  size_t next_recv_ = 0;
};

}  // namespace

ncclResult_t ring_allreduce_in_group(const CollectiveArgs& args, const AlgorithmContext& context,
                                     const GroupPhase& phase) {
  if (args.count == 0) return ncclSuccess;
  if (group_size(context, phase) == 1) {
    prepare_contribution(args.type, args.op, args.recv, args.send, args.count);
    finish_result(args.type, args.op, args.recv, args.count);
    return ncclSuccess;
  }
  return RingAllreduce(args, context, phase).run();
}

ncclResult_t ring_allreduce(const CollectiveArgs& args, const AlgorithmContext& context) {
  return ring_allreduce_in_group(args, context, GroupPhase{});
}

}  // namespace terse
