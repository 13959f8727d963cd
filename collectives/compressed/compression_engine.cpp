// The compression engine's orchestration (compression_engine.h): its creation from the agreed
// settings, and the flow of an allreduce: plan, tensor clock, residual entry, the compressed run,
// its record.
#include "collectives/compressed/compression_engine.h"

#include "collectives/compressed/run_compressed_algorithm.h"
#include "common/counter_rng.h"

#include <atomic>
#include <chrono>

#include "codecs/codec_registry.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/device_buffers.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

ncclResult_t CompressionEngine::create(Transport* transport, const CompressionSettings& settings,
                                       std::unique_ptr<CompressionEngine>* out) {
  static std::atomic<uint64_t> next_comm_id{1};
  std::unique_ptr<CompressionEngine> engine(new CompressionEngine());
  engine->transport_ = transport;
  engine->comm_id_ = next_comm_id.fetch_add(1);
  engine->policy_ = settings.policy;
  engine->residuals_ =
      std::make_unique<ResidualMemory>(settings.memory_max_bytes, settings.memory_idle_steps);
  CompressionEngine* self = engine.get();
  TERSE_CHECK(Planner::create(
      transport, settings.planner,
      [self](const std::string& spec, Codec** codec) {
        std::string name;
        CodecParams params;
        TERSE_CHECK(parse_codec_spec(spec, &name, &params));
        return self->codec_for(spec, name, params, codec);
      },
      &engine->planner_));
  engine->link_ = engine->planner_->multi_node() ? LinkClass::kInter : LinkClass::kIntra;
  *out = std::move(engine);
  return ncclSuccess;
}

CompressionEngine::~CompressionEngine() = default;

ncclResult_t CompressionEngine::allreduce(const CollectiveArgs& args,
                                          const AlgorithmContext& context, bool* handled) {
  *handled = false;
  std::unique_lock<std::mutex> lock(mutex_);
  // The common case of an application without any compression: nothing to decide.
  dense_to_observe_.reset();
  if (policy_.rules().empty() && args.tensor == nullptr) return ncclSuccess;
  TERSE_CHECK(planner_->begin_call());
  Plan plan;
  TERSE_CHECK(this->plan(args, /*may_agree=*/true, /*pending=*/nullptr, &plan));
  advance_clock(plan);
  log_first_decision(plan, args);
  // `auto` plans uncompressed calls too; their prediction goes with the dense call's record.
  stats_.last_call.inner_algorithm.clear();
  stats_.last_call.predicted_seconds =
      plan.call.chosen >= 0
          ? plan.call.candidates[static_cast<size_t>(plan.call.chosen)].prediction.seconds
          : 0;
  if (!plan.compressed) {
    // The communicator runs it; an uncompressed call auto chose tells the planner its time.
    if (plan.automatic && plan.call.chosen >= 0 && args.device == nullptr) {
      dense_to_observe_ = DenseCall{plan.request, plan.call};
    }
    return ncclSuccess;
  }

  // Device buffers run on the device backend (every compressed algorithm is written against
  // it), with their residual in device memory (device_buffers.h).
  DeviceBuffers* device = args.device;
  std::shared_ptr<ResidualEntry> entry;
  if (needs_entry(plan)) {
    Admission admission;
    const bool on_device = device != nullptr;
    TERSE_CHECK(residuals_->acquire(plan.key, *plan.codec, plan.decision.memory,
                                    entry_options(plan, on_device ? Memory::kDevice : Memory::kHost,
                                                  on_device ? device->stream() : nullptr),
                                    &entry, &admission));
    if (entry == nullptr) {
      TERSE_CHECK(fall_back(admission, &plan));
      if (!plan.compressed) return ncclSuccess;  // the caller runs the dense allreduce
    } else {
      note_admitted(plan.key);
    }
  }
  CompressedArgs compressed;
  compressed.send = args.send;
  compressed.recv = args.recv;
  compressed.count = args.count;
  compressed.dtype = plan.dtype;
  compressed.result_scale = args.op.average ? args.op.input_scale : 1.0;
  compressed.codec = plan.codec;
  compressed.entry = entry.get();
  compressed.encode.seed =
      mix64(mix64(transport_->communicator()) ^ (uint64_t{context.sequence} << 20) ^ plan.step);
  compressed.encode.step = plan.step;
  compressed.encode.warmup_progress = plan.decision.warmup_progress;
  compressed.encode.shape = plan.shape;

  CompressedContext compressed_context;
  compressed_context.transport = transport_;
  compressed_context.sequence = context.sequence;
  compressed_context.deadline = context.deadline;
  compressed_context.group = plan.call.group;
  compressed_context.inner = plan.call.inner;
  compressed_context.piece_bytes = plan.call.piece_bytes;
  compressed_context.scratch = &scratch_;
  CompressionCounters counters;
  compressed_context.counters = &counters;
  compressed_context.backend = device != nullptr ? device->backend() : nullptr;

  *handled = true;
  const uint64_t sent_before = transport_->bytes_sent();
  const auto start = std::chrono::steady_clock::now();
  // The network part runs without the engine's lock, so that the C API (statistics, policy,
  // residual resets) never waits for a transfer. The communicator's call lock keeps its other
  // calls out, and what the run uses stays put: codecs are never removed, the entry is shared.
  lock.unlock();
  const ncclResult_t result =
      run_compressed_algorithm(*plan.algorithm, compressed, compressed_context);
  const double seconds = seconds_since(start);
  lock.lock();
  if (result != ncclSuccess) return result;
  record(plan.decision.spec, plan.algorithm->name, args.count * dtype_size(plan.dtype),
         transport_->bytes_sent() - sent_before, counters, seconds, true);
  // Calls on host buffers teach the planner (a device call's time is the GPU's and the copies').
  // A call that fell back ran another plan than the planner's.
  if (device == nullptr && plan.codec == plan.call.codec) {
    planner_->observe(plan.request, plan.call,
                      Planner::Measured{seconds, counters.encode_seconds, counters.decode_seconds});
  }
  stats_.last_call.seed = compressed.encode.seed;
  stats_.last_call.step = plan.step;
  stats_.last_call.piece_bytes = plan.call.piece_bytes;
  stats_.last_call.inner_algorithm = plan.call.inner != nullptr ? plan.call.inner->name : "";
  stats_.last_call.predicted_seconds =
      plan.call.chosen >= 0
          ? plan.call.candidates[static_cast<size_t>(plan.call.chosen)].prediction.seconds
          : 0;
  return ncclSuccess;
}

}  // namespace terse
