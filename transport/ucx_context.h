// One UCX context (ucp_context_h) per communicator rank, owning the library state for that rank.
// Shared ownership: the worker, and through it every outstanding request, keeps its context
// alive, so tearing things down in any order is safe.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace terse {

class UcxContext {
 public:
  // Reads the UCX_* environment (UCX_TLS and friends pick the wires) and initialises UCX for
  // tagged messages and worker wake-up events. `estimated_endpoints` is a sizing hint.
  // `transports`, when not null, replaces UCX_TLS (e.g. "sm,self"); `net_devices`, when not
  // empty, restricts the network devices (UCX_NET_DEVICES, e.g. "mlx5_3:1": nic_binding.h).
  // `defaults` are UCX settings of this context only (names without the UCX_ prefix, as
  // ucp_config_modify takes them, e.g. {"RNDV_THRESH", "262145"}), each applied unless the
  // environment sets UCX_<name>.
  struct Setting {
    const char* name;
    const char* value;
  };
  static Result create(size_t estimated_endpoints, const char* transports,
                       std::shared_ptr<UcxContext>* out,
                       const std::string& net_devices = std::string(),
                       const std::vector<Setting>& defaults = {});

  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h handle() const { return context_; }

  // Whether this UCX build and configuration take CUDA device memory in its requests
  // (ucp_context_query: UCS_MEMORY_TYPE_CUDA among the memory types). Without it a message in
  // device memory must be copied to host memory before UCX sees it.
  bool supports_cuda_memory() const;

 private:
  explicit UcxContext(ucp_context_h context) : context_(context) {}
  ucp_context_h context_;
};

}  // namespace terse
