// PowerSGD (Vogels et al. 2019): a gradient viewed as a rows x cols matrix M is sent as a
// rank-r factorisation P Q^T found by power iteration, warm-started from the previous step's Q:
//   P = M Q;  P = orthonormalise(P);  Q = M^T P;  M^ = P Q^T = P P^T M.
// The pieces are in powersgd.h (the collective layer runs them with allreduces in between).
//
// Parameters: rank (default 4, 1..256; clamped to min(rows, cols) per tensor, which makes
// the message dense: full-rank factors are never smaller than the matrix), iterations
// (power iterations per step, default 1, 1..16), warm_start (default true).
// Matrix view: EncodeContext.shape when set (rows * cols must equal the count, else the encode
// is refused), otherwise the near-square view of matrix_view.h.
//
// Wire format, after the 32-byte header (wire_format.h):
//   low-rank message, flags = 0: param0 = rank r, seed = rows (cols = count / rows),
//     param1 = 0. Payload: P (rows x r fp32, column-major: column c at float c * rows), then
//     Q (cols x r fp32, column-major). Bytes: 32 + 4 r (rows + cols); 131,104 for 4096 x 4096
//     at rank 4, 0.00195 of the fp32 tensor.
//     Decode: M^[i][j] = sum_c P[c rows + i] Q[c cols + j], summed in c order
//     (powersgd_math.h), identical bits on every rank and device.
//   dense message, flags = kDenseFlag: param0 = param1 = seed = 0; payload: the count elements
//     in the header's dtype, as the `none` codec sends them. Chosen when the factors would not
//     be smaller than the tensor (plan_powersgd: empty and tiny tensors, prime counts, whose
//     only view is 1 x n, and rank >= min(rows, cols)), and when P or Q come out NaN or Inf
//     (the input held NaN/Inf: it reaches the receivers as it would uncompressed, and the
//     warm-start Q is not replaced by garbage).
//   Decode refuses unknown flags, non-zero unused fields, rank outside [1, 256] or above
//   min(rows, cols), rows that do not divide the count, a length other than the implied one,
//   and NaN/Inf factors.
//
// Error bound: M^ = P P^T M with orthonormal P is an orthogonal projection of M's columns, so
// ||M - M^||_F <= ||M||_F always, and ||M - M^||_F >= sqrt(sum_{k>r} sigma_k^2), the best
// rank-r error, which warm-started steps on a slowly changing M approach (each step is one
// more subspace iteration). No element-wise bound. A matrix of rank <= r is recovered to fp32
// rounding. EncodeContext.error receives M - M^ exactly as decoding computes M^.
//
// State: make_state() returns a PowerSgdState holding Q (null for tensors planned dense, and
// for invalid shapes, which encode then refuses). Without a state (context.state null), and
// with warm_start=false, every step starts from the fixed initial Q of context.step (a fresh
// state holds the one of step 0; temporaries hold it when there is no state): it works, only
// without the warm start. The initial Q depends on the step only (not on context.seed), so
// ranks agree on it without talking.
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "codecs/cast_math.h"
#include "codecs/codec_factories.h"
#include "codecs/device_support.h"
#include "codecs/powersgd.h"
#include "codecs/powersgd_math.h"
#include "codecs/powersgd_state.h"
#include "codecs/wire_format.h"
#include "common/result.h"

#if TERSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "codecs/cuda/cast_kernels.h"
#endif

namespace terse {
namespace {

constexpr uint8_t kDenseFlag = 1;
constexpr const char* kName = "powersgd";

// fp32 scratch in host or device memory (device: stream-ordered allocation), freed on scope
// exit; only the stateless path needs it.
class FloatBuffer {
 public:
  FloatBuffer() = default;
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  ~FloatBuffer() {
#if TERSE_HAVE_CUDA
    // A destructor cannot return the failure; it leaves no stray last error either.
    if (device_ != nullptr &&
        cudaFreeAsync(device_, static_cast<cudaStream_t>(stream_)) != cudaSuccess) {
      cudaGetLastError();
    }
#endif
  }

  ncclResult_t allocate(Memory memory, size_t floats, void* stream, float** data) {
    if (memory == Memory::kHost) {
      host_.resize(floats);
      *data = host_.data();
      return ncclSuccess;
    }
    TERSE_CHECK(require_cuda(kName));
    (void)stream;
#if TERSE_HAVE_CUDA
    stream_ = stream;
    if (cudaMallocAsync(reinterpret_cast<void**>(&device_), floats == 0 ? 1 : floats * 4,
                        static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      device_ = nullptr;
      return fail(ncclSystemError, "powersgd: cannot allocate %zu device floats", floats);
    }
    *data = device_;
#endif
    return ncclSuccess;
  }

 private:
  std::vector<float> host_;
  [[maybe_unused]] float* device_ = nullptr;  // unused without CUDA
  [[maybe_unused]] void* stream_ = nullptr;
};

ncclResult_t copy_floats(float* to, const float* from, size_t floats, Memory memory, void* stream) {
  if (memory == Memory::kHost) {
    memcpy(to, from, floats * sizeof(float));
    return ncclSuccess;
  }
  TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
  cudaError_t error = cudaMemcpyAsync(to, from, floats * sizeof(float), cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) {
    return cuda_call_failed(error, "powersgd: copying Q");
  }
#else
  (void)stream;
#endif
  return ncclSuccess;
}

template <typename T>
TERSE_CPU_DISPATCH void dense_encode_cpu(const typename T::Storage* input,
                                         typename T::Storage* payload, float* error, size_t count) {
  for (size_t i = 0; i < count; ++i) cast_encode_element<T, T>(input, payload, error, i);
}

template <typename Wire, typename Out>
TERSE_CPU_DISPATCH void dense_decode_cpu(const typename Wire::Storage* payload,
                                         typename Out::Storage* output, bool accumulate,
                                         size_t count) {
  for (size_t i = 0; i < count; ++i) cast_decode_element<Wire, Out>(payload, output, accumulate, i);
}

class PowerSgdCodec final : public Codec {
 public:
  PowerSgdCodec(int rank, int iterations, bool warm_start)
      : rank_(rank), iterations_(iterations), warm_start_(warm_start) {
    params_.rank = rank;
    params_.iterations = iterations;
    params_.warm_start = warm_start;
  }

  CodecId id() const override { return CodecId::kPowerSgd; }
  CodecFamily family() const override { return CodecFamily::kLowRank; }
  std::string spec() const override {
    return std::string(kName) + ":rank=" + std::to_string(rank_) +
           ",iterations=" + std::to_string(iterations_) +
           ",warm_start=" + (warm_start_ ? "true" : "false");
  }

  // Whatever the shape, a low-rank message is smaller than the dense one (else the plan is
  // dense), so the dense size bounds both.
  size_t max_finite_bytes(size_t count, DType dtype) const override {
    return kWireHeaderBytes + count * dtype_size(dtype);
  }

  // Not linear as a message (M^ = P Q^T is bilinear in the factors); its steps are, which
  // low_rank() tells the powersgd algorithm.
  const LowRankParams* low_rank() const override { return &params_; }

  bool stateful(size_t count, DType dtype, const MatrixShape& shape) const override {
    PowerSgdPlan plan;
    return plan_powersgd(count, dtype, shape, rank_, &plan) == ncclSuccess && !plan.dense;
  }

  // 32 + 4 r (rows + cols) for the plan's view and effective rank r, or the dense message where
  // the plan is dense (and, for a shape that encode refuses, the dense size too).
  size_t wire_bytes(size_t count, DType dtype, const MatrixShape& shape) const override {
    PowerSgdPlan plan;
    size_t factor_bytes = 0;
    if (plan_powersgd(count, dtype, shape, rank_, &plan) != ncclSuccess || plan.dense ||
        !powersgd_factor_bytes(plan.rows, plan.cols, plan.rank, &factor_bytes)) {
      return max_finite_bytes(count, dtype);
    }
    return kWireHeaderBytes + factor_bytes;
  }

  // M^ = P P^T M with orthonormal P is an orthogonal projection of M's columns, so
  // ||M - M^||_F <= ||M||_F, which bounds every element; 2^-16 covers the fp32 GEMMs. In L2 only.
  ErrorBound error_bound(size_t) const override {
    ErrorBound bound;
    bound.stated = true;
    bound.factor = 1.0 + std::ldexp(1.0, -16);
    bound.norm = BoundNorm::kL2;
    return bound;
  }

  std::unique_ptr<CodecState> make_state(size_t count, DType dtype,
                                         const MatrixShape& shape) const override {
    PowerSgdPlan plan;
    if (plan_powersgd(count, dtype, shape, rank_, &plan) != ncclSuccess || plan.dense) {
      return nullptr;
    }
    return std::make_unique<PowerSgdState>(plan.rows, plan.cols, plan.rank);
  }

  ncclResult_t encode_finite(const void* input, size_t count, DType dtype,
                             const EncodeContext& context, void* message, size_t capacity,
                             size_t* message_bytes) override {
    if (count > 0 && input == nullptr) return fail(ncclInvalidArgument, "powersgd: input is null");
    if (message == nullptr) return fail(ncclInvalidArgument, "powersgd: message is null");
    if (context.memory == Memory::kDevice) TERSE_CHECK(require_cuda(kName));
    PowerSgdPlan plan;
    TERSE_CHECK(plan_powersgd(count, dtype, context.shape, rank_, &plan));
    if (plan.dense)
      return encode_dense(input, count, dtype, context, message, capacity, message_bytes);
    size_t factor_bytes = 0;
    powersgd_factor_bytes(plan.rows, plan.cols, plan.rank, &factor_bytes);  // checked by plan
    size_t bytes = kWireHeaderBytes + factor_bytes;
    TERSE_CHECK(check_capacity(kName, bytes, capacity));

    PowerSgdState* state = nullptr;
    if (context.state != nullptr) {
      state = dynamic_cast<PowerSgdState*>(context.state);
      if (state == nullptr) {
        return fail(ncclInvalidArgument, "powersgd: the encode context's state is not PowerSGD's");
      }
      if (state->rows() != plan.rows || state->cols() != plan.cols || state->rank() != plan.rank) {
        return fail(ncclInvalidArgument,
                    "powersgd: state was made for a %zu x %zu matrix at rank %d, this encode "
                    "has %zu x %zu at rank %d",
                    state->rows(), state->cols(), state->rank(), plan.rows, plan.cols, plan.rank);
      }
    }

    Memory memory = context.memory;
    void* stream = context.stream;
    size_t q_floats = plan.cols * static_cast<size_t>(plan.rank);
    FloatBuffer temporary_q;
    float* q = nullptr;
    if (state != nullptr) {
      TERSE_CHECK(state->q(memory, stream, &q));
    } else {
      TERSE_CHECK(temporary_q.allocate(memory, q_floats, stream, &q));
    }
    if (state == nullptr || !warm_start_) {
      TERSE_CHECK(powersgd_initial_q(q, plan.cols, plan.rank, context.step, memory, stream));
    }
    PowerSgdWorkspace* workspace = state != nullptr ? &state->workspace() : nullptr;

    float* p = reinterpret_cast<float*>(static_cast<char*>(message) + kWireHeaderBytes);
    float* q_out = p + plan.rows * static_cast<size_t>(plan.rank);
    for (int iteration = 0; iteration < iterations_; ++iteration) {
      if (iteration > 0) TERSE_CHECK(copy_floats(q, q_out, q_floats, memory, stream));
      TERSE_CHECK(powersgd_prepare_q(q, plan.cols, plan.rank, context.step, memory, stream));
      TERSE_CHECK(powersgd_compute_p(input, dtype, plan.rows, plan.cols, q, plan.rank, p, workspace,
                                     memory, stream));
      TERSE_CHECK(powersgd_orthogonalize(p, plan.rows, plan.rank, memory, stream));
      TERSE_CHECK(powersgd_compute_q(input, dtype, plan.rows, plan.cols, p, plan.rank, q_out,
                                     workspace, memory, stream));
    }
    bool finite = false;
    TERSE_CHECK(powersgd_all_finite(p, (plan.rows + plan.cols) * plan.rank, workspace, memory,
                                    stream, &finite));
    if (!finite) {
      return encode_dense(input, count, dtype, context, message, capacity, message_bytes);
    }
    if (state != nullptr && warm_start_) {
      TERSE_CHECK(copy_floats(q, q_out, q_floats, memory, stream));
    }
    if (context.error != nullptr) {
      TERSE_CHECK(powersgd_residual(input, dtype, p, q_out, plan.rows, plan.cols, plan.rank,
                                    context.error, memory, stream));
    }
    WireHeader header = make_header(CodecId::kPowerSgd, dtype, count);
    header.param0 = static_cast<uint32_t>(plan.rank);
    header.seed = plan.rows;
    TERSE_CHECK(put_header(message, header, memory, stream));
    *message_bytes = bytes;
    return ncclSuccess;
  }

  ncclResult_t decode_finite(const void* message, size_t message_bytes, void* output, size_t count,
                             DType dtype, bool accumulate,
                             const DecodeContext& context) const override {
    WireHeader header;
    TERSE_CHECK(read_header(message, message_bytes, CodecId::kPowerSgd, count, context, &header));
    if ((header.flags & ~kDenseFlag) != 0) {
      return fail(ncclInvalidArgument, "powersgd: message flags 0x%02x hold unknown bits",
                  header.flags);
    }
    if (header.param1 != 0) {
      return fail(ncclInvalidArgument, "powersgd: message param1=%u is not 0", header.param1);
    }
    const char* payload = static_cast<const char*>(message) + kWireHeaderBytes;
    if (header.flags & kDenseFlag) {
      return decode_dense(header, payload, message_bytes, output, count, dtype, accumulate,
                          context);
    }
    uint32_t rank = header.param0;
    if (rank < 1 || rank > kPowerSgdMaxRank) {
      return fail(ncclInvalidArgument, "powersgd: message rank %u is outside [1, %d]", rank,
                  kPowerSgdMaxRank);
    }
    uint64_t rows = header.seed;
    if (rows == 0 || rows > count || count % rows != 0) {
      return fail(ncclInvalidArgument, "powersgd: message rows=%llu do not divide %zu elements",
                  static_cast<unsigned long long>(rows), count);
    }
    size_t cols = count / rows;
    if (rank > rows || rank > cols || rows > INT_MAX || cols > INT_MAX) {
      return fail(ncclInvalidArgument,
                  "powersgd: message rank %u does not fit its %llu x %zu matrix", rank,
                  static_cast<unsigned long long>(rows), cols);
    }
    size_t factor_bytes = 0;
    if (!powersgd_factor_bytes(rows, cols, static_cast<int>(rank), &factor_bytes) ||
        factor_bytes > SIZE_MAX - kWireHeaderBytes) {
      return fail(ncclInvalidArgument,
                  "powersgd: message factors of %llu x %zu at rank %u "
                  "overflow",
                  static_cast<unsigned long long>(rows), cols, rank);
    }
    TERSE_CHECK(check_payload(kName, kWireHeaderBytes + factor_bytes, message_bytes));
    if (output == nullptr) return fail(ncclInvalidArgument, "powersgd: output is null");
    const float* p = reinterpret_cast<const float*>(payload);
    const float* q = p + rows * rank;
    bool finite = false;
    TERSE_CHECK(powersgd_all_finite(p, (rows + cols) * rank, nullptr, context.memory,
                                    context.stream, &finite));
    if (!finite) return fail(ncclInvalidArgument, "powersgd: message factors hold NaN or Inf");
    return powersgd_reconstruct(p, q, rows, cols, static_cast<int>(rank), output, dtype, accumulate,
                                context.memory, context.stream);
  }

 private:
  static ncclResult_t put_header(void* message, const WireHeader& header, Memory memory,
                                 void* stream) {
    if (memory == Memory::kDevice) return write_header_device(message, header, stream);
    write_header(message, header);
    return ncclSuccess;
  }

  // The tensor as the `none` codec sends it, under a PowerSGD header with kDenseFlag.
  ncclResult_t encode_dense(const void* input, size_t count, DType dtype,
                            const EncodeContext& context, void* message, size_t capacity,
                            size_t* message_bytes) const {
    size_t bytes = max_finite_bytes(count, dtype);
    TERSE_CHECK(check_capacity(kName, bytes, capacity));
    WireHeader header = make_header(CodecId::kPowerSgd, dtype, count);
    header.flags = kDenseFlag;
    void* payload = static_cast<char*>(message) + kWireHeaderBytes;
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
      TERSE_CHECK(
          launch_cast_encode(dtype, dtype, input, payload, context.error, count, context.stream));
#endif
    } else {
      dispatch_dtype(dtype, [&](auto type) {
        using T = decltype(type);
        dense_encode_cpu<T>(static_cast<const typename T::Storage*>(input),
                            static_cast<typename T::Storage*>(payload), context.error, count);
      });
    }
    TERSE_CHECK(put_header(message, header, context.memory, context.stream));
    *message_bytes = bytes;
    return ncclSuccess;
  }

  ncclResult_t decode_dense(const WireHeader& header, const void* payload, size_t message_bytes,
                            void* output, size_t count, DType dtype, bool accumulate,
                            const DecodeContext& context) const {
    if (header.param0 != 0 || header.seed != 0) {
      return fail(ncclInvalidArgument,
                  "powersgd: dense message has param0=%u and seed=%llu, expected 0", header.param0,
                  static_cast<unsigned long long>(header.seed));
    }
    DType wire_type = static_cast<DType>(header.dtype);  // checked by read_header
    size_t element = dtype_size(wire_type);
    if (count > (SIZE_MAX - kWireHeaderBytes) / element) {
      return fail(ncclInvalidArgument, "powersgd: %zu dense elements overflow a message", count);
    }
    TERSE_CHECK(check_payload(kName, kWireHeaderBytes + count * element, message_bytes));
    if (count > 0 && output == nullptr) {
      return fail(ncclInvalidArgument, "powersgd: output is null");
    }
    if (context.memory == Memory::kDevice) {
      TERSE_CHECK(require_cuda(kName));
#if TERSE_HAVE_CUDA
      return launch_cast_decode(wire_type, payload, dtype, output, count, accumulate,
                                context.stream);
#endif
    }
    dispatch_dtype(wire_type, [&](auto wire) {
      using Wire = decltype(wire);
      dispatch_dtype(dtype, [&](auto out) {
        using Out = decltype(out);
        dense_decode_cpu<Wire, Out>(static_cast<const typename Wire::Storage*>(payload),
                                    static_cast<typename Out::Storage*>(output), accumulate, count);
      });
    });
    return ncclSuccess;
  }

  int rank_;
  int iterations_;
  bool warm_start_;
  LowRankParams params_;
};

}  // namespace

ncclResult_t create_powersgd_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  long long rank = 0, iterations = 0;
  bool warm_start = true;
  TERSE_CHECK(params.get_int("rank", 4, 1, kPowerSgdMaxRank, &rank));
  TERSE_CHECK(params.get_int("iterations", 1, 1, kPowerSgdMaxIterations, &iterations));
  TERSE_CHECK(params.get_bool("warm_start", true, &warm_start));
  TERSE_CHECK(params.finish());
  *codec = std::make_unique<PowerSgdCodec>(static_cast<int>(rank), static_cast<int>(iterations),
                                           warm_start);
  return ncclSuccess;
}

}  // namespace terse
