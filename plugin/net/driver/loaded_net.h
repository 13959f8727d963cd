// libnccl-net-terse.so as NCCL sees it: dlopen'ed, one ncclNetPlugin_vN table looked up by name,
// and every call made through that version's own signature (v8's int sizes included), so the
// tests and perf/net_plugin_perf drive each version's struct exactly as NCCL would.
#pragma once

#include <cstddef>
#include <string>

#include "plugin/net/net_abi.h"
#include "plugin/net/net_v10.h"
#include "plugin/net/net_v11.h"
#include "plugin/net/net_v8.h"
#include "plugin/net/net_v9.h"

namespace terse::test {

// The fields every version's properties carry, plus maxP2pBytes (0 before v9).
struct NetProperties {
  std::string name;
  std::string pci_path;
  int ptr_support = 0;
  int speed = 0;
  int max_comms = 0;
  int max_recvs = 0;
  size_t max_p2p_bytes = 0;
  int vdevice_count = 0;
};

class LoadedNet {
 public:
  // Loads `path` and its ncclNetPlugin_v<version>; "" or what failed.
  std::string load(const std::string& path, int version);
  int version() const { return version_; }
  const char* name() const;

  ncclResult_t init(netabi::Logger logger);
  ncclResult_t devices(int* count);
  ncclResult_t properties(int dev, NetProperties* out);
  ncclResult_t listen(int dev, void* handle, void** listen_comm);
  ncclResult_t connect(int dev, void* handle, void** send_comm);
  ncclResult_t accept(void* listen_comm, void** recv_comm);
  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t dereg_mr(void* comm, void* mhandle);
  ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request);
  ncclResult_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request);
  ncclResult_t test(void* request, int* done, int* sizes);
  ncclResult_t close_send(void* send_comm);
  ncclResult_t close_recv(void* recv_comm);
  ncclResult_t close_listen(void* listen_comm);

 private:
  int version_ = 0;
  void* library_ = nullptr;
  const netabi::NetV8* v8_ = nullptr;
  const netabi::NetV9* v9_ = nullptr;
  const netabi::NetV10* v10_ = nullptr;
  const netabi::NetV11* v11_ = nullptr;
  void* context_ = nullptr;  // v11's
};

// The plugin the build made (TERSE_NET_PLUGIN_PATH), or $TERSE_NET_PLUGIN when set.
std::string net_plugin_path();

}  // namespace terse::test
