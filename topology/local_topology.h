// This process's machine, loaded once (TERSE_TOPO_FILE, else the live machine through hwloc):
// discovering PCI and NICs costs tens of milliseconds, and every communicator asks.
#pragma once

#include "topology/machine_topology.h"

namespace terse {

// The topology, or null when it cannot be loaded (a bad TERSE_TOPO_FILE, hwloc failing); the
// reason is logged once at WARN and callers fall back to what needs no topology (the link
// model's defaults). Thread-safe; the result lives until the process ends.
const MachineTopology* local_topology();

}  // namespace terse
