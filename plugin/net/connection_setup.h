// listen, connect and accept as NCCL calls them: listen never blocks; connect and accept are
// called again and again until they return a comm, so each keeps its progress in a stage object
// (connect's in the handle NCCL passes back each time, accept's in the listen comm). The steps:
//
//   listen:  a TCP listener on the device's address; the handle gets its address and a nonce.
//   connect: a non-blocking TCP connect to the handle's address (one attempt: the listener
//            exists), a link (UCX worker) of its own, then the handshake frames swapped without
//            blocking; a refused or unanswered connection fails it (TERSE_TIMEOUT_S).
//   accept:  takes a waiting connection when there is one, then the same swap.
//
// After the swap each side opens its endpoint to the other's worker and the TCP connection
// stays as the lifeline (link_handshake.h). One listen comm accepts any number of connections.
#pragma once

#include <cstdint>
#include <memory>

#include "plugin/net/net_abi.h"
#include "transport/deadline.h"
#include "transport/link.h"
#include "transport/link_handshake.h"
#include "transport/socket.h"
#include "transport/transport_settings.h"

namespace terse::net {

class SendComm;  // send_comm.h
class RecvComm;  // recv_comm.h

struct SetupStage {
  Socket socket;
  std::unique_ptr<Link> link;
  FrameExchange exchange;
  uint64_t nonce = 0;
  // Whether the peer (when it is the receiving side) wants framed messages, from its handshake.
  bool peer_framed = false;
  // The peer's eager bound (when it is the sending side), from its handshake.
  uint64_t peer_eager_bytes = 0;
  // TERSE_TIMEOUT_S from the first call: a peer that never answers fails the setup, not NCCL's
  // loop of calls.
  Deadline deadline = Deadline::after_seconds(kDefaultTransportTimeoutSeconds);
};

struct ConnectStage : SetupStage {
  bool connected = false;  // the TCP connection is up
  size_t eager_bytes = 0;  // TERSE_NET_EAGER_BYTES, read when the connect started
};

struct ListenComm {
  int dev = 0;
  Socket listener;
  uint64_t nonce = 0;
  std::unique_ptr<SetupStage> pending;  // the accept in progress
  bool framed = false;                  // what this side's receive comms ask of senders
};

ncclResult_t listen_on(int dev, void* handle, ListenComm** out);
ncclResult_t connect_to(int dev, void* handle, SendComm** out);
ncclResult_t accept_from(ListenComm* listen, RecvComm** out);

}  // namespace terse::net
