#include "collectives/algorithm_selection.h"

#include <strings.h>

#include "common/env.h"
#include "common/result.h"

namespace terse {
namespace {

std::string trim(const std::string& text) {
  const char* blanks = " \t";
  const size_t first = text.find_first_not_of(blanks);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

bool kind_named(const std::string& name, CollectiveKind* kind) {
  for (int k = 0; k < kCollectiveKinds; ++k) {
    if (strcasecmp(collective_name(static_cast<CollectiveKind>(k)), name.c_str()) == 0) {
      *kind = static_cast<CollectiveKind>(k);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string algorithm_names() {
  std::string names;
  for (const AlgorithmInfo& info : algorithm_table()) {
    if (!names.empty()) names += ", ";
    names += std::string(collective_name(info.kind)) + ":" + info.name;
  }
  return names;
}

ncclResult_t AlgorithmSelection::parse(const std::string& text, AlgorithmSelection* out) {
  AlgorithmSelection selection;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string entry = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon != std::string::npos) {
      const std::string collective = trim(entry.substr(0, colon));
      const std::string name = trim(entry.substr(colon + 1));
      CollectiveKind kind;
      if (!kind_named(collective, &kind)) {
        return fail(ncclInvalidArgument,
                    "TERSE_ALGO entry '%s': unknown collective '%s'; known algorithms: %s",
                    entry.c_str(), collective.c_str(), algorithm_names().c_str());
      }
      const AlgorithmInfo* info = find_algorithm(kind, name);
      if (info == nullptr) {
        return fail(ncclInvalidArgument,
                    "TERSE_ALGO entry '%s': %s has no algorithm named '%s'; known algorithms: %s",
                    entry.c_str(), collective.c_str(), name.c_str(), algorithm_names().c_str());
      }
      selection.forced_[static_cast<int>(kind)] = info;
      continue;
    }
    bool matched = false;
    for (int k = 0; k < kCollectiveKinds; ++k) {
      const AlgorithmInfo* info = find_algorithm(static_cast<CollectiveKind>(k), entry);
      if (info != nullptr) {
        selection.forced_[k] = info;
        matched = true;
      }
    }
    if (!matched) {
      return fail(ncclInvalidArgument,
                  "TERSE_ALGO entry '%s': no collective has an algorithm of that name; known "
                  "algorithms: %s",
                  entry.c_str(), algorithm_names().c_str());
    }
  }
  *out = selection;
  return ncclSuccess;
}

ncclResult_t AlgorithmSelection::from_environment(AlgorithmSelection* out) {
  return parse(env_string("TERSE_ALGO", ""), out);
}

const AlgorithmInfo* AlgorithmSelection::choose(const CollectiveArgs& args, int nranks) const {
  if (const AlgorithmInfo* info = forced(args.kind)) return info;
  return default_algorithm(args.kind, args.count * nccl_type_size(args.type), nranks);
}

}  // namespace terse
