// What every ncclNet version shares: the logger NCCL hands to init, the profiler callback, the
// device-offload handle, pointer-support bits and limits. Written from the ABI facts of NCCL's
// plugin headers (DESIGN.md section 10); only the layouts must match, so the names live in
// terse::netabi and nothing here is NCCL's text. nccl.h supplies ncclResult_t.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace terse::netabi {

enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};
constexpr unsigned long kLogSubsystemNet = 0x10;  // NCCL_NET
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line,
                        const char* format, ...);
using ProfilerCallback = ncclResult_t (*)(void** event, int type, void* parent, int64_t plugin_id,
                                          void* extra);

constexpr int kPtrHost = 0x1;
constexpr int kPtrCuda = 0x2;
constexpr int kPtrDmaBuf = 0x4;
constexpr size_t kHandleMaxBytes = 128;                     // NCCL_NET_HANDLE_MAXSIZE
constexpr int kMaxRequests = 32;                            // NCCL_NET_MAX_REQUESTS per comm
constexpr int kMaxDevicesPerNic = 4;                        // NCCL_NET_MAX_DEVS_PER_NIC (v9 to v11)
constexpr size_t kMaxNetSizeBytes = size_t{1} << 40;        // NCCL_MAX_NET_SIZE_BYTES
constexpr size_t kMaxCollNetSizeBytes = size_t{512} << 20;  // MAX_COLLNET_SIZE
constexpr int kTrafficClassUndefined = -1;

enum DeviceType : int { kDeviceHost = 0, kDeviceUnpack = 1 };  // ncclNetDeviceType

// ncclNetDeviceHandle_v7_t, the same in every version since.
struct DeviceHandle {
  DeviceType type;
  int version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
};

// ncclNetVDeviceProps_v9_t .. _v11_t (one layout).
struct VirtualDeviceProps {
  int ndevs;
  int devs[kMaxDevicesPerNic];
};

// ncclNetCommConfig_v10_t / _v11_t.
struct CommConfig {
  int traffic_class;
};

}  // namespace terse::netabi
