// A request as isend and irecv hand it to NCCL: one message on the send side, up to
// kMaxGroupedReceives on the receive side, each with its transfers, frame header and staging.
// Requests live inside their comm (net_comm.h), which hands them out (request_pool.cpp).
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plugin/net/coder_pool.h"
#include "plugin/net/net_abi.h"
#include "plugin/net/net_wire.h"
#include "transport/transfer_request.h"

namespace terse::net {

class Comm;

struct Request {
  struct Entry {
    TransferRequest transfer;         // the payload
    TransferRequest header_transfer;  // a framed message's header
    FrameHeader header{};
    ucp_dt_iov_t pieces[2]{};
    void* data = nullptr;
    size_t size = 0;    // posted (receive) or sent (send) bytes
    size_t result = 0;  // bytes test() reports
    bool complete = false;
    std::vector<uint8_t> staging;  // the encoded message (send), its copy for decoding (receive)
    // The entry's encode (send) or decode (receive) on the coder pool; `coding` while its outcome
    // is not yet used.
    CoderJob job;
    bool coding = false;
    uint64_t tag = 0;    // send: the UCX tag, to post once encoded
    bool tried = false;  // send: an encode was attempted
    size_t encoded = 0;  // send: the encoding's size (0: send the bytes as they are)
    ncclResult_t decoded = ncclSuccess;  // receive: the decode's outcome
  };
  Comm* comm = nullptr;
  bool in_use = false;
  bool framed = false;
  int count = 0;
  Entry entries[kMaxGroupedReceives];
  // Receive side: the receive comm's clear-to-send slot this irecv announced itself in, or -1
  // when the sender's eager sends fill all its buffers (recv_comm.h).
  int clear_to_send_slot = -1;
};

}  // namespace terse::net
