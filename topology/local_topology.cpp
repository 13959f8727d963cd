#include "topology/local_topology.h"

#include <memory>

#include "common/log.h"
#include "common/result.h"

namespace terse {

const MachineTopology* local_topology() {
  // A function-local static: loaded by the first caller, the others wait for it (C++11).
  static const std::unique_ptr<MachineTopology> loaded = []() {
    auto topology = std::make_unique<MachineTopology>();
    if (load_machine_topology("", topology.get()) != Result::kSuccess) {
      TERSE_WARN("topology: %s; going on without it (link speeds assumed)", last_error());
      topology.reset();
    }
    return topology;
  }();
  return loaded.get();
}

}  // namespace terse
