// The one place that speaks hwloc's API directly: loading a topology (this machine with I/O
// discovery, or an XML export) and the few object questions whose spelling differs between hwloc
// 2.x and 3.x (OS device types became a bitmask in 3.0; NVLink distances need 2.1). The rest of
// topology/ walks hwloc objects only through what this header offers and plain tree fields.
#pragma once

#include <hwloc.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace terse {

class HwlocTopology {
 public:
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology();

  // Loads `xml_path`, or this machine when it is "", keeping the I/O objects that matter (GPUs,
  // NICs, the bridges above them). A file that cannot be read or is not an hwloc XML export is
  // Result::kInvalidArgument naming the file and the reason; `what` prefixes the path in that
  // message, saying where it came from ("TERSE_TOPO_FILE=", "topology file ").
  static Result load(const std::string& xml_path, const char* what,
                     std::unique_ptr<HwlocTopology>* out);

  hwloc_topology_t get() const { return topology_; }

 private:
  HwlocTopology() = default;
  hwloc_topology_t topology_ = nullptr;
};

// The API version of the hwloc library loaded at run time, "2.8.0" (hwloc_get_api_version).
std::string hwloc_runtime_version();

enum class OsDeviceKind { kGpu, kCoprocessor, kNetwork, kOpenFabrics, kOther };
// An OS device's kind; under hwloc 3, where a device may have several, OpenFabrics wins over
// network and coprocessor over GPU (an RDMA HCA is also a network device there).
OsDeviceKind os_device_kind(hwloc_obj_t os_device);

// A PCI-to-PCI bridge (a root port or a switch port), as opposed to a host bridge.
bool is_pci_bridge(hwloc_obj_t object);
// The PCI attributes of a PCI device or of a PCI bridge's upstream side; null for anything else.
using HwlocPciAttributes = hwloc_obj_attr_u::hwloc_pcidev_attr_s;
const HwlocPciAttributes* pci_attributes(hwloc_obj_t object);
// "0000:3b:00.0" for a PCI device or PCI bridge, "" otherwise.
std::string pci_bus_id(hwloc_obj_t object);
// A bitmap as a list, "0-7,16-23"; "" for an empty or null one.
std::string bitmap_list(hwloc_const_bitmap_t bitmap);

// Pairs of objects that hwloc's "NVLinkBandwidth" distances (from NVML, or an XML export of it)
// join with a positive bandwidth. Empty when the topology has no such matrix.
std::vector<std::pair<hwloc_obj_t, hwloc_obj_t>> nvlink_pairs(hwloc_topology_t topology);

}  // namespace terse
