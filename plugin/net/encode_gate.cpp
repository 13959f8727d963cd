// The encode gate's rule (encode_gate.h): what saving pays, and how rarely to try after a run of
// encodes that did not pay.
#include "plugin/net/encode_gate.h"

namespace terse::net {
namespace {

// Encoding pays when it saves at least 3% (the encoder's time and the receiver's decode).
constexpr size_t kPayingPercent = 97;
// After this many encodes in a row that did not pay, only every kRetryEncodeEvery-th eligible
// message is tried: random bytes cost an encode each, up to 13% of a 1 Gbit/s link here.
constexpr int kFutileEncodes = 8;
constexpr uint64_t kRetryEncodeEvery = 32;

}  // namespace

bool encode_paid(size_t encoded, size_t size) {
  return encoded > 0 && encoded * 100 <= size * kPayingPercent;
}

bool encodes_futile(int futile_encodes) {
  return futile_encodes >= kFutileEncodes;
}

bool retry_encode(uint64_t eligible_while_futile) {
  return eligible_while_futile % kRetryEncodeEvery == 0;
}

}  // namespace terse::net
