// The non-virtual half of the codec interface: non-finite escapes around every codec's own
// encode and decode (codec.h, nonfinite_escapes.h).
#include "codecs/codec.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "codecs/device_support.h"
#include "codecs/nonfinite_escapes.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include "codecs/cuda/nonfinite_kernels.h"
#endif

namespace terse {
namespace {

// Whether a host message says that an escape section follows the codec's bytes.
bool carries_escapes(const void* message, size_t message_bytes, const DecodeContext& context) {
  if (context.memory != Memory::kHost || message == nullptr || message_bytes < kWireHeaderBytes) {
    return false;
  }
  WireHeader header;
  std::memcpy(&header, message, sizeof(header));
  return header.magic == kWireMagic && (header.flags & kWireEscapesFlag) != 0;
}

// A device tensor with NaN or Inf is encoded through the host, where the escapes are made: the
// codec's device state (DGC's momentum, PowerSGD's factors) cannot follow it there.
ncclResult_t refuse_device_state(const Codec& codec, const EncodeContext& context, size_t count) {
  if (context.state == nullptr) return ncclSuccess;
  return fail(ncclInvalidArgument,
              "%s: a %zu-element device tensor holds NaN or Inf, and this codec keeps state on the "
              "device that an exact escape of those elements cannot go through; use host "
              "buffers or a stateless codec for tensors that can overflow",
              codec.spec().c_str(), count);
}

// Device pointers must be aligned as the kernels access them: a misaligned access is a sticky
// fault on a GPU (every later CUDA call of the process fails), so it is refused here.
ncclResult_t check_device_alignment(const Codec& codec, const char* what, const void* pointer,
                                    size_t alignment) {
  if (pointer == nullptr || reinterpret_cast<uintptr_t>(pointer) % alignment == 0) {
    return ncclSuccess;
  }
  return fail(ncclInvalidArgument,
              "%s: the device %s at %p is not %zu-byte aligned, as the kernels access it",
              codec.spec().c_str(), what, pointer, alignment);
}

}  // namespace

size_t Codec::max_encoded_bytes(size_t count, DType dtype) const {
  return max_finite_bytes(count, dtype) + max_escape_section_bytes(count);
}

ncclResult_t Codec::encode(const void* input, size_t count, DType dtype,
                           const EncodeContext& context, void* message, size_t capacity,
                           size_t* message_bytes) {
  if (context.memory == Memory::kDevice) {
    TERSE_CHECK(check_device_alignment(*this, "input", input, dtype_size(dtype)));
    TERSE_CHECK(check_device_alignment(*this, "message", message, kDeviceMessageAlignment));
    TERSE_CHECK(check_device_alignment(*this, "error output", context.error, sizeof(float)));
  }
  // The codec validates its own arguments (null pointers, capacity) when nothing is escaped.
  if (context.input_finite || count == 0 || input == nullptr || message == nullptr) {
    return encode_finite(input, count, dtype, context, message, capacity, message_bytes);
  }
  if (context.memory == Memory::kDevice) {
    bool found = false;
    TERSE_CHECK(device_holds_nonfinite(input, count, dtype, context.stream, &found));
    if (!found)
      return encode_finite(input, count, dtype, context, message, capacity, message_bytes);
    return encode_device_through_host(input, count, dtype, context, message, capacity,
                                      message_bytes);
  }
  if (all_finite(input, count, dtype)) {
    return encode_finite(input, count, dtype, context, message, capacity, message_bytes);
  }
  const Escapes escapes = find_escapes(input, count, dtype);
  const size_t section = escape_section_bytes(escapes, count);
  if (capacity < section) {
    return fail(ncclInvalidArgument,
                "%s: capacity of %zu bytes leaves no room for the %zu escaped non-finite elements",
                spec().c_str(), capacity, escapes.size());
  }
  const std::vector<uint8_t> finite = zero_escaped(input, count, dtype, escapes);
  size_t finite_bytes = 0;
  TERSE_CHECK(encode_finite(finite.data(), count, dtype, context, message, capacity - section,
                            &finite_bytes));
  // What the message drops of an escaped element is nothing: it travels exactly.
  if (context.error != nullptr) {
    for (uint64_t index : escapes.indices) context.error[index] = 0.0f;
  }
  uint8_t* bytes = static_cast<uint8_t*>(message);
  write_escapes(escapes, count, bytes + finite_bytes);
  bytes[offsetof(WireHeader, flags)] |= kWireEscapesFlag;
  *message_bytes = finite_bytes + section;
  return ncclSuccess;
}

ncclResult_t Codec::encode_compensated(const void* input, DType dtype, float* residual,
                                       size_t count, const EncodeContext& context, void* message,
                                       size_t capacity, size_t* message_bytes) {
  if (context.memory == Memory::kDevice && !fuses_device_compensation()) {
    return fail(ncclInvalidArgument, "%s: a compensated encode takes host memory only",
                spec().c_str());
  }
  if (count > 0 && (input == nullptr || residual == nullptr)) {
    return fail(ncclInvalidArgument, "%s: compensated encode of %zu elements without %s",
                spec().c_str(), count, input == nullptr ? "an input" : "a residual");
  }
  if (context.memory == Memory::kDevice) {
    TERSE_CHECK(check_device_alignment(*this, "input", input, dtype_size(dtype)));
    TERSE_CHECK(check_device_alignment(*this, "residual", residual, sizeof(float)));
    TERSE_CHECK(check_device_alignment(*this, "message", message, kDeviceMessageAlignment));
    bool found = false;
    if (!context.input_finite && count > 0) {
      TERSE_CHECK(device_holds_nonfinite(input, count, dtype, context.stream, &found));
    }
    if (found) {
      return encode_compensated_through_host(input, dtype, residual, count, context, message,
                                             capacity, message_bytes);
    }
    bool finite = true;  // the input was scanned (or is known finite), the residual is always
    return encode_compensated_finite(input, dtype, residual, count, context, message, capacity,
                                     message_bytes, &finite);
  }
  if (fuses_compensation()) {
    bool finite = true;
    TERSE_CHECK(encode_compensated_finite(input, dtype, residual, count, context, message, capacity,
                                          message_bytes, &finite));
    if (finite) return ncclSuccess;
  } else {
    // The generic path: v into the residual, as the fused pass leaves it when v is not finite.
    for (size_t i = 0; i < count; ++i) residual[i] += load_element(input, dtype, i);
  }
  // v (in the residual) is encoded from a copy, the residual receiving the error.
  const std::vector<float> values(residual, residual + count);
  EncodeContext plain = context;
  plain.error = residual;
  plain.input_finite = false;
  return encode(values.data(), count, DType::kFloat32, plain, message, capacity, message_bytes);
}

ncclResult_t Codec::encode_compensated_finite(const void*, DType, float*, size_t,
                                              const EncodeContext&, void*, size_t, size_t*, bool*) {
  return fail(ncclInternalError, "%s: no fused compensated encode", spec().c_str());
}

ncclResult_t Codec::decode(const void* message, size_t message_bytes, void* output, size_t count,
                           DType dtype, bool accumulate, const DecodeContext& context) const {
  if (context.memory == Memory::kDevice) {
    TERSE_CHECK(check_device_alignment(*this, "message", message, kDeviceMessageAlignment));
    TERSE_CHECK(check_device_alignment(*this, "output", output, dtype_size(dtype)));
    return decode_device(message, message_bytes, output, count, dtype, accumulate, context);
  }
  if (!carries_escapes(message, message_bytes, context)) {
    return decode_finite(message, message_bytes, output, count, dtype, accumulate, context);
  }
  Escapes escapes;
  size_t section = 0;
  TERSE_CHECK(read_escapes(static_cast<const uint8_t*>(message), message_bytes, count,
                           kWireHeaderBytes, &escapes, &section));
  TERSE_CHECK(
      decode_finite(message, message_bytes - section, output, count, dtype, accumulate, context));
  apply_escapes(escapes, output, dtype, accumulate);
  return ncclSuccess;
}

ncclResult_t Codec::encode_device_through_host(const void* input, size_t count, DType dtype,
                                               const EncodeContext& context, void* message,
                                               size_t capacity, size_t* message_bytes) {
  TERSE_CHECK(refuse_device_state(*this, context, count));
  std::vector<uint8_t> host_input(count * dtype_size(dtype));
  TERSE_CHECK(copy_and_wait(host_input.data(), input, host_input.size(), context.stream));
  std::vector<uint8_t> host_message(capacity);
  std::vector<float> host_error(context.error != nullptr ? count : 0);
  EncodeContext host = context;
  host.memory = Memory::kHost;
  host.stream = nullptr;
  host.error = context.error != nullptr ? host_error.data() : nullptr;
  TERSE_CHECK(
      encode(host_input.data(), count, dtype, host, host_message.data(), capacity, message_bytes));
  TERSE_CHECK(copy_and_wait(message, host_message.data(), *message_bytes, context.stream));
  return copy_and_wait(context.error, host_error.data(), host_error.size() * sizeof(float),
                       context.stream);
}

ncclResult_t Codec::encode_compensated_through_host(const void* input, DType dtype, float* residual,
                                                    size_t count, const EncodeContext& context,
                                                    void* message, size_t capacity,
                                                    size_t* message_bytes) {
  TERSE_CHECK(refuse_device_state(*this, context, count));
  std::vector<uint8_t> host_input(count * dtype_size(dtype));
  std::vector<float> host_residual(count);
  TERSE_CHECK(copy_and_wait(host_input.data(), input, host_input.size(), context.stream));
  TERSE_CHECK(copy_and_wait(host_residual.data(), residual, count * sizeof(float), context.stream));
  std::vector<uint8_t> host_message(capacity);
  EncodeContext host = context;
  host.memory = Memory::kHost;
  host.stream = nullptr;
  TERSE_CHECK(encode_compensated(host_input.data(), dtype, host_residual.data(), count, host,
                                 host_message.data(), capacity, message_bytes));
  TERSE_CHECK(copy_and_wait(message, host_message.data(), *message_bytes, context.stream));
  return copy_and_wait(residual, host_residual.data(), count * sizeof(float), context.stream);
}

ncclResult_t Codec::decode_device(const void* message, size_t message_bytes, void* output,
                                  size_t count, DType dtype, bool accumulate,
                                  const DecodeContext& context) const {
  if (message == nullptr || message_bytes < kWireHeaderBytes) {
    return decode_finite(message, message_bytes, output, count, dtype, accumulate, context);
  }
  // The flag is read from the host's copy where the caller has one; otherwise from the device
  // message (a wait for the stream), and a flagged message is then copied whole.
  const uint8_t* host = static_cast<const uint8_t*>(context.host_message);
  WireHeader header;
  if (host != nullptr) {
    std::memcpy(&header, host, sizeof(header));
  } else {
    TERSE_CHECK(copy_and_wait(&header, message, sizeof(header), context.stream));
  }
  if (header.magic != kWireMagic || (header.flags & kWireEscapesFlag) == 0) {
    return decode_finite(message, message_bytes, output, count, dtype, accumulate, context);
  }
  std::vector<uint8_t> copied;
  if (host == nullptr) {
    copied.resize(message_bytes);
    TERSE_CHECK(copy_and_wait(copied.data(), message, message_bytes, context.stream));
    host = copied.data();
  }
  Escapes escapes;
  size_t section = 0;
  TERSE_CHECK(read_escapes(host, message_bytes, count, kWireHeaderBytes, &escapes, &section));
  DecodeContext finite = context;
  finite.host_message = host;
  TERSE_CHECK(
      decode_finite(message, message_bytes - section, output, count, dtype, accumulate, finite));
#if TERSE_HAVE_CUDA
  // The section's body lies in the device message after the codec's bytes (its trailer last).
  const uint8_t* body = static_cast<const uint8_t*>(message) + message_bytes - section;
  return launch_apply_escapes(body, escapes_listed(host, message_bytes), escapes.size(), count,
                              output, dtype, accumulate, context.stream);
#else
  return require_cuda(spec().c_str());
#endif
}

}  // namespace terse
