#include "plugin/net/driver/loaded_net.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

namespace terse::test {

std::string net_plugin_path() {
  const char* path = getenv("TERSE_NET_PLUGIN");
  if (path != nullptr && *path != '\0') return path;
#ifdef TERSE_NET_PLUGIN_PATH
  return TERSE_NET_PLUGIN_PATH;
#else
  return "libnccl-net-terse.so";
#endif
}

std::string LoadedNet::load(const std::string& path, int version) {
  // NCCL opens its plugins RTLD_NOW | RTLD_LOCAL.
  library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) return std::string("dlopen: ") + dlerror();
  std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  void* table = dlsym(library_, symbol.c_str());
  if (table == nullptr) return "no " + symbol + " in " + path;
  version_ = version;
  switch (version) {
    case 8:
      v8_ = static_cast<const netabi::NetV8*>(table);
      break;
    case 9:
      v9_ = static_cast<const netabi::NetV9*>(table);
      break;
    case 10:
      v10_ = static_cast<const netabi::NetV10*>(table);
      break;
    case 11:
      v11_ = static_cast<const netabi::NetV11*>(table);
      break;
    default:
      return "version " + std::to_string(version) + " is not one the harness drives";
  }
  return std::string();
}

// Calls the same entry point of whichever table is loaded.
#define TERSE_NET_CALL(entry, ...)   \
  (v11_   ? v11_->entry(__VA_ARGS__) \
   : v10_ ? v10_->entry(__VA_ARGS__) \
   : v9_  ? v9_->entry(__VA_ARGS__)  \
          : v8_->entry(__VA_ARGS__))

const char* LoadedNet::name() const {
  return v11_ ? v11_->name : v10_ ? v10_->name : v9_ ? v9_->name : v8_->name;
}

ncclResult_t LoadedNet::init(netabi::Logger logger) {
  if (v11_) {
    netabi::CommConfig config{netabi::kTrafficClassUndefined};
    return v11_->init(&context_, /*comm_id=*/0x7e55e, &config, logger, nullptr);
  }
  if (v10_) return v10_->init(logger, nullptr);
  return v9_ ? v9_->init(logger) : v8_->init(logger);
}

ncclResult_t LoadedNet::devices(int* count) {
  return TERSE_NET_CALL(devices, count);
}

ncclResult_t LoadedNet::properties(int dev, NetProperties* out) {
  auto copy_common = [out](const auto& props) {
    out->name = props.name ? props.name : "";
    out->pci_path = props.pci_path ? props.pci_path : "";
    out->ptr_support = props.ptr_support;
    out->speed = props.speed;
    out->max_comms = props.max_comms;
    out->max_recvs = props.max_recvs;
  };
  ncclResult_t result;
  if (v11_) {
    netabi::PropertiesV11 props{};
    result = v11_->get_properties(dev, &props);
    copy_common(props);
    out->max_p2p_bytes = props.max_p2p_bytes;
    out->vdevice_count = props.vprops.ndevs;
  } else if (v10_ || v9_) {
    netabi::PropertiesV9 props{};
    result = v10_ ? v10_->get_properties(dev, &props) : v9_->get_properties(dev, &props);
    copy_common(props);
    out->max_p2p_bytes = props.max_p2p_bytes;
    out->vdevice_count = props.vprops.ndevs;
  } else {
    netabi::PropertiesV8 props{};
    result = v8_->get_properties(dev, &props);
    copy_common(props);
  }
  return result;
}

ncclResult_t LoadedNet::listen(int dev, void* handle, void** listen_comm) {
  if (v11_) return v11_->listen(context_, dev, handle, listen_comm);
  if (v10_) return v10_->listen(dev, handle, listen_comm);
  return v9_ ? v9_->listen(dev, handle, listen_comm) : v8_->listen(dev, handle, listen_comm);
}

ncclResult_t LoadedNet::connect(int dev, void* handle, void** send_comm) {
  netabi::DeviceHandle* device_comm = nullptr;
  if (v11_) return v11_->connect(context_, dev, handle, send_comm, &device_comm);
  if (v10_) {
    netabi::CommConfig config{netabi::kTrafficClassUndefined};
    return v10_->connect(dev, &config, handle, send_comm, &device_comm);
  }
  return v9_ ? v9_->connect(dev, handle, send_comm, &device_comm)
             : v8_->connect(dev, handle, send_comm, &device_comm);
}

ncclResult_t LoadedNet::accept(void* listen_comm, void** recv_comm) {
  netabi::DeviceHandle* device_comm = nullptr;
  return TERSE_NET_CALL(accept, listen_comm, recv_comm, &device_comm);
}

ncclResult_t LoadedNet::reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return TERSE_NET_CALL(reg_mr, comm, data, size, type, mhandle);
}

ncclResult_t LoadedNet::dereg_mr(void* comm, void* mhandle) {
  return TERSE_NET_CALL(dereg_mr, comm, mhandle);
}

ncclResult_t LoadedNet::isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void** request) {
  if (v11_) return v11_->isend(send_comm, data, size, tag, mhandle, nullptr, request);
  if (v10_) return v10_->isend(send_comm, data, size, tag, mhandle, nullptr, request);
  if (v9_) return v9_->isend(send_comm, data, size, tag, mhandle, request);
  return v8_->isend(send_comm, data, static_cast<int>(size), tag, mhandle, request);
}

ncclResult_t LoadedNet::irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** request) {
  std::vector<void*> phandles(n > 0 ? n : 1, nullptr);
  if (v11_) return v11_->irecv(recv_comm, n, data, sizes, tags, mhandles, phandles.data(), request);
  if (v10_) return v10_->irecv(recv_comm, n, data, sizes, tags, mhandles, phandles.data(), request);
  if (v9_) return v9_->irecv(recv_comm, n, data, sizes, tags, mhandles, request);
  std::vector<int> narrow(n > 0 ? n : 1);
  for (int i = 0; i < n; ++i) narrow[i] = static_cast<int>(sizes[i]);
  return v8_->irecv(recv_comm, n, data, narrow.data(), tags, mhandles, request);
}

ncclResult_t LoadedNet::test(void* request, int* done, int* sizes) {
  return TERSE_NET_CALL(test, request, done, sizes);
}

ncclResult_t LoadedNet::close_send(void* send_comm) {
  return TERSE_NET_CALL(close_send, send_comm);
}

ncclResult_t LoadedNet::close_recv(void* recv_comm) {
  return TERSE_NET_CALL(close_recv, recv_comm);
}

ncclResult_t LoadedNet::close_listen(void* listen_comm) {
  return TERSE_NET_CALL(close_listen, listen_comm);
}

}  // namespace terse::test
