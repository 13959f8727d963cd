#include "model/pcie_bytes.h"

#include <algorithm>
#include <functional>

namespace terse {
namespace model {
namespace {

using Bytes = std::function<uint64_t(size_t elements)>;

// Elements of block `b` of `n` near-equal blocks in order (the first count % n one larger): the
// chunks of sra and the blocks of the ring.
size_t block_elements(size_t count, int n, int b) {
  const size_t parts = static_cast<size_t>(n);
  return count / parts + (static_cast<size_t>(b) < count % parts ? 1 : 0);
}

// sra: to the host, its encode of every chunk and the re-encode of its own; to the device, the n
// versions of its chunk (its own included) and the n owners' chunks (its own included).
PcieBytes sra(const Bytes& wire, size_t count, int n, int rank) {
  PcieBytes pcie;
  for (int j = 0; j < n; ++j) {
    pcie.to_host += wire(block_elements(count, n, j));
    pcie.to_device += wire(block_elements(count, n, j));
  }
  const uint64_t own = wire(block_elements(count, n, rank));
  pcie.to_host += own;
  pcie.to_device += static_cast<uint64_t>(n) * own;
  return pcie;
}

// Ring: rank r encodes block r-1 (its contribution) and re-encodes every block it receives in
// the reduce-scatter (r-2, ..., r-n = r, its own total last): every block once to the host. To
// the device: the n-1 partial sums it receives (every block but r-1), its own total (decoded
// into its result), and the n-1 totals the allgather brings (every block but r).
PcieBytes ring(const Bytes& wire, size_t count, int n, int rank) {
  PcieBytes pcie;
  const int first = (rank - 1 + n) % n;
  for (int b = 0; b < n; ++b) {
    const uint64_t bytes = wire(block_elements(count, n, b));
    pcie.to_host += bytes;
    if (b != first) pcie.to_device += bytes;
    if (b != rank) pcie.to_device += bytes;
  }
  pcie.to_device += wire(block_elements(count, n, rank));
  return pcie;
}

// Recursive doubling over p = the largest power of two <= n (whole-tensor messages): a folded
// rank (r >= p) encodes once and decodes the result once. A rank of the p encodes once per round
// and decodes two messages per round (its partner's and its own); a fold host (r < n - p) also
// decodes its folded rank's contribution; with a fold, every rank of the p encodes the final
// value once more and decodes it.
PcieBytes recursive_doubling(const Bytes& wire, size_t count, int n, int rank) {
  int p = 1, rounds = 0;
  while (p * 2 <= n) {
    p *= 2;
    ++rounds;
  }
  const int extra = n - p;
  const uint64_t w = wire(count);
  if (rank >= p) return PcieBytes{w, w};
  PcieBytes pcie;
  pcie.to_host = static_cast<uint64_t>(rounds) * w + (extra > 0 ? w : 0);
  pcie.to_device =
      2 * static_cast<uint64_t>(rounds) * w + (rank < extra ? w : 0) + (extra > 0 ? w : 0);
  return pcie;
}

// Binary tree in heap order (children 2r+1, 2r+2): every rank encodes once (contribution,
// partial sum or total) and decodes its children's messages and the down message.
PcieBytes tree(const Bytes& wire, size_t count, int n, int rank) {
  uint64_t children = 0;
  for (int child : {2 * rank + 1, 2 * rank + 2}) children += child < n ? 1 : 0;
  const uint64_t w = wire(count);
  return PcieBytes{w, (children + 1) * w};
}

}  // namespace

PcieBytes device_pcie_bytes(const std::string& algorithm, const Codec& codec, size_t count,
                            int nranks, int rank) {
  const Bytes wire = [&](size_t elements) {
    return static_cast<uint64_t>(codec.wire_bytes(elements, DType::kFloat32, MatrixShape{}));
  };
  if (algorithm == "sra") return sra(wire, count, nranks, rank);
  if (algorithm == "ring") return ring(wire, count, nranks, rank);
  if (algorithm == "recursive_doubling") return recursive_doubling(wire, count, nranks, rank);
  if (algorithm == "tree") return tree(wire, count, nranks, rank);
  return PcieBytes{};
}

PcieBytes grouped_device_pcie_bytes(const std::string& algorithm, const std::string& inner,
                                    const Codec& codec, size_t count, size_t element_bytes,
                                    const std::vector<std::string>& hosts, int rank) {
  const int n = static_cast<int>(hosts.size());
  std::vector<std::vector<int>> nodes;
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) {
    const auto known = std::find(names.begin(), names.end(), hosts[static_cast<size_t>(r)]);
    if (known == names.end()) {
      names.push_back(hosts[static_cast<size_t>(r)]);
      nodes.push_back({r});
    } else {
      nodes[static_cast<size_t>(known - names.begin())].push_back(r);
    }
  }
  int node = 0, local = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto at = std::find(nodes[i].begin(), nodes[i].end(), rank);
    if (at != nodes[i].end()) {
      node = static_cast<int>(i);
      local = static_cast<int>(at - nodes[i].begin());
    }
  }
  const std::vector<int>& mine = nodes[static_cast<size_t>(node)];
  const int node_ranks = static_cast<int>(mine.size());
  const int node_count = static_cast<int>(nodes.size());
  const uint64_t tensor = static_cast<uint64_t>(count * element_bytes);
  bool several = false, equal = true;
  for (const std::vector<int>& members : nodes) {
    several = several || members.size() > 1;
    equal = equal && members.size() == nodes.front().size();
  }
  if (algorithm == "hierarchical" && node_count > 1 && several) {
    if (local > 0) return PcieBytes{tensor, tensor};
    PcieBytes pcie = device_pcie_bytes(inner, codec, count, node_count, node);
    pcie.to_device += static_cast<uint64_t>(node_ranks - 1) * tensor;
    if (node_ranks > 1) pcie.to_host += tensor;
    return pcie;
  }
  if (algorithm == "rail" && node_count > 1 && equal && node_ranks > 1) {
    const size_t chunk = block_elements(count, node_ranks, local);
    const uint64_t chunk_bytes = static_cast<uint64_t>(chunk * element_bytes);
    PcieBytes pcie = device_pcie_bytes(inner, codec, chunk, node_count, node);
    pcie.to_host += tensor;
    pcie.to_device += static_cast<uint64_t>(node_ranks - 1) * chunk_bytes + (tensor - chunk_bytes);
    return pcie;
  }
  return device_pcie_bytes(inner, codec, count, n, rank);
}

}  // namespace model
}  // namespace terse
