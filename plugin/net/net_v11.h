// ncclNet v11 (NCCL 2.28, the version it looks up first): a context from init passed to listen,
// connect and finalize; the comm config moves to init; maxMultiRequestSize; setNetAttr.
#pragma once

#include "plugin/net/net_abi.h"

namespace terse::netabi {

struct PropertiesV11 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;  // Mbit/s
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  DeviceType device_type;
  int device_version;
  VirtualDeviceProps vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int max_multi_request_size;
};

// ncclNetCommAttr_v11_t and ncclNetAttr_v11_t: hints NCCL may pass through setNetAttr.
struct CommAttrV11 {
  int32_t max_concurrent_peers;
  int32_t min_concurrent_peers;
  int32_t max_flows_per_peer;
  int32_t min_flows_per_peer;
};
struct NetAttrV11 {
  CommAttrV11 send_comm_attr;
  CommAttrV11 recv_comm_attr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

struct NetV11 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t comm_id, CommConfig* config, Logger logger,
                       ProfilerCallback profiler);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, PropertiesV11* props);
  ncclResult_t (*listen)(void* context, int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* context, int dev, void* handle, void** send_comm,
                          DeviceHandle** send_dev_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** device_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*make_vdevice)(int* dev, VirtualDeviceProps* props);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*set_net_attr)(void* context, NetAttrV11* attr);
};

}  // namespace terse::netabi
