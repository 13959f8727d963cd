// Recursive-doubling allreduce (tree_pattern.h, RecursiveDoubling): in round k every rank
// exchanges its whole partial result with exchange rank ^ 2^k and combines the two, so after
// log2(p) rounds every one of the p exchangers holds the full result. With n not a power of two,
// the first 2(n - p) ranks fold in pairs before the rounds and the result goes back to the
// folded rank after them. 2 + log2(n) steps at most, but every rank moves the whole buffer
// each round: the algorithm for messages too small for the ring's 2(n-1) steps to pay off.
//
// Bitwise agreement. Both partners of a round compute lower-ranked data (op) higher-ranked data
// with the lower one as the left operand, so the two hold identical bits after every round and
// all ranks end with the same result even where (op) is not commutative in floating point
// (max/min with NaN or signed zeros).
//
// Groups: the pattern runs over positions of an ordered group (GroupPhase,
// allreduce_algorithms.h), partners being the ranks at those positions; the whole communicator
// is the group of every rank in rank order. Steps: 0 the fold, 1..rounds the rounds, rounds + 1
// the unfold, from the phase's first_step.
//
// Buffers: the partial result alternates between `recv` and one scratch buffer of the message
// size (the received operand lands in whichever is not the current result), so no combine needs
// a copy; one copy at the end if the result ended in scratch.
#include <cstdint>
#include <cstring>
#include <utility>

#include "collectives/algorithm_scratch.h"
#include "collectives/allreduce_algorithms.h"
#include "collectives/in_flight_transfers.h"
#include "collectives/reduce_op_stages.h"
#include "collectives/reduction.h"
#include "collectives/tree_pattern.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Sends `data` to `peer` and receives as many bytes from it into `incoming`, as one step.
ncclResult_t exchange(InFlightTransfers& transfers, int peer, uint32_t operation, const void* data,
                      void* incoming, size_t bytes) {
  TERSE_CHECK(transfers.recv(0, peer, operation, incoming, bytes));
  TERSE_CHECK(transfers.send(1, peer, operation, data, bytes));
  return transfers.wait_all();
}

}  // namespace

uint32_t recursive_doubling_allreduce_steps(int ranks) {
  if (ranks <= 1) return 0;
  return static_cast<uint32_t>(RecursiveDoubling(0, ranks).rounds() + 2);
}

ncclResult_t recursive_doubling_allreduce_in_group(const CollectiveArgs& args,
                                                   const AlgorithmContext& context,
                                                   const GroupPhase& phase) {
  if (args.count == 0) return ncclSuccess;
  Transport& transport = *context.transport;
  const PeerGroup* group = phase.group;
  const int n = group != nullptr ? group->size() : transport.nranks();
  const size_t bytes = args.count * nccl_type_size(args.type);
  prepare_contribution(args.type, args.op, args.recv, args.send, args.count);
  if (n == 1) {
    finish_result(args.type, args.op, args.recv, args.count);
    return ncclSuccess;
  }

  const RecursiveDoubling pattern(group != nullptr ? group->index : transport.rank(), n);
  const int rounds = pattern.rounds();
  auto operation = [&](int step) {
    return make_operation(context.sequence, phase.first_step + static_cast<uint32_t>(step));
  };
  auto rank_at = [&](int position) {
    return group != nullptr ? group->rank_at(position) : position;
  };
  const int fold_partner =
      pattern.role() == RecursiveDoubling::Role::kExchanger ? -1 : rank_at(pattern.fold_partner());
  auto count_sent = [&]() {
    if (phase.sent == nullptr) return;
    phase.sent->bytes += bytes;
    phase.sent->messages += 1;
  };
  AlgorithmScratch scratch(bytes, context.scratch);
  InFlightTransfers transfers(&transport, 2, context.deadline);
  uint8_t* result = static_cast<uint8_t*>(args.recv);
  uint8_t* spare = scratch.data();

  // Combines the partial result with `incoming` (the peer's), lower rank's data on the left.
  auto combine = [&](bool peer_is_lower) {
    if (peer_is_lower) {
      reduce_into(args.type, args.op.kind, spare, result, args.count);
      std::swap(result, spare);
    } else {
      reduce_into(args.type, args.op.kind, result, spare, args.count);
    }
  };

  switch (pattern.role()) {
    case RecursiveDoubling::Role::kFolded:
      // Hands its contribution over, sits out the rounds, and gets the final result back.
      TERSE_CHECK(transfers.send(0, fold_partner, operation(0), result, bytes));
      count_sent();
      TERSE_CHECK(transfers.wait_all());
      TERSE_CHECK(transfers.recv(0, fold_partner, operation(rounds + 1), result, bytes));
      return transfers.wait_all();
    case RecursiveDoubling::Role::kFoldHost:
      TERSE_CHECK(transfers.recv(0, fold_partner, operation(0), spare, bytes));
      TERSE_CHECK(transfers.wait_all());
      combine(/*peer_is_lower=*/true);  // the folded rank is the even, lower one of the pair
      break;
    case RecursiveDoubling::Role::kExchanger:
      break;
  }

  for (int round = 0; round < rounds; ++round) {
    const int peer = rank_at(pattern.round_partner(round));
    TERSE_CHECK(exchange(transfers, peer, operation(round + 1), result, spare, bytes));
    count_sent();
    combine(/*peer_is_lower=*/(pattern.exchange_rank() & (1 << round)) != 0);
  }

  finish_result(args.type, args.op, result, args.count);
  if (result != args.recv) std::memcpy(args.recv, result, bytes);
  if (pattern.role() == RecursiveDoubling::Role::kFoldHost) {
    TERSE_CHECK(transfers.send(0, fold_partner, operation(rounds + 1), args.recv, bytes));
    count_sent();
    TERSE_CHECK(transfers.wait_all());
  }
  return ncclSuccess;
}

ncclResult_t recursive_doubling_allreduce(const CollectiveArgs& args,
                                          const AlgorithmContext& context) {
  return recursive_doubling_allreduce_in_group(args, context, GroupPhase{});
}

}  // namespace terse
