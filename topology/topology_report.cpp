#include "topology/topology_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <vector>

namespace terse {
namespace {

constexpr int kLabelWidth = 20;  // "GPU0 0000:3b:00.0"
constexpr int kCellWidth = 7;

void append(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void append(std::string* out, const char* format, ...) {
  char line[1024];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(line, sizeof line, format, arguments);
  va_end(arguments);
  *out += line;
}

struct Row {
  std::string name;  // "GPU0", "NIC1"
  const DeviceLocation* where;
};

std::vector<Row> matrix_rows(const MachineTopology& topology) {
  std::vector<Row> rows;
  for (size_t i = 0; i < topology.gpus.size(); ++i) {
    rows.push_back(Row{"GPU" + std::to_string(i), &topology.gpus[i].where});
  }
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    rows.push_back(Row{"NIC" + std::to_string(i), &topology.nics[i].where});
  }
  return rows;
}

PathClass path_between(const MachineTopology& topology, int a, int b) {
  const int gpus = static_cast<int>(topology.gpus.size());
  if (a < gpus && b < gpus) return topology.gpu_gpu(a, b);
  if (a < gpus) return topology.gpu_nic(a, b - gpus);
  if (b < gpus) return topology.gpu_nic(b, a - gpus);
  return topology.nic_nic(a - gpus, b - gpus);
}

std::string numa_text(const MachineTopology& topology, const DeviceLocation& where) {
  const Locality* place = topology.locality_of(where);
  return place != nullptr && !place->nodeset.empty() ? place->nodeset : "N/A";
}

std::string cpu_text(const MachineTopology& topology, const DeviceLocation& where) {
  const Locality* place = topology.locality_of(where);
  return place != nullptr && !place->cpuset.empty() ? place->cpuset : "N/A";
}

std::string speed_text(const NicDevice& nic) {
  if (nic.gbps <= 0) return "speed unknown";
  char text[64];
  std::snprintf(text, sizeof text, "%g Gbit/s (%s)", nic.gbps, nic.speed_source.c_str());
  return text;
}

void append_devices(const MachineTopology& topology, std::string* out) {
  append(out, "Machine: %s\n", topology.source.c_str());
  if (topology.gpus.empty()) append(out, "GPUs: no GPUs\n");
  for (size_t i = 0; i < topology.gpus.size(); ++i) {
    const GpuDevice& gpu = topology.gpus[i];
    append(out, "  GPU%zu: %s %s, %s\n", i, gpu.name.empty() ? "(PCI)" : gpu.name.c_str(),
           gpu.where.pci_bus_id.empty() ? "-" : gpu.where.pci_bus_id.c_str(),
           gpu.model.empty() ? "model unknown" : gpu.model.c_str());
  }
  if (topology.nics.empty()) append(out, "NICs: no NICs with a PCI device\n");
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    const NicDevice& nic = topology.nics[i];
    append(out, "  NIC%zu: %s %s, %s, %s, %s\n", i, nic.label().c_str(),
           nic.where.pci_bus_id.empty() ? "-" : nic.where.pci_bus_id.c_str(),
           nic_kind_name(nic.kind), port_state_name(nic.state), speed_text(nic).c_str());
  }
  if (!topology.other_interfaces.empty()) {
    append(out, "Network interfaces without a PCI device (never a rank's NIC):");
    for (const NetInterface& other : topology.other_interfaces) {
      if (other.gbps > 0) {
        append(out, " %s (%g Gbit/s)", other.name.c_str(), other.gbps);
      } else {
        append(out, " %s (speed unknown)", other.name.c_str());
      }
    }
    append(out, "\n");
  }
}

void append_nic_plan(const MachineTopology& topology, const NicPlan& plan, std::string* out) {
  if (plan.ranks.empty()) return;
  if (topology.gpus.empty()) {
    append(out, "NIC per local rank (no GPUs: round-robin over the NICs):\n");
  } else {
    append(out, "NIC per local rank (local rank i drives GPU i mod %zu; rail = NIC index):\n",
           topology.gpus.size());
  }
  for (size_t rank = 0; rank < plan.ranks.size(); ++rank) {
    const RankNic& choice = plan.ranks[rank];
    append(out, "  local rank %zu:", rank);
    if (choice.gpu >= 0) append(out, " GPU%d ->", choice.gpu);
    if (choice.nic < 0) {
      append(out, " no NIC\n");
      continue;
    }
    const NicDevice& nic = topology.nics[static_cast<size_t>(choice.nic)];
    append(out, " NIC%d (%s", choice.nic, nic.label().c_str());
    if (choice.gpu >= 0) append(out, ", %s", path_class_name(choice.path));
    append(out, "), rail %d\n", choice.nic);
  }
}

void append_numa(const MachineTopology& topology, std::string* out) {
  append(out, "NUMA nodes:%s\n", topology.numa_nodes.empty() ? " none reported" : "");
  for (const NumaNode& node : topology.numa_nodes) {
    append(out, "  node %d: CPUs %s, %.1f GiB\n", node.os_index,
           node.cpuset.empty() ? "none" : node.cpuset.c_str(),
           static_cast<double>(node.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  }
}

}  // namespace

std::string format_path_matrix(const MachineTopology& topology) {
  const std::vector<Row> rows = matrix_rows(topology);
  if (rows.empty()) return "";
  std::string out;
  append(&out, "%-*s", kLabelWidth, "");
  for (const Row& column : rows) append(&out, "%-*s", kCellWidth, column.name.c_str());
  size_t cpu_width = sizeof "CPU Affinity";
  for (const Row& row : rows)
    cpu_width = std::max(cpu_width, cpu_text(topology, *row.where).size());
  const int affinity_width = static_cast<int>(cpu_width) + 3;
  append(&out, "%-*s%s\n", affinity_width, "CPU Affinity", "NUMA Affinity");
  for (size_t a = 0; a < rows.size(); ++a) {
    const std::string bus = rows[a].where->pci_bus_id.empty() ? "-" : rows[a].where->pci_bus_id;
    append(&out, "%-*s", kLabelWidth, (rows[a].name + " " + bus).c_str());
    for (size_t b = 0; b < rows.size(); ++b) {
      const char* cell =
          a == b
              ? " X"
              : path_class_name(path_between(topology, static_cast<int>(a), static_cast<int>(b)));
      append(&out, "%-*s", kCellWidth, cell);
    }
    append(&out, "%-*s%s\n", affinity_width, cpu_text(topology, *rows[a].where).c_str(),
           numa_text(topology, *rows[a].where).c_str());
  }
  return out;
}

std::string format_path_legend() {
  return "Legend (NCCL's path classes, closest first):\n"
         "  X    = Self\n"
         "  LOC  = The same PCI device (ports of one NIC)\n"
         "  NVL  = Connection traversing NVLink\n"
         "  PIX  = Connection traversing at most a single PCIe switch\n"
         "  PXB  = Connection traversing multiple PCIe switches (without the PCIe Host Bridge)\n"
         "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (the same CPU / NUMA "
         "node; nvidia-smi's NODE is PHB here)\n"
         "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
         "(e.g., QPI/UPI)\n";
}

std::string format_topology_report(const MachineTopology& topology, const NicPlan& plan,
                                   const LinkModel& model) {
  std::string out;
  append_devices(topology, &out);
  const std::string matrix = format_path_matrix(topology);
  if (!matrix.empty()) out += "\n" + matrix + "\n" + format_path_legend();
  out += "\n";
  append_nic_plan(topology, plan, &out);
  append_numa(topology, &out);
  append(&out, "\nLink model assumed: %s\n", model.source.c_str());
  append(&out, "  intra-node: alpha %g us, %g GB/s; inter-node: alpha %g us, %g GB/s\n",
         model.intra.latency_s * 1e6, model.intra.bytes_per_s / 1e9, model.inter.latency_s * 1e6,
         model.inter.bytes_per_s / 1e9);
  return out;
}

}  // namespace terse
