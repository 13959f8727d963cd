#include "plugin/net/net_api.h"

#include <mutex>
#include <set>

#include "common/result.h"
#include "plugin/net/connection_setup.h"
#include "plugin/net/net_comm.h"
#include "plugin/net/net_devices.h"
#include "plugin/net/net_log.h"
#include "plugin/net/recv_comm.h"
#include "plugin/net/send_comm.h"
#include "plugin/net/ucx_for_plugin.h"

namespace terse::net::api {
namespace {

// NCCL's transfers report sizes as int: the largest message a request may carry.
constexpr size_t kMaxMessageBytes = size_t{1} << 30;

// Live objects, so that a stale or foreign pointer is refused instead of followed.
std::set<ListenComm*>& listen_comms() {
  static std::set<ListenComm*> comms;
  return comms;
}
std::set<Comm*>& comms() {
  static std::set<Comm*> all;
  return all;
}

ncclResult_t find_comm(void* pointer, const char* what, Comm** out) {
  auto found = comms().find(static_cast<Comm*>(pointer));
  if (found == comms().end()) {
    return NET_FAIL(ncclInvalidArgument, "%s %p is not an open comm of this plugin", what, pointer);
  }
  *out = *found;
  return ncclSuccess;
}

ncclResult_t find_send_comm(void* pointer, SendComm** out) {
  Comm* comm = nullptr;
  TERSE_CHECK(find_comm(pointer, "sendComm", &comm));
  if (!comm->is_send()) {
    return NET_FAIL(ncclInvalidArgument, "sendComm %p is a receive comm", pointer);
  }
  *out = static_cast<SendComm*>(comm);
  return ncclSuccess;
}

ncclResult_t find_recv_comm(void* pointer, RecvComm** out) {
  Comm* comm = nullptr;
  TERSE_CHECK(find_comm(pointer, "recvComm", &comm));
  if (comm->is_send()) return NET_FAIL(ncclInvalidArgument, "recvComm %p is a send comm", pointer);
  *out = static_cast<RecvComm*>(comm);
  return ncclSuccess;
}

}  // namespace

ncclResult_t init(netabi::Logger logger) {
  set_logger(logger);
  std::lock_guard<std::mutex> lock(plugin_lock());
  const std::vector<NetDevice>* list = nullptr;
  TERSE_CHECK(net_devices(&list));
  CompressMode mode = CompressMode::kAuto;
  TERSE_CHECK(compress_mode(&mode));
  int level = 1;
  TERSE_CHECK(zstd_level(&level));
  for (size_t i = 0; i < list->size(); ++i) {
    const NetDevice& device = (*list)[i];
    NET_INFO("device %zu: %s %s, %d Mbit/s%s%s", i, device.name.c_str(),
             device.address.to_string().c_str(), device.speed_mbps,
             device.pci_path.empty() ? "" : ", ", device.pci_path.c_str());
  }
  NET_INFO("TERSE_NET_COMPRESS=%s; host memory only (UCX %s CUDA memory)", compress_mode_name(mode),
           ucx_reports_cuda_memory() ? "takes" : "does not take");
  return ncclSuccess;
}

ncclResult_t devices(int* ndev) {
  if (ndev == nullptr) return NET_FAIL(ncclInvalidArgument, "devices: ndev is NULL");
  std::lock_guard<std::mutex> lock(plugin_lock());
  const std::vector<NetDevice>* list = nullptr;
  TERSE_CHECK(net_devices(&list));
  *ndev = static_cast<int>(list->size());
  return ncclSuccess;
}

ncclResult_t properties(int dev, netabi::PropertiesV11* props) {
  if (props == nullptr) return NET_FAIL(ncclInvalidArgument, "getProperties: props is NULL");
  std::lock_guard<std::mutex> lock(plugin_lock());
  const std::vector<NetDevice>* list = nullptr;
  TERSE_CHECK(net_devices(&list));
  if (dev < 0 || static_cast<size_t>(dev) >= list->size()) {
    return NET_FAIL(ncclInvalidArgument, "getProperties: dev %d (devices are 0 to %zu)", dev,
                    list->size() - 1);
  }
  const NetDevice& device = (*list)[dev];
  *props = netabi::PropertiesV11{};
  props->name = const_cast<char*>(device.name.c_str());
  props->pci_path = device.pci_path.empty() ? nullptr : const_cast<char*>(device.pci_path.c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptr_support = netabi::kPtrHost;
  props->reg_is_global = 0;
  props->force_flush = 0;
  props->speed = device.speed_mbps;
  props->port = 0;
  props->latency = 0;
  props->max_comms = 65536;
  props->max_recvs = kMaxGroupedReceives;
  props->device_type = netabi::kDeviceHost;
  props->device_version = 0;
  props->vprops.ndevs = 1;
  props->vprops.devs[0] = dev;
  props->max_p2p_bytes = kMaxMessageBytes;
  props->max_coll_bytes = kMaxMessageBytes;
  props->max_multi_request_size = 1;
  return ncclSuccess;
}

ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  if (listen_comm == nullptr) return NET_FAIL(ncclInvalidArgument, "listen: listenComm is NULL");
  std::lock_guard<std::mutex> lock(plugin_lock());
  ListenComm* comm = nullptr;
  TERSE_CHECK(listen_on(dev, handle, &comm));
  listen_comms().insert(comm);
  *listen_comm = comm;
  return ncclSuccess;
}

ncclResult_t connect(int dev, void* handle, void** send_comm, netabi::DeviceHandle** /*dev*/) {
  if (send_comm == nullptr) return NET_FAIL(ncclInvalidArgument, "connect: sendComm is NULL");
  *send_comm = nullptr;
  std::lock_guard<std::mutex> lock(plugin_lock());
  SendComm* comm = nullptr;
  TERSE_CHECK(connect_to(dev, handle, &comm));
  if (comm != nullptr) comms().insert(comm);
  *send_comm = comm;
  return ncclSuccess;
}

ncclResult_t accept(void* listen_comm, void** recv_comm, netabi::DeviceHandle** /*dev*/) {
  if (recv_comm == nullptr) return NET_FAIL(ncclInvalidArgument, "accept: recvComm is NULL");
  *recv_comm = nullptr;
  std::lock_guard<std::mutex> lock(plugin_lock());
  auto found = listen_comms().find(static_cast<ListenComm*>(listen_comm));
  if (found == listen_comms().end()) {
    return NET_FAIL(ncclInvalidArgument, "accept: listenComm %p is not an open listen comm",
                    listen_comm);
  }
  RecvComm* comm = nullptr;
  TERSE_CHECK(accept_from(*found, &comm));
  if (comm != nullptr) comms().insert(comm);
  *recv_comm = comm;
  return ncclSuccess;
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return NET_FAIL(ncclInvalidArgument, "regMr: mhandle is NULL");
  std::lock_guard<std::mutex> lock(plugin_lock());
  Comm* owner = nullptr;
  TERSE_CHECK(find_comm(comm, "regMr: comm", &owner));
  if (type != netabi::kPtrHost) {
    return NET_FAIL(ncclInvalidArgument,
                    "regMr: type %d; this plugin reports ptrSupport NCCL_PTR_HOST (1) only", type);
  }
  if (data == nullptr && size > 0) return NET_FAIL(ncclInvalidArgument, "regMr: data is NULL");
  *mhandle = owner->registrations().add(data, size, type);
  return ncclSuccess;
}

ncclResult_t reg_mr_dma_buf(void* /*comm*/, void* /*data*/, size_t /*size*/, int type,
                            uint64_t /*offset*/, int fd, void** /*mhandle*/) {
  return NET_FAIL(ncclInvalidUsage,
                  "regMrDmaBuf (type %d, fd %d): this plugin does not take DMA-BUF memory "
                  "(ptrSupport is NCCL_PTR_HOST)",
                  type, fd);
}

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  std::lock_guard<std::mutex> lock(plugin_lock());
  Comm* owner = nullptr;
  TERSE_CHECK(find_comm(comm, "deregMr: comm", &owner));
  if (!owner->registrations().remove(static_cast<MemoryRegion*>(mhandle))) {
    return NET_FAIL(ncclInvalidArgument, "deregMr: mhandle %p is not registered with comm %p",
                    mhandle, comm);
  }
  return ncclSuccess;
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void** request) {
  if (request == nullptr) return NET_FAIL(ncclInvalidArgument, "isend: request is NULL");
  *request = nullptr;
  if (size > kMaxMessageBytes) {
    return NET_FAIL(ncclInvalidArgument, "isend: size %zu is over maxP2pBytes (%zu)", size,
                    kMaxMessageBytes);
  }
  std::lock_guard<std::mutex> lock(plugin_lock());
  SendComm* comm = nullptr;
  TERSE_CHECK(find_send_comm(send_comm, &comm));
  return comm->isend(data, size, tag, mhandle, request);
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** request) {
  if (request == nullptr) return NET_FAIL(ncclInvalidArgument, "irecv: request is NULL");
  *request = nullptr;
  for (int i = 0; sizes != nullptr && i < n && i < kMaxGroupedReceives; ++i) {
    if (sizes[i] > kMaxMessageBytes) {
      return NET_FAIL(ncclInvalidArgument, "irecv: sizes[%d] %zu is over maxP2pBytes (%zu)", i,
                      sizes[i], kMaxMessageBytes);
    }
  }
  std::lock_guard<std::mutex> lock(plugin_lock());
  RecvComm* comm = nullptr;
  TERSE_CHECK(find_recv_comm(recv_comm, &comm));
  return comm->irecv(n, data, sizes, tags, mhandles, request);
}

ncclResult_t iflush(void* recv_comm, int /*n*/, void** /*data*/, int* /*sizes*/,
                    void** /*mhandles*/, void** request) {
  // Host memory needs no flush (NCCL never calls it for a host-only plugin): nothing to wait for.
  if (request == nullptr) return NET_FAIL(ncclInvalidArgument, "iflush: request is NULL");
  std::lock_guard<std::mutex> lock(plugin_lock());
  RecvComm* comm = nullptr;
  TERSE_CHECK(find_recv_comm(recv_comm, &comm));
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  if (done == nullptr) return NET_FAIL(ncclInvalidArgument, "test: done is NULL");
  *done = 0;
  std::lock_guard<std::mutex> lock(plugin_lock());
  // A request lives inside its comm: find the live comm that holds it.
  for (Comm* comm : comms()) {
    Request* found = comm->request_at(request);
    if (found != nullptr) return comm->test(found, done, sizes);
  }
  return NET_FAIL(ncclInvalidArgument, "test: request %p is not an outstanding request", request);
}

namespace {

ncclResult_t close_comm(void* pointer, bool is_send) {
  std::lock_guard<std::mutex> lock(plugin_lock());
  Comm* comm = nullptr;
  TERSE_CHECK(find_comm(pointer, is_send ? "closeSend: sendComm" : "closeRecv: recvComm", &comm));
  if (comm->is_send() != is_send) {
    return NET_FAIL(ncclInvalidArgument, "%s: comm %p is a %s comm",
                    is_send ? "closeSend" : "closeRecv", pointer, is_send ? "receive" : "send");
  }
  comms().erase(comm);
  ncclResult_t result = comm->close();
  delete comm;
  return result;
}

}  // namespace

ncclResult_t close_send(void* send_comm) {
  return close_comm(send_comm, true);
}

ncclResult_t close_recv(void* recv_comm) {
  return close_comm(recv_comm, false);
}

ncclResult_t close_listen(void* listen_comm) {
  std::lock_guard<std::mutex> lock(plugin_lock());
  auto found = listen_comms().find(static_cast<ListenComm*>(listen_comm));
  if (found == listen_comms().end()) {
    return NET_FAIL(ncclInvalidArgument, "closeListen: listenComm %p is not an open listen comm",
                    listen_comm);
  }
  delete *found;
  listen_comms().erase(found);
  return ncclSuccess;
}

ncclResult_t make_vdevice(int* dev, netabi::VirtualDeviceProps* props) {
  if (dev == nullptr || props == nullptr) {
    return NET_FAIL(ncclInvalidArgument, "makeVDevice: d and props must not be NULL");
  }
  std::lock_guard<std::mutex> lock(plugin_lock());
  const std::vector<NetDevice>* list = nullptr;
  TERSE_CHECK(net_devices(&list));
  // A virtual device of one device is that device; merging several is not supported.
  if (props->ndevs != 1 || props->devs[0] < 0 ||
      static_cast<size_t>(props->devs[0]) >= list->size()) {
    return NET_FAIL(ncclInvalidUsage,
                    "makeVDevice: %d devices (first %d): this plugin makes virtual devices of "
                    "exactly one of its devices",
                    props->ndevs, props->ndevs > 0 ? props->devs[0] : -1);
  }
  *dev = props->devs[0];
  return ncclSuccess;
}

}  // namespace terse::net::api
