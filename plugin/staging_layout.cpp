#include "plugin/staging_layout.h"

#include <algorithm>

namespace terse {

StagingLayout plan_staging(uintptr_t send, size_t send_bytes, uintptr_t recv, size_t recv_bytes) {
  StagingLayout layout;
  const bool overlap =
      send_bytes > 0 && recv_bytes > 0 && send < recv + recv_bytes && recv < send + send_bytes;
  if (overlap) {
    const uintptr_t low = std::min(send, recv);
    const uintptr_t high = std::max(send + send_bytes, recv + recv_bytes);
    layout.bytes = align_staging(high - low);
    layout.send_offset = send - low;
    layout.recv_offset = recv - low;
  } else {
    layout.send_offset = 0;
    layout.recv_offset = align_staging(send_bytes);
    layout.bytes = layout.recv_offset + align_staging(recv_bytes);
  }
  if (send_bytes > 0) layout.input = {send, layout.send_offset, send_bytes};
  if (recv_bytes > 0) layout.output = {recv, layout.recv_offset, recv_bytes};
  return layout;
}

}  // namespace terse
