#include "plugin/wrapped_comm.h"

#include <cstdint>
#include <random>
#include <vector>

#include "collectives/compressed/compression_engine.h"
#include "common/log.h"
#include "common/result.h"
#include "plugin/nccl_comm.h"
#include "plugin/real_comm_exchange.h"
#include "plugin/real_nccl.h"

namespace terse {

ncclResult_t create_terse_side(ncclComm* comm, int fallback_device) {
  const RealNccl& real = *real_nccl();
  TERSE_CHECK(wait_until_real_ready(comm->real, "wrap mode"));
  int nranks = 0;
  int rank = 0;
  int device = -1;
  TERSE_CHECK(call_real(real.ncclCommCount, "ncclCommCount", comm->real, &nranks));
  TERSE_CHECK(call_real(real.ncclCommUserRank, "ncclCommUserRank", comm->real, &rank));
  TERSE_CHECK(call_real(real.ncclCommCuDevice, "ncclCommCuDevice", comm->real, &device));
  const RealCommExchange exchange(comm->real, nranks, device);
  // Rank 0's random number names the communicator in terse's tag layout, as a unique id's
  // secret does in engine mode.
  std::random_device entropy;
  const uint64_t mine = (uint64_t{entropy()} << 32) | entropy();
  std::vector<uint64_t> secrets(static_cast<size_t>(nranks));
  TERSE_CHECK(exchange.allgather(&mine, sizeof(mine), secrets.data()));
  const Transport::PeerExchange peers = [&](const std::vector<uint8_t>& address,
                                            std::vector<std::vector<uint8_t>>* table) {
    return exchange.allgather(address, table);
  };
  TERSE_CHECK(Communicator::create(peers, communicator_tag_id(secrets[0]), rank, nranks,
                                   device >= 0 ? device : fallback_device, &comm->engine));
  // An `auto` rule's calls that stay uncompressed go to the real NCCL too: that needs codec
  // speeds agreed before any call (compression_engine.h). The agreement is an allgather on the
  // transport, whose idle progress thread already runs: the call lock keeps it off the workers
  // (two threads progressing one UCX worker crashed rank 1 inside ucp_worker_progress).
  const std::unique_lock<std::mutex> transport_held = comm->engine->hold_transport();
  return comm->engine->compression()->prepare_hand_off();
}

void log_comm_mode(const ncclComm* comm) {
  if (comm->engine == nullptr) return;
  if (comm->real != nullptr) {
    TERSE_INFO(
        "rank %d of %d: wrap mode: uncompressed calls on the real NCCL's communicator %p "
        "(%s), compressed allreduces on terse's UCX side",
        comm->engine->rank(), comm->engine->nranks(), static_cast<void*>(comm->real),
        real_nccl()->path.c_str());
  } else {
    TERSE_INFO("rank %d of %d: engine mode: every call on terse's engine", comm->engine->rank(),
               comm->engine->nranks());
  }
}

ncclResult_t forwarded(ncclResult_t result, const char* function, ncclComm_t real) {
  if (result == ncclSuccess || result == ncclInProgress) return result;
  const RealNccl* nccl = real_nccl();
  const char* why = "";
  if (nccl != nullptr && nccl->ncclGetLastError != nullptr) {
    RealNcclCall guard;
    why = nccl->ncclGetLastError(real);
  }
  return fail(result, "%s (real NCCL): %s", function, why != nullptr ? why : "");
}

ncclRedOp_t real_op(ncclComm* comm, ncclRedOp_t op) {
  if (static_cast<int>(op) < ncclNumOps) return op;
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  const auto found = comm->real_ops.find(static_cast<int>(op));
  return found != comm->real_ops.end() ? found->second : op;
}

}  // namespace terse
