#include "transport/ucx_protocol_info.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace terse {

std::optional<size_t> parse_tag_send_rendezvous_threshold(const std::string& endpoint_info) {
  // The line reads "#   tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)":
  // ranges of message sizes, each protocol between the sizes that bound it.
  std::istringstream lines(endpoint_info);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t label = line.find(" tag_send:");
    if (label == std::string::npos) continue;
    const std::string ranges = line.substr(label + 10);
    const size_t rendezvous = ranges.find("..<rndv>");
    if (rendezvous == 0) return std::nullopt;  // no size before it
    if (rendezvous == std::string::npos) {
      // Every range eager: only valid when the line ends the way every line does.
      if (ranges.find("..(inf)") == std::string::npos) return std::nullopt;
      return SIZE_MAX;
    }
    // The size that starts the rendezvous range: the number just before it.
    const size_t start = ranges.find_last_not_of("0123456789", rendezvous - 1);
    const size_t first = start == std::string::npos ? 0 : start + 1;
    if (first == rendezvous) return std::nullopt;
    return static_cast<size_t>(std::strtoull(ranges.c_str() + first, nullptr, 10));
  }
  return std::nullopt;
}

std::optional<size_t> parse_ucx_size(const std::string& text) {
  if (text == "inf") return SIZE_MAX;
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  char* end = nullptr;
  const unsigned long long number = std::strtoull(text.c_str(), &end, 10);
  std::string suffix = end;
  if (!suffix.empty() && (suffix.back() == 'b' || suffix.back() == 'B')) suffix.pop_back();
  int shift = 0;
  if (suffix == "k" || suffix == "K") {
    shift = 10;
  } else if (suffix == "m" || suffix == "M") {
    shift = 20;
  } else if (suffix == "g" || suffix == "G") {
    shift = 30;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  if (number > (SIZE_MAX >> shift)) return std::nullopt;
  return static_cast<size_t>(number) << shift;
}

std::optional<size_t> tag_send_rendezvous_threshold(ucp_ep_h endpoint) {
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return std::nullopt;
  ucp_ep_print_info(endpoint, stream);
  std::fclose(stream);
  std::string info(text == nullptr ? "" : text, length);
  std::free(text);
  return parse_tag_send_rendezvous_threshold(info);
}

}  // namespace terse
