// The command line of the perf binaries: nccl-tests' flags (short and long forms), their
// defaults, and the checks that turn a bad command line into one clear sentence.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

#include "perf/nccl_tests/data_types.h"

namespace terse {
namespace perf {

// Where a rank's send and receive buffers live (-B).
enum class BufferMemory {
  kAuto,     // device memory when this build has CUDA and a GPU is present, else host memory
  kHost,     // page-aligned host memory
  kDevice,   // cudaMalloc on the rank's GPU, as nccl-tests
  kManaged,  // cudaMallocManaged on the rank's GPU
};

// "host", "device", "managed"; false for anything else.
bool parse_buffer_memory(const std::string& text, BufferMemory* memory);
const char* buffer_memory_name(BufferMemory memory);  // "auto" for kAuto

struct Options {
  int threads = 1;               // -t: ranks per process, one thread each
  int gpus = 1;                  // -g: ranks per thread (only 1 without GPUs)
  size_t min_bytes = 32u << 20;  // -b
  size_t max_bytes = 32u << 20;  // -e
  size_t step_bytes = 1u << 20;  // -i: used when the step factor is 1
  size_t step_factor = 1;        // -f
  int iters = 20;                // -n
  int warmup_iters = 1;          // -w
  int agg_iters = 1;             // -m: calls per timed iteration, grouped
  int check = 1;                 // -c: validation passes per measurement (0: none)
  std::vector<Reduction> ops = {Reduction::kSum};     // -o
  std::vector<ncclDataType_t> types = {ncclFloat32};  // -d
  int root = 0;                                       // -r: -1 runs every rank as root in turn
  int blocking = 0;                                   // -z: 1 = barrier after every call
  int timeout_s = 0;                                  // -T: 0 = no limit
  int average = 1;        // -a: 0 rank 0, 1 mean, 2 min, 3 max across ranks
  std::string json_path;  // -J
  std::string codec;      // -Z: TERSE_CODEC for this run ("" leaves the environment alone)
  BufferMemory memory = BufferMemory::kAuto;  // -B
  std::vector<std::string> command_line;
};

// What the caller should do after parsing.
enum class ParseOutcome { kRun, kHelp, kError };

// Parses argv (argv[0] is the program). kError leaves a sentence naming the flag and the value
// in `*error`; kHelp means -h was given. The subset `allowed` (short flag letters, e.g.
// "befnwcdJ") restricts what is accepted; empty accepts every flag.
ParseOutcome parse_options(int argc, const char* const* argv, Options* options, std::string* error,
                           const std::string& allowed = "");

// "8", "1K", "1.5M", "64MB", "2G": 1024-based. False for anything else (negative, junk).
bool parse_size(const std::string& text, size_t* bytes);

// The -h text for `program`, restricted to `allowed` as above.
std::string usage_text(const std::string& program, const std::string& allowed = "");

}  // namespace perf
}  // namespace terse
