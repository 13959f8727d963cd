#include "transport/transfer_request.h"

#include "common/log.h"
#include "transport/tag_layout.h"

namespace terse {

TransferRequest& TransferRequest::operator=(TransferRequest&& other) noexcept {
  if (this != &other) {
    release();
    worker_ = std::move(other.worker_);
    ucx_request_ = other.ucx_request_;
    status_ = other.status_;
    posted_ = other.posted_;
    direction_ = other.direction_;
    peer_ = other.peer_;
    tag_ = other.tag_;
    bytes_ = other.bytes_;
    received_bytes_ = other.received_bytes_;
    other.ucx_request_ = nullptr;
    other.posted_ = false;
  }
  return *this;
}

void TransferRequest::start(std::shared_ptr<UcxWorker> worker, ucs_status_ptr_t result,
                            TransferDirection direction, int peer, uint64_t tag, size_t bytes) {
  worker_ = std::move(worker);
  posted_ = true;
  direction_ = direction;
  peer_ = peer;
  tag_ = tag;
  bytes_ = bytes;
  received_bytes_ = 0;
  if (UCS_PTR_IS_PTR(result)) {
    ucx_request_ = result;
    status_ = UCS_INPROGRESS;
  } else {
    // Finished (or failed) inside the call. Only sends get here: receives are posted with
    // UCP_OP_ATTR_FLAG_NO_IMM_CMPL because UCX 1.13 does not fill recv_info on an immediate
    // completion, and the received length must come from ucp_tag_recv_request_test.
    status_ = UCS_PTR_STATUS(result);
  }
}

ucs_status_t TransferRequest::status() {
  if (ucx_request_ == nullptr) return status_;
  ucs_status_t status = ucp_request_check_status(ucx_request_);
  if (status == UCS_INPROGRESS) return status;
  if (direction_ == TransferDirection::kReceive) {
    ucp_tag_recv_info_t info{};
    if (ucp_tag_recv_request_test(ucx_request_, &info) != UCS_INPROGRESS) {
      received_bytes_ = info.length;
    }
  }
  ucp_request_free(ucx_request_);
  ucx_request_ = nullptr;
  status_ = status;
  return status_;
}

void TransferRequest::cancel() {
  if (ucx_request_ != nullptr) ucp_request_cancel(worker_->handle(), ucx_request_);
}

void TransferRequest::abandon() {
  if (ucx_request_ == nullptr) return;
  ucp_request_free(ucx_request_);
  ucx_request_ = nullptr;
  status_ = UCS_ERR_CANCELED;
}

void TransferRequest::release() {
  if (ucx_request_ != nullptr && status() == UCS_INPROGRESS) {
    // An unmatched receive cancels on the spot; anything else (a send, a receive already
    // matched) may still touch its buffer after we let go, which deserves a warning.
    cancel();
    TagFields fields = split_tag(tag_);
    const char* what = direction_ == TransferDirection::kSend ? "send to" : "receive from";
    if (status() == UCS_INPROGRESS) {
      TERSE_WARN(
          "a %s rank %d (operation 0x%08x) was released before it finished and could not "
          "be cancelled; UCX may still use its buffer",
          what, peer_, fields.operation);
      abandon();
    } else {
      TERSE_INFO("a %s rank %d (operation 0x%08x) was released unfinished; cancelled it", what,
                 peer_, fields.operation);
    }
  }
  worker_.reset();
  posted_ = false;
}

}  // namespace terse
