#include "collectives/compressed/learned_figures.h"

#include <algorithm>
#include <cmath>

namespace terse {
namespace {

// Where a link class's sums sit in a payload: bandwidth's two doubles, then latency's.
constexpr size_t kLinkDoubles = 4;

}  // namespace

void LearnedFigures::add(Sum* sum, double log_factor) {
  if (!std::isfinite(log_factor)) return;
  const double bound = std::log(kClamp);
  sum->logs += std::clamp(log_factor, -bound, bound);
  sum->count += 1;
}

void LearnedFigures::observe_call(double measured, double predicted) {
  if (!(measured > 0) || !(predicted > 0)) return;
  const double ratio = measured / predicted;
  if (ratio > kDepartureMargin || ratio < 1 / kDepartureMargin) departed_ = true;
}

std::vector<double> LearnedFigures::payload(const std::vector<std::string>& specs) const {
  std::vector<double> out;
  out.reserve(payload_size(specs.size()));
  for (const LinkSums& link : link_) {
    out.insert(out.end(),
               {link.bandwidth.logs, link.bandwidth.count, link.latency.logs, link.latency.count});
  }
  out.insert(out.end(), {reduce_.logs, reduce_.count});
  for (const std::string& spec : specs) {
    const auto found = codecs_.find(spec);
    const CodecSums sums = found != codecs_.end() ? found->second : CodecSums{};
    out.insert(out.end(),
               {sums.encode.logs, sums.encode.count, sums.decode.logs, sums.decode.count});
  }
  out.push_back(departed_ ? 1 : 0);
  return out;
}

bool LearnedFigures::merge(const std::vector<double>& all, size_t ranks,
                           const std::vector<std::string>& specs, uint64_t call) {
  const size_t size = payload_size(specs.size());
  const double moved = std::log(kReplanChange);
  const double rate = step();
  bool changed = false;
  bool departed = false;
  auto move = [&](Factor* factor, double target, double observations) {
    const double before = factor->log;
    factor->log += rate * (target - factor->log);
    factor->merged += static_cast<uint64_t>(observations);
    if (std::fabs(factor->log - before) > moved) changed = true;
  };
  // Links: the mean of every observation of every rank.
  for (int link = 0; link < 2; ++link) {
    for (int which = 0; which < 2; ++which) {
      double logs = 0, count = 0;
      for (size_t r = 0; r < ranks; ++r) {
        const double* sums = &all[r * size + static_cast<size_t>(link) * kLinkDoubles + 2 * which];
        logs += sums[0];
        count += sums[1];
      }
      if (count > 0) move(which == 0 ? &bandwidth_[link] : &latency_[link], logs / count, count);
    }
  }
  // Additions and codecs: the slowest rank's mean.
  auto slowest_at = [&](size_t offset, Factor* factor) {
    double slowest = -INFINITY, count = 0;
    for (size_t r = 0; r < ranks; ++r) {
      const double* sums = &all[r * size + offset];
      if (sums[1] <= 0) continue;
      slowest = std::max(slowest, sums[0] / sums[1]);
      count += sums[1];
    }
    if (count > 0) move(factor, slowest, count);
  };
  slowest_at(2 * kLinkDoubles, &reduce_factor_);
  for (size_t c = 0; c < specs.size(); ++c) {
    slowest_at(2 * kLinkDoubles + 2 + 4 * c, &encode_[specs[c]]);
    slowest_at(2 * kLinkDoubles + 2 + 4 * c + 2, &decode_[specs[c]]);
  }
  for (size_t r = 0; r < ranks; ++r) departed = departed || all[r * size + size - 1] != 0;

  ++agreements_;
  gap_ = departed ? 1 : std::min(gap_ * 2, kMaxAgreementGap);
  next_agreement_ = call + gap_;
  link_[0] = link_[1] = LinkSums{};
  reduce_ = Sum{};
  codecs_.clear();
  departed_ = false;
  return changed;
}

double LearnedFigures::bandwidth_factor(LinkClass link) const {
  return std::exp(bandwidth_[link].log);
}

double LearnedFigures::latency_factor(LinkClass link) const {
  return std::exp(latency_[link].log);
}

double LearnedFigures::reduce_factor() const {
  return std::exp(reduce_factor_.log);
}

double LearnedFigures::encode_factor(const std::string& spec) const {
  const auto found = encode_.find(spec);
  return found == encode_.end() ? 1.0 : std::exp(found->second.log);
}

double LearnedFigures::decode_factor(const std::string& spec) const {
  const auto found = decode_.find(spec);
  return found == decode_.end() ? 1.0 : std::exp(found->second.log);
}

uint64_t LearnedFigures::encode_observations(const std::string& spec) const {
  const auto found = encode_.find(spec);
  return found == encode_.end() ? 0 : found->second.merged;
}

}  // namespace terse
