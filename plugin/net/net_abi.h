// What every ncclNet version shares: the result codes, the logger NCCL hands to init, the
// profiler callback, the device-offload handle, pointer-support bits and limits. Written from the
// ABI facts of NCCL's plugin headers (docs/design.md section 10); only the layouts and numbers must
// match, so the names live in terse::netabi and nothing here is NCCL's text, except the result
// codes below.
#pragma once

#include <cstddef>
#include <cstdint>

// The ncclNet ABI's result codes (every entry point returns one, as an int-sized enum), declared
// here as NCCL's ext-net example plugins declare them, so that the plugin builds without NCCL's
// headers (tests/net_plugin/check_net_no_nccl_headers.sh holds it to that). Their numbers are
// nccl.h's; terse::Result copies them too (common/result.h), and net_abi_checks.cpp checks both
// agree. A translation unit must not include this header and nccl.h together.
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

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
