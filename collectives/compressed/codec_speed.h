// How fast each codec runs on this machine: the codec half of the planner's cost model
// (cost_model.h). Measured once per process and codec spec, on a synthetic gradient of
// kSpeedProbeElements fp32 elements (large enough to leave the caches, small enough to take a
// few milliseconds; about 50 MiB of buffers, freed after) by the probing thread's CPU time (the
// speed on a core; the planner applies the ranks' share of the cores), or read from a table when
// TERSE_CODEC_SPEED names one:
//
//   # codec spec or name       encode GB/s   decode GB/s   (per GB of fp32 input)
//   int8                       1.6           3.1
//   topk:ratio=0.01            0.35          9.0
//   reduce                     5.0                         (an fp32 add of two buffers)
//
// A spec is looked up whole, then by its name (the part before ':'); what the table lacks is
// measured. Every rank's figures differ a little, and plans must not: the planner agrees on
// them across ranks before it uses them (planner.h), taking the slowest rank's.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>

#include "codecs/codec.h"

namespace terse {

// 16 MiB of fp32: past the caches, as the tensors worth compressing are.
constexpr size_t kSpeedProbeElements = size_t{4} << 20;

constexpr double kUnmeasuredBytesPerSecond = 1e9;

struct CodecSpeed {
  double encode_bytes_per_s = 0;  // fp32 input bytes per second, error-feedback output included
  double decode_bytes_per_s = 0;  // fp32 output bytes per second, decoding with accumulate
};

// `codec`'s speed on this machine (the table's, or measured once per process and spec). A codec
// whose probe fails (it should not) is given kUnmeasuredBytesPerSecond and an INFO line, so that
// a plan never fails for want of a figure.
ncclResult_t codec_speed(Codec& codec, CodecSpeed* speed);

// One probe of `codec` as codec_speed makes it, neither cached nor looked up in a table.
ncclResult_t measure_codec_speed(Codec& codec, CodecSpeed* speed);

// Bytes per second of out[i] += in[i] over fp32 buffers (the table's "reduce", or measured once).
ncclResult_t reduce_speed(double* bytes_per_s);

}  // namespace terse
