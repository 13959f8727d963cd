#include "perf/train/sync_scheme.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace terse {
namespace train {
namespace {

constexpr long kMaxEvery = 1000000;

bool whole(const std::string& text, long lo, long hi, long* value) {
  errno = 0;
  char* end = nullptr;
  const long parsed = strtol(text.c_str(), &end, 10);
  if (errno != 0 || text.empty() || *end != '\0' || parsed < lo || parsed > hi) return false;
  *value = parsed;
  return true;
}

bool real(const std::string& text, double lo, double hi, float* value) {
  errno = 0;
  char* end = nullptr;
  const double parsed = strtod(text.c_str(), &end);
  if (errno != 0 || text.empty() || *end != '\0' || !std::isfinite(parsed) || parsed <= lo ||
      parsed > hi) {
    return false;
  }
  *value = static_cast<float>(parsed);
  return true;
}

// Applies "key=value,key=value" to *scheme; false with *error naming the part at fault.
bool parse_parameters(const std::string& spec, const std::string& parameters, SyncScheme* scheme,
                      std::string* error) {
  size_t start = 0;
  while (start <= parameters.size()) {
    const size_t comma = parameters.find(',', start);
    const std::string part =
        parameters.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t equals = part.find('=');
    const std::string key = part.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : part.substr(equals + 1);
    long number = 0;
    bool ok = equals != std::string::npos;
    if (ok && scheme->kind == SyncScheme::Kind::kDownpour && key == "send") {
      ok = whole(value, 1, kMaxEvery, &number);
      scheme->send_every = static_cast<int>(number);
    } else if (ok && scheme->kind == SyncScheme::Kind::kDownpour && key == "fetch") {
      ok = whole(value, 1, kMaxEvery, &number);
      scheme->fetch_every = static_cast<int>(number);
    } else if (ok && scheme->kind == SyncScheme::Kind::kEasgd && key == "tau") {
      ok = whole(value, 1, kMaxEvery, &number);
      scheme->tau = static_cast<int>(number);
    } else if (ok && scheme->kind == SyncScheme::Kind::kEasgd && key == "beta") {
      ok = real(value, 0.0, 1.0, &scheme->beta);
    } else {
      ok = false;
    }
    if (!ok) {
      *error = "--sync: '" + spec + "': '" + part +
               "' is not a valid parameter (downpour takes send=N,fetch=M with N, M >= 1; "
               "easgd takes tau=T,beta=B with T >= 1, 0 < B <= 1)";
      return false;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace

std::string SyncScheme::describe() const {
  char text[96];
  switch (kind) {
    case Kind::kAllreduce:
      return "allreduce";
    case Kind::kDownpour:
      snprintf(text, sizeof(text), "downpour:send=%d,fetch=%d", send_every, fetch_every);
      return text;
    case Kind::kEasgd:
      snprintf(text, sizeof(text), "easgd:tau=%d,beta=%g", tau, beta);
      return text;
    case Kind::kStaleSynchronous:
      return "ssp:" + std::to_string(staleness);
  }
  return "";
}

bool parse_sync_scheme(const std::string& text, SyncScheme* scheme, std::string* error) {
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const bool has_parameters = colon != std::string::npos;
  const std::string parameters = has_parameters ? text.substr(colon + 1) : "";
  SyncScheme parsed;
  if (name == "allreduce" && !has_parameters) {
    parsed.kind = SyncScheme::Kind::kAllreduce;
  } else if (name == "downpour" || name == "easgd") {
    parsed.kind = name == "downpour" ? SyncScheme::Kind::kDownpour : SyncScheme::Kind::kEasgd;
    if (has_parameters && !parse_parameters(text, parameters, &parsed, error)) return false;
  } else if (name == "ssp") {
    long staleness = 0;
    if (!has_parameters || !whole(parameters, 0, kMaxEvery, &staleness)) {
      *error = "--sync: '" + text + "': ssp needs its staleness, a whole number >= 0 (ssp:2)";
      return false;
    }
    parsed.kind = SyncScheme::Kind::kStaleSynchronous;
    parsed.staleness = static_cast<uint64_t>(staleness);
  } else {
    *error = "--sync: '" + text +
             "' is not a scheme (allreduce, downpour[:send=N,fetch=M], easgd[:tau=T,beta=B], "
             "ssp:S)";
    return false;
  }
  *scheme = parsed;
  return true;
}

}  // namespace train
}  // namespace terse
