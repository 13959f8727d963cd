#include "codecs/nonfinite_escapes.h"

#include <cmath>
#include <cstring>

#include "common/host_device.h"
#include "common/result.h"

namespace terse {
namespace {

constexpr uint32_t kEscapeMagic = 0x31435345u;  // "ESC1" in memory order
constexpr uint8_t kListForm = 1;
constexpr uint8_t kMapForm = 2;
constexpr size_t kTrailerBytes = 16;

struct Trailer {
  uint32_t magic;
  uint8_t form;
  uint8_t zero[3];
  uint64_t escapes;
};
static_assert(sizeof(Trailer) == kTrailerBytes, "the escape trailer is 16 bytes");

// The bits of an element's magnitude, and the smallest magnitude that is not finite, per dtype.
struct FloatBits {
  uint32_t magnitude_mask;
  uint32_t infinity;
};
FloatBits float_bits_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return FloatBits{0x7fffu, 0x7c00u};
    case DType::kBFloat16:
      return FloatBits{0x7fffu, 0x7f80u};
    case DType::kFloat8E4M3:
      return FloatBits{0x7fu, 0x7fu};  // no infinity: S.1111.111 is the only non-number
    case DType::kFloat8E5M2:
      return FloatBits{0x7fu, 0x7cu};
    default:
      return FloatBits{0x7fffffffu, 0x7f800000u};
  }
}

// The largest magnitude pattern: a max-reduction, which vectorises, instead of an early exit.
template <typename Word>
TERSE_CPU_DISPATCH uint32_t largest_magnitude(const Word* words, size_t count, uint32_t mask) {
  uint32_t largest = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t magnitude = static_cast<uint32_t>(words[i]) & mask;
    largest = magnitude > largest ? magnitude : largest;
  }
  return largest;
}

uint32_t element_bits(const void* input, DType dtype, size_t i) {
  if (dtype == DType::kFloat32) return static_cast<const uint32_t*>(input)[i];
  if (dtype_size(dtype) == 1) return static_cast<const uint8_t*>(input)[i];
  return static_cast<const uint16_t*>(input)[i];
}

EscapeKind kind_of(float value) {
  if (std::isnan(value)) return EscapeKind::kNaN;
  return value > 0 ? EscapeKind::kPositiveInfinity : EscapeKind::kNegativeInfinity;
}

float value_of(EscapeKind kind) {
  switch (kind) {
    case EscapeKind::kPositiveInfinity:
      return INFINITY;
    case EscapeKind::kNegativeInfinity:
      return -INFINITY;
    default:
      return NAN;
  }
}

size_t map_bytes(size_t count) {
  return (count + 3) / 4;
}

bool list_fits(size_t escapes, size_t count) {
  return count <= UINT32_MAX && 5 * escapes <= map_bytes(count);
}

bool valid_kind(uint8_t kind) {
  return kind >= 1 && kind <= 3;
}

}  // namespace

bool all_finite(const void* input, size_t count, DType dtype) {
  const FloatBits bits = float_bits_of(dtype);
  if (dtype == DType::kFloat32) {
    return largest_magnitude(static_cast<const uint32_t*>(input), count, bits.magnitude_mask) <
           bits.infinity;
  }
  if (dtype_size(dtype) == 1) {
    return largest_magnitude(static_cast<const uint8_t*>(input), count, bits.magnitude_mask) <
           bits.infinity;
  }
  return largest_magnitude(static_cast<const uint16_t*>(input), count, bits.magnitude_mask) <
         bits.infinity;
}

Escapes find_escapes(const void* input, size_t count, DType dtype) {
  const FloatBits bits = float_bits_of(dtype);
  Escapes escapes;
  for (size_t i = 0; i < count; ++i) {
    if ((element_bits(input, dtype, i) & bits.magnitude_mask) < bits.infinity) continue;
    escapes.indices.push_back(i);
    escapes.kinds.push_back(kind_of(load_element(input, dtype, i)));
  }
  return escapes;
}

std::vector<uint8_t> zero_escaped(const void* input, size_t count, DType dtype,
                                  const Escapes& escapes) {
  const size_t element = dtype_size(dtype);
  std::vector<uint8_t> copy(static_cast<const uint8_t*>(input),
                            static_cast<const uint8_t*>(input) + count * element);
  for (uint64_t index : escapes.indices) std::memset(copy.data() + index * element, 0, element);
  return copy;
}

size_t escape_section_bytes(const Escapes& escapes, size_t count) {
  const size_t body = list_fits(escapes.size(), count) ? 5 * escapes.size() : map_bytes(count);
  return body + kTrailerBytes;
}

size_t max_escape_section_bytes(size_t count) {
  return map_bytes(count) + kTrailerBytes;
}

void write_escapes(const Escapes& escapes, size_t count, uint8_t* out) {
  Trailer trailer{};
  trailer.magic = kEscapeMagic;
  trailer.escapes = escapes.size();
  const size_t m = escapes.size();
  if (list_fits(m, count)) {
    trailer.form = kListForm;
    for (size_t e = 0; e < m; ++e) {
      const uint32_t index = static_cast<uint32_t>(escapes.indices[e]);
      std::memcpy(out + 4 * e, &index, sizeof(index));
      out[4 * m + e] = static_cast<uint8_t>(escapes.kinds[e]);
    }
    out += 5 * m;
  } else {
    trailer.form = kMapForm;
    std::memset(out, 0, map_bytes(count));
    for (size_t e = 0; e < m; ++e) {
      const uint64_t i = escapes.indices[e];
      out[i / 4] |= static_cast<uint8_t>(static_cast<uint8_t>(escapes.kinds[e]) << (2 * (i % 4)));
    }
    out += map_bytes(count);
  }
  std::memcpy(out, &trailer, sizeof(trailer));
}

ncclResult_t read_escapes(const uint8_t* message, size_t message_bytes, size_t count,
                          size_t min_rest, Escapes* escapes, size_t* section_bytes) {
  if (message_bytes < min_rest + kTrailerBytes) {
    return fail(ncclInvalidArgument,
                "message of %zu bytes is flagged with non-finite escapes but has no room for "
                "their section",
                message_bytes);
  }
  Trailer trailer;
  std::memcpy(&trailer, message + message_bytes - kTrailerBytes, sizeof(trailer));
  if (trailer.magic != kEscapeMagic || trailer.zero[0] != 0 || trailer.zero[1] != 0 ||
      trailer.zero[2] != 0 || (trailer.form != kListForm && trailer.form != kMapForm)) {
    return fail(ncclInvalidArgument, "message's non-finite escape trailer is malformed");
  }
  const uint64_t m = trailer.escapes;
  if (m == 0 || m > count) {
    return fail(ncclInvalidArgument,
                "message escapes %llu non-finite elements of a %zu-element tensor",
                static_cast<unsigned long long>(m), count);
  }
  const bool list = trailer.form == kListForm;
  if (list && count > UINT32_MAX) {
    return fail(ncclInvalidArgument, "message lists escapes of a tensor past 32-bit indices");
  }
  const size_t body = list ? 5 * static_cast<size_t>(m) : map_bytes(count);
  if (body > message_bytes - kTrailerBytes - min_rest) {
    return fail(ncclInvalidArgument,
                "message of %zu bytes is too short for its %llu non-finite escapes", message_bytes,
                static_cast<unsigned long long>(m));
  }
  const uint8_t* at = message + message_bytes - kTrailerBytes - body;
  escapes->indices.clear();
  escapes->kinds.clear();
  escapes->indices.reserve(static_cast<size_t>(m));
  escapes->kinds.reserve(static_cast<size_t>(m));
  if (list) {
    for (size_t e = 0; e < m; ++e) {
      uint32_t index;
      std::memcpy(&index, at + 4 * e, sizeof(index));
      const uint8_t kind = at[4 * m + e];
      if (index >= count || (e > 0 && index <= escapes->indices.back()) || !valid_kind(kind)) {
        return fail(ncclInvalidArgument,
                    "message's non-finite escape %zu (element %u, kind %u) is out of order, out "
                    "of range or of no known kind",
                    e, index, kind);
      }
      escapes->indices.push_back(index);
      escapes->kinds.push_back(static_cast<EscapeKind>(kind));
    }
  } else {
    for (size_t byte = 0; byte < body; ++byte) {
      for (size_t lane = 0; lane < 4 && at[byte] != 0; ++lane) {
        const uint8_t kind = (at[byte] >> (2 * lane)) & 3u;
        if (kind == 0) continue;
        const size_t index = 4 * byte + lane;
        if (index >= count || escapes->size() == m) {
          return fail(ncclInvalidArgument,
                      "message's non-finite escape map marks more elements than it declares");
        }
        escapes->indices.push_back(index);
        escapes->kinds.push_back(static_cast<EscapeKind>(kind));
      }
    }
    if (escapes->size() != m) {
      return fail(ncclInvalidArgument,
                  "message's non-finite escape map marks %zu elements, its trailer says %llu",
                  escapes->size(), static_cast<unsigned long long>(m));
    }
  }
  *section_bytes = body + kTrailerBytes;
  return ncclSuccess;
}

bool escapes_listed(const uint8_t* message, size_t message_bytes) {
  Trailer trailer;
  std::memcpy(&trailer, message + message_bytes - kTrailerBytes, sizeof(trailer));
  return trailer.form == kListForm;
}

void apply_escapes(const Escapes& escapes, void* output, DType dtype, bool accumulate) {
  for (size_t e = 0; e < escapes.size(); ++e) {
    const size_t i = static_cast<size_t>(escapes.indices[e]);
    const float value = value_of(escapes.kinds[e]);
    store_element(output, dtype, i, accumulate ? load_element(output, dtype, i) + value : value);
  }
}

}  // namespace terse
