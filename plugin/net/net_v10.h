// ncclNet v10 (NCCL 2.25 to 2.27): a profiler callback in init, a comm config in connect, and
// profiler handles in isend/irecv.
#pragma once

#include "plugin/net/net_abi.h"
#include "plugin/net/net_v9.h"

namespace terse::netabi {

using PropertiesV10 = PropertiesV9;  // the same fields in the same order

struct NetV10 {
  const char* name;
  ncclResult_t (*init)(Logger logger, ProfilerCallback profiler);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, PropertiesV10* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, CommConfig* config, void* handle, void** send_comm,
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
};

}  // namespace terse::netabi
