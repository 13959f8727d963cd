// A comm's request slots (net_comm.h's Comm::requests_, Request in request.h): finding the
// request a pointer names, taking a free one, giving one back.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "plugin/net/net_comm.h"

namespace terse::net {
namespace {

// The most staging a request slot keeps between messages.
constexpr size_t kKeptStagingBytes = size_t{8} << 20;

}  // namespace

Request* Comm::request_at(void* pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  auto first = reinterpret_cast<uintptr_t>(&requests_[0]);
  if (address < first || address >= first + sizeof(requests_)) return nullptr;
  if ((address - first) % sizeof(Request) != 0) return nullptr;
  Request* request = &requests_[(address - first) / sizeof(Request)];
  return request->in_use ? request : nullptr;
}

Request* Comm::allocate_request() {
  for (Request& request : requests_) {
    if (!request.in_use) {
      request.in_use = true;
      request.count = 0;
      request.framed = false;
      return &request;
    }
  }
  return nullptr;
}

void Comm::release_request(Request* request) {
  for (int i = 0; i < request->count; ++i) {
    Request::Entry& entry = request->entries[i];
    entry.complete = false;
    entry.result = 0;
    // A slot keeps its staging for the next message of NCCL's usual sizes, not a rare large one
    // (32 slots per comm, many comms).
    if (entry.staging.capacity() > kKeptStagingBytes) std::vector<uint8_t>().swap(entry.staging);
  }
  request->in_use = false;
}

int Comm::requests_in_use() const {
  int count = 0;
  for (const Request& request : requests_) count += request.in_use ? 1 : 0;
  return count;
}

}  // namespace terse::net
