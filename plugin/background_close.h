// ncclCommDestroy closes a communicator's transport on a thread of its own. Closing flushes
// what was sent, which needs the peers to progress too; when one thread owns several ranks of a
// job (ncclCommInitAll, or InitRank inside a group) and destroys them one after another, a
// synchronous close would wait for peers that thread has not reached yet, until the timeout.
// Closing in the background lets every rank's close progress together; the library waits for
// the closes still running when the process exits.
#pragma once

//
// With device staging, the staging goes first: its proxy finishes the calls already made (as
// their streams reach them, until TERSE_TIMEOUT_S), then its pinned memory is freed once no
// stream can touch it; only then does the engine close.
#include <memory>

#include "collectives/communicator.h"
#include "plugin/device_staging.h"

namespace terse {

// Either may be null.
void close_in_background(std::unique_ptr<DeviceStaging> staging,
                         std::unique_ptr<Communicator> engine);

}  // namespace terse
