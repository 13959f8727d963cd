// One parameter server per communicator and process (ps_server.h), shared by the communicator's
// tensors: made by the first tersePsInit, found by the next, forgotten once the last is freed.
#pragma once

#include <nccl.h>

#include <memory>

#include "ps/ps_server.h"

namespace terse {

class Communicator;

// The communicator's server, made (PsServer::create, collective) when it has none yet. The
// caller holds the communicator's call lock (see g_servers, ps_server_registry.cpp).
ncclResult_t server_for(Communicator* communicator, std::shared_ptr<PsServer>* server);
// Erases `communicator`'s entry once its server is gone (the caller holds the call lock).
void forget_server_if_gone(Communicator* communicator);

}  // namespace terse
