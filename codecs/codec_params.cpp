#include "codecs/codec_params.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/result.h"

namespace terse {
namespace {

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

ncclResult_t CodecParams::parse(const std::string& codec_name, const std::string& text,
                                CodecParams* params) {
  *params = CodecParams(codec_name);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string pair = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (pair.empty()) {
      if (comma == text.size()) break;
      return fail(ncclInvalidArgument, "codec %s: empty parameter in '%s'", codec_name.c_str(),
                  text.c_str());
    }
    size_t equals = pair.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == pair.size()) {
      return fail(ncclInvalidArgument, "codec %s: parameter '%s' is not key=value",
                  codec_name.c_str(), pair.c_str());
    }
    std::string key = trim(pair.substr(0, equals));
    if (params->has(key)) {
      return fail(ncclInvalidArgument, "codec %s: parameter '%s' given twice", codec_name.c_str(),
                  key.c_str());
    }
    params->set(key, trim(pair.substr(equals + 1)));
  }
  return ncclSuccess;
}

ncclResult_t CodecParams::get_int(const std::string& key, long long fallback, long long min,
                                  long long max, long long* value) {
  known_.push_back(key);
  auto found = values_.find(key);
  if (found == values_.end()) {
    *value = fallback;
    return ncclSuccess;
  }
  const char* text = found->second.c_str();
  errno = 0;
  char* end = nullptr;
  long long number = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    return fail(ncclInvalidArgument, "codec %s: parameter %s=%s is not an integer", codec_.c_str(),
                key.c_str(), text);
  }
  if (number < min || number > max) {
    return fail(ncclInvalidArgument, "codec %s: parameter %s=%lld is outside [%lld, %lld]",
                codec_.c_str(), key.c_str(), number, min, max);
  }
  *value = number;
  return ncclSuccess;
}

ncclResult_t CodecParams::get_double(const std::string& key, double fallback, double min,
                                     double max, double* value) {
  known_.push_back(key);
  auto found = values_.find(key);
  if (found == values_.end()) {
    *value = fallback;
    return ncclSuccess;
  }
  const char* text = found->second.c_str();
  errno = 0;
  char* end = nullptr;
  double number = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || number != number) {
    return fail(ncclInvalidArgument, "codec %s: parameter %s=%s is not a number", codec_.c_str(),
                key.c_str(), text);
  }
  if (number < min || number > max) {
    return fail(ncclInvalidArgument, "codec %s: parameter %s=%g is outside [%g, %g]",
                codec_.c_str(), key.c_str(), number, min, max);
  }
  *value = number;
  return ncclSuccess;
}

ncclResult_t CodecParams::get_bool(const std::string& key, bool fallback, bool* value) {
  std::string text;
  TERSE_CHECK(get_choice(key, {"true", "false", "1", "0", "yes", "no", "on", "off"},
                         fallback ? "true" : "false", &text));
  *value = text == "true" || text == "1" || text == "yes" || text == "on";
  return ncclSuccess;
}

ncclResult_t CodecParams::get_choice(const std::string& key,
                                     const std::vector<std::string>& choices,
                                     const std::string& fallback, std::string* value) {
  known_.push_back(key);
  auto found = values_.find(key);
  if (found == values_.end()) {
    *value = fallback;
    return ncclSuccess;
  }
  if (std::find(choices.begin(), choices.end(), found->second) == choices.end()) {
    std::string list;
    for (const std::string& choice : choices) list += (list.empty() ? "" : ", ") + choice;
    return fail(ncclInvalidArgument, "codec %s: parameter %s=%s is not one of: %s", codec_.c_str(),
                key.c_str(), found->second.c_str(), list.c_str());
  }
  *value = found->second;
  return ncclSuccess;
}

ncclResult_t CodecParams::finish() const {
  for (const auto& entry : values_) {
    if (std::find(known_.begin(), known_.end(), entry.first) != known_.end()) continue;
    std::string list;
    for (const std::string& key : known_) list += (list.empty() ? "" : ", ") + key;
    return fail(ncclInvalidArgument, "codec %s: unknown parameter '%s' (known: %s)", codec_.c_str(),
                entry.first.c_str(), list.empty() ? "none" : list.c_str());
  }
  return ncclSuccess;
}

ncclResult_t parse_codec_spec(const std::string& spec, std::string* name, CodecParams* params) {
  size_t colon = spec.find(':');
  *name = trim(spec.substr(0, colon));
  if (name->empty())
    return fail(ncclInvalidArgument, "codec spec '%s' names no codec", spec.c_str());
  return CodecParams::parse(*name, colon == std::string::npos ? "" : spec.substr(colon + 1),
                            params);
}

}  // namespace terse
