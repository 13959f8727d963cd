#include "collectives/settings_agreement.h"

#include <algorithm>
#include <cstdint>

#include "common/byte_allgather.h"
#include "common/log.h"
#include "common/result.h"

namespace terse {
namespace {

// How many distinct values, and how many runs of ranks per value, a sentence lists: enough to
// see the mistake, few enough that a thousand ranks with a thousand values still fit a message.
constexpr size_t kValuesShown = 3;
constexpr size_t kRankRunsShown = 8;

// The ranks of one value of a setting, and how the first of them shows it.
struct ValueHolders {
  std::string key;  // "=" + value, or "!" for ranks that do not list the setting
  std::string shown;
  std::vector<int> ranks;  // ascending
};

// "rank 2", "ranks 0-1,3", "ranks 0,2,4,...".
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  size_t runs = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i;
    while (end + 1 < ranks.size() && ranks[end + 1] == ranks[end] + 1) ++end;
    if (runs > 0) text += ",";
    if (++runs > kRankRunsShown) return text + "...";
    text += std::to_string(ranks[i]);
    if (end > i) text += "-" + std::to_string(ranks[end]);
    i = end + 1;
  }
  return text;
}

const AgreedSetting* find_setting(const std::vector<AgreedSetting>& settings,
                                  const std::string& name) {
  for (const AgreedSetting& setting : settings) {
    if (setting.name == name) return &setting;
  }
  return nullptr;
}

// Every setting name any rank lists, in order of first appearance from rank 0 on (the same
// order on every rank, so every rank names the same setting first).
std::vector<std::string> setting_names(const std::vector<std::vector<AgreedSetting>>& by_rank) {
  std::vector<std::string> names;
  for (const std::vector<AgreedSetting>& settings : by_rank) {
    for (const AgreedSetting& setting : settings) {
      if (std::find(names.begin(), names.end(), setting.name) == names.end()) {
        names.push_back(setting.name);
      }
    }
  }
  return names;
}

std::vector<ValueHolders> holders_of(const std::vector<std::vector<AgreedSetting>>& by_rank,
                                     const std::string& name) {
  std::vector<ValueHolders> holders;
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    const AgreedSetting* setting = find_setting(by_rank[rank], name);
    const std::string key = setting != nullptr ? "=" + setting->value : "!";
    auto found = std::find_if(holders.begin(), holders.end(),
                              [&](const ValueHolders& value) { return value.key == key; });
    if (found == holders.end()) {
      holders.push_back(
          {key,
           setting != nullptr ? setting->shown : "no such setting (another version of terse?)",
           {}});
      found = holders.end() - 1;
    }
    found->ranks.push_back(static_cast<int>(rank));
  }
  return holders;
}

}  // namespace

std::string encode_settings(const std::vector<AgreedSetting>& settings) {
  std::string encoded;
  for (const AgreedSetting& setting : settings) {
    for (const std::string* text : {&setting.name, &setting.value, &setting.shown}) {
      encoded += *text;
      encoded += '\0';
    }
  }
  return encoded;
}

std::vector<AgreedSetting> decode_settings(const std::string& encoded) {
  std::vector<std::string> texts;
  size_t start = 0;
  for (size_t end = encoded.find('\0'); end != std::string::npos; end = encoded.find('\0', start)) {
    texts.push_back(encoded.substr(start, end - start));
    start = end + 1;
  }
  std::vector<AgreedSetting> settings;
  for (size_t i = 0; i + 2 < texts.size(); i += 3) {
    settings.push_back({texts[i], texts[i + 1], texts[i + 2]});
  }
  return settings;
}

std::string describe_disagreement(const std::vector<std::vector<AgreedSetting>>& by_rank) {
  std::string sentence;
  std::string also;
  for (const std::string& name : setting_names(by_rank)) {
    const std::vector<ValueHolders> holders = holders_of(by_rank, name);
    if (holders.size() < 2) continue;
    if (!sentence.empty()) {
      also += (also.empty() ? "" : ", ") + name;
      continue;
    }
    sentence = name + " differs across ranks: ";
    for (size_t i = 0; i < holders.size() && i < kValuesShown; ++i) {
      if (i > 0) sentence += ", ";
      sentence += rank_list(holders[i].ranks) +
                  (holders[i].ranks.size() == 1 ? " has " : " have ") + holders[i].shown;
    }
    if (holders.size() > kValuesShown) {
      sentence += ", and " + std::to_string(holders.size() - kValuesShown) + " more values";
    }
    sentence += "; every rank must set the same value";
  }
  if (!also.empty()) sentence += " (also differing: " + also + ")";
  return sentence;
}

ncclResult_t check_settings_agree(Transport* transport, const std::vector<AgreedSetting>& mine) {
  const int nranks = transport->nranks();
  if (nranks == 1) return ncclSuccess;
  const std::string encoded = encode_settings(mine);
  std::vector<std::vector<uint8_t>> table;
  TERSE_CHECK(
      allgather_bytes([transport](const void* bytes, size_t size,
                                  void* all) { return transport->allgather(bytes, size, all); },
                      nranks, std::vector<uint8_t>(encoded.begin(), encoded.end()),
                      kMaxEncodedSettingsBytes, "settings to agree on", &table));
  std::vector<std::vector<AgreedSetting>> by_rank;
  for (const std::vector<uint8_t>& bytes : table) {
    by_rank.push_back(decode_settings(std::string(bytes.begin(), bytes.end())));
  }
  const std::string disagreement = describe_disagreement(by_rank);
  if (!disagreement.empty()) return fail(ncclInvalidUsage, "%s", disagreement.c_str());
  TERSE_TRACE("rank %d: the %d ranks agree on their %zu settings", transport->rank(), nranks,
              mine.size());
  return ncclSuccess;
}

}  // namespace terse
