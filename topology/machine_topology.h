// One machine as terse sees it: NUMA nodes, GPUs, NICs and the PCIe switches between them, each
// device with its location (topology/path_class.h), so that every GPU-GPU, GPU-NIC and NIC-NIC
// pair has NCCL's path class. Plain data: load_machine_topology() fills it from hwloc (this
// machine, or an XML export), and tests may build one by hand.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "topology/nic_discovery.h"
#include "topology/path_class.h"

namespace terse {

// A place on the CPU side that I/O hangs from (hwloc's first non-I/O ancestor): one NUMA node
// on most machines, several where hwloc cannot tell (then devices there are SYS to all others).
struct Locality {
  std::string nodeset;  // NUMA nodes, "0" or "0-1"
  std::string cpuset;   // CPUs, "0-7,16-23"
  int numa_node = -1;   // the NUMA node's OS index when there is exactly one, else -1
};

struct NumaNode {
  int os_index = 0;
  std::string cpuset;
  uint64_t memory_bytes = 0;
};

// A PCIe switch, as NCCL counts them (its upstream port's bus id; path_class.h says why).
struct PciSwitch {
  std::string pci_bus_id;
  DeviceLocation where;  // the switches above it and its locality
};

struct GpuDevice {
  std::string name;   // the CUDA/NVML OS device ("cuda0", "nvml0"), or "" for a bare PCI GPU
  std::string model;  // hwloc's GPUModel or PCIDevice info, "" unknown
  DeviceLocation where;
};

enum class NicKind : uint8_t { kRdma, kEthernet };
enum class PortState : uint8_t { kUnknown, kActive, kDown };
const char* nic_kind_name(NicKind kind);       // "RDMA", "Ethernet"
const char* port_state_name(PortState state);  // "state unknown", "active", "down"

// One NIC port: an RDMA device's port (mlx5_0:1), or an Ethernet interface.
struct NicDevice {
  std::string name;  // "mlx5_0", "eth0"
  NicKind kind = NicKind::kEthernet;
  int port = 0;  // RDMA: 1-based port number; Ethernet: 0
  PortState state = PortState::kUnknown;
  RdmaLinkLayer link_layer = RdmaLinkLayer::kUnspecified;  // RDMA, from ibverbs
  double gbps = 0;           // link speed, 0 when unknown (always, from an XML file)
  std::string speed_source;  // "ibverbs", "sysfs", "" when unknown
  DeviceLocation where;

  std::string label() const;  // "mlx5_0:1", "eth0"
  bool usable() const { return state != PortState::kDown; }
};

// A network interface with no PCI device (virtual, veth, bonds): never a rank's NIC, but the
// bootstrap or UCX may still go through it, so its speed is kept for the link model.
struct NetInterface {
  std::string name;
  double gbps = 0;  // sysfs speed, 0 when unknown
};

struct MachineTopology {
  std::string source;  // "this machine (hwloc 2.9.0)" or the XML file's path
  bool live = false;   // read from this machine (speeds from ibverbs and sysfs) or from a file
  std::vector<NumaNode> numa_nodes;
  std::vector<Locality> localities;
  std::vector<PciSwitch> switches;
  std::vector<GpuDevice> gpus;  // in PCI bus id order (NVML's and nvidia-smi's)
  std::vector<NicDevice> nics;
  std::vector<NetInterface> other_interfaces;
  std::vector<std::pair<int, int>> nvlinks;  // GPU index pairs joined by NVLink, first < second

  PathClass gpu_gpu(int a, int b) const;  // NVL where NVLink joins them, else the PCIe path
  PathClass gpu_nic(int gpu, int nic) const;
  PathClass nic_nic(int a, int b) const;
  // The locality a device hangs from; null when unknown.
  const Locality* locality_of(const DeviceLocation& where) const;
};

// Fills `topology` from `xml_path`; when that is "", from TERSE_TOPO_FILE when set, else from
// this machine (hwloc with I/O discovery; RDMA port state and speed from ibverbs, Ethernet
// speeds from /sys/class/net). A file hwloc cannot load is Result::kInvalidArgument naming it and
// why.
Result load_machine_topology(const std::string& xml_path, MachineTopology* topology);

}  // namespace terse
