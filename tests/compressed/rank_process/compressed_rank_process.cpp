// One rank of the compressed-allreduce process tests: an application of libterse's public API
// (<nccl.h>, <terse/terse.h>) that checks every result against the reference model
// (model/), which it runs itself for all ranks (every rank's input is a known function of
// rank, step and element). Reports through its exit code, says what went wrong on stderr.
//
//   compressed_rank_process <rank> <nranks> <unique id in hex>
//
// Environment (set per test): TERSE_CODEC and TERSE_COMPRESSED_ALGO as for any application, and
//   MODEL_DTYPE    float32 | float16 | bfloat16 (default float32)
//   MODEL_COUNT    elements (default 5003)       MODEL_STEPS   calls (default 4)
//   MODEL_OP       sum | avg (default sum)        MODEL_ROWS    rows of a matrix view (PowerSGD)
//   MODEL_RANKS_PER_NODE  ranks per emulated node (TERSE_HOSTID), for hierarchical calls
//   MODEL_POISON_STEP     at this step rank n-1 holds +Inf at element 7, rank 0 NaN at element
//                         count/2 and rank 1 -Inf at the last element; those elements must come
//                         back non-finite of the right kind on every rank, everything else as
//                         the model says, and the next steps too.
// Each call goes through terseAllReduceTensor with a name and shape. The statistics say the codec
// and algorithm the call ran with; its seed, step and piece size the rank derives itself (the
// rules terse.h states for last_seed), checks against the statistics and gives the model.
#include <nccl.h>
#include <terse/terse.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/hex_bytes.h"
#include "model/last_call.h"

namespace {

enum ExitCode { kOk = 0, kBadArguments = 10, kInitFailed = 11, kWrong = 12 };

int g_rank = -1;

int fail(const std::string& what) {
  fprintf(stderr, "compressed_rank_process rank %d: %s\n", g_rank, what.c_str());
  return kWrong;
}

size_t env_size(const char* name, size_t fallback) {
  const char* text = getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

std::string env_text(const char* name, const char* fallback) {
  const char* text = getenv(name);
  return text != nullptr && *text != '\0' ? text : fallback;
}

bool parse_id(const std::string& hex, ncclUniqueId* id) {
  return terse::hex_to_bytes(hex, id->internal, sizeof(id->internal));
}

// SplitMix64's output for the state z (Steele, Lea and Flood, 2014), which terse.h's seed rule
// names: the state advanced by the golden gamma, then the finaliser.
uint64_t splitmix64_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The seed of a compressed call as terse.h states it: from the communicator's 16-bit number (the
// unique id's secret, bytes 32-39 little-endian, folded), the call's index among the
// communicator's collectives (mod 2^18) and the tensor's step.
uint64_t stated_seed(const ncclUniqueId& id, uint64_t collective_index, uint64_t step) {
  uint64_t secret = 0;
  for (int b = 7; b >= 0; --b) secret = (secret << 8) | static_cast<uint8_t>(id.internal[32 + b]);
  const uint64_t communicator =
      (secret ^ (secret >> 16) ^ (secret >> 32) ^ (secret >> 48)) & 0xffffu;
  return splitmix64_mix(splitmix64_mix(communicator) ^ ((collective_index & 0x3ffffu) << 20) ^
                        step);
}

// TERSE_COMPRESSED_PIECE_BYTES as the README's table states it: bytes with an optional K or M
// (binary), 256K when unset.
size_t stated_piece_bytes() {
  const std::string text = env_text("TERSE_COMPRESSED_PIECE_BYTES", "256K");
  size_t bytes = std::strtoull(text.c_str(), nullptr, 10);
  if (text.back() == 'K') bytes <<= 10;
  if (text.back() == 'M') bytes <<= 20;
  return bytes;
}

// Rank r's input at a step: smooth plus noise in about [-1.5, 1.5], different on every rank.
float input_value(int rank, int step, size_t i) {
  const double x = 0.013 * double(i) + 0.7 * rank + 0.31 * step;
  const uint64_t h = (i * 0x9e3779b97f4a7c15ull) ^ (uint64_t(rank) << 40) ^ (uint64_t(step) << 52);
  const double noise = double((h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull >> 40) / double(1 << 24);
  return static_cast<float>(std::sin(x) + noise - 0.5);
}

struct Poison {
  size_t index;
  float value;
  int rank;
};

std::vector<Poison> poisons(int nranks, size_t count) {
  return {{7, INFINITY, nranks - 1}, {count / 2, NAN, 0}, {count - 1, -INFINITY, 1 % nranks}};
}

bool kind_matches(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want;
}

int run(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <rank> <nranks> <unique id in hex>\n", argv[0]);
    return kBadArguments;
  }
  const int rank = atoi(argv[1]), nranks = atoi(argv[2]);
  g_rank = rank;
  ncclUniqueId id;
  if (!parse_id(argv[3], &id)) return fail("the unique id is not 256 hex digits");
  const size_t per_node = env_size("MODEL_RANKS_PER_NODE", 0);
  std::vector<std::string> hosts;
  if (per_node > 0) {
    for (int r = 0; r < nranks; ++r) hosts.push_back("node" + std::to_string(r / per_node));
    setenv("TERSE_HOSTID", hosts[static_cast<size_t>(rank)].c_str(), 1);
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "ncclCommInitRank: %s\n", ncclGetLastError(nullptr));
    return kInitFailed;
  }

  const std::string dtype_name = env_text("MODEL_DTYPE", "float32");
  const terse::DType dtype = dtype_name == "float16"    ? terse::DType::kFloat16
                             : dtype_name == "bfloat16" ? terse::DType::kBFloat16
                                                        : terse::DType::kFloat32;
  const ncclDataType_t nccl_type = dtype == terse::DType::kFloat16    ? ncclFloat16
                                   : dtype == terse::DType::kBFloat16 ? ncclBfloat16
                                                                      : ncclFloat32;
  const size_t count = env_size("MODEL_COUNT", 5003);
  const int steps = static_cast<int>(env_size("MODEL_STEPS", 4));
  const bool average = env_text("MODEL_OP", "sum") == "avg";
  const size_t rows = env_size("MODEL_ROWS", 0);
  const int poison_step = static_cast<int>(env_size("MODEL_POISON_STEP", 1u << 30));

  terseTensor tensor{};
  tensor.name = "model.tensor";
  if (rows > 0 && count % rows == 0) {
    tensor.ndims = 2;
    tensor.shape[0] = static_cast<int64_t>(rows);
    tensor.shape[1] = static_cast<int64_t>(count / rows);
  }
  std::unique_ptr<terse::model::CompressedModel> model;
  std::vector<uint8_t> recv(count * terse::dtype_size(dtype));
  const size_t piece_bytes = stated_piece_bytes();
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(nranks));
    for (int r = 0; r < nranks; ++r) {
      inputs[r].resize(count * terse::dtype_size(dtype));
      for (size_t i = 0; i < count; ++i) {
        terse::store_element(inputs[r].data(), dtype, i, input_value(r, step, i));
      }
      if (step == poison_step) {
        for (const Poison& p : poisons(nranks, count)) {
          if (p.rank == r) terse::store_element(inputs[r].data(), dtype, p.index, p.value);
        }
      }
    }
    // NaN everywhere first: an element the call does not write cannot pass.
    for (size_t i = 0; i < count; ++i) terse::store_element(recv.data(), dtype, i, NAN);
    terseStats stats{};
    if (terseAllReduceTensor(inputs[static_cast<size_t>(rank)].data(), recv.data(), count,
                             nccl_type, average ? ncclAvg : ncclSum, &tensor, comm,
                             nullptr) != ncclSuccess) {
      return fail("step " + std::to_string(step) + ": " + ncclGetLastError(comm));
    }
    if (terseCommGetStats(comm, &stats) != ncclSuccess) return fail("terseCommGetStats failed");
    if (stats.compressed_calls != static_cast<uint64_t>(step + 1)) {
      return fail("step " + std::to_string(step) + " was not compressed (last codec " +
                  stats.last_codec + ")");
    }
    if (model == nullptr) {
      model = terse::model::model_of_last_call(stats, nranks);
      if (model == nullptr) {
        return fail(std::string("the model cannot make codec ") + stats.last_codec);
      }
    }
    // Every call is a collective of this communicator and the tensor's step'th call.
    const uint64_t seed = stated_seed(id, static_cast<uint64_t>(step), static_cast<uint64_t>(step));
    if (stats.last_seed != seed || stats.last_step != static_cast<uint64_t>(step) ||
        stats.last_piece_bytes != piece_bytes) {
      return fail("step " + std::to_string(step) + ": the statistics say seed " +
                  std::to_string(stats.last_seed) + ", step " + std::to_string(stats.last_step) +
                  ", piece " + std::to_string(stats.last_piece_bytes) +
                  " bytes; terse.h's rules give " + std::to_string(seed) + ", " +
                  std::to_string(step) + ", " + std::to_string(piece_bytes));
    }
    terse::model::CallSpec spec =
        terse::model::spec_of_last_call(stats, dtype, count, average ? 1.0 / nranks : 1.0);
    spec.seed = seed;
    spec.step = static_cast<uint64_t>(step);
    spec.piece_bytes = piece_bytes;
    if (tensor.ndims == 2) spec.shape = terse::MatrixShape{rows, count / rows};
    spec.hosts = hosts;
    const terse::model::Expected expected = model->call(spec, inputs);
    const terse::model::Comparison comparison =
        terse::model::compare(expected, dtype, recv.data(), count);
    const std::string call = "step " + std::to_string(step) + " (" + stats.last_codec + ", " +
                             stats.last_algorithm + ")";
    if (comparison.mismatches != 0) {
      return fail(call + ": " + std::to_string(comparison.mismatches) +
                  " elements differ from the model: " + comparison.first);
    }
    size_t non_finite = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!std::isfinite(terse::load_element(recv.data(), dtype, i))) ++non_finite;
    }
    const size_t poisoned = step == poison_step ? poisons(nranks, count).size() : 0;
    if (non_finite != poisoned) {
      return fail(call + ": " + std::to_string(non_finite) + " non-finite elements, expected " +
                  std::to_string(poisoned));
    }
    if (step == poison_step) {
      for (const Poison& p : poisons(nranks, count)) {
        const float got = terse::load_element(recv.data(), dtype, p.index);
        if (!kind_matches(got, p.value)) {
          return fail(call + ": element " + std::to_string(p.index) + " is " + std::to_string(got) +
                      ", not " + std::to_string(p.value));
        }
      }
    }
  }
  fprintf(stderr, "compressed_rank_process rank %d: %d steps as the model says\n", rank, steps);
  return ncclCommDestroy(comm) == ncclSuccess ? kOk : fail("ncclCommDestroy failed");
}

}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
