// Ranks agreeing on their settings (agreed_settings.h) when a communicator is created: every
// rank allgathers every rank's settings and compares them all, so each reaches the same verdict
// from the same data and, when they differ, every rank refuses the communicator with the same
// sentence instead of one rank taking another path and its peers hanging until TERSE_TIMEOUT_S.
//
// The exchange is two allgathers over the transport's control channel: each rank's encoded
// length (8 bytes), then every rank's encoding padded to the longest. An encoding is the
// settings' name, value and shown text, each ended by a NUL (no environment text holds one).
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "collectives/agreed_settings.h"
#include "transport/transport.h"

namespace terse {

// Longest encoding a rank may send: far above the ten settings' (each text is shortened to under
// a hundred characters), low enough that a corrupt length cannot make peers allocate much.
constexpr size_t kMaxEncodedSettingsBytes = size_t{64} << 10;

std::string encode_settings(const std::vector<AgreedSetting>& settings);
// The settings of an encoding; an incomplete last setting is dropped.
std::vector<AgreedSetting> decode_settings(const std::string& encoded);

// "" when every rank has the same value of every setting (by_rank[r] holds rank r's). Otherwise
// the sentence naming the first setting that differs, which ranks have which value, and the
// other settings that differ too:
//   TERSE_CODEC differs across ranks: ranks 0-1 have "int8" (int8:...), rank 2 has "sign"
//   (sign:...); every rank must set the same value
// A setting some rank does not list at all (another terse version) differs too.
std::string describe_disagreement(const std::vector<std::vector<AgreedSetting>>& by_rank);

// Collective over every rank of `transport`: exchanges `mine` and compares. ncclInvalidUsage
// with describe_disagreement's sentence, on every rank, when the settings differ; the
// transport's error when the exchange fails.
ncclResult_t check_settings_agree(Transport* transport, const std::vector<AgreedSetting>& mine);

}  // namespace terse
