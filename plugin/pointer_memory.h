// What CUDA says a user's pointer is, as buffer_placement.h's BufferKind.
#pragma once

#include "plugin/buffer_placement.h"

namespace terse {

// cudaPointerGetAttributes: device or managed memory (with its device), else host memory. An
// address CUDA does not know, a build without CUDA, or a machine without a driver or device:
// host memory (the error this leaves in the runtime is cleared).
BufferMemory query_buffer_memory(const void* pointer);

}  // namespace terse
