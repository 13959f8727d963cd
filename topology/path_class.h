// How far apart two devices of one machine are, in NCCL's classes (NCCL's src/graph/topo.h and
// paths.cc define them; nvidia-smi topo -m prints the same names). The classes are ordered: a
// smaller one is a closer, faster path.
//
// The PCIe picture is NCCL's: a device hangs from the PCIe switch two PCI levels above it (the
// switch's upstream port: one physical switch is an upstream port over several downstream ports),
// or from its CPU when that level is the root complex. So a device under a root port of the CPU
// hangs from the CPU itself, and two devices behind one switch meet at that switch.
//   LOC  the same device (functions of one PCI device count as one: a dual-port NIC)
//   NVL  NVLink between two GPUs
//   PIX  through exactly one PCIe switch
//   PXB  through several PCIe switches, without the host bridge
//   PHB  through a PCIe host bridge: the same CPU (NUMA node), different switches or none
//   SYS  across the SMP interconnect between NUMA nodes / sockets (QPI, UPI, xGMI)
#pragma once

#include <string>
#include <vector>

namespace terse {

enum class PathClass : int { kLoc = 0, kNvl = 1, kPix = 2, kPxb = 3, kPhb = 4, kSys = 5 };
const char* path_class_name(PathClass path);  // "LOC", "NVL", "PIX", "PXB", "PHB", "SYS"

// Where one device sits, as path classification needs it.
struct DeviceLocation {
  std::string pci_bus_id;     // "0000:3b:00.0"; "" when the device has none
  std::vector<int> switches;  // the PCIe switches above it, the nearest first (ids of one machine)
  int locality = -1;          // the CPU / NUMA locality it hangs from; -1 unknown
};

// The class of the PCIe/SMP path between two devices (never NVL: NVLink is not in a location).
// One PCI device (whatever the functions) is LOC; an unknown locality on either side is SYS
// (assume the worst).
PathClass classify_path(const DeviceLocation& a, const DeviceLocation& b);

}  // namespace terse
