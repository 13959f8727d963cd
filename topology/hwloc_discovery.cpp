// describe_hwloc_topology(): hwloc's tree turned into MachineTopology. The PCIe switch rule is
// NCCL's (path_class.h): a device hangs from the bridge two PCI levels above it when that is a
// PCI bridge (a switch's upstream port), else from its CPU locality; Broadcom Gen4/Gen5
// switches count as one level, as NCCL flattens them.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "common/log.h"
#include "topology/hwloc_discovery.h"
#include "topology/natural_order.h"

namespace terse {
namespace {

constexpr uint16_t kNvidiaVendor = 0x10de;
constexpr uint16_t kVgaClass = 0x0300;
constexpr uint16_t k3dClass = 0x0302;
constexpr int kMaxRdmaPorts = 16;
constexpr const char* kActivePortState = "4";  // IBV_PORT_ACTIVE, as hwloc's PortNState holds it

// The nearest PCI device at or above `object` (an OS device's PCI function), or null.
hwloc_obj_t pci_device_of(hwloc_obj_t object) {
  for (hwloc_obj_t up = object; up != nullptr; up = up->parent) {
    if (up->type == HWLOC_OBJ_PCI_DEVICE) return up;
  }
  return nullptr;
}

// The switch (upstream port) `object` hangs from, or null when it hangs from its CPU.
hwloc_obj_t switch_above(hwloc_obj_t object) {
  hwloc_obj_t port = object->parent;
  if (!is_pci_bridge(port)) return nullptr;
  hwloc_obj_t upstream = port->parent;
  return is_pci_bridge(upstream) ? upstream : nullptr;
}

// Broadcom PEX Gen4/Gen5 switches in base mode show as two levels (a top switch over
// sub-switches of the same chip) but carry full bandwidth between all their ports, so NCCL
// fuses the second level into the first (topo.cc, ncclTopoFlattenBcmSwitches). The generation
// from the vendor, device, subsystem vendor and subsystem device (whose top nibble is the level
// for Gen5), or 0 for any other switch.
int bcm_generation(hwloc_obj_t upstream_port, unsigned level) {
  const HwlocPciAttributes* pci = pci_attributes(upstream_port);
  if (pci == nullptr || pci->vendor_id != 0x1000 || pci->subvendor_id != 0x1000) return 0;
  const unsigned sub_top = pci->subdevice_id & 0xf000u;
  if (pci->device_id == 0xc010 && sub_top == 0xa000u) return 4;
  if (pci->device_id == 0xc030 && sub_top == level << 12) return 5;
  return 0;
}

// `sub` is the second level of the Broadcom switch `top` and counts as `top` itself.
bool fused_into(hwloc_obj_t sub, hwloc_obj_t top) {
  const int generation = bcm_generation(top, 0);
  return generation != 0 && bcm_generation(sub, 1) == generation;
}

bool starts_with_index(const char* name, const char* prefix) {
  const size_t length = strlen(prefix);
  return strncmp(name, prefix, length) == 0 && name[length] >= '0' && name[length] <= '9';
}

bool is_nvidia_gpu_os_device(hwloc_obj_t os_device) {
  const char* subtype = os_device->subtype != nullptr ? os_device->subtype : "";
  const char* name = os_device->name != nullptr ? os_device->name : "";
  return strcmp(subtype, "CUDA") == 0 || strcmp(subtype, "NVML") == 0 ||
         starts_with_index(name, "cuda") || starts_with_index(name, "nvml");
}

bool has_openfabrics_child(hwloc_obj_t pci_device) {
  for (hwloc_obj_t child = pci_device->io_first_child; child != nullptr;
       child = child->next_sibling) {
    if (os_device_kind(child) == OsDeviceKind::kOpenFabrics) return true;
  }
  return false;
}

std::string info(hwloc_obj_t object, const char* name) {
  const char* value = object != nullptr ? hwloc_obj_get_info_by_name(object, name) : nullptr;
  return value != nullptr ? value : "";
}

class Describer {
 public:
  Describer(hwloc_topology_t hwloc, MachineTopology* topology)
      : hwloc_(hwloc), topology_(topology) {}

  void run() {
    add_numa_nodes();
    add_gpus();
    add_nics();
    add_nvlinks();
  }

 private:
  int locality_of(hwloc_obj_t object) {
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(hwloc_, object);
    if (anchor == nullptr || anchor->nodeset == nullptr) return -1;
    Locality locality;
    locality.nodeset = bitmap_list(anchor->nodeset);
    locality.cpuset = bitmap_list(anchor->cpuset);
    if (hwloc_bitmap_weight(anchor->nodeset) == 1) {
      locality.numa_node = hwloc_bitmap_first(anchor->nodeset);
    }
    std::vector<Locality>& known = topology_->localities;
    for (size_t i = 0; i < known.size(); ++i) {
      if (known[i].nodeset == locality.nodeset) return static_cast<int>(i);
    }
    known.push_back(locality);
    return static_cast<int>(known.size() - 1);
  }

  // Where a PCI device or switch sits; `object` null (no PCI device) leaves switches empty.
  DeviceLocation location_of(hwloc_obj_t object, hwloc_obj_t locality_anchor) {
    DeviceLocation where;
    where.locality = locality_of(locality_anchor);
    if (object == nullptr) return where;
    where.pci_bus_id = pci_bus_id(object);
    for (hwloc_obj_t up = switch_above(object); up != nullptr; up = switch_above(up)) {
      hwloc_obj_t above = switch_above(up);
      if (above != nullptr && fused_into(up, above)) continue;  // counted as `above`
      where.switches.push_back(switch_index(up));
    }
    return where;
  }

  int switch_index(hwloc_obj_t upstream_port) {
    auto found = switch_of_object_.find(upstream_port);
    if (found != switch_of_object_.end()) return found->second;
    PciSwitch entry;
    entry.pci_bus_id = pci_bus_id(upstream_port);
    entry.where = location_of(upstream_port, upstream_port);
    topology_->switches.push_back(entry);
    const int index = static_cast<int>(topology_->switches.size() - 1);
    switch_of_object_[upstream_port] = index;
    return index;
  }

  void add_numa_nodes() {
    hwloc_obj_t node = nullptr;
    while ((node = hwloc_get_next_obj_by_type(hwloc_, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
      NumaNode entry;
      entry.os_index = static_cast<int>(node->os_index);
      entry.cpuset = bitmap_list(node->cpuset);
      entry.memory_bytes = node->attr->numanode.local_memory;
      topology_->numa_nodes.push_back(entry);
    }
  }

  // CUDA/NVML OS devices, one GPU per PCI function (cuda0 and nvml0 are one GPU); without any,
  // NVIDIA display or 3D controllers (an XML exported without the CUDA/NVML backends).
  void add_gpus() {
    std::map<std::string, GpuDevice> by_bus;
    hwloc_obj_t os_device = nullptr;
    while ((os_device = hwloc_get_next_osdev(hwloc_, os_device)) != nullptr) {
      if (!is_nvidia_gpu_os_device(os_device)) continue;
      hwloc_obj_t pci = pci_device_of(os_device);
      GpuDevice gpu;
      gpu.name = os_device->name != nullptr ? os_device->name : "";
      gpu.model = info(os_device, "GPUModel");
      if (gpu.model.empty()) gpu.model = info(pci, "PCIDevice");
      gpu.where = location_of(pci, os_device);
      const std::string key = pci != nullptr ? gpu.where.pci_bus_id : gpu.name;
      auto found = by_bus.find(key);
      // The CUDA name is the one applications use; NVML's only when no CUDA device is shown.
      if (found == by_bus.end() || starts_with_index(gpu.name.c_str(), "cuda")) by_bus[key] = gpu;
    }
    if (by_bus.empty()) {
      hwloc_obj_t pci = nullptr;
      while ((pci = hwloc_get_next_pcidev(hwloc_, pci)) != nullptr) {
        const HwlocPciAttributes& attributes = pci->attr->pcidev;
        if (attributes.vendor_id != kNvidiaVendor) continue;
        if (attributes.class_id != kVgaClass && attributes.class_id != k3dClass) continue;
        GpuDevice gpu;
        gpu.model = info(pci, "PCIDevice");
        gpu.where = location_of(pci, pci);
        by_bus[gpu.where.pci_bus_id] = gpu;
      }
    }
    for (auto& [bus, gpu] : by_bus) topology_->gpus.push_back(gpu);  // std::map: bus id order
  }

  void add_nics() {
    std::vector<NicDevice>& nics = topology_->nics;
    hwloc_obj_t os_device = nullptr;
    while ((os_device = hwloc_get_next_osdev(hwloc_, os_device)) != nullptr) {
      const OsDeviceKind kind = os_device_kind(os_device);
      hwloc_obj_t pci = pci_device_of(os_device);
      NicDevice nic;
      nic.name = os_device->name != nullptr ? os_device->name : "";
      nic.where = location_of(pci, os_device);
      if (kind == OsDeviceKind::kOpenFabrics) {
        nic.kind = NicKind::kRdma;
        add_rdma_ports(os_device, nic);
      } else if (kind == OsDeviceKind::kNetwork && pci != nullptr && !has_openfabrics_child(pci)) {
        // An interface of an RDMA device (IPoIB, RoCE) is that device's NIC, counted once.
        nic.kind = NicKind::kEthernet;
        nics.push_back(nic);
      }
    }
    std::sort(nics.begin(), nics.end(), [](const NicDevice& a, const NicDevice& b) {
      if (a.kind != b.kind) return a.kind == NicKind::kRdma;
      if (a.name != b.name) return natural_less(a.name, b.name);
      return a.port < b.port;
    });
  }

  void add_rdma_ports(hwloc_obj_t os_device, NicDevice nic) {
    bool any = false;
    for (int port = 1; port <= kMaxRdmaPorts; ++port) {
      char name[32];
      std::snprintf(name, sizeof name, "Port%dState", port);
      const std::string state = info(os_device, name);
      if (state.empty()) continue;
      nic.port = port;
      nic.state = state == kActivePortState ? PortState::kActive : PortState::kDown;
      topology_->nics.push_back(nic);
      any = true;
    }
    if (!any) {  // hwloc did not say: one port of unknown state
      nic.port = 1;
      topology_->nics.push_back(nic);
    }
  }

  void add_nvlinks() {
    for (const auto& [a, b] : nvlink_pairs(hwloc_)) {
      const int first = gpu_with_bus(pci_bus_id(pci_device_of(a)));
      const int second = gpu_with_bus(pci_bus_id(pci_device_of(b)));
      if (first < 0 || second < 0 || first == second) continue;  // NVLink to a CPU or NVSwitch
      const std::pair<int, int> pair(std::min(first, second), std::max(first, second));
      std::vector<std::pair<int, int>>& links = topology_->nvlinks;
      if (std::find(links.begin(), links.end(), pair) == links.end()) links.push_back(pair);
    }
    std::sort(topology_->nvlinks.begin(), topology_->nvlinks.end());
  }

  int gpu_with_bus(const std::string& bus) const {
    if (bus.empty()) return -1;
    for (size_t i = 0; i < topology_->gpus.size(); ++i) {
      if (topology_->gpus[i].where.pci_bus_id == bus) return static_cast<int>(i);
    }
    return -1;
  }

  hwloc_topology_t hwloc_;
  MachineTopology* topology_;
  std::map<hwloc_obj_t, int> switch_of_object_;
};

}  // namespace

void describe_hwloc_topology(hwloc_topology_t hwloc, MachineTopology* topology) {
  Describer(hwloc, topology).run();
  TERSE_INFO("topology: %zu NUMA node(s), %zu GPU(s), %zu NIC port(s), %zu PCIe switch(es)",
             topology->numa_nodes.size(), topology->gpus.size(), topology->nics.size(),
             topology->switches.size());
}

}  // namespace terse
