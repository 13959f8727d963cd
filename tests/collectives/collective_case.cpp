#include "collective_case.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "collectives/algorithm_table.h"
#include "collectives/reduction.h"
#include "common/result.h"

namespace terse {
namespace test {
namespace {

constexpr size_t kMaxFailuresPerCase = 3;
constexpr uint8_t kGuard = 0x5A;

bool is_reducing(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduce ||
         kind == CollectiveKind::kReduceScatter;
}

// Elements in this rank's send and receive buffers (0: not used here).
void buffer_elements(const CollectiveCase& c, int rank, int nranks, size_t* send, size_t* recv) {
  const size_t n = static_cast<size_t>(nranks);
  const bool root = rank == c.root;
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      *send = c.count, *recv = c.count;
      return;
    case CollectiveKind::kBroadcast:
      *send = root ? c.count : 0, *recv = c.count;
      return;
    case CollectiveKind::kReduce:
      *send = c.count, *recv = root ? c.count : 0;
      return;
    case CollectiveKind::kAllGather:
      *send = c.count, *recv = n * c.count;
      return;
    case CollectiveKind::kReduceScatter:
      *send = n * c.count, *recv = c.count;
      return;
    case CollectiveKind::kAllToAll:
      *send = n * c.count, *recv = n * c.count;
      return;
    case CollectiveKind::kGather:
      *send = c.count, *recv = root ? n * c.count : 0;
      return;
    case CollectiveKind::kScatter:
      *send = root ? n * c.count : 0, *recv = c.count;
      return;
    default:
      *send = *recv = 0;
  }
}

// A buffer with one guard element on each side, aligned to its element size as any real
// buffer of that type is (the reductions load typed elements).
struct GuardedBuffer {
  GuardedBuffer(size_t elements, size_t element_bytes)
      : element_bytes(element_bytes),
        storage(((elements + 2) * element_bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t)) {
    std::memset(bytes(), kGuard, (elements + 2) * element_bytes);
  }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(storage.data()); }
  const uint8_t* bytes() const { return reinterpret_cast<const uint8_t*>(storage.data()); }
  uint8_t* data() { return bytes() + element_bytes; }
  bool guards_intact(size_t elements) const {
    for (size_t i = 0; i < element_bytes; ++i) {
      if (bytes()[i] != kGuard) return false;
      if (bytes()[(elements + 1) * element_bytes + i] != kGuard) return false;
    }
    return true;
  }
  size_t element_bytes;
  std::vector<uint64_t> storage;
};

// Sentences for CaseOutcome::failures: "rank r of n, <case>: <what>".
class FailureList {
 public:
  FailureList(const CollectiveCase& c, int rank, int nranks, CaseOutcome* outcome)
      : prefix_("rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ", " +
                describe(c) + ": "),
        outcome_(outcome) {}
  bool full() const { return outcome_->failures.size() >= kMaxFailuresPerCase; }
  void add(const std::string& what) {
    if (!full()) outcome_->failures.push_back(prefix_ + what);
  }

 private:
  std::string prefix_;
  CaseOutcome* outcome_;
};

}  // namespace

Reference reference_for(const CollectiveCase& c, int nranks) {
  if (c.kind == CollectiveKind::kAllReduce || c.kind == CollectiveKind::kReduce) {
    return make_reference(c.type, c.op, nranks, c.count);
  }
  if (c.kind == CollectiveKind::kReduceScatter) {
    return make_reference(c.type, c.op, nranks, static_cast<size_t>(nranks) * c.count);
  }
  return Reference{};
}

CaseOutcome run_collective_case(Communicator& comm, const CollectiveCase& c,
                                const Reference& reference) {
  CaseOutcome outcome;
  const int rank = comm.rank(), nranks = comm.nranks();
  const size_t es = nccl_type_size(c.type);
  const TestOp value_op = is_reducing(c.kind) ? c.op : TestOp::kSum;
  auto value = [&](int of_rank, size_t element) {
    return input_value(c.type, value_op, of_rank, element);
  };
  size_t send_elements = 0, recv_elements = 0;
  buffer_elements(c, rank, nranks, &send_elements, &recv_elements);
  GuardedBuffer send_buffer(send_elements, es), recv_buffer(recv_elements, es);
  uint8_t* send = send_elements > 0 ? send_buffer.data() : nullptr;
  uint8_t* recv = recv_elements > 0 ? recv_buffer.data() : nullptr;
  const bool root = rank == c.root;
  const size_t own_offset = static_cast<size_t>(rank) * c.count * es;

  // In place as NCCL defines it per collective (only where this rank has both buffers).
  if (c.in_place) {
    switch (c.kind) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kBroadcast:
      case CollectiveKind::kAllToAll:
        send = recv;
        break;
      case CollectiveKind::kReduce:
        if (root) send = recv;
        break;
      case CollectiveKind::kAllGather:
        send = recv + own_offset;
        break;
      case CollectiveKind::kReduceScatter:
        recv = send + own_offset;
        break;
      case CollectiveKind::kGather:
        if (root) send = recv + own_offset;
        break;
      case CollectiveKind::kScatter:
        if (root) recv = send + own_offset;
        break;
      default:
        break;
    }
  }
  if (c.count == 0) {
    // Zero elements: any pointer will do, as NCCL allows; keep them non-null where used.
    send = send_buffer.data();
    recv = recv_buffer.data();
  }
  if (send != nullptr) {
    for (size_t i = 0; i < send_elements; ++i) store_element(c.type, send, i, value(rank, i));
  }

  CollectiveArgs args;
  args.kind = c.kind;
  args.send = send;
  args.recv = recv;
  args.count = c.count;
  args.type = c.type;
  args.op = make_reduce_op(c.op, c.type, nranks);
  args.root = c.root;
  FailureList failures(c, rank, nranks, &outcome);
  const AlgorithmInfo* algorithm = nullptr;
  if (c.algorithm != nullptr) {
    algorithm = find_algorithm(c.kind, c.algorithm);
    if (algorithm == nullptr) {
      failures.add("no such algorithm in the table");
      outcome.call_failed = true;
      return outcome;
    }
  }
  const ncclResult_t result = comm.run(args, algorithm);
  if (result != ncclSuccess) {
    failures.add(std::string("the call failed: ") + result_string(result) + ": " + last_error());
    outcome.call_failed = true;
    return outcome;
  }

  auto expect = [&](size_t i, double want, double tolerance) {
    if (failures.full()) return;
    const double got = load_element(c.type, recv, i);
    if (!(std::fabs(got - want) <= tolerance)) {
      std::ostringstream text;
      text.precision(10);
      text << "element " << i << " is " << got << ", expected " << want << " within " << tolerance;
      failures.add(text.str());
    }
  };
  const size_t n = static_cast<size_t>(nranks);
  switch (c.kind) {
    case CollectiveKind::kAllReduce:
      for (size_t i = 0; i < c.count; ++i) expect(i, reference.value[i], reference.tolerance[i]);
      break;
    case CollectiveKind::kBroadcast:
      for (size_t i = 0; i < c.count; ++i) expect(i, value(c.root, i), 0);
      break;
    case CollectiveKind::kReduce:
      if (root) {
        for (size_t i = 0; i < c.count; ++i) {
          expect(i, reference.value[i], reference.tolerance[i]);
        }
      }
      break;
    case CollectiveKind::kAllGather:
      for (size_t b = 0; b < n; ++b) {
        for (size_t i = 0; i < c.count; ++i) {
          expect(b * c.count + i, value(static_cast<int>(b), i), 0);
        }
      }
      break;
    case CollectiveKind::kReduceScatter:
      for (size_t i = 0; i < c.count; ++i) {
        const size_t global = static_cast<size_t>(rank) * c.count + i;
        expect(i, reference.value[global], reference.tolerance[global]);
      }
      break;
    case CollectiveKind::kAllToAll:
      for (size_t p = 0; p < n; ++p) {
        for (size_t i = 0; i < c.count; ++i) {
          expect(p * c.count + i,
                 value(static_cast<int>(p), static_cast<size_t>(rank) * c.count + i), 0);
        }
      }
      break;
    case CollectiveKind::kGather:
      if (root) {
        for (size_t b = 0; b < n; ++b) {
          for (size_t i = 0; i < c.count; ++i) {
            expect(b * c.count + i, value(static_cast<int>(b), i), 0);
          }
        }
      }
      break;
    case CollectiveKind::kScatter:
      for (size_t i = 0; i < c.count; ++i) {
        expect(i, value(c.root, static_cast<size_t>(rank) * c.count + i), 0);
      }
      break;
    default:
      break;
  }
  if (!recv_buffer.guards_intact(recv_elements)) failures.add("wrote outside the receive buffer");
  if (!send_buffer.guards_intact(send_elements)) failures.add("wrote outside the send buffer");
  if (!c.in_place && send_elements > 0 && c.count > 0) {
    for (size_t i = 0; i < send_elements; ++i) {
      if (load_element(c.type, send, i) != value(rank, i)) {
        failures.add("input changed at element " + std::to_string(i));
        break;
      }
    }
  }
  return outcome;
}

std::string describe(const CollectiveCase& c) {
  std::string text = collective_name(c.kind);
  if (c.algorithm != nullptr) text += std::string(":") + c.algorithm;
  text += std::string(" ") + nccl_type_name(c.type);
  if (is_reducing(c.kind)) text += std::string(" ") + test_op_name(c.op);
  text += " count " + std::to_string(c.count) + (c.in_place ? " in place" : " out of place");
  if (c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kReduce ||
      c.kind == CollectiveKind::kGather || c.kind == CollectiveKind::kScatter) {
    text += " root " + std::to_string(c.root);
  }
  return text;
}

}  // namespace test
}  // namespace terse
