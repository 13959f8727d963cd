// terseCommGetStats' struct from the compression engine's statistics: totals over every
// (codec, algorithm) row, the first TERSE_STATS_MAX_ROWS rows and the count of those beyond them,
// the residual memory's figures and the last call's plan. Pure, so that the plugin's unit tests
// feed it statistics of their own.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/compressed/compression_engine.h"
#include "terse/terse.h"

namespace terse {

// This library's layout of terseStats (size = sizeof(terseStats)); terseCommGetStats writes it
// into the caller's as far as the caller's size reaches (growing_structs.h).
terseStats public_stats(const CompressionStats& now, const ResidualStats& residuals);

// Copies `text` into a C buffer of `bytes`, truncating, always terminated (when bytes > 0): the
// C API's fixed-size names.
void copy_text(const std::string& text, char* out, size_t bytes);

}  // namespace terse
