// include/terse/terse.h's parameter server (tersePs*): the arguments a user can get wrong are
// refused here with a sentence naming them, then ps/parameter_server.h does the work.
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "collectives/reduction.h"
#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/growing_structs.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "ps/parameter_server.h"
#include "ps/shard_update.h"
#include "terse/terse.h"

// What the opaque handles of terse.h point to. Each holds a use of its communicator
// (acquire_comm) from init to free, so a destroy or abort in between leaves the communicator's
// memory in place until the free, which then releases the use.
struct tersePsTensor {
  ncclComm_t comm = nullptr;
  std::unique_ptr<terse::PsHandle> handle;
};
struct tersePsRequest {
  std::shared_ptr<terse::PsRequest> request;
};

namespace terse {
namespace {

ncclResult_t check_spec(const char* function, int index, const tersePsTensorDesc& desc,
                        PsTensorSpec* spec) {
  const char* name = desc.name != nullptr ? desc.name : "";
  if (desc.count == 0) {
    return fail(ncclInvalidArgument, "%s: tensor %d ('%s'): count is 0", function, index, name);
  }
  if (!ps_type_supported(desc.datatype)) {
    return fail(ncclInvalidArgument,
                "%s: tensor %d ('%s'): datatype %d is not one the parameter server holds "
                "(ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16)",
                function, index, name, int(desc.datatype));
  }
  const size_t element_bytes = nccl_type_size(desc.datatype);
  if (desc.count > std::numeric_limits<size_t>::max() / element_bytes) {
    return fail(ncclInvalidArgument, "%s: tensor %d ('%s'): count %zu overflows the byte size",
                function, index, name, desc.count);
  }
  if (desc.data == nullptr) {
    return fail(ncclInvalidArgument, "%s: tensor %d ('%s'): data is NULL with count %zu", function,
                index, name, desc.count);
  }
  const size_t row = desc.row_elements == 0 ? 1 : desc.row_elements;
  if (desc.count % row != 0) {
    return fail(ncclInvalidArgument,
                "%s: tensor %d ('%s'): row_elements %zu does not divide count %zu", function, index,
                name, desc.row_elements, desc.count);
  }
  spec->name = name;
  spec->data = desc.data;
  spec->count = desc.count;
  spec->type = desc.datatype;
  spec->row_elements = row;
  spec->push_codec_given = desc.push_codec != nullptr;
  spec->push_codec = desc.push_codec != nullptr ? desc.push_codec : "none";
  spec->receive_codec_given = desc.receive_codec != nullptr;
  spec->receive_codec = desc.receive_codec != nullptr ? desc.receive_codec : "none";
  return ncclSuccess;
}

ncclResult_t init(const char* function, ncclComm_t comm, const tersePsTensorDesc* tensors,
                  int ntensors, tersePsHandle_t* handles) {
  Communicator* engine = nullptr;
  TERSE_CHECK(engine_of(comm, function, &engine));
  CommUse use(comm, function);
  TERSE_CHECK(use.result());
  // The argument checks' failure is not returned at once: ps_init shares it with every rank
  // first, so that the others fail too instead of waiting in its collectives.
  ncclResult_t local = ncclSuccess;
  std::vector<PsTensorSpec> specs;
  if (handles == nullptr) {
    local = fail(ncclInvalidArgument, "%s: handle is NULL", function);
  } else if (ntensors <= 0) {
    local = fail(ncclInvalidArgument, "%s: ntensors %d is not positive", function, ntensors);
  } else if (tensors == nullptr) {
    local = fail(ncclInvalidArgument, "%s: tensors is NULL", function);
  } else {
    specs.resize(static_cast<size_t>(ntensors));
    // The array steps by the caller's struct size (growing_structs.h), the same for every element.
    size_t stride = 0;
    local = caller_size<tersePsTensorDesc>(function, "tensors[0]", tensors[0].size, &stride);
    const auto* bytes = reinterpret_cast<const unsigned char*>(tensors);
    for (int i = 0; i < ntensors && local == ncclSuccess; ++i) {
      const auto& given = *reinterpret_cast<const tersePsTensorDesc*>(bytes + size_t(i) * stride);
      tersePsTensorDesc desc{};
      if (given.size != tensors[0].size) {
        local = fail(ncclInvalidArgument,
                     "%s: tensors[%d].size is %zu but tensors[0].size is %zu: one array, one size",
                     function, i, given.size, tensors[0].size);
      } else {
        local = read_grown(function, "tensors[i]", given, &desc);
      }
      if (local == ncclSuccess) local = check_spec(function, i, desc, &specs[size_t(i)]);
    }
  }
  if (local != ncclSuccess) specs.clear();
  std::vector<std::unique_ptr<PsHandle>> made;
  TERSE_CHECK(ps_init(engine, specs, local, &made));
  for (int i = 0; i < ntensors; ++i) {
    // Cannot fail: this call's own use keeps the communicator open.
    TERSE_CHECK(acquire_comm(comm, function));
    handles[i] = new tersePsTensor{comm, std::move(made[size_t(i)])};
  }
  return ncclSuccess;
}

ncclResult_t check_handle(const char* function, tersePsHandle_t handle) {
  if (handle == nullptr || handle->handle == nullptr) {
    return fail(ncclInvalidArgument, "%s: handle is NULL (or already freed)", function);
  }
  return ncclSuccess;
}

ncclResult_t hand_out(std::shared_ptr<PsRequest> request, tersePsRequest_t* sync) {
  *sync = new tersePsRequest{std::move(request)};
  return ncclSuccess;
}

}  // namespace
}  // namespace terse

TERSE_API ncclResult_t tersePsInit(ncclComm_t comm, const char* name, const void* tensor,
                                   size_t count, ncclDataType_t datatype,
                                   tersePsHandle_t* handle) try {
  tersePsTensorDesc desc{};
  desc.size = sizeof(desc);
  desc.name = name;
  desc.data = tensor;
  desc.count = count;
  desc.datatype = datatype;
  return terse::init("tersePsInit", comm, &desc, 1, handle);
} catch (...) {
  return terse::result_of_current_exception("tersePsInit");
}

TERSE_API ncclResult_t tersePsInitList(ncclComm_t comm, const tersePsTensorDesc* tensors,
                                       int ntensors, tersePsHandle_t* handles) try {
  return terse::init("tersePsInitList", comm, tensors, ntensors, handles);
} catch (...) {
  return terse::result_of_current_exception("tersePsInitList");
}

TERSE_API ncclResult_t tersePsSend(tersePsHandle_t handle, const void* tensor, tersePsRule_t rule,
                                   tersePsRequest_t* sync) try {
  TERSE_CHECK(terse::check_handle("tersePsSend", handle));
  if (sync == nullptr) return terse::fail(ncclInvalidArgument, "tersePsSend: sync is NULL");
  if (rule != tersePsZero && rule != tersePsCopy && rule != tersePsAdd) {
    return terse::fail(ncclInvalidArgument,
                       "tersePsSend: rule %d is not tersePsZero, tersePsCopy or tersePsAdd",
                       int(rule));
  }
  if (tensor == nullptr && rule != tersePsZero) {
    return terse::fail(ncclInvalidArgument, "tersePsSend: tensor is NULL (rule %s)",
                       rule == tersePsCopy ? "tersePsCopy" : "tersePsAdd");
  }
  std::shared_ptr<terse::PsRequest> request;
  TERSE_CHECK(terse::ps_send(*handle->handle, tensor, terse::PsRule(rule), &request));
  return terse::hand_out(std::move(request), sync);
} catch (...) {
  return terse::result_of_current_exception("tersePsSend");
}

TERSE_API ncclResult_t tersePsReceive(tersePsHandle_t handle, void* tensor,
                                      tersePsRequest_t* sync) try {
  TERSE_CHECK(terse::check_handle("tersePsReceive", handle));
  if (sync == nullptr) return terse::fail(ncclInvalidArgument, "tersePsReceive: sync is NULL");
  if (tensor == nullptr) return terse::fail(ncclInvalidArgument, "tersePsReceive: tensor is NULL");
  std::shared_ptr<terse::PsRequest> request;
  TERSE_CHECK(terse::ps_receive(*handle->handle, tensor, &request));
  return terse::hand_out(std::move(request), sync);
} catch (...) {
  return terse::result_of_current_exception("tersePsReceive");
}

TERSE_API ncclResult_t tersePsClock(tersePsHandle_t handle, uint64_t clock, uint64_t staleness,
                                    tersePsRequest_t* sync) try {
  TERSE_CHECK(terse::check_handle("tersePsClock", handle));
  if (sync == nullptr) return terse::fail(ncclInvalidArgument, "tersePsClock: sync is NULL");
  std::shared_ptr<terse::PsRequest> request;
  TERSE_CHECK(terse::ps_clock(*handle->handle, clock, staleness, &request));
  return terse::hand_out(std::move(request), sync);
} catch (...) {
  return terse::result_of_current_exception("tersePsClock");
}

TERSE_API ncclResult_t tersePsSync(tersePsRequest_t sync) try {
  if (sync == nullptr) return terse::fail(ncclInvalidArgument, "tersePsSync: sync is NULL");
  std::unique_ptr<tersePsRequest> owned(sync);
  return owned->request->wait();
} catch (...) {
  return terse::result_of_current_exception("tersePsSync");
}

TERSE_API ncclResult_t tersePsTest(tersePsRequest_t sync, int* done) try {
  if (sync == nullptr) return terse::fail(ncclInvalidArgument, "tersePsTest: sync is NULL");
  if (done == nullptr) return terse::fail(ncclInvalidArgument, "tersePsTest: done is NULL");
  *done = sync->request->done() ? 1 : 0;
  if (*done == 0) return ncclSuccess;
  std::unique_ptr<tersePsRequest> owned(sync);
  return owned->request->outcome();
} catch (...) {
  return terse::result_of_current_exception("tersePsTest");
}

TERSE_API ncclResult_t tersePsGetLayout(tersePsHandle_t handle, tersePsShard* shards,
                                        int max_shards, int* nshards) try {
  TERSE_CHECK(terse::check_handle("tersePsGetLayout", handle));
  if (nshards == nullptr) {
    return terse::fail(ncclInvalidArgument, "tersePsGetLayout: nshards is NULL");
  }
  if (max_shards < 0 || (max_shards > 0 && shards == nullptr)) {
    return terse::fail(ncclInvalidArgument,
                       "tersePsGetLayout: shards is NULL or max_shards %d is negative", max_shards);
  }
  const std::vector<terse::ShardSpan>& spans = handle->handle->tensor->shards;
  *nshards = int(spans.size());
  for (int i = 0; i < max_shards && size_t(i) < spans.size(); ++i) {
    shards[i] =
        tersePsShard{spans[size_t(i)].owner, spans[size_t(i)].offset, spans[size_t(i)].count};
  }
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("tersePsGetLayout");
}

TERSE_API ncclResult_t tersePsGetStats(tersePsHandle_t handle, tersePsStats* stats) try {
  TERSE_CHECK(terse::check_handle("tersePsGetStats", handle));
  if (stats == nullptr) return terse::fail(ncclInvalidArgument, "tersePsGetStats: stats is NULL");
  const terse::PsTrafficCounters& traffic = handle->handle->tensor->traffic;
  tersePsStats out{};
  out.size = sizeof(out);
  out.sends = traffic.sends.load();
  out.send_bytes = traffic.send_bytes.load();
  out.send_uncompressed_bytes = traffic.send_uncompressed_bytes.load();
  out.receives = traffic.receives.load();
  out.receive_bytes = traffic.receive_bytes.load();
  out.receive_uncompressed_bytes = traffic.receive_uncompressed_bytes.load();
  out.header_bytes = traffic.header_bytes.load();
  return terse::write_grown("tersePsGetStats", "stats", out, stats);
} catch (...) {
  return terse::result_of_current_exception("tersePsGetStats");
}

TERSE_API ncclResult_t tersePsFree(tersePsHandle_t handle) try {
  TERSE_CHECK(terse::check_handle("tersePsFree", handle));
  std::unique_ptr<tersePsTensor> owned(handle);
  ncclComm_t comm = owned->comm;
  // The handle's use keeps `comm` allocated even after a destroy or abort; it goes last.
  struct Release {
    ncclComm_t comm;
    ~Release() { terse::release_comm(comm); }
  } release{comm};
  const bool closing = comm->closing.load();
  const ncclResult_t result = terse::ps_free(owned->handle.get(), closing);
  owned->handle.reset();
  if (result != ncclSuccess || !closing || comm->aborted.load()) return result;
  // After an abort, releasing alone is the expected clean-up; after a destroy it is a misuse
  // worth naming, though the handle is released all the same.
  return terse::fail(ncclInvalidUsage,
                     "tersePsFree: the communicator was destroyed before the handle was freed; "
                     "released this rank's side without waiting for the others");
} catch (...) {
  return terse::result_of_current_exception("tersePsFree");
}
