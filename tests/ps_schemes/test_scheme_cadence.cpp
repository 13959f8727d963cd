// The update schemes' cadence and arithmetic against the recording stand-in of the tersePs calls
// (recording_ps.h): which requests each step makes, in which order, and the exact values worker
// and centre hold. Every value is a small dyadic number, so float results compare exactly. The
// same schemes run over real ranks and the real parameter server in test_schemes_over_ranks.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/train/ps_schemes/downpour.h"
#include "perf/train/ps_schemes/easgd.h"
#include "perf/train/ps_schemes/stale_synchronous.h"
#include "recording_ps.h"

namespace terse {
namespace test {
namespace {

using ps::SchemeTensor;
using Log = std::vector<std::string>;

// One tensor "w" of one element on the recording server, with the worker's copy.
struct OneTensor {
  explicit OneTensor(float initial) : value(initial) {
    handle = recording_ps_tensor("w", {initial});
    recording_ps_clear_log();
  }
  ~OneTensor() { recording_ps_free(handle); }
  std::vector<SchemeTensor> tensors() { return {SchemeTensor{handle, &value, 1}}; }
  float centre() const { return recording_ps_centre(handle)[0]; }
  // The calls made since the last look, cleared.
  Log calls() {
    Log log = recording_ps_log();
    recording_ps_clear_log();
    return log;
  }
  tersePsHandle_t handle;
  float value;
};

TEST(DownpourCadence, PushesEverySendStepsAndFetchesWithAReceiveIssuedOneStepAhead) {
  OneTensor w(0.0f);
  ps::Downpour downpour(w.tensors(), {/*send_every=*/2, /*fetch_every=*/3, /*push_scale=*/0.5f});
  ASSERT_EQ(downpour.start(), ncclSuccess);
  EXPECT_EQ(w.calls(), Log{}) << "fetch_every 3: nothing to prefetch before step 0";
  // Each step the worker's optimizer adds 1 to its value.
  auto step = [&] {
    w.value += 1.0f;
    return downpour.step();
  };
  ASSERT_EQ(step(), ncclSuccess);  // t0: neither push (1 % 2) nor fetch
  EXPECT_EQ(w.calls(), Log{});
  ASSERT_EQ(step(), ncclSuccess);  // t1: push 0.5 * 2; the receive for t2's fetch goes out
  EXPECT_EQ(w.calls(), (Log{"send add w 1", "receive w"}));
  EXPECT_EQ(w.centre(), 1.0f);
  recording_ps_add(w.handle, {100.0f});  // another worker, after the receive was issued
  ASSERT_EQ(step(), ncclSuccess);        // t2: fetch: the centre as issued (1) + t2's update
  EXPECT_EQ(w.calls(), Log{"sync receive w"});
  EXPECT_EQ(w.value, 2.0f);
  ASSERT_EQ(step(), ncclSuccess);  // t3: push 0.5 * (t2's + t3's updates), the last push synced
  EXPECT_EQ(w.calls(), (Log{"sync send w", "send add w 1"}));
  EXPECT_EQ(w.centre(), 102.0f);
  EXPECT_EQ(w.value, 3.0f);
  recording_ps_add(w.handle, {1000.0f});
  ASSERT_EQ(step(), ncclSuccess);  // t4: the receive for t5 goes out with t4's update unpushed
  EXPECT_EQ(w.calls(), Log{"receive w"});
  ASSERT_EQ(step(), ncclSuccess);  // t5: push, then fetch: 1102 + t4's and t5's updates
  EXPECT_EQ(w.calls(), (Log{"sync send w", "send add w 1", "sync receive w"}));
  EXPECT_EQ(w.value, 1104.0f);
  EXPECT_EQ(w.centre(), 1103.0f);
  ASSERT_EQ(downpour.flush(), ncclSuccess);  // nothing unpushed: only the last push's sync
  EXPECT_EQ(w.calls(), Log{"sync send w"});
  EXPECT_EQ(downpour.steps(), 6u);
}

TEST(DownpourCadence, FetchingEveryStepPrefetchesFromStartAndKeepsTheWorkersOwnUpdate) {
  OneTensor w(0.0f);
  ps::Downpour downpour(w.tensors(), {1, 1, 0.5f});
  ASSERT_EQ(downpour.start(), ncclSuccess);
  EXPECT_EQ(w.calls(), Log{"receive w"});
  w.value += 1.0f;
  ASSERT_EQ(downpour.step(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"send add w 0.5", "sync receive w", "receive w"}));
  // Received before the push (0), plus this worker's update the receive could not contain.
  EXPECT_EQ(w.value, 1.0f);
  w.value += 1.0f;
  ASSERT_EQ(downpour.step(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"sync send w", "send add w 0.5", "sync receive w", "receive w"}));
  EXPECT_EQ(w.value, 1.5f);  // the centre after step 0's push (0.5) + step 1's update
  EXPECT_EQ(w.centre(), 1.0f);
  // flush pushes nothing new (step 1 pushed) and waits for the prefetch, which step 2 applies.
  ASSERT_EQ(downpour.flush(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"sync send w", "sync receive w"}));
  recording_ps_add(w.handle, {8.0f});
  w.value += 1.0f;
  ASSERT_EQ(downpour.step(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"send add w 0.5", "receive w"}));
  EXPECT_EQ(w.value, 2.0f) << "the prefetch as issued (1) + step 2's update";
}

TEST(DownpourCadence, AReceiveLateForItsFetchIsAppliedWhenItArrivesNeverWaitedFor) {
  OneTensor w(0.0f);
  ps::Downpour downpour(w.tensors(), {1, 1, 1.0f});
  ASSERT_EQ(downpour.start(), ncclSuccess);
  EXPECT_EQ(w.calls(), Log{"receive w"});
  recording_ps_hold_receives(true);
  for (int t = 0; t < 2; ++t) {
    w.value += 1.0f;
    ASSERT_EQ(downpour.step(), ncclSuccess);
    // Pushed; the receive still running: no wait, no second receive, the worker's own values.
    Log expected = t == 0 ? Log{"send add w 1"} : Log{"sync send w", "send add w 1"};
    expected.push_back("test receive w: running");
    EXPECT_EQ(w.calls(), expected) << "step " << t;
    EXPECT_EQ(w.value, t + 1.0f);
  }
  recording_ps_hold_receives(false);
  recording_ps_add(w.handle, {16.0f});  // after the receive was issued: not in it
  w.value += 1.0f;
  ASSERT_EQ(downpour.step(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"sync send w", "send add w 1", "sync receive w", "receive w"}));
  // The centre as issued (0) + the three updates made since.
  EXPECT_EQ(w.value, 3.0f);
  w.value += 1.0f;
  ASSERT_EQ(downpour.step(), ncclSuccess);
  EXPECT_EQ(w.value, 20.0f) << "16 + the 3 pushed + step 3's update";
}

TEST(DownpourCadence, FlushPushesWhatIsUnpushed) {
  OneTensor w(0.0f);
  ps::Downpour downpour(w.tensors(), {4, 4, 1.0f});
  ASSERT_EQ(downpour.start(), ncclSuccess);
  w.value += 2.0f;
  ASSERT_EQ(downpour.step(), ncclSuccess);
  EXPECT_EQ(w.calls(), Log{});
  ASSERT_EQ(downpour.flush(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"send add w 2", "sync send w"}));
  EXPECT_EQ(w.centre(), 2.0f);
}

// The paper's update, restated: worker x and centre c pulled together by d = alpha (x - c).
struct ElasticReference {
  float centre;
  void exchange(float* x, float alpha) {
    const float d = alpha * (*x - centre);
    *x -= d;
    centre += d;
  }
};

TEST(EasgdCadence, TwoWorkersTakingTurnsMatchTheElasticUpdateExactly) {
  OneTensor a(8.0f);
  float b_value = 8.0f;
  std::vector<SchemeTensor> b_tensors = {SchemeTensor{a.handle, &b_value, 1}};
  const int tau = 2;
  const float alpha = 0.25f;
  ps::Easgd worker_a(a.tensors(), {tau, alpha});
  ps::Easgd worker_b(b_tensors, {tau, alpha});
  ASSERT_EQ(worker_a.start(), ncclSuccess);
  ASSERT_EQ(worker_b.start(), ncclSuccess);
  ElasticReference reference{8.0f};
  float a_reference = 8.0f, b_reference = 8.0f;
  for (int t = 0; t < 8; ++t) {
    a.value += 4.0f;  // worker a's optimizer step
    a_reference += 4.0f;
    ASSERT_EQ(worker_a.step(), ncclSuccess);
    const bool exchanges = (t + 1) % tau == 0;
    if (exchanges) reference.exchange(&a_reference, alpha);
    b_value -= 2.0f;  // worker b's
    b_reference -= 2.0f;
    ASSERT_EQ(worker_b.step(), ncclSuccess);
    if (exchanges) reference.exchange(&b_reference, alpha);
    const Log calls = a.calls();
    if (!exchanges) {
      EXPECT_EQ(calls, Log{}) << "step " << t;
    } else {
      // Worker a: the previous exchange's push synced (from step 3 on), receive, push; then b.
      Log kinds;
      for (const std::string& line : calls) kinds.push_back(line.substr(0, line.find(" w")));
      const Log one = t < tau ? Log{"receive", "sync receive", "send add"}
                              : Log{"sync send", "receive", "sync receive", "send add"};
      Log both = one;
      both.insert(both.end(), one.begin(), one.end());
      EXPECT_EQ(kinds, both) << "step " << t;
    }
    EXPECT_EQ(a.value, a_reference) << "step " << t;
    EXPECT_EQ(b_value, b_reference) << "step " << t;
    EXPECT_EQ(a.centre(), reference.centre) << "step " << t;
  }
  // Four exchanges each moved the centre: it is no longer where it started, and x + c of each
  // exchange was conserved, so the centre holds the sum of what the workers gave up.
  EXPECT_NE(reference.centre, 8.0f);
  ASSERT_EQ(worker_a.flush(), ncclSuccess);
  ASSERT_EQ(worker_b.flush(), ncclSuccess);
  EXPECT_EQ(a.calls(), (Log{"sync send w", "sync send w"}));
}

TEST(EasgdCadence, ThePullIsAlphaOfTheDistanceToTheCentre) {
  OneTensor w(0.0f);
  ps::Easgd easgd(w.tensors(), {1, 0.25f});
  w.value = 16.0f;
  ASSERT_EQ(easgd.step(), ncclSuccess);
  EXPECT_EQ(w.calls(), (Log{"receive w", "sync receive w", "send add w 4"}));
  EXPECT_EQ(w.value, 12.0f);
  EXPECT_EQ(w.centre(), 4.0f);
}

TEST(StaleSynchronousCadence, PushesClocksAndThenReceivesTheCentreEveryStep) {
  OneTensor w(0.0f);
  ps::StaleSynchronous ssp(w.tensors(), {/*staleness=*/2, /*push_scale=*/0.5f});
  ASSERT_EQ(ssp.start(), ncclSuccess);
  for (uint64_t t = 0; t < 3; ++t) {
    w.value += 2.0f;
    recording_ps_add(w.handle, {16.0f});  // another worker's push of this step
    const float centre_before = w.centre();
    ASSERT_EQ(ssp.step(), ncclSuccess);
    const std::string clock = std::to_string(t + 1);
    EXPECT_EQ(w.calls(), (Log{"send add w 1", "clock w " + clock + " 2", "sync clock w",
                              "receive w", "sync receive w", "sync send w"}))
        << "step " << t;
    EXPECT_EQ(w.value, centre_before + 1.0f) << "the worker's model is the centre, step " << t;
    EXPECT_EQ(w.centre(), w.value);
  }
}

TEST(StaleSynchronousCadence, EveryTensorsRequestsOfOneKindGoOutBeforeAnyIsWaitedFor) {
  std::vector<float> a = {1.0f}, b = {2.0f};
  tersePsHandle_t ha = recording_ps_tensor("a", a), hb = recording_ps_tensor("b", b);
  recording_ps_clear_log();
  ps::StaleSynchronous ssp({SchemeTensor{ha, a.data(), 1}, SchemeTensor{hb, b.data(), 1}},
                           {0, 1.0f});
  ASSERT_EQ(ssp.step(), ncclSuccess);
  EXPECT_EQ(recording_ps_log(),
            (Log{"send add a 0", "send add b 0", "clock a 1 0", "clock b 1 0", "sync clock a",
                 "sync clock b", "receive a", "receive b", "sync receive a", "sync receive b",
                 "sync send a", "sync send b"}));
  recording_ps_free(ha);
  recording_ps_free(hb);
}

}  // namespace
}  // namespace test
}  // namespace terse
