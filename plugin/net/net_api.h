// The plugin's entry points with v11's meaning, version-neutral: net_exports.cpp hands them to
// NCCL as v11 and adapts them for v10, v9 and v8. Every entry point takes the plugin lock, checks
// its arguments (a comm or request this plugin does not know is refused by name, not followed),
// and returns an NCCL result with a logged reason.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/net/net_abi.h"
#include "plugin/net/net_v11.h"

namespace terse::net::api {

ncclResult_t init(netabi::Logger logger);
ncclResult_t devices(int* ndev);
ncclResult_t properties(int dev, netabi::PropertiesV11* props);
ncclResult_t listen(int dev, void* handle, void** listen_comm);
ncclResult_t connect(int dev, void* handle, void** send_comm, netabi::DeviceHandle** dev_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm, netabi::DeviceHandle** dev_comm);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dma_buf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                   void** request);
ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                   void** mhandles, void** request);
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* send_comm);
ncclResult_t close_recv(void* recv_comm);
ncclResult_t close_listen(void* listen_comm);
ncclResult_t make_vdevice(int* dev, netabi::VirtualDeviceProps* props);

}  // namespace terse::net::api
