// What the parameter server's sources (ps_server.cpp, ps_owner.cpp, ps_client_outbox.cpp) share
// beyond ps_server.h; nothing else includes it.
#pragma once

#include "transport/transfer_request.h"

namespace terse {

inline bool in_progress(TransferRequest& request) {
  return request.posted() && request.status() == UCS_INPROGRESS;
}

}  // namespace terse
