#include "transport/ucx_endpoint.h"

#include "common/log.h"

namespace terse {

ucs_status_t UcxEndpoint::open(const std::shared_ptr<UcxWorker>& worker,
                               const std::vector<uint8_t>& remote_address, int peer_rank,
                               UcxErrorMode mode, UcxEndpoint* out) {
  auto health = std::make_shared<Health>();
  health->peer_rank = peer_rank;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  params.err_mode =
      mode == UcxErrorMode::kPeer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &UcxEndpoint::on_error;
  params.err_handler.arg = health.get();
  ucp_ep_h endpoint = nullptr;
  ucs_status_t status = ucp_ep_create(worker->handle(), &params, &endpoint);
  if (status != UCS_OK) return status;
  worker->keep_until_destroyed(health);
  *out = UcxEndpoint();
  out->worker_ = worker;
  out->endpoint_ = endpoint;
  out->peer_rank_ = peer_rank;
  out->mode_ = mode;
  out->health_ = std::move(health);
  return UCS_OK;
}

void UcxEndpoint::on_error(void* arg, ucp_ep_h /*endpoint*/, ucs_status_t status) {
  Health* health = static_cast<Health*>(arg);
  health->status.store(status);
  TERSE_INFO("UCX reports the endpoint to rank %d failed: %s", health->peer_rank,
             ucs_status_string(status));
}

UcxEndpoint& UcxEndpoint::operator=(UcxEndpoint&& other) noexcept {
  if (this != &other) {
    if (is_open()) {
      void* request = start_close(/*force=*/true);
      if (request != nullptr) ucp_request_free(request);
    }
    worker_ = std::move(other.worker_);
    endpoint_ = other.endpoint_;
    other.endpoint_ = nullptr;
    peer_rank_ = other.peer_rank_;
    mode_ = other.mode_;
    health_ = std::move(other.health_);
  }
  return *this;
}

UcxEndpoint::~UcxEndpoint() {
  if (!is_open()) return;
  void* request = start_close(/*force=*/true);
  // Released to UCX, which finishes it; destroying the worker reclaims whatever remains.
  if (request != nullptr) ucp_request_free(request);
}

void* UcxEndpoint::start_close(bool force) {
  if (!is_open()) return nullptr;
  ucp_request_param_t params{};
  if (mode_ == UcxErrorMode::kPeer && (force || error() != UCS_OK)) {
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  ucs_status_ptr_t request = ucp_ep_close_nbx(endpoint_, &params);
  endpoint_ = nullptr;
  if (UCS_PTR_IS_ERR(request)) {
    TERSE_INFO("closing the endpoint to rank %d: %s", peer_rank_,
               ucs_status_string(UCS_PTR_STATUS(request)));
    return nullptr;
  }
  return request;  // nullptr (UCS_OK) when the close completed at once
}

}  // namespace terse
