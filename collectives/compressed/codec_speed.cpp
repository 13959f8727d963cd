#include "collectives/compressed/codec_speed.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/env.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

// Timed runs after one untimed warm-up; the fastest counts (the others met a busy core).
constexpr int kTimedRuns = 2;

struct SpeedCache {
  std::mutex mutex;
  bool table_loaded = false;
  ncclResult_t table_result = ncclSuccess;
  std::string table_error;
  std::map<std::string, CodecSpeed> table;  // by spec or name, from TERSE_CODEC_SPEED
  double table_reduce = 0;
  std::map<std::string, CodecSpeed> measured;  // by spec
  double measured_reduce = 0;
};

SpeedCache& cache() {
  static SpeedCache* instance = new SpeedCache();  // never destroyed: used until exit
  return *instance;
}

double gbps_to_bytes(double gbps) {
  return gbps * 1e9;
}

// Reads TERSE_CODEC_SPEED once (cache mutex held).
ncclResult_t load_table(SpeedCache& speeds) {
  if (speeds.table_loaded) {
    if (speeds.table_result != ncclSuccess) {
      return fail(speeds.table_result, "%s", speeds.table_error.c_str());
    }
    return ncclSuccess;
  }
  speeds.table_loaded = true;
  const std::string path = env_string("TERSE_CODEC_SPEED", "");
  if (path.empty()) return ncclSuccess;
  auto refuse = [&](const std::string& why) {
    speeds.table_result = ncclInvalidArgument;
    speeds.table_error = "TERSE_CODEC_SPEED=" + path + ": " + why;
    return fail(speeds.table_result, "%s", speeds.table_error.c_str());
  };
  std::ifstream file(path);
  if (!file) return refuse("cannot open it");
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string spec;
    if (!(fields >> spec)) continue;
    double encode = 0, decode = 0;
    const bool reduce = spec == "reduce";
    if (!(fields >> encode) || (!reduce && !(fields >> decode))) {
      return refuse("line " + std::to_string(number) + ": expected '<codec> <encode GB/s> " +
                    "<decode GB/s>' or 'reduce <GB/s>'");
    }
    std::string extra;
    if (fields >> extra) {
      return refuse("line " + std::to_string(number) + ": unexpected '" + extra + "'");
    }
    if (!(encode > 0) || !std::isfinite(encode) || (!reduce && !(decode > 0)) ||
        !std::isfinite(decode)) {
      return refuse("line " + std::to_string(number) + ": speeds must be positive numbers");
    }
    if (reduce) {
      speeds.table_reduce = gbps_to_bytes(encode);
    } else {
      speeds.table[spec] = CodecSpeed{gbps_to_bytes(encode), gbps_to_bytes(decode)};
    }
  }
  return ncclSuccess;
}

// A gradient-like probe: values of mixed sign and magnitude, the same on every run.
std::vector<float> probe_values(size_t count) {
  std::vector<float> values(count);
  uint64_t state = 0x2545f4914f6cdd1dull;
  for (size_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const double uniform = static_cast<double>(state >> 11) * 0x1.0p-53;
    values[i] = static_cast<float>((uniform - 0.5) * std::exp2(8.0 * uniform - 6.0));
  }
  return values;
}

// The probes time the CPU time of the probing thread, not the wall clock. Ranks on one machine
// probe at the same moment (their first plan) and share its cores, so a wall clock would measure
// the share each got, which changes from run to run (with 4 ranks on 2 cores one run's int8 came
// out 1.7x slower than another's); the cost model applies the ranks' share of the cores itself
// (cpu_share, planner.cpp). A limit: a codec whose BLAS runs threads of its own (PowerSGD) is
// timed by the calling thread alone, whose clock misses the other threads' work while it waits;
// with several BLAS threads its speed can read high (the emulated cluster and the convergence
// study run BLAS on one thread).
double thread_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

ncclResult_t measure_codec_speed(Codec& codec, CodecSpeed* speed) {
  const size_t count = kSpeedProbeElements;
  const std::vector<float> input = probe_values(count);
  std::vector<float> error(count), output(count, 0.0f);
  std::vector<uint8_t> message(codec.max_encoded_bytes(count, DType::kFloat32));
  std::unique_ptr<CodecState> state = codec.make_state(count, DType::kFloat32, MatrixShape{});
  EncodeContext encode;
  // Error feedback's output, as the collectives ask for it; codecs that keep their residual in
  // their state (DGC's momentum) take none.
  encode.error = codec.stateful(count, DType::kFloat32, MatrixShape{}) ? nullptr : error.data();
  encode.state = state.get();
  double best_encode = 1e30, best_decode = 1e30;
  for (int run = 0; run <= kTimedRuns; ++run) {
    encode.seed = static_cast<uint64_t>(run) + 1;
    size_t bytes = 0;
    double start = thread_seconds();
    TERSE_CHECK(codec.encode(input.data(), count, DType::kFloat32, encode, message.data(),
                             message.size(), &bytes));
    const double encoded = thread_seconds() - start;
    start = thread_seconds();
    TERSE_CHECK(codec.decode(message.data(), bytes, output.data(), count, DType::kFloat32,
                             /*accumulate=*/true, DecodeContext{}));
    const double decoded = thread_seconds() - start;
    if (run == 0) continue;  // warm-up: first touches, lazy tables
    best_encode = std::min(best_encode, encoded);
    best_decode = std::min(best_decode, decoded);
  }
  const double bytes = static_cast<double>(count * sizeof(float));
  speed->encode_bytes_per_s = bytes / std::max(best_encode, 1e-9);
  speed->decode_bytes_per_s = bytes / std::max(best_decode, 1e-9);
  return ncclSuccess;
}

namespace {

double measure_reduce() {
  const size_t count = kSpeedProbeElements;
  const std::vector<float> input = probe_values(count);
  std::vector<float> output(count, 1.0f);
  double best = 1e30;
  for (int run = 0; run <= kTimedRuns; ++run) {
    const double start = thread_seconds();
    float* out = output.data();
    const float* in = input.data();
    for (size_t i = 0; i < count; ++i) out[i] += in[i];
    const double seconds = thread_seconds() - start;
    if (run > 0) best = std::min(best, seconds);
  }
  // Keeps the loop from being optimised away.
  volatile float sink = output[count / 2];
  (void)sink;
  return static_cast<double>(count * sizeof(float)) / std::max(best, 1e-9);
}

}  // namespace

ncclResult_t codec_speed(Codec& codec, CodecSpeed* speed) {
  SpeedCache& speeds = cache();
  std::lock_guard<std::mutex> lock(speeds.mutex);
  TERSE_CHECK(load_table(speeds));
  const std::string spec = codec.spec();
  for (const std::string& key : {spec, spec.substr(0, spec.find(':'))}) {
    const auto listed = speeds.table.find(key);
    if (listed != speeds.table.end()) {
      *speed = listed->second;
      return ncclSuccess;
    }
  }
  auto known = speeds.measured.find(spec);
  if (known == speeds.measured.end()) {
    CodecSpeed measured;
    if (measure_codec_speed(codec, &measured) != ncclSuccess) {
      TERSE_INFO("the speed probe of codec %s failed (%s); planning with %g GB/s for it",
                 spec.c_str(), last_error(), kUnmeasuredBytesPerSecond / 1e9);
      measured = CodecSpeed{kUnmeasuredBytesPerSecond, kUnmeasuredBytesPerSecond};
    }
    known = speeds.measured.emplace(spec, measured).first;
  }
  *speed = known->second;
  return ncclSuccess;
}

ncclResult_t reduce_speed(double* bytes_per_s) {
  SpeedCache& speeds = cache();
  std::lock_guard<std::mutex> lock(speeds.mutex);
  TERSE_CHECK(load_table(speeds));
  if (speeds.table_reduce > 0) {
    *bytes_per_s = speeds.table_reduce;
    return ncclSuccess;
  }
  if (speeds.measured_reduce <= 0) speeds.measured_reduce = measure_reduce();
  *bytes_per_s = speeds.measured_reduce;
  return ncclSuccess;
}

}  // namespace terse
