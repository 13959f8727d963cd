#include "codec_test_support.h"

#include <cstring>
#include <random>

#include "codecs/codec_registry.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace terse::testing {

std::unique_ptr<Codec> make_codec(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(create_codec(spec, &codec), ncclSuccess) << spec << ": " << last_error();
  return codec;
}

std::vector<float> random_normal(size_t n, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& value : values) value = normal(engine);
  return values;
}

std::vector<uint8_t> to_dtype(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) store_element(bytes.data(), dtype, i, values[i]);
  return bytes;
}

std::vector<float> from_dtype(const std::vector<uint8_t>& bytes, DType dtype) {
  std::vector<float> values(bytes.size() / dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) values[i] = load_element(bytes.data(), dtype, i);
  return values;
}

std::vector<uint8_t> encode_host(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                                 const EncodeContext& context) {
  size_t count = input.size() / dtype_size(dtype);
  std::vector<uint8_t> message(codec.max_encoded_bytes(count, dtype));
  size_t bytes = 0;
  ncclResult_t result =
      codec.encode(input.data(), count, dtype, context, message.data(), message.size(), &bytes);
  EXPECT_EQ(result, ncclSuccess) << codec.spec() << ": " << last_error();
  EXPECT_LE(bytes, message.size());
  message.resize(bytes);
  return message;
}

std::vector<float> decode_host(const Codec& codec, const std::vector<uint8_t>& message,
                               size_t count, DType dtype) {
  std::vector<uint8_t> output(count * dtype_size(dtype));
  ncclResult_t result = codec.decode(message.data(), message.size(), output.data(), count, dtype,
                                     false, DecodeContext{});
  EXPECT_EQ(result, ncclSuccess) << codec.spec() << ": " << last_error();
  return from_dtype(output, dtype);
}

#if TERSE_HAVE_CUDA

bool gpu_available(std::string* why) {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(error);
    return false;
  }
  if (devices == 0) {
    *why = "no CUDA device present";
    return false;
  }
  return true;
}

namespace {

// A device buffer that frees itself; tests stay short and leak nothing on early returns.
struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&data, bytes == 0 ? 1 : bytes) != cudaSuccess) data = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data); }
};

}  // namespace

ncclResult_t encode_device(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                           EncodeContext context, std::vector<uint8_t>* message,
                           std::vector<float>* error) {
  size_t count = input.size() / dtype_size(dtype);
  size_t capacity = codec.max_encoded_bytes(count, dtype);
  DeviceBuffer device_input(input.size()), device_message(capacity),
      device_error(count * sizeof(float));
  if (!device_input.data || !device_message.data || !device_error.data) return ncclSystemError;
  cudaMemcpy(device_input.data, input.data(), input.size(), cudaMemcpyHostToDevice);
  context.memory = Memory::kDevice;
  context.stream = nullptr;
  if (error != nullptr) context.error = static_cast<float*>(device_error.data);
  size_t bytes = 0;
  ncclResult_t result =
      codec.encode(device_input.data, count, dtype, context, device_message.data, capacity, &bytes);
  if (result != ncclSuccess) return result;
  if (cudaDeviceSynchronize() != cudaSuccess) return ncclUnhandledCudaError;
  message->resize(bytes);
  cudaMemcpy(message->data(), device_message.data, bytes, cudaMemcpyDeviceToHost);
  if (error != nullptr) {
    error->resize(count);
    cudaMemcpy(error->data(), device_error.data, count * sizeof(float), cudaMemcpyDeviceToHost);
  }
  return ncclSuccess;
}

ncclResult_t encode_compensated_device(Codec& codec, const std::vector<uint8_t>& input, DType dtype,
                                       std::vector<float>* residual, EncodeContext context,
                                       std::vector<uint8_t>* message) {
  const size_t count = residual->size();
  const size_t capacity = codec.max_encoded_bytes(count, dtype);
  DeviceBuffer device_input(input.size()), device_message(capacity),
      device_residual(count * sizeof(float));
  if (!device_input.data || !device_message.data || !device_residual.data) return ncclSystemError;
  cudaMemcpy(device_input.data, input.data(), input.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(device_residual.data, residual->data(), count * sizeof(float), cudaMemcpyHostToDevice);
  context.memory = Memory::kDevice;
  size_t bytes = 0;
  const ncclResult_t result =
      codec.encode_compensated(device_input.data, dtype, static_cast<float*>(device_residual.data),
                               count, context, device_message.data, capacity, &bytes);
  if (result != ncclSuccess) return result;
  if (cudaDeviceSynchronize() != cudaSuccess) return ncclUnhandledCudaError;
  message->resize(bytes);
  cudaMemcpy(message->data(), device_message.data, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(residual->data(), device_residual.data, count * sizeof(float), cudaMemcpyDeviceToHost);
  return ncclSuccess;
}

ncclResult_t decode_device(const Codec& codec, const std::vector<uint8_t>& message, size_t count,
                           DType dtype, bool accumulate, const std::vector<uint8_t>& initial,
                           std::vector<float>* output, bool with_host_message) {
  DeviceBuffer device_message(message.size()), device_output(count * dtype_size(dtype));
  if (!device_message.data || !device_output.data) return ncclSystemError;
  cudaMemcpy(device_message.data, message.data(), message.size(), cudaMemcpyHostToDevice);
  if (accumulate) {
    cudaMemcpy(device_output.data, initial.data(), count * dtype_size(dtype),
               cudaMemcpyHostToDevice);
  }
  DecodeContext context;
  context.memory = Memory::kDevice;
  if (with_host_message) context.host_message = message.data();
  ncclResult_t result = codec.decode(device_message.data, message.size(), device_output.data, count,
                                     dtype, accumulate, context);
  if (result != ncclSuccess) return result;
  if (cudaDeviceSynchronize() != cudaSuccess) return ncclUnhandledCudaError;
  std::vector<uint8_t> bytes(count * dtype_size(dtype));
  cudaMemcpy(bytes.data(), device_output.data, bytes.size(), cudaMemcpyDeviceToHost);
  *output = from_dtype(bytes, dtype);
  return ncclSuccess;
}

#else  // !TERSE_HAVE_CUDA

bool gpu_available(std::string* why) {
  *why = "terse was built without CUDA (TERSE_CUDA=OFF or no nvcc)";
  return false;
}

ncclResult_t encode_device(Codec&, const std::vector<uint8_t>&, DType, EncodeContext,
                           std::vector<uint8_t>*, std::vector<float>*) {
  return ncclInvalidUsage;
}

ncclResult_t encode_compensated_device(Codec&, const std::vector<uint8_t>&, DType,
                                       std::vector<float>*, EncodeContext, std::vector<uint8_t>*) {
  return ncclInvalidUsage;
}

ncclResult_t decode_device(const Codec&, const std::vector<uint8_t>&, size_t, DType, bool,
                           const std::vector<uint8_t>&, std::vector<float>*, bool) {
  return ncclInvalidUsage;
}

#endif

}  // namespace terse::testing
