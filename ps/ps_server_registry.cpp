// The map behind ps_server_registry.h: each communicator's server, held weakly so that the
// communicator's tensor handles alone keep it alive.
#include "ps/ps_server_registry.h"

#include <map>
#include <mutex>

#include "collectives/communicator.h"
#include "common/result.h"

namespace terse {
namespace {

// One server per communicator and process, alive while a tensor of it is: the handles own it.
// The mutex guards the map alone and is never held across a collective: ranks that are threads
// of one process create their servers at once, each over allgathers that need the others. An
// entry is made and erased only under its communicator's call lock (ps_init, ps_free), which
// serialises them per communicator; each handle holds a use of its communicator, so no other
// communicator can take the address while the entry lives.
std::mutex g_servers_mutex;
std::map<Communicator*, std::weak_ptr<PsServer>> g_servers;

}  // namespace

void forget_server_if_gone(Communicator* communicator) {
  std::lock_guard<std::mutex> lock(g_servers_mutex);
  auto found = g_servers.find(communicator);
  if (found != g_servers.end() && found->second.expired()) g_servers.erase(found);
}

ncclResult_t server_for(Communicator* communicator, std::shared_ptr<PsServer>* server) {
  {
    std::lock_guard<std::mutex> lock(g_servers_mutex);
    auto found = g_servers.find(communicator);
    *server = found != g_servers.end() ? found->second.lock() : nullptr;
  }
  if (*server != nullptr) return ncclSuccess;
  std::unique_ptr<PsServer> made;
  TERSE_CHECK(PsServer::create(communicator->transport(), &made));
  *server = std::move(made);
  std::lock_guard<std::mutex> lock(g_servers_mutex);
  g_servers[communicator] = *server;
  return ncclSuccess;
}

}  // namespace terse
