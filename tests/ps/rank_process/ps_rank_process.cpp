// One rank of the parameter-server process tests: an application of libterse's public API
// (<nccl.h>, <terse/terse.h>) that runs one scenario and checks every value it receives against
// a model it computes itself (every rank's contribution is a known function of rank, step and
// element). Reports through its exit code, says what went wrong on stderr.
//
//   ps_rank_process <scenario> <rank> <nranks> <unique id in hex>
//
// Scenarios: sum, torn, clock (PS_STALENESS), compressed (PS_PUSH_CODEC, or the policy when
// unset), owner_killed, rss, bad_input. The test sets TERSE_PS_SPLIT_BYTES where a scenario
// wants tensors split.
#include <malloc.h>
#include <nccl.h>
#include <signal.h>
#include <terse/terse.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "codecs/codec_registry.h"
#include "common/hex_bytes.h"

namespace {

enum ExitCode { kOk = 0, kBadArguments = 10, kInitFailed = 11, kWrong = 12 };

int g_rank = -1;
int g_nranks = 0;
ncclComm_t g_comm = nullptr;

int wrong(const std::string& what) {
  fprintf(stderr, "ps_rank_process rank %d: %s\n", g_rank, what.c_str());
  return kWrong;
}

#define EXPECT_OK(call)                                                           \
  do {                                                                            \
    ncclResult_t expect_ok_result_ = (call);                                      \
    if (expect_ok_result_ != ncclSuccess) {                                       \
      return wrong(std::string(#call) + " failed: " + ncclGetLastError(nullptr)); \
    }                                                                             \
  } while (0)

size_t env_size(const char* name, size_t fallback) {
  const char* text = getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

// A byte count as TERSE_* variables spell it: digits, then K, M or G (1024-based).
size_t env_bytes(const char* name, size_t fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  size_t value = std::strtoull(text, &end, 10);
  if (*end == 'K') value <<= 10;
  if (*end == 'M') value <<= 20;
  if (*end == 'G') value <<= 30;
  return value;
}

// Every rank has arrived: an allreduce cannot finish before.
ncclResult_t barrier() {
  float one = 1, sum = 0;
  return ncclAllReduce(&one, &sum, 1, ncclFloat32, ncclSum, g_comm, nullptr);
}

// The model of placement (terse.h, "Placement"), written from the documentation: split tensors
// by balanced rows, small ones largest first onto the least-loaded rank.
struct Shard {
  int owner;
  size_t offset, count;
};
struct Placed {
  size_t count, row, element_bytes;
};
std::vector<std::vector<Shard>> model_placement(const std::vector<Placed>& tensors,
                                                size_t split_bytes, int nranks) {
  std::vector<unsigned long long> load(size_t(nranks), 0);
  std::vector<std::vector<Shard>> out(tensors.size());
  std::vector<size_t> small;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Placed& p = tensors[t];
    if (p.count * p.element_bytes <= split_bytes) {
      small.push_back(t);
      continue;
    }
    const size_t rows = p.count / p.row;
    for (int r = 0; r < nranks; ++r) {
      const size_t a = rows * r / nranks, b = rows * (r + 1) / nranks;
      out[t].push_back({r, a * p.row, (b - a) * p.row});
      load[size_t(r)] += (b - a) * p.row * p.element_bytes;
    }
  }
  // Largest first; among equals the earlier tensor.
  for (size_t i = 0; i < small.size(); ++i) {
    for (size_t j = i + 1; j < small.size(); ++j) {
      const Placed &a = tensors[small[i]], &b = tensors[small[j]];
      if (b.count * b.element_bytes > a.count * a.element_bytes) std::swap(small[i], small[j]);
    }
  }
  for (size_t t : small) {
    int best = 0;
    for (int r = 1; r < nranks; ++r) best = load[size_t(r)] < load[size_t(best)] ? r : best;
    out[t].push_back({best, 0, tensors[t].count});
    load[size_t(best)] += tensors[t].count * tensors[t].element_bytes;
  }
  return out;
}

int owner_of(const std::vector<Shard>& shards, size_t i) {
  for (const Shard& s : shards) {
    if (i >= s.offset && i < s.offset + s.count) return s.owner;
  }
  return -1;
}

std::vector<Shard> layout_of(tersePsHandle_t handle) {
  tersePsShard shards[64];
  int n = 0;
  if (tersePsGetLayout(handle, shards, 64, &n) != ncclSuccess) return {};
  std::vector<Shard> out;
  for (int i = 0; i < n && i < 64; ++i)
    out.push_back({shards[i].owner, shards[i].offset, shards[i].count});
  return out;
}

// Small integers: every sum of them is exact in fp32, whatever the order of the additions.
double add_value(int rank, int step, size_t i) {
  return double(int((i * 7 + size_t(rank) * 13 + size_t(step) * 5) % 17) - 8);
}
double initial_value(int rank, size_t i) {
  return rank * 1000.0 + double(i % 11);
}

// bf16 of a float, rounded to nearest even: the model of a bf16 receive.
float bf16_round(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

template <class T>
int expect_equal(const char* what, const std::vector<T>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (double(got[i]) != want[i]) {
      return wrong(std::string(what) + ": element " + std::to_string(i) + " is " +
                   std::to_string(double(got[i])) + ", the model says " + std::to_string(want[i]));
    }
  }
  return kOk;
}

// ---- sum: placement, init from owners, concurrent adds, copy, zero, order, bf16 receives ----
int run_sum() {
  const int steps = 20;
  const size_t split = env_bytes("TERSE_PS_SPLIT_BYTES", 1 << 20);
  std::vector<Placed> placed = {{3000, 3, 4}, {100, 1, 4}, {300, 1, 8}, {50, 1, 4}, {64, 1, 4}};
  std::vector<std::vector<float>> f32(5);
  std::vector<double> f64(300);
  for (size_t t : {0, 1, 3, 4}) {
    f32[t].resize(placed[t].count);
    for (size_t i = 0; i < f32[t].size(); ++i) f32[t][i] = float(initial_value(g_rank, i));
  }
  for (size_t i = 0; i < 64; ++i) f32[4][i] = 1.0f + float(i) / 1000.0f + float(g_rank) * 0.25f;
  for (size_t i = 0; i < f64.size(); ++i) f64[i] = initial_value(g_rank, i) + 0.5;
  const char* names[] = {"big", "small_a", "small_b", "small_c", "bf16_received"};
  tersePsTensorDesc descs[5] = {};
  for (int t = 0; t < 5; ++t) {
    descs[t].name = names[t];
    descs[t].count = placed[size_t(t)].count;
    descs[t].row_elements = placed[size_t(t)].row;
    descs[t].datatype = t == 2 ? ncclFloat64 : ncclFloat32;
    descs[t].data = t == 2 ? static_cast<const void*>(f64.data()) : f32[size_t(t)].data();
  }
  // bf16 receives, named here or (PS_RECEIVE_BY_POLICY) by the policy file's ps_receive.
  descs[4].receive_codec = getenv("PS_RECEIVE_BY_POLICY") != nullptr ? nullptr : "bf16";
  tersePsHandle_t handles[5];
  EXPECT_OK(tersePsInitList(g_comm, descs, 5, handles));

  const auto model = model_placement(placed, split, g_nranks);
  for (int t = 0; t < 5; ++t) {
    const std::vector<Shard> got = layout_of(handles[t]);
    bool same = got.size() == model[size_t(t)].size();
    for (size_t s = 0; same && s < got.size(); ++s) {
      same = got[s].owner == model[size_t(t)][s].owner &&
             got[s].offset == model[size_t(t)][s].offset &&
             got[s].count == model[size_t(t)][s].count;
    }
    if (!same) return wrong(std::string("the layout of '") + names[t] + "' is not the model's");
  }
  if (split < 12000 && model[0].size() != size_t(g_nranks)) return wrong("'big' was not split");

  // Initialised from each owner's slice.
  std::vector<double> want[5];
  for (int t = 0; t < 4; ++t) {
    want[t].resize(placed[size_t(t)].count);
    for (size_t i = 0; i < want[t].size(); ++i) {
      want[t][i] = initial_value(owner_of(model[size_t(t)], i), i) + (t == 2 ? 0.5 : 0.0);
    }
  }
  std::vector<float> got32(3000);
  std::vector<double> got64(300);
  tersePsRequest_t sync;
  for (int t : {0, 1, 3}) {
    got32.assign(placed[size_t(t)].count, -1.0f);
    EXPECT_OK(tersePsReceive(handles[t], got32.data(), &sync));
    EXPECT_OK(tersePsSync(sync));
    if (expect_equal(names[t], got32, want[t]) != kOk) return kWrong;
  }
  EXPECT_OK(tersePsReceive(handles[2], got64.data(), &sync));
  EXPECT_OK(tersePsSync(sync));
  if (expect_equal("small_b", got64, want[2]) != kOk) return kWrong;

  // The bf16 receive: each element the owner's value rounded to bf16.
  {
    std::vector<float> got(64, -1.0f);
    std::vector<double> model_values(64);
    for (size_t i = 0; i < 64; ++i) {
      const int owner = owner_of(model[4], i);
      model_values[i] = bf16_round(1.0f + float(i) / 1000.0f + float(owner) * 0.25f);
    }
    EXPECT_OK(tersePsReceive(handles[4], got.data(), &sync));
    EXPECT_OK(tersePsSync(sync));
    if (expect_equal("bf16_received", got, model_values) != kOk) return kWrong;
  }

  // Concurrent adds from every rank: four sends in flight at a time.
  EXPECT_OK(barrier());
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<float>> push32(4);
    std::vector<double> push64(300);
    tersePsRequest_t syncs[4];
    for (int t = 0; t < 4; ++t) {
      if (t == 2) {
        for (size_t i = 0; i < 300; ++i) push64[i] = add_value(g_rank, step, i);
        EXPECT_OK(tersePsSend(handles[t], push64.data(), tersePsAdd, &syncs[t]));
        continue;
      }
      push32[size_t(t)].resize(placed[size_t(t)].count);
      for (size_t i = 0; i < push32[size_t(t)].size(); ++i) {
        push32[size_t(t)][i] = float(add_value(g_rank, step, i));
      }
      EXPECT_OK(tersePsSend(handles[t], push32[size_t(t)].data(), tersePsAdd, &syncs[t]));
    }
    for (int t = 0; t < 4; ++t) EXPECT_OK(tersePsSync(syncs[t]));
  }
  EXPECT_OK(barrier());
  for (int t = 0; t < 4; ++t) {
    for (size_t i = 0; i < want[t].size(); ++i) {
      for (int r = 0; r < g_nranks; ++r) {
        for (int step = 0; step < steps; ++step) want[t][i] += add_value(r, step, i);
      }
    }
  }
  for (int t : {0, 1, 3}) {
    got32.assign(placed[size_t(t)].count, -1.0f);
    EXPECT_OK(tersePsReceive(handles[t], got32.data(), &sync));
    EXPECT_OK(tersePsSync(sync));
    if (expect_equal(names[t], got32, want[t]) != kOk) return kWrong;
  }
  EXPECT_OK(tersePsReceive(handles[2], got64.data(), &sync));
  EXPECT_OK(tersePsSync(sync));
  if (expect_equal("small_b after the adds", got64, want[2]) != kOk) return kWrong;
  EXPECT_OK(barrier());

  // copy: the last rank's values replace the tensor exactly; zero: the tensor is zeros.
  if (g_rank == g_nranks - 1) {
    std::vector<float> copied(100);
    for (size_t i = 0; i < 100; ++i) copied[i] = float(i) * 0.5f - 7.25f;
    EXPECT_OK(tersePsSend(handles[1], copied.data(), tersePsCopy, &sync));
    EXPECT_OK(tersePsSync(sync));
  }
  if (g_rank == 0) {
    EXPECT_OK(tersePsSend(handles[0], nullptr, tersePsZero, &sync));
    EXPECT_OK(tersePsSync(sync));
  }
  // A copy then an add from one client, the add sent before the copy is answered: applied in
  // that order.
  if (g_rank == 1 % g_nranks) {
    std::vector<float> a(50), b(50);
    for (size_t i = 0; i < 50; ++i) {
      a[i] = float(i) - 20.0f;
      b[i] = 3.0f;
    }
    tersePsRequest_t first, second;
    EXPECT_OK(tersePsSend(handles[3], a.data(), tersePsCopy, &first));
    EXPECT_OK(tersePsSend(handles[3], b.data(), tersePsAdd, &second));
    EXPECT_OK(tersePsSync(second));
    EXPECT_OK(tersePsSync(first));
  }
  EXPECT_OK(barrier());
  std::vector<double> copied(100), zeros(3000, 0.0), ordered(50);
  for (size_t i = 0; i < 100; ++i) copied[i] = double(float(i) * 0.5f - 7.25f);
  for (size_t i = 0; i < 50; ++i) ordered[i] = double(i) - 20.0 + 3.0;
  got32.assign(100, -1.0f);
  EXPECT_OK(tersePsReceive(handles[1], got32.data(), &sync));
  EXPECT_OK(tersePsSync(sync));
  if (expect_equal("small_a after the copy", got32, copied) != kOk) return kWrong;
  got32.assign(3000, -1.0f);
  EXPECT_OK(tersePsReceive(handles[0], got32.data(), &sync));
  EXPECT_OK(tersePsSync(sync));
  if (expect_equal("big after the zero", got32, zeros) != kOk) return kWrong;
  got32.assign(50, -1.0f);
  EXPECT_OK(tersePsReceive(handles[3], got32.data(), &sync));
  EXPECT_OK(tersePsSync(sync));
  if (expect_equal("small_c after copy then add", got32, ordered) != kOk) return kWrong;

  for (int t = 0; t < 5; ++t) EXPECT_OK(tersePsFree(handles[t]));
  return kOk;
}

// ---- torn: every rank copies uniform tensors and receives them; every shard must be uniform ----
int run_torn() {
  const int iterations = int(env_size("PS_ITERATIONS", 60));
  // One tensor placed whole, one split (more than the default 1 MiB), both larger than UCX's
  // eager messages, so that answers and copies travel by rendezvous.
  const size_t counts[2] = {size_t(64) << 10, size_t(300) << 10};
  std::vector<std::vector<float>> initial(2);
  tersePsTensorDesc descs[2] = {};
  const char* names[] = {"whole", "split"};
  for (int t = 0; t < 2; ++t) {
    initial[size_t(t)].assign(counts[t], -1.0f);
    descs[t] = {sizeof(tersePsTensorDesc),
                names[t],
                initial[size_t(t)].data(),
                counts[t],
                ncclFloat32,
                0,
                nullptr,
                nullptr};
  }
  tersePsHandle_t handles[2];
  EXPECT_OK(tersePsInitList(g_comm, descs, 2, handles));
  std::vector<Shard> layouts[2] = {layout_of(handles[0]), layout_of(handles[1])};
  if (layouts[1].size() != size_t(g_nranks)) return wrong("'split' was not split");
  std::vector<float> mine, got;
  size_t checked = 0;
  for (int it = 0; it < iterations; ++it) {
    for (int t = 0; t < 2; ++t) {
      mine.assign(counts[t], float(g_rank * 100000 + it));
      got.assign(counts[t], -2.0f);
      tersePsRequest_t sent, received;
      EXPECT_OK(tersePsSend(handles[t], mine.data(), tersePsCopy, &sent));
      EXPECT_OK(tersePsReceive(handles[t], got.data(), &received));
      EXPECT_OK(tersePsSync(received));
      EXPECT_OK(tersePsSync(sent));
      for (const Shard& shard : layouts[t]) {
        for (size_t i = shard.offset; i < shard.offset + shard.count; ++i) {
          if (got[i] != got[shard.offset] || got[i] < 0) {
            return wrong(std::string("tensor '") + names[t] + "' iteration " + std::to_string(it) +
                         ": a torn read: element " + std::to_string(i) + " is " +
                         std::to_string(got[i]) + ", its shard starts with " +
                         std::to_string(got[shard.offset]));
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_OK(barrier());
  for (int t = 0; t < 2; ++t) EXPECT_OK(tersePsFree(handles[t]));
  fprintf(stderr, "rank %d: %zu shard reads, none torn\n", g_rank, checked);
  return kOk;
}

// ---- clock: no rank is ever more than `staleness` steps ahead of the slowest ----
int run_clock() {
  const uint64_t staleness = env_size("PS_STALENESS", 0);
  const int steps = 30;
  std::vector<float> progress(size_t(g_nranks), 0.0f), one_hot(size_t(g_nranks), 0.0f);
  one_hot[size_t(g_rank)] = 1.0f;
  tersePsHandle_t handle;
  EXPECT_OK(
      tersePsInit(g_comm, "progress", progress.data(), progress.size(), ncclFloat32, &handle));
  tersePsRequest_t sync;
  for (int step = 0; step < steps; ++step) {
    // Rank 0 straggles, so that the others would run ahead if nothing held them (the check
    // holds whatever the timing; the delay only makes a broken bound show).
    if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(4));
    EXPECT_OK(tersePsSend(handle, one_hot.data(), tersePsAdd, &sync));
    EXPECT_OK(tersePsSync(sync));
    const uint64_t clock = uint64_t(step) + 1;
    EXPECT_OK(tersePsClock(handle, clock, staleness, &sync));
    EXPECT_OK(tersePsSync(sync));
    EXPECT_OK(tersePsReceive(handle, progress.data(), &sync));
    EXPECT_OK(tersePsSync(sync));
    // Every rank added before it reported its clock, so each has added at least
    // clock - staleness times; none can have added more than clock + staleness + 1 (it waited
    // for the slowest, whose clock is at most ours, before each of its adds after the first).
    for (int q = 0; q < g_nranks; ++q) {
      const double done = progress[size_t(q)];
      const double least = clock > staleness ? double(clock - staleness) : 0.0;
      const double most = double(clock + staleness + 1);
      if (done < least || done > most) {
        return wrong("clock " + std::to_string(clock) + " staleness " + std::to_string(staleness) +
                     ": rank " + std::to_string(q) + " has done " + std::to_string(done) +
                     " steps, outside [" + std::to_string(least) + ", " + std::to_string(most) +
                     "]");
      }
    }
  }
  EXPECT_OK(barrier());
  EXPECT_OK(tersePsReceive(handle, progress.data(), &sync));
  EXPECT_OK(tersePsSync(sync));
  for (int q = 0; q < g_nranks; ++q) {
    if (progress[size_t(q)] != float(steps)) return wrong("the final progress is not every step");
  }
  EXPECT_OK(tersePsFree(handle));
  return kOk;
}

// ---- compressed: add through a codec with error feedback, against a replay of every client ----
float gradient(int rank, int step, size_t i) {
  const double x = 0.013 * double(i) + 0.7 * rank + 0.31 * step;
  return float(std::sin(x) * (1.0 + 0.5 * std::cos(0.1 * double(i) * (rank + 1))));
}

int run_compressed() {
  const int steps = 30;
  const size_t count = 2000;
  const char* codec_env = getenv("PS_PUSH_CODEC");
  const std::string codec_name = codec_env != nullptr ? codec_env : "";
  const char* model_env = getenv("PS_MODEL_CODEC");
  const std::string model_codec = !codec_name.empty()    ? codec_name
                                  : model_env != nullptr ? model_env
                                                         : "none";
  std::vector<float> initial(count);
  for (size_t i = 0; i < count; ++i) initial[i] = float(initial_value(g_rank, i)) * 0.001f;
  tersePsTensorDesc desc = {sizeof(tersePsTensorDesc),
                            "encoder.weight",
                            initial.data(),
                            count,
                            ncclFloat32,
                            0,
                            codec_name.empty() ? nullptr : codec_name.c_str(),
                            nullptr};
  tersePsHandle_t handle;
  EXPECT_OK(tersePsInitList(g_comm, &desc, 1, &handle));
  const std::vector<Shard> layout = layout_of(handle);
  tersePsRequest_t sync;
  std::vector<float> push(count);
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < count; ++i) push[i] = gradient(g_rank, step, i);
    EXPECT_OK(tersePsSend(handle, push.data(), tersePsAdd, &sync));
    EXPECT_OK(tersePsSync(sync));
  }
  EXPECT_OK(barrier());
  std::vector<float> got(count, -1.0f);
  EXPECT_OK(tersePsReceive(handle, got.data(), &sync));
  EXPECT_OK(tersePsSync(sync));

  // The model: each client's pushes replayed through the codec shard by shard (what the owner
  // must have decoded and added), and its final residuals.
  std::unique_ptr<terse::Codec> codec;
  if (terse::create_codec(model_codec, &codec) != ncclSuccess)
    return wrong("model codec " + model_codec);
  std::vector<double> owner(count), residual_sum(count, 0.0), pushed(count, 0.0);
  for (size_t i = 0; i < count; ++i) {
    const int who = owner_of(layout, i);
    owner[i] = double(float(initial_value(who, i)) * 0.001f);
    pushed[i] = owner[i];
  }
  for (int r = 0; r < g_nranks; ++r) {
    for (const Shard& shard : layout) {
      if (shard.count == 0) continue;
      std::vector<float> residual(shard.count, 0.0f), input(shard.count), decoded(shard.count);
      std::vector<uint8_t> message(codec->max_encoded_bytes(shard.count, terse::DType::kFloat32));
      for (int step = 0; step < steps; ++step) {
        for (size_t j = 0; j < shard.count; ++j) input[j] = gradient(r, step, shard.offset + j);
        size_t bytes = 0;
        if (codec->encode_compensated(input.data(), terse::DType::kFloat32, residual.data(),
                                      shard.count, terse::EncodeContext{}, message.data(),
                                      message.size(), &bytes) != ncclSuccess ||
            codec->decode(message.data(), bytes, decoded.data(), shard.count,
                          terse::DType::kFloat32, false, terse::DecodeContext{}) != ncclSuccess) {
          return wrong("the model's codec failed");
        }
        for (size_t j = 0; j < shard.count; ++j) {
          owner[shard.offset + j] += decoded[j];
          pushed[shard.offset + j] += input[j];
        }
      }
      for (size_t j = 0; j < shard.count; ++j) residual_sum[shard.offset + j] += residual[j];
    }
  }
  // fp32 sums in the owner's arrival order: within a few roundings of the model's double sum.
  double worst = 0, worst_conservation = 0, dropped = 0;
  for (size_t i = 0; i < count; ++i) {
    const double tolerance = 1e-5 * (8.0 + std::fabs(owner[i])) * g_nranks;
    const double error = std::fabs(double(got[i]) - owner[i]);
    worst = std::max(worst, error / tolerance);
    // Conservation: what the owner holds plus what the clients still hold is what was pushed.
    worst_conservation = std::max(
        worst_conservation, std::fabs(double(got[i]) + residual_sum[i] - pushed[i]) / tolerance);
    dropped = std::max(dropped, std::fabs(residual_sum[i]));
  }
  if (worst > 1.0)
    return wrong("the owner's values differ from the codec replay (" + std::to_string(worst) +
                 " tolerances)");
  if (worst_conservation > 1.0)
    return wrong("owner + residuals != pushed (" + std::to_string(worst_conservation) +
                 " tolerances)");
  fprintf(stderr, "rank %d: codec %s: owner matches the replay; residuals hold up to %g\n", g_rank,
          codec->spec().c_str(), dropped);
  if (dropped == 0) return wrong("the codec dropped nothing: the check would not see feedback");
  EXPECT_OK(tersePsFree(handle));
  return kOk;
}

// ---- owner_killed: the last rank dies after init; the others get errors, not hangs ----
// With PS_OWNER_STOP=1 it stops instead (SIGSTOP): alive to the transport, silent, so only the
// deadline path ends the others' requests.
int run_owner_killed() {
  std::vector<float> data(4096, 1.0f);
  tersePsHandle_t handle;
  EXPECT_OK(tersePsInit(g_comm, "doomed", data.data(), data.size(), ncclFloat32, &handle));
  if (g_rank == g_nranks - 1) raise(env_size("PS_OWNER_STOP", 0) != 0 ? SIGSTOP : SIGKILL);
  const double timeout = double(env_size("TERSE_TIMEOUT_S", 600));
  auto timed = [&](const char* what, auto&& call) -> int {
    const auto start = std::chrono::steady_clock::now();
    const ncclResult_t result = call();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (result != ncclRemoteError) {
      return wrong(std::string(what) + " returned " + ncclGetErrorString(result) +
                   ", not a remote error");
    }
    if (seconds > timeout + 5 || (env_size("PS_OWNER_STOP", 0) != 0 && seconds < timeout - 1)) {
      return wrong(std::string(what) + " took " + std::to_string(seconds) +
                   " s, outside TERSE_TIMEOUT_S (a stopped owner is only noticed at it)");
    }
    fprintf(stderr, "rank %d: %s failed after %.2f s: %s\n", g_rank, what, seconds,
            ncclGetLastError(nullptr));
    return kOk;
  };
  tersePsRequest_t sync;
  // Waits for the dead rank's clock, which never comes.
  EXPECT_OK(tersePsClock(handle, 1, 0, &sync));
  if (timed("the clock wait", [&] { return tersePsSync(sync); }) != kOk) return kWrong;
  EXPECT_OK(tersePsReceive(handle, data.data(), &sync));
  if (timed("the receive", [&] { return tersePsSync(sync); }) != kOk) return kWrong;
  EXPECT_OK(tersePsSend(handle, data.data(), tersePsAdd, &sync));
  if (timed("the add", [&] { return tersePsSync(sync); }) != kOk) return kWrong;
  tersePsFree(handle);  // fails: the dead rank never frees; the handle is released anyway
  ncclCommAbort(g_comm);
  g_comm = nullptr;
  return kOk;
}

// ---- rss: free gives the memory back, and the last free the server thread ----
long rss_kib() {
  FILE* file = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (file != nullptr && fgets(line, sizeof(line), file) != nullptr) {
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, nullptr, 10);
  }
  if (file != nullptr) fclose(file);
  return kib;
}
int threads() {
  FILE* file = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (file != nullptr && fgets(line, sizeof(line), file) != nullptr) {
    if (strncmp(line, "Threads:", 8) == 0) n = int(strtol(line + 8, nullptr, 10));
  }
  if (file != nullptr) fclose(file);
  return n;
}

int run_rss() {
  // Large blocks always straight from mmap and back: glibc otherwise raises its mmap threshold
  // after the first large free and keeps later blocks of that size in its heaps, which moved RSS
  // by +-20 MiB between cycles (what is measured is terse's frees, not glibc's caching).
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  const size_t count = size_t(8) << 20;  // 32 MiB of fp32
  const long tensor_kib = long(count * 4 / 1024);
  std::vector<float> data(count, 0.5f), got(count, 0.0f);
  // The first cycle pays what a process pays once (UCX's and the allocator's pools): the
  // baseline is taken after it.
  long before = 0;
  int threads_before = 0;
  for (int cycle = 0; cycle < 4; ++cycle) {
    EXPECT_OK(barrier());
    if (cycle == 1) {
      before = rss_kib();
      threads_before = threads();
    }
    tersePsTensorDesc desc = {
        sizeof(tersePsTensorDesc), "big", data.data(), count, ncclFloat32, 0, "int8", nullptr};
    tersePsHandle_t handle;
    EXPECT_OK(tersePsInitList(g_comm, &desc, 1, &handle));
    tersePsRequest_t sync;
    EXPECT_OK(tersePsSend(handle, data.data(), tersePsAdd, &sync));
    EXPECT_OK(tersePsSync(sync));
    EXPECT_OK(tersePsReceive(handle, got.data(), &sync));
    EXPECT_OK(tersePsSync(sync));
    EXPECT_OK(barrier());
    const long used = rss_kib();
    if (cycle == 0) {
      EXPECT_OK(tersePsFree(handle));
      continue;
    }
    // The residuals alone (one fp32 per element pushed) are a whole tensor.
    if (used - before < tensor_kib) {
      return wrong("in use the tensor added only " + std::to_string(used - before) +
                   " KiB: the measurement would not see a leak");
    }
    EXPECT_OK(tersePsFree(handle));
    const long after = rss_kib();
    fprintf(stderr, "rank %d cycle %d: RSS %ld KiB before, %ld in use, %ld after free\n", g_rank,
            cycle, before, used, after);
    if (after - before > tensor_kib / 4) {
      return wrong("after tersePsFree RSS is " + std::to_string(after - before) +
                   " KiB above where it was");
    }
    if (threads() != threads_before) {
      return wrong("the server thread outlived the last tensor (" + std::to_string(threads()) +
                   " threads, " + std::to_string(threads_before) + " before)");
    }
  }
  return kOk;
}

// ---- bad_input: every refusal names its argument; nothing breaks the communicator ----
int expect_refusal(ncclResult_t got, ncclResult_t want, const char* words, const char* what) {
  if (got != want) {
    return wrong(std::string(what) + ": returned " + ncclGetErrorString(got) + ", expected " +
                 ncclGetErrorString(want));
  }
  const std::string message = ncclGetLastError(nullptr);
  if (message.find(words) == std::string::npos) {
    return wrong(std::string(what) + ": the message '" + message + "' does not say '" + words +
                 "'");
  }
  return kOk;
}
#define EXPECT_REFUSED(call, code, words) \
  if (expect_refusal((call), (code), (words), #call) != kOk) return kWrong

int run_bad_input() {
  std::vector<float> data(100, 1.0f);
  tersePsHandle_t handle = nullptr;
  tersePsRequest_t sync = nullptr;
  EXPECT_REFUSED(tersePsInit(nullptr, "x", data.data(), 100, ncclFloat32, &handle),
                 ncclInvalidArgument, "comm");
  EXPECT_REFUSED(tersePsInit(g_comm, "x", data.data(), 0, ncclFloat32, &handle),
                 ncclInvalidArgument, "count is 0");
  EXPECT_REFUSED(tersePsInit(g_comm, "x", data.data(), 100, ncclInt8, &handle), ncclInvalidArgument,
                 "datatype");
  EXPECT_REFUSED(tersePsInit(g_comm, "x", nullptr, 100, ncclFloat32, &handle), ncclInvalidArgument,
                 "data is NULL");
  EXPECT_REFUSED(tersePsInit(g_comm, "x", data.data(), 100, ncclFloat32, nullptr),
                 ncclInvalidArgument, "handle");
  tersePsTensorDesc desc = {
      sizeof(tersePsTensorDesc), "x", data.data(), 100, ncclFloat32, 7, nullptr, nullptr};
  EXPECT_REFUSED(tersePsInitList(g_comm, &desc, 1, &handle), ncclInvalidArgument, "row_elements");
  desc.row_elements = 0;
  desc.push_codec = "bogus";
  EXPECT_REFUSED(tersePsInitList(g_comm, &desc, 1, &handle), ncclInvalidArgument, "bogus");
  desc.push_codec = "dgc";
  EXPECT_REFUSED(tersePsInitList(g_comm, &desc, 1, &handle), ncclInvalidArgument,
                 "per-tensor state");
  desc.push_codec = nullptr;
  EXPECT_REFUSED(tersePsInitList(g_comm, &desc, 0, &handle), ncclInvalidArgument, "ntensors");
  // Ranks that describe a tensor differently fail alike, and nothing is left half made.
  EXPECT_REFUSED(
      tersePsInit(g_comm, "x", data.data(), g_rank == 0 ? 100 : 99, ncclFloat32, &handle),
      ncclInvalidUsage, "differ in count");
  EXPECT_REFUSED(tersePsSend(nullptr, data.data(), tersePsAdd, &sync), ncclInvalidArgument,
                 "handle");
  EXPECT_REFUSED(tersePsSync(nullptr), ncclInvalidArgument, "sync");

  EXPECT_OK(tersePsInit(g_comm, "x", data.data(), 100, ncclFloat32, &handle));
  EXPECT_REFUSED(tersePsSend(handle, data.data(), tersePsRule_t(7), &sync), ncclInvalidArgument,
                 "rule 7");
  EXPECT_REFUSED(tersePsSend(handle, nullptr, tersePsCopy, &sync), ncclInvalidArgument,
                 "tensor is NULL");
  EXPECT_REFUSED(tersePsSend(handle, data.data(), tersePsAdd, nullptr), ncclInvalidArgument,
                 "sync");
  EXPECT_REFUSED(tersePsReceive(handle, nullptr, &sync), ncclInvalidArgument, "tensor is NULL");
  EXPECT_REFUSED(tersePsGetLayout(handle, nullptr, 4, nullptr), ncclInvalidArgument, "nshards");
  tersePsStats stats{};
  EXPECT_REFUSED(tersePsGetStats(nullptr, &stats), ncclInvalidArgument, "handle is NULL");
  EXPECT_REFUSED(tersePsGetStats(handle, nullptr), ncclInvalidArgument, "stats is NULL");
  EXPECT_OK(tersePsClock(handle, 5, 100, &sync));
  EXPECT_OK(tersePsSync(sync));
  EXPECT_REFUSED(tersePsClock(handle, 3, 100, &sync), ncclInvalidArgument, "behind");
  int done = 0;
  EXPECT_OK(tersePsReceive(handle, data.data(), &sync));
  EXPECT_REFUSED(tersePsTest(sync, nullptr), ncclInvalidArgument, "done");
  while (done == 0) EXPECT_OK(tersePsTest(sync, &done));
  // The communicator still works.
  EXPECT_OK(barrier());
  EXPECT_OK(tersePsFree(handle));
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ps_rank_process <scenario> <rank> <nranks> <unique id hex>\n");
    return kBadArguments;
  }
  const std::string scenario = argv[1];
  g_rank = atoi(argv[2]);
  g_nranks = atoi(argv[3]);
  ncclUniqueId id;
  if (!terse::hex_to_bytes(argv[4], id.internal, sizeof(id.internal))) return kBadArguments;
  if (ncclCommInitRank(&g_comm, g_nranks, id, g_rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", g_rank, ncclGetLastError(nullptr));
    return kInitFailed;
  }
  int code = kBadArguments;
  if (scenario == "sum") code = run_sum();
  if (scenario == "torn") code = run_torn();
  if (scenario == "clock") code = run_clock();
  if (scenario == "compressed") code = run_compressed();
  if (scenario == "owner_killed") code = run_owner_killed();
  if (scenario == "rss") code = run_rss();
  if (scenario == "bad_input") code = run_bad_input();
  if (g_comm != nullptr) {
    if (code == kOk) {
      ncclCommDestroy(g_comm);
    } else {
      ncclCommAbort(g_comm);
    }
  }
  return code;
}
