// The planner's learning (planner.h, Learning): what a call's measurements say about the figures,
// the agreements that merge every rank's, the exploration of contenders, and the estimates the
// statistics show.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "collectives/compressed/planner.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Searches x in [-limit, limit] with time(x) = measured for a time that falls as x grows; the
// ends when the measured time lies outside.
template <typename TimeOf>
double solve_decreasing(TimeOf time_of, double measured, double limit) {
  double low = -limit, high = limit;
  if (time_of(low) <= measured) return low;
  if (time_of(high) >= measured) return high;
  for (int i = 0; i < 40; ++i) {
    const double mid = 0.5 * (low + high);
    (time_of(mid) > measured ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

// A call must have spent at least this share of the predicted seconds in a part for that part to
// say something about its figure (a rank that does not encode in a plan: a hierarchical member).
constexpr double kObservable = 0.05;

}  // namespace

ncclResult_t Planner::begin_call() {
  if (!learning_) return ncclSuccess;
  ++calls_;
  if (!learned_.agreement_due(calls_)) return ncclSuccess;
  // Every rank agreed on the same codec speeds so far, in the same order: the same list.
  std::vector<std::string> specs;
  for (const auto& [spec, speed] : agreed_) specs.push_back(spec);
  const std::vector<double> mine = learned_.payload(specs);
  size_t ranks = 1;
  std::vector<double> all = mine;
  if (transport_ != nullptr) {
    ranks = static_cast<size_t>(transport_->nranks());
    all.resize(ranks * mine.size());
    TERSE_CHECK(transport_->allgather(mine.data(), mine.size() * sizeof(double), all.data()));
  }
  if (learned_.merge(all, ranks, specs, calls_)) {
    ++generation_;
    if (rank_ == 0) {
      TERSE_INFO("planner: figures after %llu calls (agreement %llu): %s",
                 static_cast<unsigned long long>(calls_),
                 static_cast<unsigned long long>(learned_.agreements()),
                 describe_figures().c_str());
    }
  }
  return ncclSuccess;
}

LinkModel Planner::effective_links() const {
  LinkModel links = links_;
  links.intra.bytes_per_s *= learned_.bandwidth_factor(LearnedFigures::kIntra);
  links.intra.latency_s *= learned_.latency_factor(LearnedFigures::kIntra);
  links.inter.bytes_per_s *= learned_.bandwidth_factor(LearnedFigures::kInter);
  links.inter.latency_s *= learned_.latency_factor(LearnedFigures::kInter);
  return links;
}

Prediction Planner::predict_candidate(const PlanCandidate& candidate, const CodecFigures& figures,
                                      const LinkModel& links, size_t bytes) const {
  const bool compressed = candidate.run != nullptr;
  CostQuery cost_query =
      query(figures, compressed ? settings_.piece_bytes : settings_.dense_piece_bytes);
  cost_query.links = links;
  return compressed ? predict(*candidate.run, cost_query, candidate.inner)
                    : predict(*dense_allreduce(bytes), cost_query);
}

void Planner::observe(const PlanRequest& request, const CallPlan& plan, const Measured& measured) {
  if (!learning_ || plan.chosen < 0 || !plan.agreed || !(measured.seconds > 0)) return;
  const PlanCandidate& candidate = plan.candidates[static_cast<size_t>(plan.chosen)];
  learned_.observe_call(measured.seconds, candidate.prediction.seconds);
  if (const auto state = plans_.find(PlanKey::of(request)); state != plans_.end()) {
    state->second.last_measured = measured.seconds;
    state->second.last_choice = plan.choice();
  }

  const size_t bytes = request.count * dtype_size(request.dtype);
  CodecFigures figures =
      figures_of(candidate.codec_object, request.count, request.dtype, request.error_feedback);
  LinkModel links = effective_links();
  auto seconds_of = [&](const CodecFigures& f, const LinkModel& l) {
    return predict_candidate(candidate, f, l, bytes);
  };
  const Prediction now = seconds_of(figures, links);

  // The codec: each part against the share of the prediction it makes; the call's own figures
  // then stand in for the agreed ones below.
  if (candidate.codec_object != nullptr) {
    const std::string spec = candidate.codec_object->spec();
    CodecFigures without = figures;
    without.encode_seconds_per_byte = 0;
    const double encode = now.codec_seconds - seconds_of(without, links).codec_seconds;
    without = figures;
    without.decode_seconds_per_byte = 0;
    const double decode = now.codec_seconds - seconds_of(without, links).codec_seconds;
    if (encode > 0 && measured.encode_seconds > kObservable * encode) {
      const double ratio = measured.encode_seconds / encode;
      learned_.observe_encode(spec, std::log(learned_.encode_factor(spec) * ratio));
      figures.encode_seconds_per_byte *= ratio;
    }
    if (decode > 0 && measured.decode_seconds > kObservable * decode) {
      const double ratio = measured.decode_seconds / decode;
      learned_.observe_decode(spec, std::log(learned_.decode_factor(spec) * ratio));
      figures.decode_seconds_per_byte *= ratio;
    }
  }

  // Of the rest, the figure the time rests on most: the bandwidth or the latency of the link the
  // call crossed, or the additions. Its factor under which the model gives the measured time.
  const LearnedFigures::LinkClass link_class =
      shape_.nodes > 1 ? LearnedFigures::kInter : LearnedFigures::kIntra;
  auto cost_of = [&](LinkModel* model) -> LinkCost& {
    return link_class == LearnedFigures::kInter ? model->inter : model->intra;
  };
  enum Figure { kBandwidth, kLatency, kReduce };
  // The call's time with `figure` made slower by e^shift.
  auto slower_by = [&](Figure figure, double shift) {
    LinkModel trial_links = links;
    CodecFigures trial = figures;
    const double factor = std::exp(shift);
    if (figure == kBandwidth) cost_of(&trial_links).bytes_per_s /= factor;
    if (figure == kLatency) cost_of(&trial_links).latency_s *= factor;
    if (figure == kReduce) trial.reduce_seconds_per_byte *= factor;  // uncompressed calls only
    return seconds_of(trial, trial_links).seconds;
  };
  // How much each figure, 8x slower, would lengthen the call: 8x rather than a little, since a
  // pipelined call the model thinks codec-bound does not feel a slightly slower link at all,
  // while the call may in truth have waited on it. A compressed call measured its codec work,
  // additions included (the residual's in its encode, the sums in its decode-accumulate), so
  // only the link may explain the rest; an uncompressed one measured nothing but its time.
  const double base = slower_by(kBandwidth, 0);
  Figure figure = kBandwidth;
  double most = 0;
  const bool measured_codec = candidate.codec_object != nullptr;
  for (Figure f : {kBandwidth, kLatency, kReduce}) {
    if (f == kReduce && measured_codec) continue;
    const double rise = slower_by(f, std::log(8.0)) - base;
    if (rise > most) {
      most = rise;
      figure = f;
    }
  }
  if (most < kObservable * base) return;
  const double limit = std::log(LearnedFigures::kClamp);
  const double shift =
      -solve_decreasing([&](double x) { return slower_by(figure, -x); }, measured.seconds, limit);
  switch (figure) {
    case kBandwidth:
      learned_.observe_bandwidth(link_class,
                                 std::log(learned_.bandwidth_factor(link_class)) - shift);
      break;
    case kLatency:
      learned_.observe_latency(link_class, std::log(learned_.latency_factor(link_class)) + shift);
      break;
    case kReduce:
      learned_.observe_reduce(std::log(learned_.reduce_factor()) + shift);
      break;
  }
}

double Planner::reduce_seconds_per_byte() const {
  return learned_.reduce_factor() / std::max(reduce_bytes_per_s_ * cpu_share_, 1.0);
}

int Planner::exploration(const CallPlan& plan, uint64_t calls) const {
  if (plan.best < 0) return -1;
  const PlanCandidate& best = plan.candidates[static_cast<size_t>(plan.best)];
  // The contenders: fastest first, compressing as the best does.
  std::vector<int> contenders;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const PlanCandidate& c = plan.candidates[i];
    if (static_cast<int>(i) == plan.best ||
        (c.codec_object == nullptr) != (best.codec_object == nullptr)) {
      continue;
    }
    if (c.prediction.seconds <= kExploreWithin * best.prediction.seconds) {
      contenders.push_back(static_cast<int>(i));
    }
  }
  if (contenders.empty()) return -1;
  std::stable_sort(contenders.begin(), contenders.end(), [&](int a, int b) {
    return plan.candidates[static_cast<size_t>(a)].prediction.seconds <
           plan.candidates[static_cast<size_t>(b)].prediction.seconds;
  });
  if (contenders.size() > kMaxContenders) contenders.resize(kMaxContenders);
  // The 2nd and 4th calls, then every kExplorePeriod-th.
  if (calls == 2 || calls == 4) {
    const size_t which = calls / 2 - 1;
    return which < contenders.size() ? contenders[which] : -1;
  }
  if (calls % kExplorePeriod == 0) {
    return contenders[(calls / kExplorePeriod) % contenders.size()];
  }
  return -1;
}

std::string Planner::describe_figures() const {
  const PlannerEstimates now = estimates();
  char text[512];
  std::snprintf(text, sizeof text,
                "inside a node %.3g GB/s (x%.2f), %.3g us (x%.2f); between nodes %.3g GB/s "
                "(x%.2f), %.3g us (x%.2f); additions %.3g GB/s (x%.2f)",
                now.intra.bytes_per_s / 1e9, now.intra.bytes_per_s / now.intra.nominal_bytes_per_s,
                now.intra.latency_s * 1e6, now.intra.latency_s / now.intra.nominal_latency_s,
                now.inter.bytes_per_s / 1e9, now.inter.bytes_per_s / now.inter.nominal_bytes_per_s,
                now.inter.latency_s * 1e6, now.inter.latency_s / now.inter.nominal_latency_s,
                now.reduce_bytes_per_s / 1e9,
                now.reduce_bytes_per_s / now.nominal_reduce_bytes_per_s);
  std::string out = text;
  for (const CodecEstimate& codec : now.codecs) {
    if (codec.observations == 0) continue;
    std::snprintf(text, sizeof text, "; %s encode %.3g GB/s (x%.2f), decode %.3g GB/s (x%.2f)",
                  codec.codec.c_str(), codec.encode_bytes_per_s / 1e9,
                  codec.encode_bytes_per_s / codec.probed_encode_bytes_per_s,
                  codec.decode_bytes_per_s / 1e9,
                  codec.decode_bytes_per_s / codec.probed_decode_bytes_per_s);
    out += text;
  }
  return out;
}

PlannerEstimates Planner::estimates() const {
  PlannerEstimates out;
  out.learning = learning_;
  const LinkModel links = effective_links();
  out.intra = LinkEstimate{links.intra.latency_s, links.intra.bytes_per_s, links_.intra.latency_s,
                           links_.intra.bytes_per_s};
  out.inter = LinkEstimate{links.inter.latency_s, links.inter.bytes_per_s, links_.inter.latency_s,
                           links_.inter.bytes_per_s};
  out.reduce_bytes_per_s = 1 / reduce_seconds_per_byte();
  out.nominal_reduce_bytes_per_s = std::max(reduce_bytes_per_s_ * cpu_share_, 1.0);
  for (const auto& [spec, speed] : agreed_) {
    CodecEstimate codec;
    codec.codec = spec;
    codec.probed_encode_bytes_per_s = speed.encode_bytes_per_s * cpu_share_;
    codec.probed_decode_bytes_per_s = speed.decode_bytes_per_s * cpu_share_;
    codec.encode_bytes_per_s = codec.probed_encode_bytes_per_s / learned_.encode_factor(spec);
    codec.decode_bytes_per_s = codec.probed_decode_bytes_per_s / learned_.decode_factor(spec);
    codec.observations = learned_.encode_observations(spec);
    out.codecs.push_back(codec);
  }
  out.agreements = learned_.agreements();
  out.plan_changes = plan_changes_;
  out.explorations = explorations_;
  return out;
}

}  // namespace terse
