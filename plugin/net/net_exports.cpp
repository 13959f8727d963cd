// The symbols NCCL looks up: ncclNetPlugin_v11 (NCCL 2.28 tries it first), then v10, v9 and v8,
// each a table of the same entry points (net_api.h) adapted to that version's signatures. Nothing
// else leaves the library (exports.map).
#include <memory>
#include <vector>

#include "common/result.h"
#include "plugin/net/net_api.h"
#include "plugin/net/net_log.h"
#include "plugin/net/net_v10.h"
#include "plugin/net/net_v11.h"
#include "plugin/net/net_v8.h"
#include "plugin/net/net_v9.h"

namespace terse::net {
namespace {

using namespace netabi;

// NCCL_NET=terse selects the plugin by this name.
constexpr const char* kName = "terse";

// The context init returns (v11): NCCL only hands it back; one plugin state serves every
// communicator.
int g_context;

ncclResult_t init_v11(void** context, uint64_t /*comm_id*/, CommConfig* /*config*/, Logger logger,
                      ProfilerCallback /*profiler*/) {
  if (context == nullptr) return NET_FAIL(ncclInvalidArgument, "init: ctx is NULL");
  *context = &g_context;
  return api::init(logger);
}
ncclResult_t init_v10(Logger logger, ProfilerCallback /*profiler*/) {
  return api::init(logger);
}
ncclResult_t init_v9(Logger logger) {
  return api::init(logger);
}

ncclResult_t listen_v11(void* /*context*/, int dev, void* handle, void** listen_comm) {
  return api::listen(dev, handle, listen_comm);
}
ncclResult_t connect_v11(void* /*context*/, int dev, void* handle, void** send_comm,
                         DeviceHandle** dev_comm) {
  return api::connect(dev, handle, send_comm, dev_comm);
}
ncclResult_t connect_v10(int dev, CommConfig* /*config*/, void* handle, void** send_comm,
                         DeviceHandle** dev_comm) {
  return api::connect(dev, handle, send_comm, dev_comm);
}
ncclResult_t isend_v10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void* /*phandle*/, void** request) {
  return api::isend(send_comm, data, size, tag, mhandle, request);
}
ncclResult_t irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                       void** mhandles, void** /*phandles*/, void** request) {
  return api::irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}
ncclResult_t irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                      void** mhandles, void** request) {
  return api::irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

// v8 sizes are int.
ncclResult_t isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                      void** request) {
  if (size < 0) return NET_FAIL(ncclInvalidArgument, "isend: size %d is negative", size);
  return api::isend(send_comm, data, static_cast<size_t>(size), tag, mhandle, request);
}
ncclResult_t irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                      void** request) {
  if (sizes == nullptr || n < 1 || n > 8) {
    return api::irecv(recv_comm, n, data, nullptr, tags, mhandles, request);
  }
  size_t wide[8];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0)
      return NET_FAIL(ncclInvalidArgument, "irecv: sizes[%d] %d is negative", i, sizes[i]);
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return api::irecv(recv_comm, n, data, wide, tags, mhandles, request);
}

ncclResult_t properties_v9(int dev, PropertiesV9* props) {
  if (props == nullptr) return NET_FAIL(ncclInvalidArgument, "getProperties: props is NULL");
  PropertiesV11 full;
  TERSE_CHECK(api::properties(dev, &full));
  *props =
      PropertiesV9{full.name,           full.pci_path,    full.guid,          full.ptr_support,
                   full.reg_is_global,  full.force_flush, full.speed,         full.port,
                   full.latency,        full.max_comms,   full.max_recvs,     full.device_type,
                   full.device_version, full.vprops,      full.max_p2p_bytes, full.max_coll_bytes};
  return ncclSuccess;
}
ncclResult_t properties_v8(int dev, PropertiesV8* props) {
  if (props == nullptr) return NET_FAIL(ncclInvalidArgument, "getProperties: props is NULL");
  PropertiesV11 full;
  TERSE_CHECK(api::properties(dev, &full));
  *props = PropertiesV8{full.name,          full.pci_path,  full.guid,        full.ptr_support,
                        full.reg_is_global, full.speed,     full.port,        full.latency,
                        full.max_comms,     full.max_recvs, full.device_type, full.device_version};
  return ncclSuccess;
}

ncclResult_t finalize_v11(void* /*context*/) {
  return ncclSuccess;
}
ncclResult_t set_net_attr_v11(void* /*context*/, NetAttrV11* /*attr*/) {
  // Hints about concurrent peers and flows; a link per comm needs none of them.
  return ncclSuccess;
}

}  // namespace
}  // namespace terse::net

using namespace terse::net;
using namespace terse::netabi;

extern "C" {

__attribute__((visibility("default"))) extern const NetV11 ncclNetPlugin_v11 = {
    kName,           init_v11,          api::devices,
    api::properties, listen_v11,        connect_v11,
    api::accept,     api::reg_mr,       api::reg_mr_dma_buf,
    api::dereg_mr,   isend_v10,         irecv_v10,
    api::iflush,     api::test,         api::close_send,
    api::close_recv, api::close_listen, nullptr,
    nullptr,         api::make_vdevice, finalize_v11,
    set_net_attr_v11};

__attribute__((visibility("default"))) extern const NetV10 ncclNetPlugin_v10 = {
    kName,           init_v10,          api::devices,
    properties_v9,   api::listen,       connect_v10,
    api::accept,     api::reg_mr,       api::reg_mr_dma_buf,
    api::dereg_mr,   isend_v10,         irecv_v10,
    api::iflush,     api::test,         api::close_send,
    api::close_recv, api::close_listen, nullptr,
    nullptr,         api::make_vdevice};

__attribute__((visibility("default"))) extern const NetV9 ncclNetPlugin_v9 = {
    kName,           init_v9,           api::devices,
    properties_v9,   api::listen,       api::connect,
    api::accept,     api::reg_mr,       api::reg_mr_dma_buf,
    api::dereg_mr,   api::isend,        irecv_v9,
    api::iflush,     api::test,         api::close_send,
    api::close_recv, api::close_listen, nullptr,
    nullptr,         api::make_vdevice};

__attribute__((visibility("default"))) extern const NetV8 ncclNetPlugin_v8 = {
    kName,       init_v9,     api::devices,        properties_v8,   api::listen,       api::connect,
    api::accept, api::reg_mr, api::reg_mr_dma_buf, api::dereg_mr,   isend_v8,          irecv_v8,
    api::iflush, api::test,   api::close_send,     api::close_recv, api::close_listen, nullptr,
    nullptr};

}  // extern "C"
