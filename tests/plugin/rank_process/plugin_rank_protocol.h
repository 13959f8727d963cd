// How the plugin's multi-process tests talk to plugin_rank_process, an application that sees
// only <nccl.h> and libterse: its command line, its scenarios and the exit codes it reports with.
//
//   plugin_rank_process <scenario> <rank> <nranks> <unique id in hex | "env">
//
// "env": every rank calls ncclGetUniqueId itself, which with TERSE_COMM_ID (or NCCL_COMM_ID)
// set returns the same id everywhere, as launchers without a side channel rely on.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/hex_bytes.h"

namespace plugin_test {

// Allreduce, allgather, broadcast, reduce-scatter and a send/recv ring, every result checked.
constexpr const char* kScenarioCollectives = "collectives";
// Rounds of allreduce and allgather; the last rank SIGKILLs itself between the two of round 2.
// The others must get ncclRemoteError (from the call, or from ncclCommGetAsyncError) within
// TERSE_TIMEOUT_S, an ncclGetLastError that names a rank, and a prompt ncclCommAbort.
constexpr const char* kScenarioKilled = "killed";
// Every rank but the last enters an allreduce the last never joins (it idles until the test
// kills it); another thread then calls ncclCommAbort, which must return promptly and make the
// blocked allreduce return an error.
constexpr const char* kScenarioAbort = "abort";
// ncclCommInitRank with an id whose secret is not the root's: it must fail, not hang, within
// TERSE_TIMEOUT_S, and say that the secret may be wrong.
constexpr const char* kScenarioStranger = "stranger";
// Compressed allreduces (TERSE_CODEC from the test) checked within the stated bound; with
// PLUGIN_TEST_RANKS_PER_NODE set, TERSE_HOSTID puts that many ranks on each emulated node and
// the hierarchical result is compared with a flat communicator's; the policy's decisions by
// name, size and link class (compressed_scenario.cpp).
constexpr const char* kScenarioCompressed = "compressed";
int run_compressed(ncclComm_t comm, int rank, int nranks);
// One compressed allreduce of 1 MiB under TERSE_CODEC=auto:... (from the test), checked within
// the bound of what it ran, which it prints as "plan: <codec spec> <algorithm>" for the test to
// compare across ranks. With PLUGIN_TEST_CODEC_SPEED_DIR set, each rank reads its own speed table
// (TERSE_CODEC_SPEED=<dir>/rank<r>.txt), so ranks that did not agree would plan differently.
constexpr const char* kScenarioAutoAgreement = "auto-agreement";
int run_auto_agreement(ncclComm_t comm, int rank, int nranks);
// Three 4 MiB sign tensors under a TERSE_MEMORY_MAX_BYTES for two (from the test): the first
// two within a few percent of the inputs over the steps, the third exact at every step, the
// counters as admission says; prints "admission counters: ..." for the test to compare across
// ranks (run_residual_admission in residual_admission_scenario.h).
constexpr const char* kScenarioResidualAdmission = "residual-admission";
// Communicator creation reported rather than checked, since the test may give ranks different
// environments on purpose (settings_scenario.cpp): prints "init result: <code>" and "init message:
// <ncclGetLastError>"; after a successful init an exact int32 allreduce, then ncclCommSplit of
// every rank into one color with PLUGIN_TEST_SPLIT_ENV ("NAME=value") set on this rank just before
// it, reported as "split result: <code>" and "split message: <text>", then the parent's allreduce
// again. PLUGIN_TEST_INIT_CALL=config or group creates the communicator with
// ncclCommInitRankConfig, or with ncclCommInitRank inside a group, instead of ncclCommInitRank.
constexpr const char* kScenarioInitResult = "init-result";
int run_init_result(const ncclUniqueId& id, int rank, int nranks);
// Rank 1 leaves after a first allreduce (PLUGIN_TEST_SHRINK=revoke: it idles until the test
// kills it; =abort: it SIGKILLs itself) while the others enter an allreduce on a thread of their
// own. revoke: ncclCommRevoke ends that call, ncclCommGetAsyncError says ncclSuccess, a
// collective and ncclCommFinalize are refused, then ncclCommShrink(NCCL_SHRINK_DEFAULT); abort:
// ncclCommShrink(NCCL_SHRINK_ABORT) alone ends it. Either way the survivors get a communicator
// of nranks - 1 in their old order whose allreduce is their exact sum, and destroy both promptly
// (shrink_scenario.cpp). The communicator is destroyed there.
constexpr const char* kScenarioShrink = "shrink";
int run_shrink(ncclComm_t comm, int rank, int nranks);
// ncclGroupSimulateEnd (simulate_scenario.cpp), with TERSE_CODEC=int8 and the planner's figures
// pinned by the test: a real compressed allreduce of a tensor of kSimulateCount fp32 values
// (step 0, inputs simulate_input(rank, 0, i)); then simulated groups: the tensor's next step
// (inputs simulate_input(rank, 1, i), into the same buffer), a broadcast of
// kSimulateBroadcastCount fp32 from rank 0, an int32 sum of kSimulateIntCount and a ring of
// send/recv of kSimulateP2pCount fp32 (to rank + 1, from rank - 1) all together, then each
// alone, then an allreduce of twice the tensor's size: every buffer unchanged after them, the
// statistics unmoved; then the tensor's step 1 for real; then, under a policy of int8 every
// second step, a simulated group of the tensor's steps 2 and 3. The outputs and the estimates
// go to files in PLUGIN_TEST_RESULT_DIR for the test to check against its models.
constexpr const char* kScenarioSimulate = "simulate";
int run_simulate(ncclComm_t comm, int rank, int nranks);
constexpr size_t kSimulateCount = 50000;
constexpr size_t kSimulateBroadcastCount = 3000;
constexpr size_t kSimulateIntCount = 5000;
constexpr size_t kSimulateP2pCount = 1000;
inline float simulate_input(int rank, int step, size_t i) {
  const size_t r = static_cast<size_t>(rank), s = static_cast<size_t>(step);
  return static_cast<float>(((i * 37 + r * 101 + s * 7) % 1000) / 250.0 - 2.0) *
         (1.0f + 0.25f * static_cast<float>(rank));
}
// The id argument that makes every rank call ncclGetUniqueId.
constexpr const char* kIdFromEnvironment = "env";

enum PluginRankExitCode {
  kPluginRankOk = 0,
  kPluginRankBadArguments = 10,
  kPluginRankInitFailed = 11,
  kPluginRankWrongResult = 12,  // a call failed where it should succeed, or wrong data
  kPluginRankNoErrorFromDeadPeer = 13,
  kPluginRankWrongErrorFromDeadPeer = 14,
  kPluginRankErrorTooLate = 15,
  kPluginRankAbortTooSlow = 16,
  kPluginRankStrangerAccepted = 17,
};

// ncclUniqueId <-> 256 lowercase hex digits.
inline std::string unique_id_to_hex(const ncclUniqueId& id) {
  return terse::bytes_to_hex(id.internal, sizeof(id.internal));
}

inline bool unique_id_from_hex(const std::string& hex, ncclUniqueId* id) {
  return terse::hex_to_bytes(hex, id->internal, sizeof(id->internal));
}

}  // namespace plugin_test
