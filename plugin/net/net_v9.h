// ncclNet v9 (NCCL 2.23 to 2.24): size_t sizes, vProps and transfer limits in the properties,
// makeVDevice.
#pragma once

#include "plugin/net/net_abi.h"

namespace terse::netabi {

struct PropertiesV9 {
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
};

struct NetV9 {
  const char* name;
  ncclResult_t (*init)(Logger logger);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, PropertiesV9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm, DeviceHandle** send_dev_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm, DeviceHandle** recv_dev_comm);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dma_buf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** device_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*make_vdevice)(int* dev, VirtualDeviceProps* props);
};

}  // namespace terse::netabi
