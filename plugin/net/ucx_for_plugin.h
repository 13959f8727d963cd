// The plugin's one UCX context, made on first use and shared by every link (each link has its
// own worker on it), and the lock every entry point holds: NCCL calls a plugin from its proxy
// threads, while the links' workers run in UCX's serialized mode on a context without
// multi-thread sharing.
#pragma once

#include <memory>
#include <mutex>

#include "plugin/net/net_abi.h"
#include "transport/ucx_context.h"

namespace terse::net {

std::mutex& plugin_lock();
ncclResult_t plugin_ucx_context(std::shared_ptr<UcxContext>* out);
// Whether UCX takes CUDA memory here (reported at init; the plugin stays host-only).
bool ucx_reports_cuda_memory();

}  // namespace terse::net
