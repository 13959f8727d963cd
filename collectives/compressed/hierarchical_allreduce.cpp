// Hierarchical compressed allreduce: uncompressed inside each node, where links are fast
// (shared memory, NVLink), compressed only between nodes, where the network is the bottleneck.
//
// Nodes are the distinct host identities of the group (PeerGroup::hosts; TERSE_HOSTID overrides
// a host's identity, so tests and emulated clusters can put several nodes on one machine). The
// lowest group position of each node is its leader.
//   1. members send their tensor as fp32 to their leader, which adds them, in position order,
//      to its own (exact fp32 sums);
//   2. the leaders run the default compressed algorithm for the codec on the node sums
//      (compressed_algorithm_table.h), with the leader's residual entry: error feedback and
//      codec state work at node level, where the compression happens; members keep no residual;
//   3. each leader sends the result, fp32, to its members.
// Every member ends with its leader's bits, and the leaders with identical bits (the inner
// algorithm guarantees it). With one node, or one rank per node, the default algorithm runs on
// the whole group instead. The bound is the inner algorithm's over the node sums (their norms
// add up to no more than the ranks' norms); lossy_steps takes the largest default.
//
// Steps: 0 members to leaders, 1 leaders to members, from 2 the inner algorithm.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_algorithms.h"
#include "collectives/compressed/contribution.h"
#include "collectives/in_flight_transfers.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {
namespace {

constexpr uint32_t kToLeaderStep = 0;
constexpr uint32_t kToMembersStep = 1;
constexpr uint32_t kInnerFirstStep = 2;

using Clock = std::chrono::steady_clock;

struct NodeLayout {
  std::vector<int> node_of;               // by group position
  std::vector<std::vector<int>> members;  // by node, positions in increasing order
  bool worth_it = false;                  // several nodes, one of them with several ranks
};

NodeLayout layout_nodes(const PeerGroup& group) {
  NodeLayout layout;
  std::vector<std::string> names;
  for (int position = 0; position < group.size(); ++position) {
    const std::string host = group.hosts.empty() ? "" : group.hosts[static_cast<size_t>(position)];
    auto found = std::find(names.begin(), names.end(), host);
    if (found == names.end()) {
      names.push_back(host);
      layout.members.emplace_back();
      found = names.end() - 1;
    }
    const int node = static_cast<int>(found - names.begin());
    layout.node_of.push_back(node);
    layout.members[static_cast<size_t>(node)].push_back(position);
  }
  bool several = false;
  for (const auto& members : layout.members) several = several || members.size() > 1;
  layout.worth_it = layout.members.size() > 1 && several;
  return layout;
}

}  // namespace

ncclResult_t hierarchical_allreduce(const CompressedArgs& args, const CompressedContext& context) {
  const PeerGroup& group = context.group;
  if (group.size() == 1) return copy_single_rank(args);
  if (args.count == 0) return ncclSuccess;
  const CompressedAlgorithmInfo* inner =
      default_compressed_algorithm(*args.codec, args.count, dtype_size(args.dtype));
  const NodeLayout layout = layout_nodes(group);
  if (!layout.worth_it) return inner->run(args, context);

  const int node = layout.node_of[static_cast<size_t>(group.index)];
  const std::vector<int>& members = layout.members[static_cast<size_t>(node)];
  const int leader = members.front();
  const bool leading = group.index == leader;
  const auto operation = [&](uint32_t step) {
    return make_operation(context.sequence, context.first_step + step);
  };
  const size_t bytes = args.count * sizeof(float);
  // The node sum, the leaders' result, and a member's incoming tensor, one after the other.
  float* node_sum = context.scratch->floats(ScratchSlot::kHierarchy, 3 * args.count);
  float* result = node_sum + args.count;
  float* incoming = result + args.count;
  InFlightTransfers transfers(context.transport, 2, context.deadline);

  auto start = Clock::now();
  for (size_t i = 0; i < args.count; ++i) node_sum[i] = load_element(args.send, args.dtype, i);
  if (!leading) {
    TERSE_CHECK(transfers.recv(1, group.rank_at(leader), operation(kToMembersStep), result, bytes));
    TERSE_CHECK(
        transfers.send(0, group.rank_at(leader), operation(kToLeaderStep), node_sum, bytes));
    count_sent(context, bytes);
    TERSE_CHECK(transfers.wait_all());
    write_result(args, result, ElementRange{0, args.count});
    if (context.counters != nullptr) {
      context.counters->dense_seconds +=
          std::chrono::duration<double>(Clock::now() - start).count();
    }
    return ncclSuccess;
  }

  for (size_t m = 1; m < members.size(); ++m) {
    TERSE_CHECK(
        transfers.recv(1, group.rank_at(members[m]), operation(kToLeaderStep), incoming, bytes));
    TERSE_CHECK(transfers.wait(1));
    for (size_t i = 0; i < args.count; ++i) node_sum[i] += incoming[i];
  }
  if (context.counters != nullptr) {
    context.counters->dense_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }

  PeerGroup leaders;
  for (size_t n = 0; n < layout.members.size(); ++n) {
    const int position = layout.members[n].front();
    leaders.ranks.push_back(group.rank_at(position));
    if (!group.hosts.empty()) leaders.hosts.push_back(group.hosts[static_cast<size_t>(position)]);
  }
  leaders.index = node;
  CompressedArgs inner_args = args;
  inner_args.send = node_sum;
  inner_args.recv = result;
  inner_args.dtype = DType::kFloat32;
  inner_args.result_scale = 1.0;
  CompressedContext inner_context = context;
  inner_context.group = std::move(leaders);
  inner_context.first_step = context.first_step + kInnerFirstStep;
  TERSE_CHECK(inner->run(inner_args, inner_context));

  start = Clock::now();
  for (size_t m = 1; m < members.size(); ++m) {
    TERSE_CHECK(
        transfers.send(0, group.rank_at(members[m]), operation(kToMembersStep), result, bytes));
    count_sent(context, bytes);
    TERSE_CHECK(transfers.wait(0));
  }
  write_result(args, result, ElementRange{0, args.count});
  if (context.counters != nullptr) {
    context.counters->dense_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  return ncclSuccess;
}

}  // namespace terse
