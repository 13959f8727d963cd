#include "collectives/in_flight_transfers.h"

#include <string>

#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {

InFlightTransfers::InFlightTransfers(Transport* transport, size_t slots, const Deadline& deadline,
                                     TransferSlots* lent)
    : transport_(transport),
      deadline_(deadline),
      slots_(slots),
      requests_(inline_requests_.data()),
      size_known_(inline_size_known_.data()) {
  if (slots > kInlineSlots && lent != nullptr) {
    if (lent->capacity_ < slots) {
      lent->requests_.reset(new TransferRequest[slots]);
      lent->size_known_.reset(new bool[slots]);
      lent->capacity_ = slots;
    }
    lent_ = true;
    requests_ = lent->requests_.get();
    size_known_ = lent->size_known_.get();
  } else if (slots > kInlineSlots) {
    heap_requests_.reset(new TransferRequest[slots]);
    heap_size_known_.reset(new bool[slots]);
    requests_ = heap_requests_.get();
    size_known_ = heap_size_known_.get();
  }
  for (size_t slot = 0; slot < slots; ++slot) size_known_[slot] = true;
}

InFlightTransfers::~InFlightTransfers() {
  // Only an early return leaves transfers running here (failed waits cancel everything); the
  // caller's buffers must not be in use once it returns.
  for (size_t slot = 0; slot < slots_; ++slot) {
    if (!finished(slot)) {
      transport_->wait(requests_, slots_, Deadline::after_seconds(0));
      break;
    }
  }
  // Lent slots go back empty (every request finished now): the next call sees them unposted,
  // and they keep no worker alive.
  if (lent_) {
    for (size_t slot = 0; slot < slots_; ++slot) requests_[slot] = TransferRequest();
  }
}

ncclResult_t InFlightTransfers::send(size_t slot, int peer, uint32_t operation, const void* buffer,
                                     size_t bytes) {
  ncclResult_t result = transport_->send(peer, operation, buffer, bytes, &requests_[slot]);
  return result == ncclSuccess ? result : cancel_all_after(result);
}

ncclResult_t InFlightTransfers::recv(size_t slot, int peer, uint32_t operation, void* buffer,
                                     size_t bytes) {
  size_known_[slot] = true;
  ncclResult_t result = transport_->recv(peer, operation, buffer, bytes, &requests_[slot]);
  return result == ncclSuccess ? result : cancel_all_after(result);
}

ncclResult_t InFlightTransfers::recv_up_to(size_t slot, int peer, uint32_t operation, void* buffer,
                                           size_t capacity) {
  size_known_[slot] = false;
  ncclResult_t result = transport_->recv(peer, operation, buffer, capacity, &requests_[slot]);
  return result == ncclSuccess ? result : cancel_all_after(result);
}

bool InFlightTransfers::finished(size_t slot) {
  TransferRequest& request = requests_[slot];
  return !request.posted() || request.status() != UCS_INPROGRESS;
}

ncclResult_t InFlightTransfers::wait(size_t slot) {
  TransferRequest& request = requests_[slot];
  ncclResult_t result = transport_->wait(&request, 1, deadline_);
  if (result != ncclSuccess) return cancel_all_after(result);
  if (request.posted() && request.direction() == TransferDirection::kReceive && size_known_[slot] &&
      request.received_bytes() != request.bytes()) {
    fail(ncclInvalidUsage,
         "rank %d: the message from rank %d (operation 0x%08x) held %zu bytes where %zu were "
         "expected; do all ranks pass the same count and datatype?",
         transport_->rank(), request.peer(), split_tag(request.tag()).operation,
         request.received_bytes(), request.bytes());
    return cancel_all_after(ncclInvalidUsage);
  }
  return ncclSuccess;
}

ncclResult_t InFlightTransfers::wait_all() {
  for (size_t slot = 0; slot < slots_; ++slot) TERSE_CHECK(wait(slot));
  return ncclSuccess;
}

ncclResult_t InFlightTransfers::cancel_all_after(ncclResult_t code) {
  bool unfinished = false;
  for (size_t slot = 0; slot < slots_ && !unfinished; ++slot) {
    unfinished = !finished(slot);
  }
  if (!unfinished) return code;
  // Transport::wait with a deadline already past cancels what is left (force-closing endpoints
  // where a send cannot be cancelled) but records its own message; the first failure is the
  // one that explains what happened, so it is put back.
  const std::string first = last_error();
  transport_->wait(requests_, slots_, Deadline::after_seconds(0));
  if (first != last_error()) fail(code, "%s", first.c_str());
  return code;
}

}  // namespace terse
