#include "transport/ucx_context.h"

#include <cstdlib>
#include <string>

#include "common/env.h"
#include "common/result.h"

namespace terse {
namespace {

// Whether the environment sets UCX setting `name` (UCX_<name>).
bool environment_sets(const std::string& name) {
  return getenv(("UCX_" + name).c_str()) != nullptr;
}

}  // namespace

Result UcxContext::create(size_t estimated_endpoints, const char* transports,
                          std::shared_ptr<UcxContext>* out, const std::string& net_devices,
                          const std::vector<Setting>& defaults) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    return fail(Result::kSystemError, "UCX cannot read its configuration (UCX_* variables): %s",
                ucs_status_string(status));
  }
  if (transports != nullptr) {
    status = ucp_config_modify(config, "TLS", transports);
    if (status != UCS_OK) {
      ucp_config_release(config);
      return fail(Result::kSystemError, "UCX refuses the transport list %s: %s", transports,
                  ucs_status_string(status));
    }
  }
  if (!net_devices.empty()) {
    status = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      return fail(Result::kSystemError, "UCX refuses the network device %s: %s",
                  net_devices.c_str(), ucs_status_string(status));
    }
  }
  for (const Setting& setting : defaults) {
    if (environment_sets(setting.name)) continue;
    status = ucp_config_modify(config, setting.name, setting.value);
    if (status != UCS_OK) {
      ucp_config_release(config);
      return fail(Result::kSystemError, "UCX refuses %s=%s: %s", setting.name, setting.value,
                  ucs_status_string(status));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  // WAKEUP lets an idle wait sleep on the worker's event descriptor instead of spinning: ranks
  // run as threads on few cores in tests, and host-memory collectives block their caller.
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = estimated_endpoints;
  params.mt_workers_shared = 0;  // one worker per context, used by one thread
  params.name = "terse";
  ucp_context_h context = nullptr;
  status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) {
    return fail(Result::kSystemError, "UCX initialisation failed: %s (UCX_TLS=%s)",
                ucs_status_string(status),
                transports != nullptr ? transports : env_string("UCX_TLS", "unset").c_str());
  }
  out->reset(new UcxContext(context));
  return Result::kSuccess;
}

bool UcxContext::supports_cuda_memory() const {
  ucp_context_attr_t attributes{};
  attributes.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context_, &attributes) != UCS_OK) return false;
  return (attributes.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

UcxContext::~UcxContext() {
  ucp_cleanup(context_);
}

}  // namespace terse
