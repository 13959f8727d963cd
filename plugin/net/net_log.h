// The plugin's log lines go through the logger NCCL passes to init (so NCCL_DEBUG and
// NCCL_DEBUG_SUBSYS=NET govern them, with NCCL's prefix), and through terse's own log
// (TERSE_DEBUG) before init or when a harness passes no logger.
#pragma once

#include "plugin/net/net_abi.h"

namespace terse::net {

void set_logger(netabi::Logger logger);

void log_warn(const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
void log_info(const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

// Logs `format` at WARN and returns `code`: every failing entry point says why.
ncclResult_t net_fail(ncclResult_t code, const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace terse::net

#define NET_WARN(...) ::terse::net::log_warn(__FILE__, __LINE__, __VA_ARGS__)
#define NET_INFO(...) ::terse::net::log_info(__FILE__, __LINE__, __VA_ARGS__)
#define NET_FAIL(code, ...) ::terse::net::net_fail(code, __FILE__, __LINE__, __VA_ARGS__)
