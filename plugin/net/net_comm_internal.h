// What the comm sources (net_comm.cpp, send_comm.cpp, recv_comm.cpp) share beyond net_comm.h:
// the list of open comms, the close deadline, and whether a transfer finished.
#pragma once

#include <ucp/api/ucp.h>

#include <vector>

#include "transport/deadline.h"
#include "transport/transfer_request.h"

namespace terse::net {

class Comm;

// Every comm of this process that is open, in creation order. Only touched under the plugin's
// lock (net_api.cpp takes it around every call that creates, uses or closes a comm).
std::vector<Comm*>& open_comms();

Deadline close_deadline();

inline bool finished(TransferRequest& transfer, ucs_status_t* status) {
  if (!transfer.posted()) {
    *status = UCS_OK;
    return true;
  }
  *status = transfer.status();
  return *status != UCS_INPROGRESS;
}

}  // namespace terse::net
