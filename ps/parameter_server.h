// The parameter server behind terse.h's tersePs* calls: tensors sharded over a communicator's
// ranks (shard_placement.h), served by one PsServer per communicator and process
// (ps_server.h), with compressed pushes under error feedback on each client. The C API in
// plugin/ps_calls.cpp checks the arguments a user could get wrong and calls these.
// Defined in ps_tensor_lifecycle.cpp (init, free) and ps_client_calls.cpp (send, receive,
// clock); the server of each communicator is found in ps_server_registry.h.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ps/ps_request.h"
#include "ps/ps_server.h"
#include "ps/ps_tensor.h"

namespace terse {

class Communicator;

// What tersePsInit/tersePsInitList say about one tensor (terse.h: tersePsTensorDesc).
struct PsTensorSpec {
  std::string name;
  const void* data = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  size_t row_elements = 1;
  bool push_codec_given = false;     // false: the communicator's policy decides
  std::string push_codec;            // "none" for exact pushes
  bool receive_codec_given = false;  // false: the policy's `ps_receive` decides
  std::string receive_codec;         // "none" for exact receives
};

// A tensor as its handle holds it.
struct PsHandle {
  Communicator* communicator = nullptr;
  std::shared_ptr<PsServer> server;
  std::shared_ptr<PsTensor> tensor;
};

// The update rules (terse.h: tersePsRule_t).
enum class PsRule : uint8_t { kZero = 0, kCopy = 1, kAdd = 2 };

// Collective: places, creates and initialises the tensors; handles[i] for specs[i]. Fails on
// every rank alike (ncclInvalidUsage) when the ranks describe them differently, and with the
// lowest failing rank's result when a rank's `local_result` (the C API's argument checks, with
// its sentence as the thread's last error) or its own codec checks fail.
ncclResult_t ps_init(Communicator* communicator, const std::vector<PsTensorSpec>& specs,
                     ncclResult_t local_result, std::vector<std::unique_ptr<PsHandle>>* handles);
ncclResult_t ps_send(const PsHandle& handle, const void* data, PsRule rule,
                     std::shared_ptr<PsRequest>* request);
ncclResult_t ps_receive(const PsHandle& handle, void* data, std::shared_ptr<PsRequest>* request);
ncclResult_t ps_clock(const PsHandle& handle, uint64_t clock, uint64_t staleness,
                      std::shared_ptr<PsRequest>* request);
// Collective: waits for every rank's free of the tensor, then releases it (and the server with
// the communicator's last tensor). `handle` is emptied either way. With `communicator_closing`
// (destroyed or aborted) it waits for nobody and releases this rank's side alone.
ncclResult_t ps_free(PsHandle* handle, bool communicator_closing);

}  // namespace terse
