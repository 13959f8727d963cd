// The transfers one algorithm call has posted, in numbered slots, so that it can wait for any
// single one while the others stay in flight (how a pipeline overlaps work with communication),
// and so that no request outlives the call: when a wait or a post fails, or the object goes out
// of scope with transfers unfinished, everything still in flight is cancelled through the
// transport before the caller's buffers can be reused or freed.
#pragma once

#include <nccl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/deadline.h"
#include "transport/transfer_request.h"
#include "transport/transport.h"

namespace terse {

// Request slots that a caller keeps across calls and lends to one InFlightTransfers at a time
// (a compressed call's scratch holds one), so that a call that needs more than kInlineSlots
// allocates nothing once warm. Only grows; between calls every slot is empty.
class TransferSlots {
 public:
  TransferSlots() = default;
  TransferSlots(const TransferSlots&) = delete;
  TransferSlots& operator=(const TransferSlots&) = delete;

 private:
  friend class InFlightTransfers;
  std::unique_ptr<TransferRequest[]> requests_;
  std::unique_ptr<bool[]> size_known_;
  size_t capacity_ = 0;
};

class InFlightTransfers {
 public:
  // `slots` transfers at most, numbered 0..slots-1; every wait ends at `deadline`. Beyond
  // kInlineSlots the slots come from `lent` when it is set, else from an allocation of their own.
  InFlightTransfers(Transport* transport, size_t slots, const Deadline& deadline,
                    TransferSlots* lent = nullptr);
  // Cancels whatever is unfinished (after an error or an early return).
  ~InFlightTransfers();
  InFlightTransfers(const InFlightTransfers&) = delete;
  InFlightTransfers& operator=(const InFlightTransfers&) = delete;

  // Posts into `slot`, which must not hold an unfinished transfer (wait for it first).
  ncclResult_t send(size_t slot, int peer, uint32_t operation, const void* buffer, size_t bytes);
  ncclResult_t recv(size_t slot, int peer, uint32_t operation, void* buffer, size_t bytes);
  // A receive of a message of at most `capacity` bytes whose size only the sender knows (an
  // encoded message); received_bytes() says how long it was once waited for.
  ncclResult_t recv_up_to(size_t slot, int peer, uint32_t operation, void* buffer, size_t capacity);
  size_t received_bytes(size_t slot) const { return requests_[slot].received_bytes(); }

  // Slots held inside the object: a call that needs no more allocates nothing for them (each
  // algorithm makes its transfers per call, and warm calls must not allocate); one that needs
  // more lends TransferSlots.
  static constexpr size_t kInlineSlots = 32;

  // Whether the slot was ever posted, and whether its transfer ended (successfully or not).
  // finished() does not progress the worker; an empty slot counts as finished.
  bool posted(size_t slot) const { return requests_[slot].posted(); }
  bool finished(size_t slot);

  // Progresses until the transfer in `slot` finished. A receive must have filled its whole
  // buffer: every rank computes message sizes the same way, so a short message means the ranks
  // disagree about the call (e.g. different counts) and fails with ncclInvalidUsage. On any
  // failure every other transfer is cancelled too and the first error is what the caller sees.
  ncclResult_t wait(size_t slot);
  // Progresses until every posted transfer finished.
  ncclResult_t wait_all();

  size_t slots() const { return slots_; }

 private:
  // Cancels every unfinished transfer, keeping `code` and the message of the first failure as
  // this thread's last error.
  ncclResult_t cancel_all_after(ncclResult_t code);

  Transport* transport_;
  Deadline deadline_;
  size_t slots_;
  std::array<TransferRequest, kInlineSlots> inline_requests_;
  std::array<bool, kInlineSlots> inline_size_known_{};
  std::unique_ptr<TransferRequest[]> heap_requests_;  // more than kInlineSlots slots, none lent
  std::unique_ptr<bool[]> heap_size_known_;
  bool lent_ = false;  // requests_ are a TransferSlots', emptied again when the object goes
  TransferRequest* requests_;
  bool* size_known_;  // by slot: the receive must fill its whole buffer
};

}  // namespace terse
