#include "collectives/agreed_settings.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "collectives/algorithm_selection.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compression_engine.h"
#include "collectives/compressed/memory/residual_memory.h"
#include "collectives/compressed/policy/policy.h"
#include "common/env.h"
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

ncclResult_t codec_setting(AgreedSetting* setting) {
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
  }
  *setting = make_agreed_setting("TERSE_CODEC", text, value);
  return ncclSuccess;
}

// The file's contents decide, wherever it lies: ranks on different machines may keep their
// copies at different paths.
ncclResult_t policy_setting(AgreedSetting* setting) {
  const std::string path = written("TERSE_POLICY");
  std::string value;
  if (!path.empty()) {
    std::ifstream file(path);
    std::stringstream contents;
    if (file) contents << file.rdbuf();
    if (!file || file.bad()) {
      return fail(ncclInvalidArgument, "TERSE_POLICY=%s cannot be read: %s", path.c_str(),
                  strerror(errno));
    }
    value = "contents hash " + hex(fnv1a(contents.str()));
  }
  *setting = make_agreed_setting("TERSE_POLICY", path, value);
  return ncclSuccess;
}

ncclResult_t compressed_algorithm_setting(AgreedSetting* setting) {
  const std::string text = written("TERSE_COMPRESSED_ALGO");
  std::string value;
  if (!text.empty()) {
    const CompressedAlgorithmInfo* algorithm = find_compressed_algorithm(text);
    if (algorithm == nullptr) {
      return fail(ncclInvalidArgument, "TERSE_COMPRESSED_ALGO=%s: no such algorithm (known: %s)",
                  text.c_str(), compressed_algorithm_names().c_str());
    }
    value = algorithm->name;
  }
  *setting = make_agreed_setting("TERSE_COMPRESSED_ALGO", text, value);
  return ncclSuccess;
}

// The spellings the compression engine accepts (parse_hierarchy_mode in planner.cpp, which
// CompressionEngine::create calls): keep the two in step.
ncclResult_t hierarchical_setting(AgreedSetting* setting) {
  const std::string text = written("TERSE_HIERARCHICAL");
  std::string value;
  if (text.empty() || text == "auto") {
    value = "auto";
  } else if (text == "on" || text == "1") {
    value = "on";
  } else if (text == "off" || text == "0") {
    value = "off";
  } else {
    return fail(ncclInvalidArgument, "TERSE_HIERARCHICAL=%s: expected auto, on or off",
                text.c_str());
  }
  *setting = make_agreed_setting("TERSE_HIERARCHICAL", text, value);
  return ncclSuccess;
}

ncclResult_t bytes_setting(const char* name, uint64_t fallback, AgreedSetting* setting) {
  uint64_t bytes = 0;
  TERSE_CHECK(env_bytes(name, fallback, &bytes));
  *setting = make_agreed_setting(name, written(name), bytes_value(bytes));
  return ncclSuccess;
}

// As the compression engine reads them at creation (a value that does not parse is refused
// there too, naming the variable).
ncclResult_t memory_max_bytes_setting(AgreedSetting* setting) {
  uint64_t bytes = 0;
  TERSE_CHECK(ResidualMemory::max_bytes_from_env(&bytes));
  *setting = make_agreed_setting("TERSE_MEMORY_MAX_BYTES", written("TERSE_MEMORY_MAX_BYTES"),
                                 bytes_value(bytes));
  return ncclSuccess;
}

ncclResult_t memory_idle_steps_setting(AgreedSetting* setting) {
  uint64_t steps = 0;
  TERSE_CHECK(ResidualMemory::idle_steps_from_env(&steps));
  *setting = make_agreed_setting("TERSE_MEMORY_IDLE_STEPS", written("TERSE_MEMORY_IDLE_STEPS"),
                                 std::to_string(steps));
  return ncclSuccess;
}

// What the selection forces, collective by collective: "ring" and
// "allreduce:ring,allgather:ring,reducescatter:ring" agree.
ncclResult_t algorithm_setting(AgreedSetting* setting) {
  AlgorithmSelection selection;
  TERSE_CHECK(AlgorithmSelection::from_environment(&selection));
  std::string value;
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const CollectiveKind kind = static_cast<CollectiveKind>(k);
    const AlgorithmInfo* forced = selection.forced(kind);
    if (forced == nullptr) continue;
    if (!value.empty()) value += ",";
    value += std::string(collective_name(kind)) + ":" + forced->name;
  }
  *setting = make_agreed_setting("TERSE_ALGO", written("TERSE_ALGO"), value);
  return ncclSuccess;
}

ncclResult_t error_mode_setting(AgreedSetting* setting) {
  UcxErrorModeSetting mode = UcxErrorModeSetting::kAuto;
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

std::vector<AgreedSetting> collect_agreed_settings() {
  struct Reader {
    const char* name;
    std::function<ncclResult_t(AgreedSetting*)> read;
  };
  const auto bytes = [](const char* name, uint64_t fallback) {
    return
        [name, fallback](AgreedSetting* setting) { return bytes_setting(name, fallback, setting); };
  };
  const Reader readers[] = {
      {"TERSE_CODEC", codec_setting},
      {"TERSE_POLICY", policy_setting},
      {"TERSE_COMPRESSED_ALGO", compressed_algorithm_setting},
      {"TERSE_HIERARCHICAL", hierarchical_setting},
      {"TERSE_COMPRESSED_PIECE_BYTES",
       bytes("TERSE_COMPRESSED_PIECE_BYTES", kDefaultCompressedPieceBytes)},
      {"TERSE_MEMORY_MAX_BYTES", memory_max_bytes_setting},
      {"TERSE_MEMORY_IDLE_STEPS", memory_idle_steps_setting},
      {"TERSE_ALGO", algorithm_setting},
      {"TERSE_PIECE_BYTES", bytes("TERSE_PIECE_BYTES", kDefaultPieceBytes)},
      {"TERSE_UCX_ERROR_MODE", error_mode_setting},
  };
  std::vector<AgreedSetting> settings;
  for (const Reader& reader : readers) {
    AgreedSetting setting;
    if (reader.read(&setting) != ncclSuccess) {
      // Compared as its refusal: the rank's peers see a value that differs from theirs and refuse
      // too, instead of waiting at the exchange for a rank that gave up before it.
      const std::string why = last_error();
      setting.name = reader.name;
      setting.value = "refused: " + shortened(why);
      setting.shown = "\"" + shortened(written(reader.name)) + "\", which does not parse (" +
                      shortened(why) + ")";
    }
    settings.push_back(std::move(setting));
  }
  return settings;
}

}  // namespace terse
