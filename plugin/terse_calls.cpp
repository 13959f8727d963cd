// include/terse/terse.h beyond terseAllReduceTensor (collective_calls.cpp): statistics, residual
// resets, policy changes and the error-bound queries, over the communicator's compression
// engine (collectives/compressed/compression_engine.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "codecs/codec_registry.h"
#include "collectives/compressed/compressed_algorithm_table.h"
#include "collectives/compressed/compressed_error_bound.h"
#include "collectives/compressed/policy/policy.h"
#include "common/exception_guard.h"
#include "common/result.h"
#include "plugin/growing_structs.h"
#include "plugin/nccl_api.h"
#include "plugin/nccl_comm.h"
#include "plugin/public_stats.h"
#include "plugin/reduction_ops.h"
#include "plugin/tensor_description.h"
#include "terse/terse.h"

namespace terse {
namespace {

ncclResult_t compression_of(ncclComm_t comm, const char* function, CompressionEngine** engine) {
  Communicator* communicator = nullptr;
  TERSE_CHECK(engine_of(comm, function, &communicator));
  *engine = communicator->compression();
  return ncclSuccess;
}

}  // namespace
}  // namespace terse

TERSE_API ncclResult_t terseCommGetStats(ncclComm_t comm, terseStats* stats) try {
  terse::CompressionEngine* engine = nullptr;
  TERSE_CHECK(terse::compression_of(comm, "terseCommGetStats", &engine));
  if (stats == nullptr) {
    return terse::fail(ncclInvalidArgument, "terseCommGetStats: stats is NULL");
  }
  const terseStats full = terse::public_stats(engine->stats(), engine->residual_stats());
  return terse::write_grown("terseCommGetStats", "stats", full, stats);
} catch (...) {
  return terse::result_of_current_exception("terseCommGetStats");
}

TERSE_API ncclResult_t terseGetVersion(int* version) try {
  if (version == nullptr)
    return terse::fail(ncclInvalidArgument, "terseGetVersion: version is NULL");
  *version = TERSE_VERSION;
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseGetVersion");
}

TERSE_API ncclResult_t terseCommResetStats(ncclComm_t comm) try {
  terse::CompressionEngine* engine = nullptr;
  TERSE_CHECK(terse::compression_of(comm, "terseCommResetStats", &engine));
  engine->reset_stats();
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseCommResetStats");
}

TERSE_API ncclResult_t terseCommResetResidual(ncclComm_t comm, const char* name) try {
  terse::CompressionEngine* engine = nullptr;
  TERSE_CHECK(terse::compression_of(comm, "terseCommResetResidual", &engine));
  engine->reset_residuals(name == nullptr ? "" : name);
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseCommResetResidual");
}

// The 0.1.0 name of terseCommResetResidual, kept for programs built against it.
TERSE_API ncclResult_t terseResidualReset(ncclComm_t comm, const char* name) {
  return terseCommResetResidual(comm, name);
}

TERSE_API ncclResult_t terseCommSetPolicy(ncclComm_t comm, const char* yaml) try {
  terse::CompressionEngine* engine = nullptr;
  TERSE_CHECK(terse::compression_of(comm, "terseCommSetPolicy", &engine));
  if (yaml == nullptr) return terse::fail(ncclInvalidArgument, "terseCommSetPolicy: yaml is NULL");
  terse::Policy policy;
  TERSE_CHECK(terse::Policy::from_yaml(yaml, "terseCommSetPolicy", &policy));
  engine->set_policy(std::move(policy));
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseCommSetPolicy");
}

TERSE_API ncclResult_t terseCommSetCodec(ncclComm_t comm, const char* codec) try {
  terse::CompressionEngine* engine = nullptr;
  TERSE_CHECK(terse::compression_of(comm, "terseCommSetCodec", &engine));
  if (codec == nullptr) return terse::fail(ncclInvalidArgument, "terseCommSetCodec: codec is NULL");
  terse::Policy policy;
  if (std::string(codec) != "none") {
    if (terse::Policy::from_codec_spec(codec, &policy) != ncclSuccess) {
      return terse::fail(ncclInvalidArgument, "terseCommSetCodec: codec \"%s\": %s", codec,
                         terse::last_error());
    }
  }
  engine->set_policy(std::move(policy));
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseCommSetCodec");
}

TERSE_API ncclResult_t terseCommDecide(ncclComm_t comm, const terseTensor* tensor, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, char* codec,
                                       size_t codec_bytes, char* algorithm,
                                       size_t algorithm_bytes) try {
  terse::Communicator* communicator = nullptr;
  TERSE_CHECK(terse::engine_of(comm, "terseCommDecide", &communicator));
  if (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes) {
    return terse::fail(ncclInvalidArgument, "terseCommDecide: datatype %d is not an ncclDataType_t",
                       static_cast<int>(datatype));
  }
  terse::CollectiveArgs args;
  args.kind = terse::CollectiveKind::kAllReduce;
  args.count = count;
  args.type = datatype;
  const void* device_scalar = nullptr;  // a decision never reads the scalar
  TERSE_CHECK(terse::resolve_reduce_op(comm, static_cast<int>(op), datatype, communicator->nranks(),
                                       &args.op, &device_scalar));
  if (tensor != nullptr) {
    std::shared_ptr<const terse::TensorRequest> request;
    TERSE_CHECK(terse::describe_tensor(*tensor, count, &request));
    args.tensor = std::move(request);
  }
  std::string chosen_codec, chosen_algorithm;
  TERSE_CHECK(communicator->compression()->decide(args, &chosen_codec, &chosen_algorithm));
  terse::copy_text(chosen_codec, codec, codec_bytes);
  terse::copy_text(chosen_algorithm, algorithm, algorithm_bytes);
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseCommDecide");
}

TERSE_API ncclResult_t terseCodecErrorBound(const char* codec, size_t count, double* factor,
                                            terseNorm_t* norm) try {
  if (codec == nullptr || factor == nullptr || norm == nullptr) {
    return terse::fail(ncclInvalidArgument, "terseCodecErrorBound: %s is NULL",
                       codec == nullptr    ? "codec"
                       : factor == nullptr ? "factor"
                                           : "norm");
  }
  std::unique_ptr<terse::Codec> made;
  TERSE_CHECK(terse::create_codec(codec, &made));
  terse::CodecErrorBound bound;
  TERSE_CHECK(terse::codec_error_bound(*made, count, &bound));
  *factor = bound.factor;
  *norm = bound.norm == terse::BoundNorm::kL2 ? terseNormL2 : terseNormMax;
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseCodecErrorBound");
}

TERSE_API ncclResult_t terseAlgorithmLossySteps(const char* algorithm, int nranks, int* steps) try {
  if (algorithm == nullptr || steps == nullptr) {
    return terse::fail(ncclInvalidArgument, "terseAlgorithmLossySteps: %s is NULL",
                       algorithm == nullptr ? "algorithm" : "steps");
  }
  if (nranks < 1) {
    return terse::fail(ncclInvalidArgument, "terseAlgorithmLossySteps: nranks %d is below 1",
                       nranks);
  }
  const terse::CompressedAlgorithmInfo* info = terse::find_compressed_algorithm(algorithm);
  // A dense algorithm (or none) is exact.
  *steps = info == nullptr ? 0 : info->lossy_steps(nranks);
  return ncclSuccess;
} catch (...) {
  return terse::result_of_current_exception("terseAlgorithmLossySteps");
}
