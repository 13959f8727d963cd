// An in-process stand-in for libterse's tersePs* calls, for the update schemes' cadence tests:
// one "server" in this process holds each tensor's centre, every call is recorded in order, and
// the test may add to a centre itself (another worker's push). Sends are applied when made (the
// real tersePsSend also reads its tensor before returning); a receive copies the centre as it
// was when issued, but only when synced, as a receive in flight would; clocks complete at once
// (one worker never waits for itself). Linked instead of libterse, never beside it.
#pragma once

#include <terse/terse.h>

#include <string>
#include <vector>

namespace terse {
namespace test {

// A tensor of the fake server, named for the call log.
tersePsHandle_t recording_ps_tensor(const std::string& name, const std::vector<float>& initial);
void recording_ps_free(tersePsHandle_t handle);
std::vector<float> recording_ps_centre(tersePsHandle_t handle);
// While held, a receive's tersePsTest says it is still running (and logs "test receive NAME:
// running"); tersePsSync still completes it.
void recording_ps_hold_receives(bool hold);
// Another worker's push: added to the centre now, not logged.
void recording_ps_add(tersePsHandle_t handle, const std::vector<float>& values);

// The calls since the last clear, one line each: "send add NAME [v0 v1 ...]", "receive NAME",
// "clock NAME C S", "sync send NAME", "sync receive NAME", "sync clock NAME" (the values of a
// send are its first elements, up to 4).
const std::vector<std::string>& recording_ps_log();
void recording_ps_clear_log();

}  // namespace test
}  // namespace terse
