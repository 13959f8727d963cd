#include "transport/nic_binding.h"

#include <cstdlib>
#include <string>

#include "topology/local_topology.h"
#include "topology/nic_assignment.h"

namespace terse {
namespace {

bool read_int(const char* name, int* value) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  const long parsed = strtol(text, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > 1 << 20) return false;
  *value = static_cast<int>(parsed);
  return true;
}

}  // namespace

bool local_rank_from_launcher(int* local_rank, int* local_ranks) {
  static const char* const kPairs[][2] = {
      {"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
  };
  for (const auto& pair : kPairs) {
    int rank = 0, size = 0;
    if (read_int(pair[0], &rank) && read_int(pair[1], &size) && rank < size) {
      *local_rank = rank;
      *local_ranks = size;
      return true;
    }
  }
  return false;
}

std::string net_devices_for_local_rank(const MachineTopology& topology, int local_rank,
                                       int local_ranks, std::string* why) {
  int usable = 0;
  for (const NicDevice& nic : topology.nics) usable += nic.usable() ? 1 : 0;
  if (usable < 2 || local_rank < 0 || local_rank >= local_ranks) {
    *why = std::to_string(usable) + " usable NIC(s): UCX chooses";
    return "";
  }
  const NicPlan plan = assign_nics(topology, local_ranks);
  const RankNic& mine = plan.ranks[static_cast<size_t>(local_rank)];
  if (mine.nic < 0) {
    *why = "no NIC assigned: UCX chooses";
    return "";
  }
  const NicDevice& nic = topology.nics[static_cast<size_t>(mine.nic)];
  *why = "local rank " + std::to_string(local_rank) + " of " + std::to_string(local_ranks) +
         ": NIC" + std::to_string(mine.nic) + " " + nic.label() +
         (mine.gpu >= 0 ? std::string(", ") + path_class_name(mine.path) + " to GPU" +
                              std::to_string(mine.gpu)
                        : std::string()) +
         ", rail " + std::to_string(mine.nic);
  return nic.label();
}

std::string net_devices_for_this_process(std::string* why) {
  if (getenv("UCX_NET_DEVICES") != nullptr) {
    *why = "UCX_NET_DEVICES is set";
    return "";
  }
  int local_rank = 0, local_ranks = 0;
  if (!local_rank_from_launcher(&local_rank, &local_ranks)) {
    *why = "no launcher names the local rank: UCX chooses";
    return "";
  }
  const MachineTopology* topology = local_topology();
  if (topology == nullptr || !topology->live) {
    // A TERSE_TOPO_FILE describes some machine, maybe not this one: never bind to its NICs.
    *why = topology == nullptr ? "no topology: UCX chooses"
                               : "the topology is a file, not this machine: UCX chooses";
    return "";
  }
  return net_devices_for_local_rank(*topology, local_rank, local_ranks, why);
}

}  // namespace terse
