// Scenario "groups": calls queued between group_start and group_end (ncclGroupStart/End) run
// together, ranks as processes.
//  1. One group holding an allreduce, an allgather, a broadcast and a reduce-scatter (in that
//     order on every rank, as NCCL requires of collectives) and a send/recv ring of 1 MiB
//     messages, past UCX's eager limit, so that a send completes only once its receive is
//     posted: even ranks queue the send first, odd ranks the receive, around the collectives.
//  2. One group with a ring in both directions: every rank receives from both neighbours before
//     it sends to either.
// Every output is checked against reduction_reference.h's inputs and float64 reference.
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "collective_case_lists.h"
#include "collectives/group.h"
#include "common/result.h"
#include "rank_process_protocol.h"
#include "rank_scenarios.h"

namespace terse {
namespace test {
namespace {

constexpr size_t kMaxWrongElementsShown = 3;

// `count` zeroed elements of `type`, aligned for it.
struct TypedBuffer {
  TypedBuffer(ncclDataType_t type, size_t count)
      : type(type), count(count), storage((count * nccl_type_size(type) + 7) / 8 + 1) {}
  // `rank`'s input_value for `op` in every element.
  void fill(int rank, TestOp op = TestOp::kSum) {
    for (size_t i = 0; i < count; ++i) {
      store_element(type, data(), i, input_value(type, op, rank, i));
    }
  }
  void* data() { return storage.data(); }
  double at(size_t i) const { return load_element(type, storage.data(), i); }
  ncclDataType_t type;
  size_t count;
  std::vector<uint64_t> storage;
};

// What a rank found wrong, said on stderr as it is found.
class ElementChecks {
 public:
  explicit ElementChecks(int rank) : rank_(rank) {}
  // Element i of `buffer` must be want(i) within tolerance(i).
  void expect(
      const std::string& what, const TypedBuffer& buffer, const std::function<double(size_t)>& want,
      const std::function<double(size_t)>& tolerance = [](size_t) { return 0.0; }) {
    size_t shown = 0;
    for (size_t i = 0; i < buffer.count && shown < kMaxWrongElementsShown; ++i) {
      const double got = buffer.at(i);
      if (!(std::fabs(got - want(i)) <= tolerance(i))) {
        std::ostringstream text;
        text.precision(10);
        text << what << ": element " << i << " is " << got << ", expected " << want(i) << " within "
             << tolerance(i);
        report(kRankExchangeFailed, rank_, text.str());
        ++shown;
        ok_ = false;
      }
    }
  }
  bool ok() const { return ok_; }

 private:
  int rank_;
  bool ok_ = true;
};

CollectiveArgs call(CollectiveKind kind, TypedBuffer* send, TypedBuffer* recv, size_t count) {
  CollectiveArgs args;
  args.kind = kind;
  args.send = send != nullptr ? send->data() : nullptr;
  args.recv = recv != nullptr ? recv->data() : nullptr;
  args.count = count;
  args.type = send != nullptr ? send->type : recv->type;
  return args;
}

CollectiveArgs point_to_point(CollectiveKind kind, int peer, TypedBuffer* buffer) {
  CollectiveArgs args = kind == CollectiveKind::kSend ? call(kind, buffer, nullptr, buffer->count)
                                                      : call(kind, nullptr, buffer, buffer->count);
  args.peer = peer;
  return args;
}

// Queues `calls` in one group and runs it.
ncclResult_t run_group(Communicator& comm, const std::vector<CollectiveArgs>& calls) {
  TERSE_CHECK(group_start());
  for (const CollectiveArgs& args : calls) {
    if (ncclResult_t result = submit(&comm, args)) {
      group_end();
      return result;
    }
  }
  return group_end();
}

int collectives_and_ring_in_one_group(Communicator& comm) {
  const int rank = comm.rank(), n = comm.nranks();
  const int next = (rank + 1) % n, previous = (rank + n - 1) % n, root = root_for(n);
  const size_t count = 1001, block = 513, ring_count = (size_t{1} << 20) / 8 + 3;
  const size_t nn = static_cast<size_t>(n);

  TypedBuffer reduce_in(ncclFloat32, count), reduce_out(ncclFloat32, count);
  reduce_in.fill(rank);
  CollectiveArgs allreduce = call(CollectiveKind::kAllReduce, &reduce_in, &reduce_out, count);
  allreduce.op = make_reduce_op(TestOp::kSum, ncclFloat32, n);

  TypedBuffer gather_in(ncclInt64, count), gathered(ncclInt64, nn * count);
  gather_in.fill(rank);
  CollectiveArgs allgather = call(CollectiveKind::kAllGather, &gather_in, &gathered, count);

  TypedBuffer broadcast_data(ncclInt32, count);
  if (rank == root) broadcast_data.fill(root);
  CollectiveArgs broadcast =
      call(CollectiveKind::kBroadcast, &broadcast_data, &broadcast_data, count);
  broadcast.root = root;

  TypedBuffer blocks(ncclBfloat16, nn * block), own_block(ncclBfloat16, block);
  blocks.fill(rank, TestOp::kAvg);
  CollectiveArgs reduce_scatter = call(CollectiveKind::kReduceScatter, &blocks, &own_block, block);
  reduce_scatter.op = make_reduce_op(TestOp::kAvg, ncclBfloat16, n);

  TypedBuffer ring_out(ncclInt64, ring_count), ring_in(ncclInt64, ring_count);
  ring_out.fill(rank + 100);
  const CollectiveArgs send = point_to_point(CollectiveKind::kSend, next, &ring_out);
  const CollectiveArgs recv = point_to_point(CollectiveKind::kRecv, previous, &ring_in);

  std::vector<CollectiveArgs> calls;
  if (rank % 2 == 0) {
    calls = {send, allreduce, allgather, recv, broadcast, reduce_scatter};
  } else {
    calls = {recv, allreduce, allgather, broadcast, reduce_scatter, send};
  }
  if (run_group(comm, calls) != ncclSuccess) {
    return report(kRankExchangeFailed, rank, std::string("group 1 failed: ") + last_error());
  }

  ElementChecks checks(rank);
  const Reference sum = make_reference(ncclFloat32, TestOp::kSum, n, count);
  checks.expect(
      "allreduce float32 sum", reduce_out, [&](size_t i) { return sum.value[i]; },
      [&](size_t i) { return sum.tolerance[i]; });
  checks.expect("allgather int64", gathered, [&](size_t i) {
    return input_value(ncclInt64, TestOp::kSum, static_cast<int>(i / count), i % count);
  });
  checks.expect("broadcast int32 from rank " + std::to_string(root), broadcast_data,
                [&](size_t i) { return input_value(ncclInt32, TestOp::kSum, root, i); });
  const Reference avg = make_reference(ncclBfloat16, TestOp::kAvg, n, nn * block);
  const size_t own = static_cast<size_t>(rank) * block;
  checks.expect(
      "reduce-scatter bfloat16 avg", own_block, [&](size_t i) { return avg.value[own + i]; },
      [&](size_t i) { return avg.tolerance[own + i]; });
  checks.expect("receive from rank " + std::to_string(previous), ring_in,
                [&](size_t i) { return input_value(ncclInt64, TestOp::kSum, previous + 100, i); });
  return checks.ok() ? kRankOk : kRankExchangeFailed;
}

int two_way_ring(Communicator& comm) {
  const int rank = comm.rank(), n = comm.nranks();
  const int next = (rank + 1) % n, previous = (rank + n - 1) % n;
  const size_t count = (size_t{1} << 18) + 1;
  TypedBuffer mine(ncclUint8, count), from_previous(ncclUint8, count), from_next(ncclUint8, count);
  mine.fill(rank);
  if (run_group(comm, {point_to_point(CollectiveKind::kRecv, previous, &from_previous),
                       point_to_point(CollectiveKind::kRecv, next, &from_next),
                       point_to_point(CollectiveKind::kSend, next, &mine),
                       point_to_point(CollectiveKind::kSend, previous, &mine)}) != ncclSuccess) {
    return report(kRankExchangeFailed, rank, std::string("group 2 failed: ") + last_error());
  }
  ElementChecks checks(rank);
  // With two ranks both neighbours are the same rank: its two messages arrive in order, equal.
  checks.expect("receive from the previous rank " + std::to_string(previous), from_previous,
                [&](size_t i) { return input_value(ncclUint8, TestOp::kSum, previous, i); });
  checks.expect("receive from the next rank " + std::to_string(next), from_next,
                [&](size_t i) { return input_value(ncclUint8, TestOp::kSum, next, i); });
  return checks.ok() ? kRankOk : kRankExchangeFailed;
}

}  // namespace

int run_groups(Communicator& comm) {
  if (int code = collectives_and_ring_in_one_group(comm)) return code;
  return two_way_ring(comm);
}

}  // namespace test
}  // namespace terse
