// How the plugin exports the NCCL API: every entry point is defined with TERSE_API (default
// visibility, C linkage; the library is built with -fvisibility=hidden and a version script, so
// nothing else leaves it) and gets its profiler name pnccl* as a strong alias, so tools that
// interpose on nccl* can still reach the implementation.
#pragma once

#include <nccl.h>

#define TERSE_API extern "C" __attribute__((visibility("default")))

// The pnccl* twin of `name`, an alias of the same code. nccl.h declares both, so the compiler
// checks that the two have one prototype.
#define TERSE_PROFILER_ALIAS(name) TERSE_API decltype(name) p##name __attribute__((alias(#name)));
