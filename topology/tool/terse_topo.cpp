// terse_topo: what terse sees of this machine (or of an hwloc XML export): the path classes
// between GPUs and NICs as `nvidia-smi topo -m` prints them, the NIC of each local rank, NUMA
// affinity and the link costs the cost model assumes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/result.h"
#include "topology/link_model.h"
#include "topology/machine_topology.h"
#include "topology/nic_assignment.h"
#include "topology/topology_report.h"

namespace {

constexpr const char kUsage[] =
    "usage: terse_topo [--xml FILE] [--ranks N] [--interface IF] [--help]\n"
    "\n"
    "Prints the machine as terse sees it: its GPUs and NICs with their PCI bus ids, the matrix\n"
    "of path classes between them (as nvidia-smi topo -m, in NCCL's classes LOC NVL PIX PXB\n"
    "PHB SYS), the NIC each local rank uses (its rail), NUMA affinity, and the link bandwidths\n"
    "and latencies the cost model assumes.\n"
    "\n"
    "  --xml FILE       read an hwloc XML export (lstopo --of xml) instead of this machine\n"
    "                   (TERSE_TOPO_FILE does the same for every terse process)\n"
    "  --ranks N        local ranks to place on NICs (default: the number of GPUs, else NICs)\n"
    "  --interface IF   the interface inter-node traffic uses, for the link model's speed\n"
    "  --help           this text\n"
    "\n"
    "Link model overrides: TERSE_NET_GBPS, TERSE_NET_LATENCY_US, TERSE_SHM_GBPS,\n"
    "TERSE_SHM_LATENCY_US (Gbit/s and microseconds).\n";

int usage_error(const char* message, const char* argument) {
  std::fprintf(stderr, "terse_topo: %s%s\n\n%s", message, argument, kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Errors are printed below, once; the library's WARN line would say the same again.
  setenv("TERSE_DEBUG", "NONE", /*overwrite=*/0);
  std::string xml, interface;
  long ranks = -1;
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    if (std::strcmp(flag, "--help") == 0 || std::strcmp(flag, "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const bool takes_value = std::strcmp(flag, "--xml") == 0 || std::strcmp(flag, "--ranks") == 0 ||
                             std::strcmp(flag, "--interface") == 0;
    if (!takes_value) return usage_error("unknown option ", flag);
    if (i + 1 >= argc) return usage_error("missing value after ", flag);
    const char* value = argv[++i];
    if (std::strcmp(flag, "--xml") == 0) {
      xml = value;
      if (xml.empty()) return usage_error("--xml needs a file name", "");
    } else if (std::strcmp(flag, "--interface") == 0) {
      interface = value;
    } else {
      char* end = nullptr;
      ranks = std::strtol(value, &end, 10);
      if (end == value || *end != '\0' || ranks < 1 || ranks > 4096) {
        return usage_error("--ranks takes a count from 1 to 4096, not ", value);
      }
    }
  }
  terse::MachineTopology topology;
  terse::LinkModel model;
  if (terse::load_machine_topology(xml, &topology) != terse::Result::kSuccess ||
      terse::assumed_link_model(&topology, interface, &model) != terse::Result::kSuccess) {
    std::fprintf(stderr, "terse_topo: %s\n", terse::last_error());
    return 1;
  }
  if (ranks < 0) {
    ranks = static_cast<long>(!topology.gpus.empty() ? topology.gpus.size() : topology.nics.size());
  }
  const terse::NicPlan plan = terse::assign_nics(topology, static_cast<int>(ranks));
  std::fputs(terse::format_topology_report(topology, plan, model).c_str(), stdout);
  return 0;
}
