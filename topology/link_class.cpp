#include "topology/link_class.h"

namespace terse {

const char* link_class_name(LinkClass link) {
  switch (link) {
    case LinkClass::kAny:
      return "any";
    case LinkClass::kIntra:
      return "intra";
    case LinkClass::kInter:
      return "inter";
  }
  return "unknown";
}

bool parse_link_class(const std::string& text, LinkClass* link) {
  for (LinkClass candidate : {LinkClass::kAny, LinkClass::kIntra, LinkClass::kInter}) {
    if (text == link_class_name(candidate)) {
      *link = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace terse
