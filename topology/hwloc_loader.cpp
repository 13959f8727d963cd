#include "topology/hwloc_loader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/result.h"

namespace terse {
namespace {

Result refuse_file(const char* what, const std::string& path, const std::string& reason) {
  return fail(Result::kInvalidArgument, "%s%s: cannot load it as a machine topology: %s", what,
              path.c_str(), reason.c_str());
}

// Checks what hwloc would only report as "failed": that the file exists, is a file, and opens.
Result check_readable(const char* what, const std::string& path) {
  struct stat status {};
  if (stat(path.c_str(), &status) != 0) return refuse_file(what, path, strerror(errno));
  if (!S_ISREG(status.st_mode)) return refuse_file(what, path, "not a regular file");
  FILE* file = fopen(path.c_str(), "r");
  if (file == nullptr) return refuse_file(what, path, strerror(errno));
  fclose(file);
  return Result::kSuccess;
}

}  // namespace

HwlocTopology::~HwlocTopology() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

Result HwlocTopology::load(const std::string& xml_path, const char* what,
                           std::unique_ptr<HwlocTopology>* out) {
  if (out == nullptr)
    return fail(Result::kInvalidArgument, "hwloc topology output pointer is NULL");
  if (!xml_path.empty()) TERSE_CHECK(check_readable(what, xml_path));
  std::unique_ptr<HwlocTopology> loaded(new HwlocTopology());
  if (hwloc_topology_init(&loaded->topology_) != 0) {
    loaded->topology_ = nullptr;
    return fail(Result::kSystemError, "hwloc_topology_init failed: %s", strerror(errno));
  }
  // GPUs, NICs and the bridges above them; not every PCI function of the machine. In hwloc 2.x
  // and 3.x alike this one call covers bridges, PCI devices and OS devices.
  hwloc_topology_set_io_types_filter(loaded->topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!xml_path.empty() && hwloc_topology_set_xml(loaded->topology_, xml_path.c_str()) != 0) {
    return refuse_file(what, xml_path,
                       std::string("hwloc cannot read it as an XML topology export (") +
                           strerror(errno) + "; HWLOC_XML_VERBOSE=1 shows the parser's reason)");
  }
  if (hwloc_topology_load(loaded->topology_) != 0) {
    if (!xml_path.empty()) {
      return refuse_file(what, xml_path,
                         std::string("hwloc rejected its content (") + strerror(errno) + ")");
    }
    return fail(Result::kSystemError, "hwloc could not discover this machine's topology: %s",
                strerror(errno));
  }
  *out = std::move(loaded);
  return Result::kSuccess;
}

std::string hwloc_runtime_version() {
  const unsigned version = hwloc_get_api_version();
  char text[32];
  std::snprintf(text, sizeof text, "%u.%u.%u", version >> 16, (version >> 8) & 0xff,
                version & 0xff);
  return text;
}

OsDeviceKind os_device_kind(hwloc_obj_t os_device) {
  if (os_device == nullptr || os_device->type != HWLOC_OBJ_OS_DEVICE) return OsDeviceKind::kOther;
#if HWLOC_API_VERSION >= 0x00030000
  // hwloc 3: a bitmask of every kind the device is.
  const auto types = os_device->attr->osdev.types;
  if (types & HWLOC_OBJ_OSDEV_OPENFABRICS) return OsDeviceKind::kOpenFabrics;
  if (types & HWLOC_OBJ_OSDEV_NETWORK) return OsDeviceKind::kNetwork;
  if (types & HWLOC_OBJ_OSDEV_COPROC) return OsDeviceKind::kCoprocessor;
  if (types & HWLOC_OBJ_OSDEV_GPU) return OsDeviceKind::kGpu;
  return OsDeviceKind::kOther;
#else
  // hwloc 2: exactly one kind.
  switch (os_device->attr->osdev.type) {
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return OsDeviceKind::kOpenFabrics;
    case HWLOC_OBJ_OSDEV_NETWORK:
      return OsDeviceKind::kNetwork;
    case HWLOC_OBJ_OSDEV_COPROC:
      return OsDeviceKind::kCoprocessor;
    case HWLOC_OBJ_OSDEV_GPU:
      return OsDeviceKind::kGpu;
    default:
      return OsDeviceKind::kOther;
  }
#endif
}

bool is_pci_bridge(hwloc_obj_t object) {
  return object != nullptr && object->type == HWLOC_OBJ_BRIDGE &&
         object->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

const HwlocPciAttributes* pci_attributes(hwloc_obj_t object) {
  if (object == nullptr) return nullptr;
  if (object->type == HWLOC_OBJ_PCI_DEVICE) return &object->attr->pcidev;
  if (is_pci_bridge(object)) return &object->attr->bridge.upstream.pci;
  return nullptr;
}

std::string pci_bus_id(hwloc_obj_t object) {
  const HwlocPciAttributes* pci = pci_attributes(object);
  if (pci == nullptr) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci->domain),
                static_cast<unsigned>(pci->bus), static_cast<unsigned>(pci->dev),
                static_cast<unsigned>(pci->func));
  return text;
}

std::string bitmap_list(hwloc_const_bitmap_t bitmap) {
  if (bitmap == nullptr || hwloc_bitmap_iszero(bitmap)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bitmap) < 0 || text == nullptr) return "";
  std::string list = text;
  free(text);
  return list;
}

std::vector<std::pair<hwloc_obj_t, hwloc_obj_t>> nvlink_pairs(hwloc_topology_t topology) {
  std::vector<std::pair<hwloc_obj_t, hwloc_obj_t>> pairs;
#if HWLOC_API_VERSION >= 0x00020100
  unsigned count = 0;
  if (hwloc_distances_get_by_name(topology, "NVLinkBandwidth", &count, nullptr, 0) != 0) {
    return pairs;
  }
  std::vector<hwloc_distances_s*> matrices(count, nullptr);
  if (count == 0 ||
      hwloc_distances_get_by_name(topology, "NVLinkBandwidth", &count, matrices.data(), 0) != 0) {
    return pairs;
  }
  for (unsigned m = 0; m < count && m < matrices.size(); ++m) {
    const hwloc_distances_s* matrix = matrices[m];
    if (matrix == nullptr) continue;
    for (unsigned i = 0; i < matrix->nbobjs; ++i) {
      for (unsigned j = i + 1; j < matrix->nbobjs; ++j) {
        const uint64_t forward = matrix->values[i * matrix->nbobjs + j];
        const uint64_t backward = matrix->values[j * matrix->nbobjs + i];
        if (forward > 0 || backward > 0) pairs.emplace_back(matrix->objs[i], matrix->objs[j]);
      }
    }
    hwloc_distances_release(topology, matrices[m]);
  }
#else
  (void)topology;  // hwloc before 2.1 exposes no NVLink distances: no pair is NVLink
#endif
  return pairs;
}

}  // namespace terse
