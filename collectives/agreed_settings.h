// The settings every rank of a communicator must share: those that change which messages a
// collective sends (docs/design.md section 3). A rank whose environment says otherwise would take
// another path and its peers would wait for messages that never come, until TERSE_TIMEOUT_S;
// the communicator compares them at creation instead (settings_agreement.h).
//
//   TERSE_CODEC                   the codec's canonical spec (every parameter spelled out), and
//                                 its fallback's
//   TERSE_POLICY                  a hash of the file's contents (its path only for messages)
//   TERSE_COMPRESSED_ALGO         the algorithm's name
//   TERSE_HIERARCHICAL            auto, on or off (1 and 0 are on and off)
//   TERSE_COMPRESSED_PIECE_BYTES  bytes (1M and 1048576 agree)
//   TERSE_MEMORY_MAX_BYTES        bytes, as the residual memory reads it
//   TERSE_MEMORY_IDLE_STEPS       steps, as the residual memory reads it (08 and 8 agree)
//   TERSE_ALGO                    collective:name for every collective it forces
//   TERSE_PIECE_BYTES             bytes
//   TERSE_UCX_ERROR_MODE          auto, peer or none
//
// Unset and empty are alike: both mean the default.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

namespace terse {

// One setting's effective value on this rank.
struct AgreedSetting {
  std::string name;   // the variable, e.g. "TERSE_CODEC"
  std::string value;  // what ranks compare: two spellings of one value give the same text
  std::string shown;  // what a message says this rank has: "\"1M\" (1048576)", "it unset (...)"
};

// Reads every setting listed above from the environment, in that order, each with the parser
// the code that uses it uses. A value that does not parse is kept as its refusal ("refused:
// <the parser's message>", shown as the text and why it does not parse), so that a rank with a
// typo is compared like any other: its peers see a value that differs and refuse with it, rather
// than wait for a rank that gave up. Ranks that all hold the same bad value agree, and then each
// refuses it where the code reads it, with the parser's message.
std::vector<AgreedSetting> collect_agreed_settings();

// The setting `name` as a rank holds it: `written` as the environment has it ("" when unset),
// `value` its canonical form. Texts longer than a message can show are shortened, the value
// keeping a hash of what was cut so that it still compares.
AgreedSetting make_agreed_setting(const std::string& name, const std::string& written,
                                  const std::string& value);

}  // namespace terse
