#include "plugin/net/ucx_for_plugin.h"

namespace terse::net {
namespace {

std::shared_ptr<UcxContext>& context_slot() {
  static std::shared_ptr<UcxContext> context;
  return context;
}

}  // namespace

std::mutex& plugin_lock() {
  static std::mutex mutex;
  return mutex;
}

ncclResult_t plugin_ucx_context(std::shared_ptr<UcxContext>* out) {
  std::shared_ptr<UcxContext>& context = context_slot();
  if (!context) {
    ncclResult_t result = UcxContext::create(/*estimated_endpoints=*/16, nullptr, &context);
    if (result != ncclSuccess) return result;
  }
  *out = context;
  return ncclSuccess;
}

bool ucx_reports_cuda_memory() {
  std::shared_ptr<UcxContext> context;
  if (plugin_ucx_context(&context) != ncclSuccess) return false;
  ucp_context_attr_t attributes{};
  attributes.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(context->handle(), &attributes) != UCS_OK) return false;
  return (attributes.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

}  // namespace terse::net
