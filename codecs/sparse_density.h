// How many elements a sparsifier keeps: the density it aims for (its ratio, the DGC warm-up
// schedule, the policy's warm-up ramp) turned into a count k. Host-side only: k travels in the
// message header, so CPU and GPU encoders agree on it without sharing this arithmetic.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace terse {

// Sparse messages carry uint32 indices, so a sparsifier handles at most this many elements.
constexpr uint64_t kMaxSparseCount = 0xffffffffull;

// density * count rounded half up, at least 1 when count > 0, at most count.
size_t kept_count(size_t count, double density);

// The policy's warm-up ramp (EncodeContext::warmup_progress p in (0, 1]): a target density d
// becomes d^p, from dense at p -> 0 toward the target at p = 1. Refuses p outside (0, 1],
// naming `codec`.
ncclResult_t ramp_density(const char* codec, double target, double progress, double* density);

// Refuses counts whose indices would not fit in uint32, naming `codec`.
ncclResult_t check_sparse_count(const char* codec, size_t count);

// A parameter value for spec(): the shortest decimal that parses back to the same double.
std::string spec_number(double value);

}  // namespace terse
