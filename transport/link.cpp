#include "transport/link.h"

#include "common/log.h"
#include "common/result.h"
#include "transport/tag_layout.h"
#include "transport/ucx_protocol_info.h"

namespace terse {

Result Link::create(std::shared_ptr<UcxContext> context, std::unique_ptr<Link>* out) {
  std::shared_ptr<UcxWorker> worker;
  TERSE_CHECK(UcxWorker::create(std::move(context), &worker));
  *out = std::make_unique<Link>(std::move(worker));
  return Result::kSuccess;
}

ucs_status_t Link::connect(const std::vector<uint8_t>& peer_address, UcxErrorMode mode,
                           int peer_id) {
  peer_id_ = peer_id;
  return UcxEndpoint::open(worker_, peer_address, peer_id, mode, &endpoint_);
}

Result Link::send(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count, TransferRequest* out) {
  return post(/*is_send=*/true, tag, pieces, count, out);
}

Result Link::recv(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count, TransferRequest* out) {
  return post(/*is_send=*/false, tag, pieces, count, out);
}

// One piece goes to UCX as a contiguous buffer (post()), so the piece itself may die on return.
Result Link::send(uint64_t tag, const void* buffer, size_t bytes, TransferRequest* out) {
  const ucp_dt_iov_t piece{const_cast<void*>(buffer), bytes};
  return post(/*is_send=*/true, tag, &piece, 1, out);
}

Result Link::recv(uint64_t tag, void* buffer, size_t bytes, TransferRequest* out) {
  const ucp_dt_iov_t piece{buffer, bytes};
  return post(/*is_send=*/false, tag, &piece, 1, out);
}

Result Link::post(bool is_send, uint64_t tag, const ucp_dt_iov_t* pieces, size_t count,
                  TransferRequest* out) {
  if (!endpoint_.is_open()) {
    return fail(Result::kInternalError, "a link to peer %d was used before it connected", peer_id_);
  }
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += pieces[i].length;
  ucp_request_param_t params{};
  // Every byte a link moves is host memory; saying so spares UCX a memory-type lookup.
  params.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  params.memory_type = UCS_MEMORY_TYPE_HOST;
  // One piece goes as a contiguous buffer: UCX's fastest path, and a zero-byte message needs no
  // iov at all.
  const void* buffer = count == 1 ? pieces[0].buffer : pieces;
  size_t length = count == 1 ? pieces[0].length : count;
  params.datatype = count == 1 ? ucp_dt_make_contig(1) : ucp_dt_make_iov();
  ucs_status_ptr_t result;
  if (is_send) {
    result = ucp_tag_send_nbx(endpoint_.handle(), buffer, length, tag, &params);
  } else {
    // UCX 1.13 fills no receive info on an immediate completion (transfer_request.cpp).
    params.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    result = ucp_tag_recv_nbx(worker_->handle(), const_cast<void*>(buffer), length, tag,
                              kMatchWholeTag, &params);
  }
  // Recorded even when refused: a caller that waits on every request it posted then finds this
  // one finished with UCX's error instead of one that never started.
  out->start(worker_, result, is_send ? TransferDirection::kSend : TransferDirection::kReceive,
             peer_id_, tag, total);
  if (UCS_PTR_IS_ERR(result)) {
    return fail(is_send ? Result::kRemoteError : Result::kSystemError,
                "UCX refused to post a %zu-byte %s peer %d (tag 0x%016llx): %s", total,
                is_send ? "send to" : "receive from", peer_id_,
                static_cast<unsigned long long>(tag), ucs_status_string(UCS_PTR_STATUS(result)));
  }
  return Result::kSuccess;
}

void Link::abandon(TransferRequest* transfer) {
  if (transfer->posted() && transfer->status() == UCS_INPROGRESS) transfer->abandon();
  transfer->release();
}

void Link::start_close(bool force) {
  void* request = endpoint_.start_close(force);
  if (request != nullptr) close_request_.reset(request);
}

bool Link::close_pending() {
  if (close_request_ == nullptr) return false;
  if (ucp_request_check_status(close_request_.get()) == UCS_INPROGRESS) return true;
  close_request_.reset();
  return false;
}

bool Link::close(bool force, const Deadline& deadline, const std::function<bool()>& give_up) {
  start_close(force);
  while (close_pending()) {
    if (deadline.expired() || give_up()) {
      TERSE_INFO(
          "closing the link to peer %d did not finish (peer gone or deadline passed); "
          "leaving it to the worker's destruction",
          peer_id_);
      abandon_close();
      return false;
    }
    worker_->progress();
  }
  return true;
}

std::optional<size_t> Link::rendezvous_threshold() const {
  if (!endpoint_.is_open()) return std::nullopt;
  return tag_send_rendezvous_threshold(endpoint_.handle());
}

}  // namespace terse
