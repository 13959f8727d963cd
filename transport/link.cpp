#include "transport/link.h"

#include "common/log.h"
#include "common/result.h"
#include "transport/tag_layout.h"

namespace terse {

ncclResult_t Link::create(std::shared_ptr<UcxContext> context, std::unique_ptr<Link>* out) {
  std::shared_ptr<UcxWorker> worker;
  TERSE_CHECK(UcxWorker::create(std::move(context), &worker));
  out->reset(new Link(std::move(worker)));
  return ncclSuccess;
}

ncclResult_t Link::connect(const std::vector<uint8_t>& peer_address, UcxErrorMode mode,
                           int peer_id) {
  peer_id_ = peer_id;
  ucs_status_t status = UcxEndpoint::open(worker_, peer_address, peer_id, mode, &endpoint_);
  if (status != UCS_OK) {
    return fail(ncclSystemError, "UCX cannot open an endpoint to peer %d: %s%s", peer_id,
                ucs_status_string(status),
                status == UCS_ERR_UNREACHABLE
                    ? " (no transport both sides allow reports peer failure; try "
                      "TERSE_UCX_ERROR_MODE=none)"
                    : "");
  }
  return ncclSuccess;
}

ncclResult_t Link::send(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count,
                        TransferRequest* out) {
  return post(/*is_send=*/true, tag, pieces, count, out);
}

ncclResult_t Link::recv(uint64_t tag, const ucp_dt_iov_t* pieces, size_t count,
                        TransferRequest* out) {
  return post(/*is_send=*/false, tag, pieces, count, out);
}

ncclResult_t Link::post(bool is_send, uint64_t tag, const ucp_dt_iov_t* pieces, size_t count,
                        TransferRequest* out) {
  if (!endpoint_.is_open()) {
    return fail(ncclInternalError, "a link to peer %d was used before it connected", peer_id_);
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
  if (UCS_PTR_IS_ERR(result)) {
    return fail(is_send ? ncclRemoteError : ncclSystemError,
                "UCX refused to post a %zu-byte %s peer %d: %s", total,
                is_send ? "send to" : "receive from", peer_id_,
                ucs_status_string(UCS_PTR_STATUS(result)));
  }
  out->start(worker_, result, is_send ? TransferDirection::kSend : TransferDirection::kReceive,
             peer_id_, tag, total);
  return ncclSuccess;
}

void Link::abandon(TransferRequest* transfer) {
  if (transfer->posted() && transfer->status() == UCS_INPROGRESS) transfer->abandon();
  transfer->release();
}

bool Link::close(bool force, const Deadline& deadline, const std::function<bool()>& give_up) {
  void* request = endpoint_.start_close(force);
  if (request == nullptr) return true;
  while (ucp_request_check_status(request) == UCS_INPROGRESS) {
    if (deadline.expired() || give_up()) {
      TERSE_INFO(
          "closing the link to peer %d did not finish (peer gone or deadline passed); "
          "leaving it to the worker's destruction",
          peer_id_);
      ucp_request_free(request);
      return false;
    }
    worker_->progress();
  }
  ucp_request_free(request);
  return true;
}

}  // namespace terse
