// Keeps alive the bootstrap roots that no rank owns: the one create_unique_id starts serves
// ranks after create_unique_id has returned, possibly in a process that is not a rank at all.
#pragma once

#include <memory>

#include "transport/bootstrap_root.h"

namespace terse {

// Holds `root` until it finishes. Finished roots are joined on the next call; unfinished ones are
// stopped and joined at process exit (except in a forked child, which has no such thread).
void keep_root_until_finished(std::unique_ptr<BootstrapRoot> root);

// Result::kRemoteError, naming why, when a root this process keeps (or kept) at `address` gave up
// its rendezvous: a rank refused there need not retry until its deadline. Success otherwise,
// including for roots this process never started.
Result check_root_kept_here(const SocketAddress& address);

}  // namespace terse
