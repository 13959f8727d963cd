#include "topology/link_model.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/env.h"
#include "common/result.h"
#include "topology/interface_speed.h"

namespace terse {
namespace {

constexpr double kShmLatencyUs = 2;
constexpr double kShmGbps = 32;  // 4 GB/s
constexpr double kTcpLatencyUs = 20;
constexpr double kRdmaLatencyUs = 5;
constexpr double kNetGbps = 10;
// Beyond these a value is a typo (a unit slip), not a machine: 100 Tbit/s, 1 s.
constexpr double kMaxGbps = 100000;
constexpr double kMaxLatencyUs = 1e6;

// A number from the environment in (0, max] (or [0, max] with zero_ok); `*set` says whether the
// variable was given.
Result env_number(const char* name, double max, bool zero_ok, const char* unit, double* value,
                  bool* set) {
  const std::string text = env_string(name, "");
  *set = !text.empty();
  if (!*set) return Result::kSuccess;
  char* end = nullptr;
  errno = 0;
  const double parsed = std::strtod(text.c_str(), &end);
  const bool in_range = zero_ok ? parsed >= 0 : parsed > 0;
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(parsed) || !in_range ||
      parsed > max) {
    return fail(Result::kInvalidArgument, "%s=%s: expected a number of %s in %s0, %g]", name,
                text.c_str(), unit, zero_ok ? "[" : "(", max);
  }
  *value = parsed;
  return Result::kSuccess;
}

double bytes_per_s(double gbps) {
  return gbps * 1e9 / 8;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// The fastest usable RDMA port (one with a known speed preferred); null when there is none.
const NicDevice* fastest_rdma(const MachineTopology* topology) {
  if (topology == nullptr) return nullptr;
  const NicDevice* best = nullptr;
  for (const NicDevice& nic : topology->nics) {
    if (nic.kind != NicKind::kRdma || !nic.usable()) continue;
    if (best == nullptr || nic.gbps > best->gbps) best = &nic;
  }
  return best;
}

// The inter-node interface's speed: as the topology knows it, else (for this machine) sysfs;
// with no interface named, the fastest usable Ethernet NIC of known speed.
double ethernet_gbps(const MachineTopology* topology, const std::string& interface,
                     std::string* name) {
  *name = interface;
  if (topology != nullptr) {
    double best = 0;
    for (const NicDevice& nic : topology->nics) {
      if (nic.kind != NicKind::kEthernet || !nic.usable()) continue;
      if (interface.empty() ? nic.gbps > best : nic.name == interface) {
        best = nic.gbps;
        *name = nic.name;
      }
    }
    for (const NetInterface& other : topology->other_interfaces) {
      if (!interface.empty() && other.name == interface) best = other.gbps;
    }
    if (best > 0 || !topology->live) return best;
  }
  return interface.empty() ? 0 : interface_gbps(kSysClassNet, interface);
}

}  // namespace

bool ucx_network_uses_rdma(const MachineTopology* topology) {
  return ucx_tls_allows_rdma(getenv("UCX_TLS")) && fastest_rdma(topology) != nullptr;
}

bool ucx_tls_allows_rdma(const char* ucx_tls) {
  if (ucx_tls == nullptr || *ucx_tls == '\0') return true;
  const bool excluding = ucx_tls[0] == '^';
  std::stringstream list(excluding ? ucx_tls + 1 : ucx_tls);
  std::string token;
  while (std::getline(list, token, ',')) {
    const std::string head = token.substr(0, 2);
    const bool verbs = token == "ib" || head == "rc" || head == "ud" || head == "dc";
    if (excluding && token == "ib") return false;  // "^ib" removes every verbs transport
    if (!excluding && (verbs || token == "all")) return true;
  }
  return excluding;
}

Result assumed_link_model(const MachineTopology* topology, const std::string& inter_node_interface,
                          LinkModel* model) {
  if (model == nullptr) return fail(Result::kInvalidArgument, "link model output pointer is NULL");
  double shm_latency_us = kShmLatencyUs, shm_gbps = kShmGbps;
  double net_latency_us = 0, net_gbps = 0;
  bool shm_latency_set = false, shm_gbps_set = false, net_latency_set = false, net_gbps_set = false;
  TERSE_CHECK(env_number("TERSE_SHM_LATENCY_US", kMaxLatencyUs, true, "microseconds",
                         &shm_latency_us, &shm_latency_set));
  TERSE_CHECK(env_number("TERSE_SHM_GBPS", kMaxGbps, false, "Gbit/s", &shm_gbps, &shm_gbps_set));
  TERSE_CHECK(env_number("TERSE_NET_LATENCY_US", kMaxLatencyUs, true, "microseconds",
                         &net_latency_us, &net_latency_set));
  TERSE_CHECK(env_number("TERSE_NET_GBPS", kMaxGbps, false, "Gbit/s", &net_gbps, &net_gbps_set));

  std::string inter = "inter-node: ";
  const NicDevice* rdma = ucx_tls_allows_rdma(getenv("UCX_TLS")) ? fastest_rdma(topology) : nullptr;
  if (!net_gbps_set) {
    std::string interface;
    const double ethernet = ethernet_gbps(topology, inter_node_interface, &interface);
    if (rdma != nullptr && rdma->gbps > 0) {
      net_gbps = rdma->gbps;
      inter += rdma->label() + " " + number(net_gbps) + " Gbit/s (ibverbs)";
    } else if (ethernet > 0) {
      net_gbps = ethernet;
      inter += interface + " " + number(net_gbps) + " Gbit/s (sysfs)";
    } else {
      net_gbps = kNetGbps;
      inter += number(net_gbps) + " Gbit/s (assumed: no NIC speed known)";
    }
  } else {
    inter += number(net_gbps) + " Gbit/s (TERSE_NET_GBPS)";
  }
  if (!net_latency_set) net_latency_us = rdma != nullptr ? kRdmaLatencyUs : kTcpLatencyUs;
  inter += ", " + number(net_latency_us) + " us (" +
           (net_latency_set   ? "TERSE_NET_LATENCY_US"
            : rdma != nullptr ? "RDMA"
                              : "TCP") +
           ")";

  model->nics = 1;
  if (topology != nullptr) {
    int usable = 0;
    for (const NicDevice& nic : topology->nics) {
      const bool kind =
          rdma != nullptr ? nic.kind == NicKind::kRdma : nic.kind == NicKind::kEthernet;
      usable += kind && nic.usable() ? 1 : 0;
    }
    model->nics = std::max(1, usable);
  }
  inter += ", " + std::to_string(model->nics) + " NIC(s)";
  model->intra = LinkCost{shm_latency_us * 1e-6, bytes_per_s(shm_gbps)};
  model->inter = LinkCost{net_latency_us * 1e-6, bytes_per_s(net_gbps)};
  model->source = "intra-node: shared memory " + number(shm_gbps) + " Gbit/s (" +
                  (shm_gbps_set ? "TERSE_SHM_GBPS" : "default") + "), " + number(shm_latency_us) +
                  " us (" + (shm_latency_set ? "TERSE_SHM_LATENCY_US" : "default") + "); " + inter;
  return Result::kSuccess;
}

}  // namespace terse
