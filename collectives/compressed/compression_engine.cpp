#include "collectives/compressed/compression_engine.h"

#include "collectives/compressed/run_compressed_algorithm.h"
#include "common/counter_rng.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <iterator>

#include "codecs/codec_registry.h"
#include "collectives/compressed/execution_backend.h"
#include "collectives/device_buffers.h"
#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Step counts and decision logs are kept per tensor key; anonymous buffers of a long run could
// otherwise grow them without end. Past this many keys they start over (steps restart at 0,
// which only matters to schedules with a start or end step).
constexpr size_t kMaxTrackedTensors = size_t{1} << 16;
// How often (in communicator steps) the tensors gone idle are looked for.
constexpr uint64_t kForgetSweepSteps = 64;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The matrix view a tensor request gives: shape[0] x the product of the rest.
MatrixShape shape_of(const TensorRequest* tensor, size_t count) {
  if (tensor == nullptr || tensor->shape.size() < 2) return MatrixShape{};
  size_t cols = 1;
  for (size_t d = 1; d < tensor->shape.size(); ++d) cols *= static_cast<size_t>(tensor->shape[d]);
  const size_t rows = static_cast<size_t>(tensor->shape[0]);
  if (rows * cols != count) return MatrixShape{};
  return MatrixShape{rows, cols};
}

}  // namespace

uint64_t CompressionEngine::dense_wire_bytes(uint64_t bytes, int nranks) {
  if (nranks <= 1) return 0;
  return 2 * bytes * static_cast<uint64_t>(nranks - 1) / static_cast<uint64_t>(nranks);
}

ncclResult_t CompressionEngine::create(Transport* transport, const std::string& dense_algorithm,
                                       size_t dense_piece_bytes,
                                       std::unique_ptr<CompressionEngine>* out) {
  static std::atomic<uint64_t> next_comm_id{1};
  std::unique_ptr<CompressionEngine> engine(new CompressionEngine());
  engine->transport_ = transport;
  engine->comm_id_ = next_comm_id.fetch_add(1);
  TERSE_CHECK(load_policy_from_env(&engine->policy_));
  Planner::Settings settings;
  settings.dense_forced = dense_algorithm;
  settings.dense_piece_bytes = dense_piece_bytes;
  const std::string forced = env_string("TERSE_COMPRESSED_ALGO", "");
  if (!forced.empty()) {
    settings.forced = find_compressed_algorithm(forced);
    if (settings.forced == nullptr) {
      return fail(ncclInvalidArgument, "TERSE_COMPRESSED_ALGO=%s: no such algorithm (known: %s)",
                  forced.c_str(), compressed_algorithm_names().c_str());
    }
  }
  TERSE_CHECK(parse_hierarchy_mode(env_string("TERSE_HIERARCHICAL", "auto"), &settings.hierarchy));
  uint64_t piece_bytes = 0;
  TERSE_CHECK(
      env_bytes("TERSE_COMPRESSED_PIECE_BYTES", kDefaultCompressedPieceBytes, &piece_bytes));
  if (piece_bytes == 0) {
    return fail(ncclInvalidArgument,
                "TERSE_COMPRESSED_PIECE_BYTES is 0; a pipeline piece needs a byte");
  }
  settings.piece_bytes = static_cast<size_t>(piece_bytes);
  uint64_t max_bytes = 0, idle_steps = 0;
  TERSE_CHECK(ResidualMemory::max_bytes_from_env(&max_bytes));
  TERSE_CHECK(ResidualMemory::idle_steps_from_env(&idle_steps));
  engine->residuals_ = std::make_unique<ResidualMemory>(max_bytes, idle_steps);
  CompressionEngine* self = engine.get();
  TERSE_CHECK(Planner::create(
      transport, settings,
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

ncclResult_t CompressionEngine::codec_for(const std::string& spec, const std::string& name,
                                          const CodecParams& params, Codec** codec) {
  auto found = codecs_.find(spec);
  if (found == codecs_.end()) {
    CodecParams consumed = params;
    std::unique_ptr<Codec> made;
    TERSE_CHECK(create_codec(name, consumed, &made));
    found = codecs_.emplace(spec, std::move(made)).first;
  }
  *codec = found->second.get();
  return ncclSuccess;
}

ncclResult_t CompressionEngine::plan(const CollectiveArgs& args, bool may_agree,
                                     const PendingSteps* pending, Plan* plan) {
  *plan = Plan{};
  const TensorRequest* tensor = args.tensor.get();
  plan->key.comm = comm_id_;
  plan->key.address =
      args.tensor_address != 0 ? args.tensor_address : reinterpret_cast<uint64_t>(args.recv);
  plan->key.count = args.count;
  if (tensor != nullptr) plan->key.name = tensor->name;
  const auto step = steps_.find(plan->key);
  plan->step = step == steps_.end() ? 0 : step->second.calls;
  if (pending != nullptr) {
    const auto ahead = pending->steps_.find(plan->key);
    if (ahead != pending->steps_.end()) plan->step += ahead->second;
  }

  TensorInfo info;
  info.name = plan->key.name;
  info.bytes = args.count * nccl_type_size(args.type);
  DType dtype = DType::kFloat32;
  if (dtype_from_nccl(args.type, &dtype)) info.dtype = dtype;
  plan->key.dtype = dtype;
  plan->dtype = dtype;
  const bool linear = args.op.kind == ReduceKind::kSum && (!args.op.scale_input || args.op.average);
  info.op = args.op.average ? ncclAvg : ncclSum;
  info.comm_size = transport_->nranks();
  info.link = link_;
  info.step = plan->step;

  if (tensor != nullptr && !tensor->codec.empty()) {
    TERSE_CHECK(decide_with_spec(tensor->codec, info, &plan->decision));
  } else {
    plan->decision = policy_.decide(info);
  }
  if (!info.dtype || !linear) {
    plan->why = "not a float sum or average";
    return ncclSuccess;
  }
  if (!plan->decision.compressed()) {
    plan->why = plan->decision.rule < 0 ? "no rule matches" : "the rule says none now";
    return ncclSuccess;
  }
  if (args.count == 0 || transport_->nranks() == 1) {
    plan->why = args.count == 0 ? "empty" : "one rank";
    return ncclSuccess;
  }
  plan->shape = shape_of(tensor, args.count);
  if (plan->decision.codec == kAutoCodec) {
    plan->automatic = true;
    TERSE_CHECK(plan_call(nullptr, plan->decision.max_rel_err, may_agree, plan));
    if (plan->codec == nullptr) {
      plan->why = "auto: the uncompressed allreduce is predicted fastest, " + plan->call.describe();
      plan->decision.spec = plan->decision.codec = "none";
      return ncclSuccess;
    }
    // The chosen codec as a rule of its own would give it, with auto's memory and schedule.
    const Decision automatic = plan->decision;
    TERSE_CHECK(decide_with_spec(plan->codec->spec(), info, &plan->decision));
    plan->decision.memory = automatic.memory;
    plan->decision.rule = automatic.rule;
    plan->decision.warmup_progress = automatic.warmup_progress;
    plan->decision.fallback = automatic.fallback;
  } else {
    Codec* codec = nullptr;
    TERSE_CHECK(
        codec_for(plan->decision.spec, plan->decision.codec, plan->decision.params, &codec));
    TERSE_CHECK(plan_call(codec, 0, may_agree, plan));
  }
  plan->compressed = true;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::plan_call(Codec* codec, double max_rel_err, bool may_agree,
                                          Plan* plan) {
  PlanRequest request;
  request.count = plan->key.count;
  request.dtype = plan->dtype;
  request.codec = codec;
  request.max_rel_err = max_rel_err;
  request.error_feedback = plan->decision.memory == MemoryKind::kResidual;
  request.may_agree = may_agree;
  TERSE_CHECK(planner_->plan(request, &plan->call));
  plan->codec = plan->call.codec;
  plan->algorithm = plan->call.algorithm;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::decide_with_spec(const std::string& spec, const TensorInfo& info,
                                                 Decision* decision) {
  // Parsed once per distinct spec: a per-call codec is usually the same every step.
  auto found = one_rule_policies_.find(spec);
  if (found == one_rule_policies_.end()) {
    Policy policy;
    TERSE_CHECK(Policy::from_codec_spec(spec, &policy));
    found = one_rule_policies_.emplace(spec, std::move(policy)).first;
  }
  *decision = found->second.decide(info);
  return ncclSuccess;
}

size_t CompressionEngine::LoggedPlanHash::operator()(const LoggedPlan& logged) const {
  uint64_t hash = TensorIdentityHash()(logged.key);
  hash = mix64(hash ^ logged.key.count);
  return static_cast<size_t>(mix64(hash ^ static_cast<uint64_t>(logged.type)));
}

void CompressionEngine::log_first_decision(const Plan& plan, const CollectiveArgs& args) {
  if (logged_.size() >= kMaxTrackedTensors) logged_.clear();
  if (!logged_.insert(LoggedPlan{plan.key, args.type}).second) return;
  if (plan.compressed) {
    TERSE_INFO("rank %d: %s: codec %s (rule %d, memory %s), algorithm %s%s%s; plan: %s",
               transport_->rank(), plan.key.describe().c_str(), plan.codec->spec().c_str(),
               plan.decision.rule, memory_kind_name(plan.decision.memory), plan.algorithm->name,
               plan.call.inner != nullptr ? " around " : "",
               plan.call.inner != nullptr ? plan.call.inner->name : "",
               plan.call.describe().c_str());
  } else {
    TERSE_INFO("rank %d: %s (%s x %zu): uncompressed, %s", transport_->rank(),
               plan.key.describe().c_str(), nccl_type_name(args.type), args.count,
               plan.why.c_str());
  }
}

void CompressionEngine::advance_clock(const Plan& plan) {
  comm_step_ = std::max(comm_step_, step_base_ + plan.step);
  if (steps_.size() >= kMaxTrackedTensors) {
    steps_.clear();
    step_base_ = comm_step_ + 1;  // steps restart at 0; the clock goes on from here
  }
  TensorRecord& record = steps_[plan.key];
  ++record.calls;
  record.last_used = comm_step_;
  residuals_->set_step(comm_step_);
  if (comm_step_ >= next_forget_) forget_idle_tensors();
}

void CompressionEngine::forget_idle_tensors() {
  next_forget_ = comm_step_ + kForgetSweepSteps;
  const uint64_t horizon = std::max(kForgetIdleSteps, residuals_->idle_steps());
  if (comm_step_ <= horizon) return;
  const uint64_t oldest_kept = comm_step_ - horizon;
  for (auto it = steps_.begin(); it != steps_.end();) {
    it = it->second.last_used < oldest_kept ? steps_.erase(it) : std::next(it);
  }
  const auto forgotten = [&](const TensorKey& key) { return steps_.count(key) == 0; };
  for (auto it = logged_.begin(); it != logged_.end();) {
    it = forgotten(it->key) ? logged_.erase(it) : std::next(it);
  }
  for (auto it = refused_.begin(); it != refused_.end();) {
    it = forgotten(it->first) ? refused_.erase(it) : std::next(it);
  }
}

bool CompressionEngine::needs_entry(const Plan& plan) const {
  return plan.decision.memory != MemoryKind::kNone ||
         plan.codec->stateful(plan.key.count, plan.dtype, plan.shape);
}

EntryOptions CompressionEngine::entry_options(const Plan& plan, Memory memory, void* stream) const {
  EntryOptions options;
  options.memory = memory;
  options.stream = stream;
  options.shape = plan.shape;
  if (plan.decision.memory == MemoryKind::kResidual) {
    options.stage_count = plan.call.stage_elements;
  }
  return options;
}

ncclResult_t CompressionEngine::switch_to_fallback(Plan* plan, bool may_agree, std::string* path) {
  const CodecChoice fallback = plan->decision.fallback;
  plan->compressed = false;
  *path = "uncompressed (the exact dense allreduce)";
  if (fallback.spec != "none") {
    Codec* codec = nullptr;
    TERSE_CHECK(codec_for(fallback.spec, fallback.name, fallback.params, &codec));
    Plan fallback_plan = *plan;
    if (plan_call(codec, 0, may_agree, &fallback_plan) == ncclSuccess) {
      plan->compressed = true;
      plan->codec = fallback_plan.codec;
      plan->algorithm = fallback_plan.algorithm;
      plan->call = fallback_plan.call;
      *path = "with its rule's fallback codec " + fallback.spec + " (memory none) through " +
              plan->algorithm->name;
    } else {
      *path += std::string(" (") + last_error() + ")";
    }
  }
  plan->decision.spec = fallback.spec;
  plan->decision.codec = fallback.name;
  plan->decision.params = fallback.params;
  plan->decision.memory = MemoryKind::kNone;
  return ncclSuccess;
}

ncclResult_t CompressionEngine::fall_back(const Admission& admission, Plan* plan) {
  const TensorKey key = plan->key;
  const uint64_t cap = residuals_->max_bytes();
  std::string path;
  TERSE_CHECK(switch_to_fallback(plan, /*may_agree=*/true, &path));
  ++stats_.fallback_calls;
  if (refused_.size() >= kMaxTrackedTensors) refused_.clear();
  auto [known, first] = refused_.emplace(key, true);
  if (!first) {
    if (!known->second) {
      known->second = true;
      TERSE_INFO("rank %d: residual memory does not admit %s again; reduced %s", transport_->rank(),
                 key.describe().c_str(), path.c_str());
    }
    return ncclSuccess;
  }
  ++stats_.residual_refused;
  if (admission.needed > cap) {
    TERSE_WARN("rank %d: residual memory does not admit %s: it needs %" PRIu64
               " bytes, more than the whole cap of %" PRIu64
               " bytes (TERSE_MEMORY_MAX_BYTES); it is reduced %s, without error feedback",
               transport_->rank(), key.describe().c_str(), admission.needed, cap, path.c_str());
  } else {
    TERSE_WARN("rank %d: residual memory does not admit %s: it needs %" PRIu64
               " bytes, and %" PRIu64 " of the cap of %" PRIu64
               " bytes (TERSE_MEMORY_MAX_BYTES) are held by tensors used in the last %" PRIu64
               " steps (TERSE_MEMORY_IDLE_STEPS); until it fits it is reduced %s, without error "
               "feedback",
               transport_->rank(), key.describe().c_str(), admission.needed, admission.in_use, cap,
               residuals_->idle_steps(), path.c_str());
  }
  return ncclSuccess;
}

void CompressionEngine::note_admitted(const TensorKey& key) {
  auto known = refused_.find(key);
  if (known == refused_.end() || !known->second) return;
  known->second = false;
  TERSE_INFO("rank %d: residual memory admits %s now: error feedback from here on",
             transport_->rank(), key.describe().c_str());
}

ncclResult_t CompressionEngine::allreduce(const CollectiveArgs& args,
                                          const AlgorithmContext& context, bool* handled) {
  *handled = false;
  std::unique_lock<std::mutex> lock(mutex_);
  // The common case of an application without any compression: nothing to decide.
  if (policy_.rules().empty() && args.tensor == nullptr) return ncclSuccess;
  Plan plan;
  TERSE_CHECK(this->plan(args, /*may_agree=*/true, /*pending=*/nullptr, &plan));
  advance_clock(plan);
  log_first_decision(plan, args);
  // `auto` plans uncompressed calls too; their prediction goes with the dense call's record.
  stats_.last_inner_algorithm.clear();
  stats_.last_predicted_seconds =
      plan.call.chosen >= 0
          ? plan.call.candidates[static_cast<size_t>(plan.call.chosen)].prediction.seconds
          : 0;
  if (!plan.compressed) return ncclSuccess;

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
  lock.lock();
  if (result != ncclSuccess) return result;
  record(plan.decision.spec, plan.algorithm->name, args.count * dtype_size(plan.dtype),
         transport_->bytes_sent() - sent_before, counters, seconds_since(start), true);
  stats_.last_seed = compressed.encode.seed;
  stats_.last_step = plan.step;
  stats_.last_piece_bytes = plan.call.piece_bytes;
  stats_.last_inner_algorithm = plan.call.inner != nullptr ? plan.call.inner->name : "";
  stats_.last_predicted_seconds =
      plan.call.chosen >= 0
          ? plan.call.candidates[static_cast<size_t>(plan.call.chosen)].prediction.seconds
          : 0;
  return ncclSuccess;
}

void CompressionEngine::record_dense(const CollectiveArgs& args, const char* algorithm,
                                     uint64_t wire_bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  record("none", algorithm, args.count * nccl_type_size(args.type), wire_bytes,
         CompressionCounters{}, seconds, false);
}

ncclResult_t CompressionEngine::hand_off_uncompressed(const CollectiveArgs& args,
                                                      const PendingSteps* pending, bool* elsewhere,
                                                      HandOff* hand_off) {
  *elsewhere = false;
  *hand_off = HandOff{};
  std::lock_guard<std::mutex> lock(mutex_);
  if (!policy_.rules().empty() || args.tensor != nullptr) {
    TERSE_CHECK(this->plan(args, /*may_agree=*/false, pending, &hand_off->plan));
    const Plan& plan = hand_off->plan;
    if (plan.compressed || (plan.automatic && !plan.call.agreed)) return ncclSuccess;
    hand_off->planned = true;
  }
  hand_off->args = args;
  *elsewhere = true;
  return ncclSuccess;
}

void CompressionEngine::count_hand_off(HandOff hand_off, const char* runner,
                                       PendingSteps* pending) {
  hand_off.runner = runner;
  if (pending != nullptr) {
    if (hand_off.planned) ++pending->steps_[hand_off.plan.key];
    pending->hand_offs_.push_back(std::move(hand_off));
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  count_hand_off_locked(hand_off);
}

void CompressionEngine::count_hand_off_locked(const HandOff& hand_off) {
  // At the step it was planned at: a group's hand-offs are counted in issue order, each planned
  // after the steps of those before it.
  if (hand_off.planned) {
    advance_clock(hand_off.plan);
    log_first_decision(hand_off.plan, hand_off.args);
  }
  record("none", hand_off.runner, hand_off.args.count * nccl_type_size(hand_off.args.type), 0,
         CompressionCounters{}, 0, false);
}

void CompressionEngine::commit(PendingSteps* pending) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const HandOff& hand_off : pending->hand_offs_) count_hand_off_locked(hand_off);
  pending->hand_offs_.clear();
  pending->steps_.clear();
}

ncclResult_t CompressionEngine::simulate(const CollectiveArgs& args, const char* dense_algorithm,
                                         PendingSteps* pending, double* seconds) {
  *seconds = 0;
  if (args.count == 0) return ncclSuccess;  // nothing moves
  std::lock_guard<std::mutex> lock(mutex_);
  if (args.kind == CollectiveKind::kAllReduce &&
      (!policy_.rules().empty() || args.tensor != nullptr)) {
    Plan plan;
    TERSE_CHECK(predict(args, pending, &plan));
    ++pending->steps_[plan.key];
    if (plan.compressed) {
      *seconds = plan.call.candidates[static_cast<size_t>(plan.call.chosen)].prediction.seconds;
      return ncclSuccess;
    }
  }
  *seconds = planner_->predict_uncompressed(args.kind, dense_algorithm, args.count,
                                            nccl_type_size(args.type));
  return ncclSuccess;
}

ncclResult_t CompressionEngine::prepare_hand_off() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<PolicyRule>& rules = policy_.rules();
  const bool automatic = std::any_of(rules.begin(), rules.end(), [](const PolicyRule& rule) {
    return rule.codec.name == kAutoCodec;
  });
  return automatic ? planner_->agree_auto_speeds() : ncclSuccess;
}

void CompressionEngine::record(const std::string& codec, const std::string& algorithm,
                               uint64_t raw_bytes, uint64_t wire_bytes,
                               const CompressionCounters& counters, double seconds,
                               bool compressed) {
  // Rows are named by codec name (the spec up to ':'); last_codec keeps the whole spec.
  const std::string codec_name = codec.substr(0, codec.find(':'));
  auto row =
      std::find_if(stats_.rows.begin(), stats_.rows.end(), [&](const CompressionStatsRow& r) {
        return r.codec == codec_name && r.algorithm == algorithm;
      });
  if (row == stats_.rows.end()) {
    stats_.rows.push_back(CompressionStatsRow{codec_name, algorithm});
    row = stats_.rows.end() - 1;
  }
  ++row->calls;
  row->raw_bytes += raw_bytes;
  row->wire_bytes += wire_bytes;
  row->dense_wire_bytes += dense_wire_bytes(raw_bytes, transport_->nranks());
  row->encode_seconds += counters.encode_seconds;
  row->decode_seconds += counters.decode_seconds;
  row->seconds += seconds;
  stats_.pcie_bytes_to_host += counters.pcie_bytes_to_host;
  stats_.pcie_bytes_to_device += counters.pcie_bytes_to_device;
  ++stats_.calls;
  if (compressed) ++stats_.compressed_calls;
  stats_.last_codec = codec;
  stats_.last_algorithm = algorithm;
}

CompressionStats CompressionEngine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CompressionEngine::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = CompressionStats{};
}

void CompressionEngine::set_policy(Policy policy) {
  std::lock_guard<std::mutex> lock(mutex_);
  policy_ = std::move(policy);
  logged_.clear();
}

size_t CompressionEngine::reset_residuals(const std::string& name) {
  if (name.empty()) return residuals_->reset_comm(comm_id_);
  TensorKey key;
  key.comm = comm_id_;
  key.name = name;
  return residuals_->reset(key) ? 1 : 0;
}

ncclResult_t CompressionEngine::decide(const CollectiveArgs& args, std::string* codec,
                                       std::string* algorithm) {
  std::lock_guard<std::mutex> lock(mutex_);
  Plan plan;
  TERSE_CHECK(predict(args, /*pending=*/nullptr, &plan));
  *codec = plan.compressed ? plan.codec->spec() : "none";
  *algorithm = plan.compressed ? plan.algorithm->name : "";
  return ncclSuccess;
}

ncclResult_t CompressionEngine::predicts_backend(const CollectiveArgs& args, bool* backend) {
  *backend = false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (policy_.rules().empty() && args.tensor == nullptr) return ncclSuccess;
  Plan plan;
  TERSE_CHECK(predict(args, /*pending=*/nullptr, &plan));
  *backend = plan.compressed;
  return ncclSuccess;
}

void CompressionEngine::count_staging_copies(uint64_t to_host, uint64_t to_device) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.pcie_bytes_to_host += to_host;
  stats_.pcie_bytes_to_device += to_device;
}

ncclResult_t CompressionEngine::predict(const CollectiveArgs& args, const PendingSteps* pending,
                                        Plan* out) {
  Plan& plan = *out;
  TERSE_CHECK(this->plan(args, /*may_agree=*/false, pending, &plan));
  // As allreduce() would find residual memory at that step (an entry of the tensor that exists
  // counts as admitted).
  if (plan.compressed && needs_entry(plan) && !residuals_->contains(plan.key)) {
    const uint64_t bytes = ResidualMemory::entry_bytes(plan.key, *plan.codec, plan.decision.memory,
                                                       entry_options(plan));
    if (!residuals_->would_admit(bytes, std::max(comm_step_, step_base_ + plan.step))) {
      std::string path;
      TERSE_CHECK(switch_to_fallback(&plan, /*may_agree=*/false, &path));
    }
  }
  return ncclSuccess;
}

std::string CompressionEngine::ps_receive_codec(const std::string& name, size_t count,
                                                ncclDataType_t type) const {
  TensorInfo info;
  info.name = name;
  info.bytes = count * nccl_type_size(type);
  DType dtype = DType::kFloat32;
  if (dtype_from_nccl(type, &dtype)) info.dtype = dtype;
  info.op = ncclSum;
  info.comm_size = transport_->nranks();
  info.link = link_;
  std::lock_guard<std::mutex> lock(mutex_);
  return policy_.decide(info).ps_receive;
}

ResidualStats CompressionEngine::residual_stats() const {
  return residuals_->stats();
}

size_t CompressionEngine::tracked_tensors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_.size();
}

}  // namespace terse
