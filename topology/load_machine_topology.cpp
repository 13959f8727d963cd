#include <memory>

#include "common/env.h"
#include "common/result.h"
#include "topology/hwloc_discovery.h"
#include "topology/interface_speed.h"
#include "topology/live_details.h"

namespace terse {

Result load_machine_topology(const std::string& xml_path, MachineTopology* topology) {
  if (topology == nullptr)
    return fail(Result::kInvalidArgument, "machine topology pointer is NULL");
  const std::string from_env = env_string("TERSE_TOPO_FILE", "");
  const std::string path = xml_path.empty() ? from_env : xml_path;
  const char* what = xml_path.empty() ? "TERSE_TOPO_FILE=" : "topology file ";
  std::unique_ptr<HwlocTopology> hwloc;
  TERSE_CHECK(HwlocTopology::load(path, what, &hwloc));
  MachineTopology described;
  described.live = path.empty();
  described.source =
      described.live ? "this machine (hwloc API " + hwloc_runtime_version() + ")" : path;
  describe_hwloc_topology(hwloc->get(), &described);
  if (described.live) {
    std::vector<RdmaPort> ports;
    TERSE_CHECK(discover_rdma_ports(&ports));
    apply_rdma_ports(ports, &described);
    apply_interface_details(kSysClassNet, &described);
  }
  *topology = std::move(described);
  return Result::kSuccess;
}

}  // namespace terse
