// What UCX says about an endpoint's protocols: the size from which a tagged send goes with
// rendezvous (the sender announces the message and the data follows once the receiver answers,
// a round trip more than an eager message). UCX picks that size per endpoint from its lanes'
// speeds (`ucx_info -e`: 8 KiB over TCP on loopback, 19,522 bytes on a 10 Gbit/s veth), or takes
// UCX_RNDV_THRESH; the cost model needs the real one to price a network step (cost_model.cpp).
// UCX 1.13 offers no query for it, only ucp_ep_print_info's text, which is read here.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <optional>
#include <string>

namespace terse {

// From ucp_ep_print_info's text: the rendezvous threshold of `tag_send` (the protocol of a
// nonblocking tagged send with a callback, which is how links send). SIZE_MAX when that line has
// no rendezvous range (UCX_RNDV_THRESH=inf); nullopt when the text has no `tag_send` line in the
// form UCX 1.13 prints, e.g. a later UCX's new protocol selection.
std::optional<size_t> parse_tag_send_rendezvous_threshold(const std::string& endpoint_info);

// The same for a live endpoint (printing its information into memory).
std::optional<size_t> tag_send_rendezvous_threshold(ucp_ep_h endpoint);

// A size as UCX_RNDV_THRESH gives it: bytes, with an optional K, M or G (binary) and B; "inf" is
// SIZE_MAX; nullopt for anything else ("auto", garbage).
std::optional<size_t> parse_ucx_size(const std::string& text);

}  // namespace terse
