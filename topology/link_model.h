// The link costs this process assumes, the cost model's inputs (alpha-beta per link class):
//   intra-node: shared memory, 2 us and 32 Gbit/s (4 GB/s) unless overridden (a PIX or NVLink
//               GPU pair could assume more, later);
//   inter-node: the NIC's speed (the fastest usable RDMA port's ibverbs speed, else the inter-node
//               interface's sysfs speed, else 10 Gbit/s), with 5 us latency over RDMA and 20 us
//               over TCP. RDMA counts only where UCX_TLS leaves UCX its verbs transports;
//               `nics` says how many such NICs the node has (a rail each).
// Environment overrides, each validated (an error names the variable and the value):
//   TERSE_NET_GBPS (Gbit/s), TERSE_NET_LATENCY_US, TERSE_SHM_GBPS (Gbit/s), TERSE_SHM_LATENCY_US.
// This is one process's view: a caller that plans collectives with it must agree the values
// across ranks (every rank must reach the same plan).
#pragma once

#include <string>

#include "common/result.h"
#include "topology/machine_topology.h"

namespace terse {

struct LinkCost {
  double latency_s;    // alpha
  double bytes_per_s;  // 1/beta
  // Over a network: messages from this size on go with UCX's rendezvous protocol, which costs a
  // round trip more than an eager message. UCX chooses it per endpoint (the transport asks it,
  // transport/ucx_protocol_info.h); 8 KiB, UCX's choice for TCP on loopback, until known.
  double rendezvous_bytes = 8 << 10;
};

struct LinkModel {
  LinkCost intra;
  LinkCost inter;      // one NIC's
  std::string source;  // where the numbers came from, one line
  // NICs of the node the inter-node traffic may spread over (usable RDMA ports when UCX uses
  // RDMA, else usable Ethernet NICs; at least 1): the rails a rail-aligned algorithm may run
  // side by side, each at `inter`.
  int nics = 1;
};

// `topology` may be null (then only sysfs and the defaults are consulted); `inter_node_interface`
// is the interface inter-node traffic leaves through, "" when unknown.
Result assumed_link_model(const MachineTopology* topology, const std::string& inter_node_interface,
                          LinkModel* model);

// Whether UCX may use InfiniBand/RoCE transports under this UCX_TLS value (null or "" = all).
bool ucx_tls_allows_rdma(const char* ucx_tls);

// Whether UCX's inter-node traffic from this process goes over RDMA: UCX_TLS allows it and
// `topology` (null: unknown, taken as no) has a usable RDMA port. Otherwise it goes over TCP.
bool ucx_network_uses_rdma(const MachineTopology* topology);

}  // namespace terse
