// One rank of the update schemes' process tests (test_schemes_over_ranks.cpp): an application of
// libterse's public API and perf/train/ps_schemes that runs one scheme over the real parameter
// server and checks every value against what the scheme's contract allows. Reports through its exit
// code, says what went wrong on stderr.
//
//   ps_scheme_rank_process <scenario> <rank> <nranks> <unique id in hex>
//
// Each scenario uses two tensors, "whole" (5 elements, placed on one owner) and "split"
// (4096 elements: the test sets TERSE_PS_SPLIT_BYTES=4K, so one shard per rank), and the
// workers' "optimizer" adds known values, so every expected value is exact in fp32:
//
// downpour  send_every 2, fetch_every 3, push_scale 1, 7 steps. Rank r adds 8^r per step to
//           every element, so a value minus its start reads, in base 8, how many of each rank's
//           steps it holds. After every step the worker must hold all of its own steps (a fetch
//           never loses them, and never counts one twice) and, of every other rank, a prefix of
//           its pushes (0, 2, 4 or 6 steps, or 7 after its flush); after every rank flushed, the
//           centre holds all 7 of every rank.
// easgd     tau 2, alpha 0.25, the ranks taking turns (a barrier between turns), so the order of
//           exchanges is known: every rank replays them all in a model of the elastic update and
//           checks its own values and the centre (received after every round) exactly.
// ssp       PS_STALENESS = S, push_scale 1, 7 steps, rank r adds 8^r; rank 0 sleeps 20 ms per
//           step so that the others run ahead (not a condition of the check: the bound must hold
//           at any speed). After step t every rank must hold its own t + 1 steps and, of every
//           other rank, at least t + 1 - S (all of them for S = 0) and at most t + 2 + S: a rank
//           whose clock t + 1 + S has passed may push step t + 2 + S before waiting at its next
//           clock, and a read may see such fresher updates (as SSP's reads may).
#include <nccl.h>
#include <terse/terse.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/hex_bytes.h"
#include "perf/train/ps_schemes/centre_fetch.h"
#include "perf/train/ps_schemes/downpour.h"
#include "perf/train/ps_schemes/easgd.h"
#include "perf/train/ps_schemes/stale_synchronous.h"

namespace {

using terse::ps::SchemeTensor;

enum ExitCode { kOk = 0, kBadArguments = 10, kInitFailed = 11, kWrong = 12 };

constexpr size_t kWholeCount = 5;
constexpr size_t kSplitCount = 4096;
constexpr int kSteps = 7;
constexpr int kMaxWrongShown = 3;

int g_rank = -1;
int g_nranks = 0;
ncclComm_t g_comm = nullptr;

int wrong(const std::string& what) {
  fprintf(stderr, "ps_scheme_rank_process rank %d: %s\n", g_rank, what.c_str());
  return kWrong;
}

#define EXPECT_OK(call)                                                           \
  do {                                                                            \
    ncclResult_t expect_ok_result_ = (call);                                      \
    if (expect_ok_result_ != ncclSuccess) {                                       \
      return wrong(std::string(#call) + " failed: " + ncclGetLastError(nullptr)); \
    }                                                                             \
  } while (0)

// The two tensors of every scenario: the worker's values and the parameter-server handles.
struct Tensors {
  std::vector<float> whole, split;
  tersePsHandle_t handles[2] = {nullptr, nullptr};
  std::vector<SchemeTensor> schemes() {
    return {SchemeTensor{handles[0], whole.data(), whole.size()},
            SchemeTensor{handles[1], split.data(), split.size()}};
  }
  std::vector<float>* values(int i) { return i == 0 ? &whole : &split; }
};

float start_value(size_t i) {
  return static_cast<float>(i % 7);
}

ncclResult_t init(Tensors* tensors) {
  tensors->whole.resize(kWholeCount);
  tensors->split.resize(kSplitCount);
  for (size_t i = 0; i < kWholeCount; ++i) tensors->whole[i] = start_value(i);
  for (size_t i = 0; i < kSplitCount; ++i) tensors->split[i] = start_value(i);
  tersePsTensorDesc descriptions[2] = {};
  descriptions[0].name = "whole";
  descriptions[0].data = tensors->whole.data();
  descriptions[0].count = kWholeCount;
  descriptions[1].name = "split";
  descriptions[1].data = tensors->split.data();
  descriptions[1].count = kSplitCount;
  for (tersePsTensorDesc& description : descriptions) {
    description.datatype = ncclFloat32;
    description.push_codec = "none";  // exact, whatever the environment's policy
  }
  return tersePsInitList(g_comm, descriptions, 2, tensors->handles);
}

ncclResult_t free_tensors(Tensors* tensors) {
  ncclResult_t result = ncclSuccess;
  for (tersePsHandle_t handle : tensors->handles) {
    const ncclResult_t freed = tersePsFree(handle);
    if (result == ncclSuccess) result = freed;
  }
  return result;
}

ncclResult_t barrier() {
  int nothing = 0;
  return ncclAllReduce(&nothing, &nothing, 1, ncclInt32, ncclSum, g_comm, nullptr);
}

// Steps of each rank that `value - start` holds, rank r counted by the base-8 digit r (every
// rank adds 8^r per step, at most 7 steps, so the digits never carry); false when the difference
// is not a whole number of such steps.
bool steps_held(float value, float start, std::vector<int>* steps) {
  const double held = static_cast<double>(value) - start;
  if (held < 0 || held != std::floor(held)) return false;
  long rest = static_cast<long>(held);
  steps->assign(static_cast<size_t>(g_nranks), 0);
  for (int r = 0; r < g_nranks; ++r, rest /= 8) (*steps)[static_cast<size_t>(r)] = rest % 8;
  return rest == 0;
}

float own_step_value() {
  return std::pow(8.0f, static_cast<float>(g_rank));
}

void add_own_step(Tensors* tensors) {
  for (float& v : tensors->whole) v += own_step_value();
  for (float& v : tensors->split) v += own_step_value();
}

// Checks every element of both tensors with `allowed(rank, steps held of it)`; counts failures.
template <typename Allowed>
int check_steps(Tensors* tensors, const std::string& when, Allowed allowed) {
  int failures = 0;
  for (int t = 0; t < 2; ++t) {
    const std::vector<float>& values = *tensors->values(t);
    for (size_t i = 0; i < values.size(); ++i) {
      std::vector<int> steps;
      bool ok = steps_held(values[i], start_value(i), &steps);
      std::string reason = "not a sum of the ranks' steps";
      for (int r = 0; ok && r < g_nranks; ++r) {
        ok = allowed(r, steps[static_cast<size_t>(r)]);
        if (!ok) {
          reason = "holds " + std::to_string(steps[static_cast<size_t>(r)]) + " steps of rank " +
                   std::to_string(r);
        }
      }
      if (!ok && failures++ < kMaxWrongShown) {
        wrong(when + ": " + (t == 0 ? "whole" : "split") + "[" + std::to_string(i) +
              "] = " + std::to_string(values[i]) + " " + reason);
      }
    }
  }
  return failures;
}

int run_downpour() {
  Tensors tensors;
  EXPECT_OK(init(&tensors));
  int failures = 0;
  {
    terse::ps::Downpour downpour(tensors.schemes(), {2, 3, 1.0f});
    EXPECT_OK(downpour.start());
    for (int t = 0; t < kSteps; ++t) {
      add_own_step(&tensors);
      EXPECT_OK(downpour.step());
      failures += check_steps(&tensors, "after step " + std::to_string(t), [&](int r, int held) {
        if (r == g_rank) return held == t + 1;
        return held == 0 || held == 2 || held == 4 || held == 6 || held == kSteps;
      });
    }
    EXPECT_OK(downpour.flush());
  }
  EXPECT_OK(barrier());
  std::vector<float> own_whole = tensors.whole, own_split = tensors.split;
  EXPECT_OK(
      terse::ps::fetch_centre(tensors.schemes(), {tensors.whole.data(), tensors.split.data()}));
  failures += check_steps(&tensors, "the centre after every rank's flush",
                          [&](int, int held) { return held == kSteps; });
  EXPECT_OK(barrier());
  EXPECT_OK(free_tensors(&tensors));
  return failures == 0 ? kOk : kWrong;
}

// The elastic update, replayed for every rank: the model of what the parameter server and the
// workers must hold when the ranks take turns.
struct ElasticModel {
  std::vector<std::vector<float>> workers;  // [rank][element]
  std::vector<float> centre;
};

float easgd_step_value(int rank, size_t i) {
  return static_cast<float>((rank + 1) * ((i % 5) + 1)) * (rank % 2 == 0 ? 1.0f : -1.0f);
}

int compare(const std::vector<float>& got, const std::vector<float>& want, size_t first,
            const std::string& what) {
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[first + i]) continue;
    if (failures++ < kMaxWrongShown) {
      wrong(what + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", the model says " +
            std::to_string(want[first + i]));
    }
  }
  return failures;
}

int run_easgd() {
  constexpr int kTau = 2;
  constexpr float kAlpha = 0.25f;
  constexpr int kRounds = 6;
  Tensors tensors;
  EXPECT_OK(init(&tensors));
  // The model sees both tensors as one vector: whole, then split.
  const size_t n = kWholeCount + kSplitCount;
  std::vector<float> start(n);
  for (size_t i = 0; i < n; ++i) start[i] = start_value(i < kWholeCount ? i : i - kWholeCount);
  ElasticModel model{std::vector<std::vector<float>>(static_cast<size_t>(g_nranks), start), start};
  int failures = 0;
  std::vector<float> centre_whole(kWholeCount), centre_split(kSplitCount);
  {
    terse::ps::Easgd easgd(tensors.schemes(), {kTau, kAlpha});
    EXPECT_OK(easgd.start());
    for (int t = 0; t < kRounds; ++t) {
      for (int turn = 0; turn < g_nranks; ++turn) {
        std::vector<float>& x = model.workers[static_cast<size_t>(turn)];
        for (size_t i = 0; i < n; ++i) {
          x[i] += easgd_step_value(turn, i < kWholeCount ? i : i - kWholeCount);
        }
        if ((t + 1) % kTau == 0) {
          for (size_t i = 0; i < n; ++i) {
            const float d = kAlpha * (x[i] - model.centre[i]);
            x[i] -= d;
            model.centre[i] += d;
          }
        }
        if (turn == g_rank) {
          for (int k = 0; k < 2; ++k) {
            std::vector<float>& values = *tensors.values(k);
            for (size_t i = 0; i < values.size(); ++i) values[i] += easgd_step_value(turn, i);
          }
          EXPECT_OK(easgd.step());
          EXPECT_OK(easgd.flush());  // applied before the next turn's receive
        }
        EXPECT_OK(barrier());
      }
      const std::string round = "round " + std::to_string(t);
      const std::vector<float>& mine = model.workers[static_cast<size_t>(g_rank)];
      failures += compare(tensors.whole, mine, 0, round + ": worker whole");
      failures += compare(tensors.split, mine, kWholeCount, round + ": worker split");
      EXPECT_OK(
          terse::ps::fetch_centre(tensors.schemes(), {centre_whole.data(), centre_split.data()}));
      failures += compare(centre_whole, model.centre, 0, round + ": centre whole");
      failures += compare(centre_split, model.centre, kWholeCount, round + ": centre split");
      // Every rank has read this round's centre before the next round's first exchange moves it.
      EXPECT_OK(barrier());
    }
  }
  // The exchanges moved the centre: a scheme that never pushed would fail above, but say so.
  if (model.centre == start) failures += wrong("the model's centre never moved") == kWrong;
  EXPECT_OK(barrier());
  EXPECT_OK(free_tensors(&tensors));
  return failures == 0 ? kOk : kWrong;
}

int run_ssp() {
  const char* text = getenv("PS_STALENESS");
  if (text == nullptr) return wrong("PS_STALENESS is not set");
  const int staleness = atoi(text);
  Tensors tensors;
  EXPECT_OK(init(&tensors));
  int failures = 0;
  {
    terse::ps::StaleSynchronous ssp(tensors.schemes(), {static_cast<uint64_t>(staleness), 1.0f});
    EXPECT_OK(ssp.start());
    for (int t = 0; t < kSteps; ++t) {
      if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      add_own_step(&tensors);
      EXPECT_OK(ssp.step());
      failures += check_steps(&tensors, "after step " + std::to_string(t), [&](int r, int held) {
        if (r == g_rank) return held == t + 1;
        return held >= t + 1 - staleness && held <= t + 2 + staleness;
      });
    }
    EXPECT_OK(ssp.flush());
  }
  EXPECT_OK(barrier());
  EXPECT_OK(free_tensors(&tensors));
  return failures == 0 ? kOk : kWrong;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ps_scheme_rank_process <scenario> <rank> <nranks> <unique id hex>\n");
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
  if (scenario == "downpour") code = run_downpour();
  if (scenario == "easgd") code = run_easgd();
  if (scenario == "ssp") code = run_ssp();
  if (code == kOk) {
    ncclCommDestroy(g_comm);
  } else {
    ncclCommAbort(g_comm);
  }
  return code;
}
