// Which links a collective crosses: inside one node (shared memory, NVLink, PCIe) or through the
// network between nodes. Policy rules match on it and the cost model prices each class, so it
// lives here, with the rest of "where ranks sit", and codecs and collectives ask for it.
#pragma once

#include <cstdint>
#include <string>

namespace terse {

enum class LinkClass : uint8_t {
  kAny = 0,    // rules only: either
  kIntra = 1,  // all ranks on one node (NVLink, PCIe, shared memory)
  kInter = 2,  // the collective crosses a network between nodes
};
const char* link_class_name(LinkClass link);  // "any", "intra", "inter"
bool parse_link_class(const std::string& text, LinkClass* link);

}  // namespace terse
