// ncclCommDestroy and ncclCommAbort close a communicator's transport on a thread of its own.
// Closing flushes what was sent, which needs the peers to progress too; when one thread owns
// several ranks of a job (ncclCommInitAll, or InitRank inside a group) and destroys them one
// after another, a synchronous close would wait for peers that thread has not reached yet, until
// the timeout. Closing in the background lets every rank's close progress together; an abort
// returns at once, whatever the closing has to wait for.
//
// With device staging, the staging goes first: its proxy finishes the calls already made (as
// their streams reach them, until TERSE_TIMEOUT_S; none after an abort), then its pinned memory
// is freed once no stream can touch it; only then does the engine close (or, after an abort,
// close by force).
//
// Finished closing threads are joined at the next close and the rest when the library is
// unloaded, so a job that creates and destroys communicators for days holds no more threads
// than it has closes in progress.
#pragma once

#include <cstddef>
#include <memory>

#include "collectives/communicator.h"
#include "plugin/device_staging.h"

namespace terse {

enum class CloseMode { kFlush, kAbort };

// Either may be null. Never throws: without memory for a thread it closes on the caller's.
void close_in_background(std::unique_ptr<DeviceStaging> staging,
                         std::unique_ptr<Communicator> engine, CloseMode mode) noexcept;

}  // namespace terse
