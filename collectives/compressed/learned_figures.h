// What the planner learns from the calls it planned (planner.h, "Learning"): corrections to the
// cost model's figures, each a factor on a nominal figure, estimated from what the calls measured
// and agreed by every rank. Pure arithmetic, no transport: the planner feeds it observations and
// the ranks' payloads, tests feed it figures of their own.
//
// The factors (1 = the nominal figure, the prior):
//   per link class (inside a node, between nodes): bandwidth (multiplies bytes per second) and
//   latency (multiplies seconds);
//   per codec spec: encode and decode time (multiply seconds per byte of the probed speed times
//   the core share), and the same for the additions (the reduction's speed).
// An observation is one call's estimate of a factor, as a natural logarithm. Each rank sums them
// between agreements; an agreement (one control allgather of every rank's payload()) merges them:
// a link factor moves toward the mean of every rank's observations, a codec's (and the
// additions') toward the slowest rank's mean (the collective waits for its slowest encoder), each
// by an exponentially weighted step (kWarmupStep for the first kWarmupAgreements agreements,
// kSteadyStep after), so one noisy call moves a figure by a fraction and a lasting change is
// followed within a few agreements. Agreements come at calls the ranks count alike: after one call,
// then at gaps that double up to kMaxAgreementGap calls while every call's time stayed within
// kDepartureMargin of its prediction, and back to every call as soon as one rank's did not.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace terse {

class LearnedFigures {
 public:
  enum LinkClass { kIntra = 0, kInter = 1 };

  static constexpr int kWarmupAgreements = 20;
  static constexpr double kWarmupStep = 0.5;
  static constexpr double kSteadyStep = 0.25;
  static constexpr uint64_t kMaxAgreementGap = 32;
  // A call whose measured time departs from its prediction by more than this factor either way.
  static constexpr double kDepartureMargin = 1.5;
  // A factor that moved by more than this (either way) at an agreement makes every plan stale.
  static constexpr double kReplanChange = 1.05;
  // Observations outside [1/kClamp, kClamp] are clamped (a call stalled by something else).
  static constexpr double kClamp = 64.0;

  // ---- one rank's observations, between agreements ----
  void observe_bandwidth(LinkClass link, double log_factor) {
    add(&link_[link].bandwidth, log_factor);
  }
  void observe_latency(LinkClass link, double log_factor) { add(&link_[link].latency, log_factor); }
  void observe_encode(const std::string& spec, double log_factor) {
    add(&codecs_[spec].encode, log_factor);
  }
  void observe_decode(const std::string& spec, double log_factor) {
    add(&codecs_[spec].decode, log_factor);
  }
  // The additions' time factor (multiplies seconds per byte of the reduction speed).
  void observe_reduce(double log_factor) { add(&reduce_, log_factor); }
  // A call that took `measured` seconds against `predicted`: a departure when outside the margin.
  void observe_call(double measured, double predicted);

  // ---- agreement ----
  // Whether the call counted now (from 1, alike on every rank) is an agreement's.
  bool agreement_due(uint64_t call) const { return call >= next_agreement_; }
  // This rank's sums since the last agreement, for the codecs `specs` (every rank passes the same
  // list): payload_size(specs.size()) doubles.
  static size_t payload_size(size_t codecs) { return 2 * 4 + 2 + 4 * codecs + 1; }
  std::vector<double> payload(const std::vector<std::string>& specs) const;
  // Merges every rank's payload (`ranks` of them, one after another in `all`), made at call
  // `call`, and starts the sums afresh. Returns whether a factor moved by more than
  // kReplanChange.
  bool merge(const std::vector<double>& all, size_t ranks, const std::vector<std::string>& specs,
             uint64_t call);

  // ---- the agreed factors ----
  double bandwidth_factor(LinkClass link) const;
  double latency_factor(LinkClass link) const;
  double encode_factor(const std::string& spec) const;
  double decode_factor(const std::string& spec) const;
  double reduce_factor() const;
  uint64_t agreements() const { return agreements_; }
  // Observations merged into a codec's encode factor so far, over all ranks.
  uint64_t encode_observations(const std::string& spec) const;

 private:
  struct Sum {
    double logs = 0;
    double count = 0;
  };
  struct Factor {
    double log = 0;       // agreed
    uint64_t merged = 0;  // observations merged so far
  };
  struct LinkSums {
    Sum bandwidth, latency;
  };
  struct CodecSums {
    Sum encode, decode;
  };
  static void add(Sum* sum, double log_factor);
  double step() const { return agreements_ < kWarmupAgreements ? kWarmupStep : kSteadyStep; }

  LinkSums link_[2];
  Sum reduce_;
  std::map<std::string, CodecSums> codecs_;
  bool departed_ = false;

  Factor bandwidth_[2], latency_[2], reduce_factor_;
  std::map<std::string, Factor> encode_, decode_;
  uint64_t agreements_ = 0;
  uint64_t next_agreement_ = 2;  // the first after one call
  uint64_t gap_ = 1;
};

}  // namespace terse
