// Packing of small per-element codes (1, 2, 4 or 8 bits) into bytes, shared by the CPU loops and
// the CUDA kernels of the low-bit quantizers (sign, terngrad, qsgd).
//
// Layout of `count` codes of kBits each (ceil(count * kBits / 8) bytes in all):
//   - Full tiles of kTileElements = 256 / kBits elements take 32 bytes each, read as eight
//     little-endian uint32 words. Element e = 8 * c + j of a tile (chunk c in [0, 32 / kBits),
//     lane j in [0, 8)) sits in word j at bits [c * kBits, c * kBits + kBits).
//   - The elements after the last full tile (fewer than kTileElements) follow linearly: tail
//     element k sits at bit k * kBits of the remaining bytes, least significant bit first. The
//     unused high bits of the last byte are zero.
// Why the transposed tile: eight consecutive elements (one chunk) land in the same bit position
// of eight words, so packing a chunk is eight independent compare/shift/or lanes: one AVX2
// register, no horizontal bit gathering, and the CPU loop vectorises as plain C++. Because kBits
// divides 8, no code straddles a byte, in a tile or in the tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace terse {

template <int kBits>
struct PackedTile {
  static_assert(kBits == 1 || kBits == 2 || kBits == 4 || kBits == 8, "kBits must divide 8");
  static constexpr int kLanes = 8;            // words per tile
  static constexpr int kChunks = 32 / kBits;  // chunks of 8 elements per tile
  static constexpr size_t kTileElements = size_t(kLanes) * kChunks;  // 256 / kBits
  static constexpr size_t kTileBytes = 32;
  static constexpr uint32_t kCodeMask = (1u << kBits) - 1u;
};

// Bytes of `count` packed codes of `bits` each.
TERSE_HD size_t packed_code_bytes(size_t count, int bits) {
  return (count / 8) * size_t(bits) + ((count % 8) * size_t(bits) + 7) / 8;
}

// Where the code of element `i` lives: byte offset and bit shift within that byte.
template <int kBits>
TERSE_HD void packed_code_position(size_t count, size_t i, size_t* byte, unsigned* shift) {
  using Tile = PackedTile<kBits>;
  const size_t full_tiles = count / Tile::kTileElements;
  const size_t tile = i / Tile::kTileElements;
  if (tile < full_tiles) {
    const size_t e = i % Tile::kTileElements;
    const unsigned bit = unsigned(e / Tile::kLanes) * kBits;  // within the word
    *byte = tile * Tile::kTileBytes + 4 * (e % Tile::kLanes) + bit / 8;
    *shift = bit % 8;
  } else {
    const size_t bit = (i - full_tiles * Tile::kTileElements) * kBits;
    *byte = full_tiles * Tile::kTileBytes + bit / 8;
    *shift = unsigned(bit % 8);
  }
}

// The code of element `i` of `count` packed codes.
template <int kBits>
TERSE_HD uint32_t packed_code(const uint8_t* codes, size_t count, size_t i) {
  size_t byte;
  unsigned shift;
  packed_code_position<kBits>(count, i, &byte, &shift);
  return (uint32_t(codes[byte]) >> shift) & PackedTile<kBits>::kCodeMask;
}

// Bits of the last byte that carry no code and must be zero (0 when the codes fill it).
TERSE_HD uint32_t packed_padding_mask(size_t count, int bits) {
  const unsigned used = unsigned((count % 8) * size_t(bits) % 8);
  return used == 0 ? 0u : (0xffu << used) & 0xffu;
}

// Host-side little-endian word access (the targets are little-endian; memcpy keeps unaligned
// message pointers legal).
inline uint32_t load_word(const uint8_t* bytes) {
  uint32_t word;
  memcpy(&word, bytes, sizeof(word));
  return word;
}

inline void store_word(uint8_t* bytes, uint32_t word) {
  memcpy(bytes, &word, sizeof(word));
}

}  // namespace terse
