// One parameter-server tensor as a rank holds it: its placement, the shards this rank owns (the
// server's side, touched by the server thread only), and the client's side: the error-feedback
// residual of each shard it pushes to through a codec, and its step clock. Shared between the
// handle (terse.h: tersePsHandle_t) and the messages in flight, so a free while a request still
// runs never pulls memory from under it.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/dtype.h"
#include "ps/shard_placement.h"

namespace terse {

// What the client moved for the tensor (terse.h: tersePsStats, which defines each field). Atomic:
// sends are counted on the callers' threads, answers on the server thread.
struct PsTrafficCounters {
  std::atomic<uint64_t> sends{0};
  std::atomic<uint64_t> send_bytes{0};
  std::atomic<uint64_t> send_uncompressed_bytes{0};
  std::atomic<uint64_t> receives{0};
  std::atomic<uint64_t> receive_bytes{0};
  std::atomic<uint64_t> receive_uncompressed_bytes{0};
  std::atomic<uint64_t> header_bytes{0};
};

struct PsTensor {
  uint32_t id = 0;  // the same on every rank: the order of the inits
  std::string name;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  size_t element_bytes = 4;
  size_t row_elements = 1;
  std::vector<ShardSpan> shards;

  // ---- Server side (the server thread only, after init) ----
  // The values of each shard this rank owns (empty for the others'), by shard index.
  std::vector<std::vector<uint8_t>> storage;
  // Every rank's step clock as this owner holds it (tersePsClock); zeros for a tensor this rank
  // owns no shard of.
  std::vector<uint64_t> clocks;

  // ---- Codecs: null for exact transfers ----
  DType codec_dtype = DType::kFloat32;  // the codecs' view of `type`
  // Pushes (add): encoded by clients under client_mutex, decoded by the server thread; two
  // instances since a codec object is not shared between threads.
  std::unique_ptr<Codec> push_encoder;
  std::unique_ptr<Codec> push_decoder;
  // Receives: encoded by the owner and decoded by the client, both on the server thread.
  std::unique_ptr<Codec> receive_codec;

  // ---- Client side ----
  std::mutex client_mutex;
  // Error feedback per shard (fp32, the shard's count), made at the first compressed push.
  std::vector<std::vector<float>> residuals;
  std::vector<uint64_t> pushes;  // compressed pushes per shard: the encode seeds
  uint64_t clock = 0;            // the last clock this rank reported
  PsTrafficCounters traffic;

  size_t shard_bytes(size_t shard) const { return shards[shard].count * element_bytes; }
};

}  // namespace terse
