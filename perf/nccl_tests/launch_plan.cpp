#include "perf/nccl_tests/launch_plan.h"

#include <cerrno>
#include <cstdlib>

namespace terse {
namespace perf {
namespace {

// A whole number >= 0 from the environment; false when unset or malformed.
bool read_count(const EnvironmentLookup& environment, const char* name, int* value,
                std::string* error) {
  const char* text = environment(name);
  if (text == nullptr) return false;
  errno = 0;
  char* end = nullptr;
  const long parsed = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || parsed < 0 || parsed > 1 << 24) {
    *error = std::string(name) + "=" + text + " is not a whole number";
    return false;
  }
  *value = static_cast<int>(parsed);
  return true;
}

bool is_set(const EnvironmentLookup& environment, const char* name) {
  const char* value = environment(name);
  return value != nullptr && *value != '\0';
}

bool plan_mpi(const EnvironmentLookup& environment, bool built_with_mpi, LaunchPlan* plan,
              std::string* error) {
  const char* size_variable =
      is_set(environment, "OMPI_COMM_WORLD_SIZE") ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
  int size = 1;
  if (!read_count(environment, size_variable, &size, error)) return false;
  if (!built_with_mpi) {
    if (size <= 1) return true;  // a one-process MPI launch needs nothing from MPI
    *error = std::string("started by an MPI launcher (") + size_variable + "=" +
             std::to_string(size) +
             ") but this binary was built without MPI (CMake found none); rebuild with MPI "
             "(e.g. libopenmpi-dev) or launch with torchrun-style RANK/WORLD_SIZE/MASTER_ADDR/"
             "MASTER_PORT";
    return false;
  }
  plan->launcher = Launcher::kMpi;
  plan->processes = size;
  std::string ignored;
  read_count(environment, "OMPI_COMM_WORLD_LOCAL_RANK", &plan->local_rank, &ignored);
  return true;
}

bool plan_torchrun(const EnvironmentLookup& environment, LaunchPlan* plan, std::string* error) {
  int rank = 0, world = 1;
  if (!read_count(environment, "RANK", &rank, error) ||
      !read_count(environment, "WORLD_SIZE", &world, error)) {
    if (error->empty()) *error = "RANK and WORLD_SIZE must be set together";
    return false;
  }
  if (world < 1 || rank >= world) {
    *error = "RANK=" + std::to_string(rank) + " is outside WORLD_SIZE=" + std::to_string(world);
    return false;
  }
  if (world == 1) return true;  // one process: nothing to meet
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
    if (!is_set(environment, name)) {
      *error = std::string("WORLD_SIZE=") + std::to_string(world) + " but " + name +
               " is not set (torchrun-style launches need MASTER_ADDR and MASTER_PORT)";
      return false;
    }
  }
  plan->launcher = Launcher::kTorchrun;
  plan->process = rank;
  plan->processes = world;
  std::string ignored;
  read_count(environment, "LOCAL_RANK", &plan->local_rank, &ignored);
  if (!is_set(environment, "TERSE_COMM_ID") && !is_set(environment, "NCCL_COMM_ID")) {
    // MASTER_PORT + 1: under a real torchrun the agent's own store already listens on
    // MASTER_PORT, so terse's bootstrap root takes the port after it.
    int port = 0;
    if (!read_count(environment, "MASTER_PORT", &port, error) || port < 1 || port >= 65535) {
      if (error->empty()) {
        *error = std::string("MASTER_PORT=") + environment("MASTER_PORT") + " is not 1 to 65534";
      }
      return false;
    }
    const std::string host = environment("MASTER_ADDR");
    // A bare IPv6 address needs brackets to be told apart from the port.
    const bool bare_ipv6 = host.find(':') != std::string::npos && host[0] != '[';
    plan->comm_id = (bare_ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port + 1);
  }
  return true;
}

}  // namespace

bool plan_launch(const EnvironmentLookup& environment, bool built_with_mpi, LaunchPlan* plan,
                 std::string* error) {
  *plan = LaunchPlan{};
  error->clear();
  if (is_set(environment, "OMPI_COMM_WORLD_SIZE") || is_set(environment, "PMI_SIZE")) {
    return plan_mpi(environment, built_with_mpi, plan, error);
  }
  if (is_set(environment, "RANK") || is_set(environment, "WORLD_SIZE")) {
    return plan_torchrun(environment, plan, error);
  }
  return true;
}

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kThreads:
      return "threads";
    case Launcher::kMpi:
      return "mpirun";
    case Launcher::kTorchrun:
      return "torchrun";
  }
  return "threads";
}

}  // namespace perf
}  // namespace terse
