#include "codecs/sparse_message.h"

#include <cstring>

#include "codecs/device_support.h"
#include "codecs/sparse_density.h"
#include "codecs/sparse_math.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/sparse_decode_kernels.h"
#endif

namespace terse {
namespace {

// Host check of every carried index: below count and above its predecessor, or (strata) inside
// stratum j, which implies both.
ncclResult_t check_indices_host(const char* codec, const uint32_t* indices, size_t kept,
                                size_t count, bool strata) {
  if (kept == 0) return ncclSuccess;
  StratumWalk walk(count, kept);
  for (size_t j = 0; j < kept; ++j) {
    uint64_t index = indices[j];
    uint64_t begin = walk.begin();
    walk.advance();
    if (strata) {
      uint64_t end = walk.begin();
      if (index < begin || index >= end) {
        return fail(ncclInvalidArgument,
                    "%s: index %llu at position %zu is outside its stratum [%llu, %llu)", codec,
                    static_cast<unsigned long long>(index), j,
                    static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
      }
    } else if (index >= count) {
      return fail(ncclInvalidArgument, "%s: index %llu at position %zu is not below count %zu",
                  codec, static_cast<unsigned long long>(index), j, count);
    } else if (j > 0 && index <= indices[j - 1]) {
      return fail(ncclInvalidArgument,
                  "%s: index %llu at position %zu does not increase on the previous index %u "
                  "(indices must be sorted and unique)",
                  codec, static_cast<unsigned long long>(index), j, indices[j - 1]);
    }
  }
  return ncclSuccess;
}

template <typename Wire, typename Out>
void scatter_host(const typename Wire::Storage* values, const uint32_t* indices, uint64_t seed,
                  size_t kept, bool scaled, typename Out::Storage* output, size_t count,
                  bool accumulate) {
  for_each_kept(indices, seed, count, kept, [&](uint64_t j, uint64_t index, uint64_t length) {
    sparse_scatter_element<Wire, Out>(values, j, index, static_cast<float>(length), scaled, output,
                                      accumulate);
  });
}

}  // namespace

WireHeader sparse_header(CodecId id, DType dtype, size_t count, const SparseLayout& layout,
                         uint8_t flags, uint64_t seed) {
  WireHeader header = make_header(id, dtype, count);
  header.param0 = static_cast<uint32_t>(layout.kept);
  header.param1 = static_cast<uint32_t>(layout.value_type);
  header.flags = flags;
  header.seed = seed;
  return header;
}

ncclResult_t write_sparse_header(void* message, const WireHeader& header, Memory memory,
                                 void* stream) {
  if (memory == Memory::kDevice) return write_header_device(message, header, stream);
  write_header(message, header);
  return ncclSuccess;
}

ncclResult_t decode_sparse(const SparseRules& rules, const void* message, size_t message_bytes,
                           void* output, size_t count, DType dtype, bool accumulate,
                           const DecodeContext& context) {
  const char* codec = rules.codec;
  WireHeader header;
  TERSE_CHECK(read_header(message, message_bytes, rules.id, count, context, &header));
  TERSE_CHECK(check_sparse_count(codec, count));
  if ((header.flags & ~rules.allowed_flags) != 0) {
    return fail(ncclInvalidArgument, "%s: message flags 0x%02x are not valid for this codec", codec,
                header.flags);
  }
  DType expected_values = rules.fp32_values ? DType::kFloat32 : static_cast<DType>(header.dtype);
  if (header.param1 != static_cast<uint32_t>(expected_values)) {
    return fail(ncclInvalidArgument, "%s: message value type %u is not the expected %s", codec,
                header.param1, dtype_name(expected_values));
  }
  if (header.param0 > count) {
    return fail(ncclInvalidArgument, "%s: message keeps k=%u elements of only %zu", codec,
                header.param0, count);
  }
  SparseLayout layout;
  layout.kept = header.param0;
  layout.value_type = expected_values;
  layout.explicit_indices = (header.flags & kSparseImplicitIndices) == 0;
  TERSE_CHECK(check_payload(codec, layout.bytes(), message_bytes));
  if (count > 0 && output == nullptr) return fail(ncclInvalidArgument, "%s: output is null", codec);
  const bool scaled = (header.flags & kSparseStratumScaled) != 0;
  const char* bytes = static_cast<const char*>(message);
  const uint32_t* indices = layout.explicit_indices
                                ? reinterpret_cast<const uint32_t*>(bytes + kWireHeaderBytes)
                                : nullptr;
  const void* values = bytes + layout.values_offset();

  if (context.memory == Memory::kDevice) {
    TERSE_CHECK(require_cuda(codec));
#if TERSE_HAVE_CUDA
    if (indices != nullptr && context.host_message != nullptr) {
      // The same bytes on the host: validated there, so the scatter is only enqueued and
      // nothing waits for the stream (an execution backend's decode of a received message).
      const auto* host_indices = reinterpret_cast<const uint32_t*>(
          static_cast<const char*>(context.host_message) + kWireHeaderBytes);
      TERSE_CHECK(check_indices_host(codec, host_indices, layout.kept, count, scaled));
    } else if (indices != nullptr && layout.kept > 0) {
      size_t bad = 0;
      TERSE_CHECK(
          launch_sparse_validate(indices, layout.kept, count, scaled, context.stream, &bad));
      if (bad != layout.kept) {
        return fail(ncclInvalidArgument,
                    "%s: index at position %zu is not below count %zu and above its predecessor%s",
                    codec, bad, count, scaled ? " and inside its stratum" : "");
      }
    }
    return launch_sparse_scatter(layout.value_type, values, indices, header.seed, layout.kept,
                                 scaled, dtype, output, count, accumulate, context.stream);
#endif
  }
  if (indices != nullptr) {
    TERSE_CHECK(check_indices_host(codec, indices, layout.kept, count, scaled));
  }
  if (!accumulate && count > 0) memset(output, 0, count * dtype_size(dtype));
  dispatch_dtype(layout.value_type, [&](auto wire) {
    using Wire = decltype(wire);
    dispatch_dtype(dtype, [&](auto out) {
      using Out = decltype(out);
      scatter_host<Wire, Out>(static_cast<const typename Wire::Storage*>(values), indices,
                              header.seed, layout.kept, scaled,
                              static_cast<typename Out::Storage*>(output), count, accumulate);
    });
  });
  return ncclSuccess;
}

}  // namespace terse
