// The layouts of net_v8.h .. net_v11.h against NCCL's (x86-64 and aarch64 LP64; the numbers
// were printed from NCCL 2.28.9's own headers): sizes and the
// offsets of the fields that differ between versions. A wrong field order fails the build, not
// NCCL at run time.
#include <cstddef>

#include "common/result.h"
#include "plugin/net/net_abi.h"
#include "plugin/net/net_v10.h"
#include "plugin/net/net_v11.h"
#include "plugin/net/net_v8.h"
#include "plugin/net/net_v9.h"

namespace terse::netabi {

// The result codes: NCCL reads an int; the lower layers' Result converts by number.
static_assert(sizeof(ncclResult_t) == sizeof(int));
static_assert(Result::kSuccess == ncclSuccess && ncclSuccess == 0);
static_assert(Result::kUnhandledCudaError == ncclUnhandledCudaError && ncclUnhandledCudaError == 1);
static_assert(Result::kSystemError == ncclSystemError && ncclSystemError == 2);
static_assert(Result::kInternalError == ncclInternalError && ncclInternalError == 3);
static_assert(Result::kInvalidArgument == ncclInvalidArgument && ncclInvalidArgument == 4);
static_assert(Result::kInvalidUsage == ncclInvalidUsage && ncclInvalidUsage == 5);
static_assert(Result::kRemoteError == ncclRemoteError && ncclRemoteError == 6);
static_assert(Result::kInProgress == ncclInProgress && ncclInProgress == 7);

static_assert(sizeof(void*) == 8, "the ncclNet layouts below are LP64's");
static_assert(sizeof(DeviceType) == 4);
static_assert(sizeof(DeviceHandle) == 32 && offsetof(DeviceHandle, size) == 16);
static_assert(sizeof(VirtualDeviceProps) == 20);
static_assert(sizeof(CommConfig) == 4);

static_assert(offsetof(PropertiesV8, guid) == 16 && offsetof(PropertiesV8, ptr_support) == 24);
static_assert(offsetof(PropertiesV8, speed) == 32 && offsetof(PropertiesV8, latency) == 40);
static_assert(offsetof(PropertiesV8, max_recvs) == 48);
static_assert(offsetof(PropertiesV8, device_version) == 56 && sizeof(PropertiesV8) == 64);

static_assert(offsetof(PropertiesV9, force_flush) == 32 && offsetof(PropertiesV9, speed) == 36);
static_assert(offsetof(PropertiesV9, max_recvs) == 52 && offsetof(PropertiesV9, vprops) == 64);
static_assert(offsetof(PropertiesV9, max_p2p_bytes) == 88 && sizeof(PropertiesV9) == 104);

static_assert(offsetof(PropertiesV11, max_coll_bytes) == 96);
static_assert(offsetof(PropertiesV11, max_multi_request_size) == 104);
static_assert(sizeof(PropertiesV11) == 112);

static_assert(sizeof(CommAttrV11) == 16 && sizeof(NetAttrV11) == 44);

// The function tables: a name, then one pointer per entry point in NCCL's order. entry(i) is
// where the i-th entry point (0 = init) sits; entry(count) is the table's size.
constexpr size_t entry(size_t index) {
  return sizeof(void*) * (1 + index);
}
static_assert(sizeof(NetV8) == entry(18) && offsetof(NetV8, isend) == entry(9));
static_assert(offsetof(NetV8, irecv_consumed) == entry(17));
static_assert(sizeof(NetV9) == entry(19) && offsetof(NetV9, make_vdevice) == entry(18));
static_assert(sizeof(NetV10) == entry(19) && offsetof(NetV10, test) == entry(12));
static_assert(sizeof(NetV11) == entry(21) && offsetof(NetV11, finalize) == entry(19));
static_assert(offsetof(NetV11, set_net_attr) == entry(20) && offsetof(NetV11, listen) == entry(3));

}  // namespace terse::netabi
