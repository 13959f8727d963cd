#include "communicator_test_support.h"

#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/result.h"
#include "transport/unique_id.h"

namespace terse {
namespace test {

EnvironmentSettings::EnvironmentSettings(
    const std::vector<std::pair<std::string, const char*>>& settings) {
  for (const auto& [name, value] : settings) {
    const char* old = getenv(name.c_str());
    saved_.push_back(Saved{name, old != nullptr, old ? old : ""});
    if (value != nullptr) {
      setenv(name.c_str(), value, 1);
    } else {
      unsetenv(name.c_str());
    }
  }
}

EnvironmentSettings::~EnvironmentSettings() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->had) {
      setenv(it->name.c_str(), it->value.c_str(), 1);
    } else {
      unsetenv(it->name.c_str());
    }
  }
}

std::vector<std::pair<std::string, const char*>> loopback_settings() {
  std::vector<std::pair<std::string, const char*>> settings = {{"TERSE_SOCKET_IFNAME", "lo"},
                                                               {"TERSE_SOCKET_FAMILY", "AF_INET"},
                                                               {"TERSE_COMM_ID", nullptr},
                                                               {"NCCL_COMM_ID", nullptr}};
  // A hang should fail the test, not the suite.
  if (getenv("TERSE_TIMEOUT_S") == nullptr) settings.emplace_back("TERSE_TIMEOUT_S", "30");
  return settings;
}

CommunicatorWorld::CommunicatorWorld(
    int nranks, const std::vector<std::pair<std::string, std::string>>& settings) {
  auto all = loopback_settings();
  for (const auto& [name, value] : settings) all.emplace_back(name, value.c_str());
  EnvironmentSettings environment(all);
  comms_.resize(static_cast<size_t>(nranks));
  UniqueId id;
  if (create_unique_id(&id) != ncclSuccess) {
    ok_ = false;
    error_ = last_error();
    return;
  }
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      ncclResult_t result =
          Communicator::create(id, rank, nranks, -1, &comms_[static_cast<size_t>(rank)]);
      if (result != ncclSuccess) {
        std::lock_guard<std::mutex> lock(mutex);
        ok_ = false;
        error_ += "rank " + std::to_string(rank) + ": " + last_error() + "\n";
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

CommunicatorWorld::~CommunicatorWorld() {
  std::vector<std::thread> threads;
  for (auto& comm : comms_) threads.emplace_back([&comm] { comm.reset(); });
  for (std::thread& thread : threads) thread.join();
}

void CommunicatorWorld::run(const std::function<void(Communicator& comm)>& body) {
  std::vector<std::thread> threads;
  for (auto& comm : comms_) threads.emplace_back([&] { body(*comm); });
  for (std::thread& thread : threads) thread.join();
}

}  // namespace test
}  // namespace terse
