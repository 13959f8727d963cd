// Fuzz target: the net plugin's handshake frame (plugin/net/net_wire.h, decode_handshake), the
// first bytes a listening plugin reads from whoever connects to its port.
//
// Any bytes: refused (false) or decoded; a decoded handshake encodes back to exactly the input
// (the format has one spelling), and nothing reads outside the input.
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "plugin/net/net_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace terse::net;
  terse::fuzz::quiet_logs();
  const std::vector<uint8_t> bytes(data, data + size);
  Handshake handshake;
  if (!decode_handshake(bytes, &handshake)) return 0;
  const std::vector<uint8_t> again = encode_handshake(handshake);
  TERSE_FUZZ_REQUIRE(again == bytes, "a decoded handshake of %zu bytes encodes to %zu others", size,
                     again.size());
  return 0;
}
