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
//   TERSE_PLANNER_LEARN           on or off (1 and 0 are on and off)
//   TERSE_COMPRESSED_PIECE_BYTES  bytes (1M and 1048576 agree)
//   TERSE_MEMORY_MAX_BYTES        bytes, as the residual memory reads it
//   TERSE_MEMORY_IDLE_STEPS       steps, as the residual memory reads it (08 and 8 agree)
//   TERSE_ALGO                    collective:name for every collective it forces
//   TERSE_PIECE_BYTES             bytes
//   TERSE_UCX_ERROR_MODE          auto, peer or none
//
// Unset and empty are alike: both mean the default. Each is parsed once, here, into CommSettings,
// which the communicator and its compression engine consume; nothing else reads them (the
// transport reads TERSE_UCX_ERROR_MODE itself, before the communicator exists, with the same
// parser).
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "collectives/algorithm_selection.h"
#include "collectives/collective_args.h"
#include "collectives/compressed/compression_engine.h"
#include "transport/transport_settings.h"

namespace terse {

// The settings above, typed.
struct CommSettings {
  // TERSE_CODEC/TERSE_POLICY, TERSE_COMPRESSED_ALGO, TERSE_HIERARCHICAL, TERSE_PLANNER_LEARN,
  // TERSE_COMPRESSED_PIECE_BYTES, TERSE_MEMORY_MAX_BYTES, TERSE_MEMORY_IDLE_STEPS, and the
  // uncompressed allreduce as the planner weighs it (from the two below).
  CompressionSettings compression;
  AlgorithmSelection selection;                                     // TERSE_ALGO
  size_t piece_bytes = kDefaultPieceBytes;                          // TERSE_PIECE_BYTES
  UcxErrorModeSetting ucx_error_mode = UcxErrorModeSetting::kAuto;  // TERSE_UCX_ERROR_MODE
};

// One setting's effective value on this rank.
struct AgreedSetting {
  std::string name;   // the variable, e.g. "TERSE_CODEC"
  std::string value;  // what ranks compare: two spellings of one value give the same text
  std::string shown;  // what a message says this rank has: "\"1M\" (1048576)", "it unset (...)"
};

// Reads every setting listed above from the environment, once, into `*settings`, and lists
// them in that order in `*compared` as ranks compare them. A value that does not parse is listed
// as its refusal ("refused: <the parser's message>", shown as the text and why it does not
// parse), so that a rank with a typo is compared like any other: its peers see a value that
// differs and refuse with it, rather than wait for a rank that gave up. Returns the first
// refusal (its message the thread's last error), which the communicator reports once the ranks
// have compared: ranks that all hold the same bad value agree, then each refuses it.
// `*compared` is always complete; `*settings` is meaningful only on success.
ncclResult_t read_comm_settings(CommSettings* settings, std::vector<AgreedSetting>* compared);

// The setting `name` as a rank holds it: `written` as the environment has it ("" when unset),
// `value` its canonical form. Texts longer than a message can show are shortened, the value
// keeping a hash of what was cut so that it still compares.
AgreedSetting make_agreed_setting(const std::string& name, const std::string& written,
                                  const std::string& value);

}  // namespace terse
