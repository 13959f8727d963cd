// An endpoint to one peer, created from the peer's worker address: the RAII handle inside a link
// (link.h), which is what everything else uses. With UcxErrorMode::kPeer
// (UCP_ERR_HANDLING_MODE_PEER) a peer that dies or becomes unreachable fails the requests on this
// endpoint (and marks it failed) instead of leaving them pending; with kNone only the caller's
// deadline notices (transport_settings.h says when each applies).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/transport_settings.h"
#include "transport/ucx_worker.h"

namespace terse {

class UcxEndpoint {
 public:
  UcxEndpoint() = default;
  // An endpoint still open here is force-closed without waiting (its link's owner closes it
  // properly first; this is the backstop).
  ~UcxEndpoint();
  UcxEndpoint(UcxEndpoint&& other) noexcept { *this = std::move(other); }
  UcxEndpoint& operator=(UcxEndpoint&& other) noexcept;
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  // Returns UCX's status as is (the caller words the error): UCS_ERR_UNREACHABLE with kPeer
  // means no transport both sides allow can report peer failure.
  static ucs_status_t open(const std::shared_ptr<UcxWorker>& worker,
                           const std::vector<uint8_t>& remote_address, int peer_rank,
                           UcxErrorMode mode, UcxEndpoint* out);

  bool is_open() const { return endpoint_ != nullptr; }
  ucp_ep_h handle() const { return endpoint_; }
  int peer_rank() const { return peer_rank_; }
  // The worker this endpoint lives on: receives from its peer are posted there.
  const std::shared_ptr<UcxWorker>& worker() const { return worker_; }

  // UCS_OK while healthy; the error UCX reported for the peer once it failed.
  ucs_status_t error() const {
    return health_ ? static_cast<ucs_status_t>(health_->status.load()) : UCS_OK;
  }

  // Starts closing: flushing outstanding sends first unless `force` (or the peer has failed, when
  // UCX requires a forced close). A forced close completes this endpoint's outstanding requests
  // with UCS_ERR_CANCELED; UCX allows it only with kPeer on both sides, so a kNone endpoint is
  // always flushed. Returns the UCX close request to progress and free, or nullptr when the close
  // finished at once. The endpoint is closed (is_open() false) afterwards either way.
  void* start_close(bool force);

 private:
  // Heap-allocated so the address UCX's error callback holds survives moves of the endpoint, and
  // shared with the worker so it also survives the endpoint (UCX may report while closing).
  struct Health {
    std::atomic<int> status{UCS_OK};
    int peer_rank = -1;
  };
  static void on_error(void* arg, ucp_ep_h endpoint, ucs_status_t status);

  std::shared_ptr<UcxWorker> worker_;
  ucp_ep_h endpoint_ = nullptr;
  int peer_rank_ = -1;
  UcxErrorMode mode_ = UcxErrorMode::kPeer;
  std::shared_ptr<Health> health_;
};

}  // namespace terse
