#include "topology/path_class.h"

#include <cstddef>

namespace terse {

const char* path_class_name(PathClass path) {
  switch (path) {
    case PathClass::kLoc:
      return "LOC";
    case PathClass::kNvl:
      return "NVL";
    case PathClass::kPix:
      return "PIX";
    case PathClass::kPxb:
      return "PXB";
    case PathClass::kPhb:
      return "PHB";
    case PathClass::kSys:
      return "SYS";
  }
  return "???";
}

namespace {

// "0000:05:00.1" without its function: the functions of one card (the ports of a dual-port NIC)
// are one device, as NCCL merges them.
std::string pci_device(const std::string& bus_id) {
  const size_t dot = bus_id.rfind('.');
  return dot == std::string::npos ? bus_id : bus_id.substr(0, dot);
}

}  // namespace

PathClass classify_path(const DeviceLocation& a, const DeviceLocation& b) {
  if (!a.pci_bus_id.empty() && pci_device(a.pci_bus_id) == pci_device(b.pci_bus_id)) {
    return PathClass::kLoc;
  }
  if (a.locality < 0 || b.locality < 0) return PathClass::kSys;
  // The nearest switch both sit under: the path climbs i switches from a, j from b, and crosses
  // the common one once.
  for (size_t i = 0; i < a.switches.size(); ++i) {
    for (size_t j = 0; j < b.switches.size(); ++j) {
      if (a.switches[i] == b.switches[j]) return i + j == 0 ? PathClass::kPix : PathClass::kPxb;
    }
  }
  return a.locality == b.locality ? PathClass::kPhb : PathClass::kSys;
}

}  // namespace terse
