#include "collectives/agreed_settings.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "collectives/algorithm_selection.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compression_engine.h"
#include "collectives/compressed/memory/residual_memory.h"
#include "collectives/compressed/policy/policy.h"
#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "common/text_hash.h"
#include "transport/transport_settings.h"

namespace terse {
namespace {

// Longest text a message shows of one rank's value; longer values keep their start and a hash
// of the whole. Bounds what ranks exchange and keeps the sentence within what fail() records.
constexpr size_t kShownChars = 96;

std::string hex(uint64_t value) {
  char text[17];
  snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

std::string shortened(const std::string& text) {
  if (text.size() <= kShownChars) return text;
  return text.substr(0, kShownChars / 2) + "...(hash " + hex(fnv1a(text)) + ")";
}

std::string written(const char* name) {
  return env_string(name, "");
}

std::string bytes_value(uint64_t bytes) {
  return std::to_string(bytes);
}

// TERSE_CODEC: the shorthand for a one-rule policy, compared as its canonical spec (every
// parameter spelled out) and its fallback's.
ncclResult_t codec_setting(CommSettings* settings, AgreedSetting* setting) {
  const std::string text = written("TERSE_CODEC");
  std::string value;
  if (!text.empty()) {
    Policy policy;
    if (Policy::from_codec_spec(text, &policy) != ncclSuccess) {
      const std::string why = last_error();
      return fail(ncclInvalidArgument, "TERSE_CODEC=%s: %s", text.c_str(), why.c_str());
    }
    const PolicyRule& rule = policy.rules()[0];
    value = rule.codec.spec;
    if (rule.fallback.spec != "none") value += ";fallback=" + rule.fallback.spec;
    TERSE_INFO(
        "policy: TERSE_CODEC=%s (%s, memory %s, fallback %s) for every float sum/avg "
        "reduction",
        text.c_str(), rule.codec.spec.c_str(), memory_kind_name(rule.codec.memory),
        rule.fallback.spec.c_str());
    settings->compression.policy = std::move(policy);
  }
  *setting = make_agreed_setting("TERSE_CODEC", text, value);
  return ncclSuccess;
}

// TERSE_POLICY: the file's contents decide, wherever it lies (ranks on different machines may
// keep their copies at different paths); they are read once, hashed and parsed.
ncclResult_t policy_setting(CommSettings* settings, AgreedSetting* setting) {
  const std::string path = written("TERSE_POLICY");
  std::string value;
  if (!path.empty()) {
    const std::string codec = written("TERSE_CODEC");
    if (!codec.empty()) {
      return fail(ncclInvalidArgument,
                  "TERSE_CODEC=%s and TERSE_POLICY=%s are both set; set only one (TERSE_CODEC is "
                  "shorthand for a one-rule policy: write that rule into the file instead)",
                  codec.c_str(), path.c_str());
    }
    std::ifstream file(path);
    std::stringstream contents;
    if (file) contents << file.rdbuf();
    if (!file || file.bad()) {
      return fail(ncclInvalidArgument, "TERSE_POLICY=%s cannot be read: %s", path.c_str(),
                  strerror(errno));
    }
    // Its errors name the file and the line.
    TERSE_CHECK(Policy::from_yaml(contents.str(), path, &settings->compression.policy));
    TERSE_INFO("policy: %zu rules from TERSE_POLICY=%s",
               settings->compression.policy.rules().size(), path.c_str());
    value = "contents hash " + hex(fnv1a(contents.str()));
  }
  *setting = make_agreed_setting("TERSE_POLICY", path, value);
  return ncclSuccess;
}

ncclResult_t compressed_algorithm_setting(CommSettings* settings, AgreedSetting* setting) {
  const std::string text = written("TERSE_COMPRESSED_ALGO");
  std::string value;
  if (!text.empty()) {
    const CompressedAlgorithmInfo* algorithm = find_compressed_algorithm(text);
    if (algorithm == nullptr) {
      return fail(ncclInvalidArgument, "TERSE_COMPRESSED_ALGO=%s: no such algorithm (known: %s)",
                  text.c_str(), compressed_algorithm_names().c_str());
    }
    settings->compression.planner.forced = algorithm;
    value = algorithm->name;
  }
  *setting = make_agreed_setting("TERSE_COMPRESSED_ALGO", text, value);
  return ncclSuccess;
}

ncclResult_t hierarchical_setting(CommSettings* settings, AgreedSetting* setting) {
  const std::string text = written("TERSE_HIERARCHICAL");
  HierarchyMode& mode = settings->compression.planner.hierarchy;
  TERSE_CHECK(parse_hierarchy_mode(text, &mode));
  const char* value = mode == HierarchyMode::kOn    ? "on"
                      : mode == HierarchyMode::kOff ? "off"
                                                    : "auto";
  *setting = make_agreed_setting("TERSE_HIERARCHICAL", text, value);
  return ncclSuccess;
}

ncclResult_t planner_learn_setting(CommSettings* settings, AgreedSetting* setting) {
  const std::string text = written("TERSE_PLANNER_LEARN");
  bool& learn = settings->compression.planner.learn;
  if (text.empty() || text == "1" || text == "on") {
    learn = true;
  } else if (text == "0" || text == "off") {
    learn = false;
  } else {
    return fail(ncclInvalidArgument, "TERSE_PLANNER_LEARN=%s: expected on or off (1 or 0)",
                text.c_str());
  }
  *setting = make_agreed_setting("TERSE_PLANNER_LEARN", text, learn ? "on" : "off");
  return ncclSuccess;
}

// A pipeline piece size: bytes, at least one.
ncclResult_t piece_bytes_setting(const char* name, size_t fallback, size_t* piece_bytes,
                                 AgreedSetting* setting) {
  uint64_t bytes = 0;
  TERSE_CHECK(env_bytes(name, fallback, &bytes));
  if (bytes == 0) return fail(ncclInvalidArgument, "%s is 0; a pipeline piece needs a byte", name);
  *piece_bytes = static_cast<size_t>(bytes);
  *setting = make_agreed_setting(name, written(name), bytes_value(bytes));
  return ncclSuccess;
}

ncclResult_t compressed_piece_bytes_setting(CommSettings* settings, AgreedSetting* setting) {
  return piece_bytes_setting("TERSE_COMPRESSED_PIECE_BYTES", kDefaultCompressedPieceBytes,
                             &settings->compression.planner.piece_bytes, setting);
}

ncclResult_t memory_max_bytes_setting(CommSettings* settings, AgreedSetting* setting) {
  uint64_t& bytes = settings->compression.memory_max_bytes;
  TERSE_CHECK(ResidualMemory::max_bytes_from_env(&bytes));
  *setting = make_agreed_setting("TERSE_MEMORY_MAX_BYTES", written("TERSE_MEMORY_MAX_BYTES"),
                                 bytes_value(bytes));
  return ncclSuccess;
}

ncclResult_t memory_idle_steps_setting(CommSettings* settings, AgreedSetting* setting) {
  uint64_t& steps = settings->compression.memory_idle_steps;
  TERSE_CHECK(ResidualMemory::idle_steps_from_env(&steps));
  *setting = make_agreed_setting("TERSE_MEMORY_IDLE_STEPS", written("TERSE_MEMORY_IDLE_STEPS"),
                                 std::to_string(steps));
  return ncclSuccess;
}

// What the selection forces, collective by collective: "ring" and
// "allreduce:ring,allgather:ring,reducescatter:ring" agree.
ncclResult_t algorithm_setting(CommSettings* settings, AgreedSetting* setting) {
  AlgorithmSelection& selection = settings->selection;
  TERSE_CHECK(AlgorithmSelection::from_environment(&selection));
  std::string value;
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const CollectiveKind kind = static_cast<CollectiveKind>(k);
    const AlgorithmInfo* forced = selection.forced(kind);
    if (forced == nullptr) continue;
    if (!value.empty()) value += ",";
    value += std::string(collective_name(kind)) + ":" + forced->name;
  }
  const AlgorithmInfo* dense = selection.forced(CollectiveKind::kAllReduce);
  settings->compression.planner.dense_forced = dense != nullptr ? dense->name : "";
  *setting = make_agreed_setting("TERSE_ALGO", written("TERSE_ALGO"), value);
  return ncclSuccess;
}

ncclResult_t dense_piece_bytes_setting(CommSettings* settings, AgreedSetting* setting) {
  TERSE_CHECK(piece_bytes_setting("TERSE_PIECE_BYTES", kDefaultPieceBytes, &settings->piece_bytes,
                                  setting));
  settings->compression.planner.dense_piece_bytes = settings->piece_bytes;
  return ncclSuccess;
}

ncclResult_t error_mode_setting(CommSettings* settings, AgreedSetting* setting) {
  UcxErrorModeSetting& mode = settings->ucx_error_mode;
  TERSE_CHECK(ucx_error_mode(&mode));
  const char* value = mode == UcxErrorModeSetting::kPeer   ? "peer"
                      : mode == UcxErrorModeSetting::kNone ? "none"
                                                           : "auto";
  *setting = make_agreed_setting("TERSE_UCX_ERROR_MODE", written("TERSE_UCX_ERROR_MODE"), value);
  return ncclSuccess;
}

}  // namespace

AgreedSetting make_agreed_setting(const std::string& name, const std::string& written,
                                  const std::string& value) {
  AgreedSetting setting;
  setting.name = name;
  setting.value = shortened(value);
  if (written.empty()) {
    setting.shown = value.empty() ? "it unset" : "it unset (default " + setting.value + ")";
  } else {
    setting.shown = "\"" + shortened(written) + "\"";
    if (value != written) setting.shown += " (" + setting.value + ")";
  }
  return setting;
}

ncclResult_t read_comm_settings(CommSettings* settings, std::vector<AgreedSetting>* compared) {
  struct Reader {
    const char* name;
    ncclResult_t (*read)(CommSettings*, AgreedSetting*);
  };
  // In the order of the file comment; TERSE_CODEC before TERSE_POLICY, which refuses both set.
  static const Reader kReaders[] = {
      {"TERSE_CODEC", codec_setting},
      {"TERSE_POLICY", policy_setting},
      {"TERSE_COMPRESSED_ALGO", compressed_algorithm_setting},
      {"TERSE_HIERARCHICAL", hierarchical_setting},
      {"TERSE_PLANNER_LEARN", planner_learn_setting},
      {"TERSE_COMPRESSED_PIECE_BYTES", compressed_piece_bytes_setting},
      {"TERSE_MEMORY_MAX_BYTES", memory_max_bytes_setting},
      {"TERSE_MEMORY_IDLE_STEPS", memory_idle_steps_setting},
      {"TERSE_ALGO", algorithm_setting},
      {"TERSE_PIECE_BYTES", dense_piece_bytes_setting},
      {"TERSE_UCX_ERROR_MODE", error_mode_setting},
  };
  CommSettings read;
  compared->clear();
  ncclResult_t first_refusal = ncclSuccess;
  std::string first_why;
  for (const Reader& reader : kReaders) {
    AgreedSetting setting;
    const ncclResult_t result = reader.read(&read, &setting);
    if (result != ncclSuccess) {
      // Compared as its refusal: the rank's peers see a value that differs from theirs and refuse
      // too, instead of waiting at the exchange for a rank that gave up before it.
      const std::string why = last_error();
      setting.name = reader.name;
      setting.value = "refused: " + shortened(why);
      setting.shown = "\"" + shortened(written(reader.name)) + "\", which does not parse (" +
                      shortened(why) + ")";
      if (first_refusal == ncclSuccess) {
        first_refusal = result;
        first_why = why;
      }
    }
    compared->push_back(std::move(setting));
  }
  if (first_refusal != ncclSuccess) return restore_error(first_refusal, first_why.c_str());
  *settings = std::move(read);
  return ncclSuccess;
}

}  // namespace terse
