// Writing a message header into device memory in stream order (wire_header_kernels.cu). Plain
// C++ so host code can call it; only CUDA builds define it.
#pragma once

#include <nccl.h>

#include "codecs/wire_format.h"

namespace terse {

// Writes `header` to `message` (device memory) on `stream`. The header travels as a kernel
// argument, copied at launch: the caller may reuse its copy at once, and nothing waits for the
// stream.
ncclResult_t launch_write_header(void* message, const WireHeader& header, void* stream);

}  // namespace terse
