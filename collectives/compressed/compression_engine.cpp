#include "collectives/compressed/compression_engine.h"

#include "collectives/compressed/compressed_mutation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <iterator>

#include "codecs/codec_registry.h"
#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "topology/node_layout.h"
#include "transport/transport.h"

namespace terse {
namespace {

// Step counts and decision logs are kept per tensor key; anonymous buffers of a long run could
// otherwise grow them without end. Past this many keys they start over (steps restart at 0,
// which only matters to schedules with a start or end step).
constexpr size_t kMaxTrackedTensors = size_t{1} << 16;
// How often (in communicator steps) the tensors gone idle are looked for.
constexpr uint64_t kForgetSweepSteps = 64;
// `auto` compresses tensors from this size across nodes (see the file comment of the header).
constexpr uint64_t kAutoMinBytes = uint64_t{1} << 20;

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ncclResult_t parse_hierarchy(const std::string& text, HierarchyMode* mode) {
  if (text.empty() || text == "auto") {
    *mode = HierarchyMode::kAuto;
  } else if (text == "on" || text == "1") {
    *mode = HierarchyMode::kOn;
  } else if (text == "off" || text == "0") {
    *mode = HierarchyMode::kOff;
  } else {
    return fail(ncclInvalidArgument, "TERSE_HIERARCHICAL=%s: expected auto, on or off",
                text.c_str());
  }
  return ncclSuccess;
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

ncclResult_t CompressionEngine::create(Transport* transport,
                                       std::unique_ptr<CompressionEngine>* out) {
  static std::atomic<uint64_t> next_comm_id{1};
  std::unique_ptr<CompressionEngine> engine(new CompressionEngine());
  engine->transport_ = transport;
  engine->comm_id_ = next_comm_id.fetch_add(1);
  TERSE_CHECK(load_policy_from_env(&engine->policy_));
  const std::string forced = env_string("TERSE_COMPRESSED_ALGO", "");
  if (!forced.empty()) {
    engine->forced_ = find_compressed_algorithm(forced);
    if (engine->forced_ == nullptr) {
      return fail(ncclInvalidArgument, "TERSE_COMPRESSED_ALGO=%s: no such algorithm (known: %s)",
                  forced.c_str(), compressed_algorithm_names().c_str());
    }
  }
  TERSE_CHECK(parse_hierarchy(env_string("TERSE_HIERARCHICAL", "auto"), &engine->hierarchy_));
  uint64_t piece_bytes = 0;
  TERSE_CHECK(
      env_bytes("TERSE_COMPRESSED_PIECE_BYTES", kDefaultCompressedPieceBytes, &piece_bytes));
  if (piece_bytes == 0) {
    return fail(ncclInvalidArgument,
                "TERSE_COMPRESSED_PIECE_BYTES is 0; a pipeline piece needs a byte");
  }
  engine->piece_bytes_ = static_cast<size_t>(piece_bytes);
  uint64_t max_bytes = 0, idle_steps = 0;
  TERSE_CHECK(ResidualMemory::max_bytes_from_env(&max_bytes));
  TERSE_CHECK(ResidualMemory::idle_steps_from_env(&idle_steps));
  engine->residuals_ = std::make_unique<ResidualMemory>(max_bytes, idle_steps);
  const int n = transport->nranks();
  for (int r = 0; r < n; ++r) engine->hosts_.push_back(transport->host_identity(r));
  const NodeLayout nodes = group_into_nodes(engine->hosts_);
  engine->multi_node_ = nodes.multi_node();
  engine->node_with_several_ranks_ = nodes.node_with_several_ranks();
  engine->link_ = engine->multi_node_ ? LinkClass::kInter : LinkClass::kIntra;
  *out = std::move(engine);
  return ncclSuccess;
}

CompressionEngine::~CompressionEngine() = default;

PeerGroup CompressionEngine::whole_group() const {
  PeerGroup group = PeerGroup::whole(transport_->rank(), transport_->nranks());
  group.hosts = hosts_;
  return group;
}

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

const CompressedAlgorithmInfo* CompressionEngine::algorithm_for(const Codec& codec, size_t count,
                                                                size_t element_bytes) const {
  if (forced_ != nullptr) return forced_;
  const bool hierarchical =
      hierarchy_ == HierarchyMode::kOn
          ? multi_node_
          : hierarchy_ == HierarchyMode::kAuto && multi_node_ && node_with_several_ranks_;
  if (hierarchical) return find_compressed_algorithm("hierarchical");
  return default_compressed_algorithm(codec, count, element_bytes);
}

ncclResult_t CompressionEngine::plan(const CollectiveArgs& args, Plan* plan) {
  *plan = Plan{};
  const TensorRequest* tensor = args.tensor.get();
  plan->key.comm = comm_id_;
  plan->key.address =
      args.tensor_address != 0 ? args.tensor_address : reinterpret_cast<uint64_t>(args.recv);
  plan->key.count = args.count;
  if (tensor != nullptr) plan->key.name = tensor->name;
  const auto step = steps_.find(plan->key);
  plan->step = step == steps_.end() ? 0 : step->second.calls;

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
  if (plan->decision.codec == kAutoCodec) {
    const bool worth_it = link_ == LinkClass::kInter && info.bytes >= kAutoMinBytes;
    TERSE_CHECK(decide_with_spec(worth_it ? "int8" : "none", info, &plan->decision));
  }
  if (!plan->decision.compressed()) {
    plan->why = plan->decision.rule < 0 ? "no rule matches" : "the rule says none now";
    return ncclSuccess;
  }
  if (args.count == 0 || transport_->nranks() == 1) {
    plan->why = args.count == 0 ? "empty" : "one rank";
    return ncclSuccess;
  }
  TERSE_CHECK(
      codec_for(plan->decision.spec, plan->decision.codec, plan->decision.params, &plan->codec));
  plan->shape = shape_of(tensor, args.count);
  plan->algorithm = algorithm_for(*plan->codec, args.count, dtype_size(dtype));
  if (!plan->algorithm->accepts(*plan->codec, args.count)) {
    return fail(ncclInvalidArgument,
                "TERSE_COMPRESSED_ALGO=%s cannot run codec %s (it needs another family or a "
                "codec without per-tensor state; unset it to let terse choose)",
                plan->algorithm->name, plan->codec->spec().c_str());
  }
  plan->compressed = true;
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

void CompressionEngine::log_first_decision(const Plan& plan, const CollectiveArgs& args) {
  if (logged_.size() >= kMaxTrackedTensors) logged_.clear();
  if (!logged_.insert(plan.key).second) return;
  if (plan.compressed) {
    TERSE_INFO("rank %d: %s: codec %s (rule %d, memory %s), algorithm %s", transport_->rank(),
               plan.key.describe().c_str(), plan.codec->spec().c_str(), plan.decision.rule,
               memory_kind_name(plan.decision.memory), plan.algorithm->name);
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
    it = forgotten(*it) ? logged_.erase(it) : std::next(it);
  }
  for (auto it = refused_.begin(); it != refused_.end();) {
    it = forgotten(it->first) ? refused_.erase(it) : std::next(it);
  }
}

bool CompressionEngine::needs_entry(const Plan& plan) const {
  return plan.decision.memory != MemoryKind::kNone ||
         plan.codec->stateful(plan.key.count, plan.dtype, plan.shape);
}

EntryOptions CompressionEngine::entry_options(const Plan& plan) const {
  EntryOptions options;
  options.shape = plan.shape;
  if (plan.decision.memory == MemoryKind::kResidual) {
    options.stage_count =
        plan.algorithm->stage_elements(*plan.codec, plan.key.count, plan.dtype, whole_group());
  }
  return options;
}

ncclResult_t CompressionEngine::switch_to_fallback(Plan* plan, std::string* path) {
  const CodecChoice fallback = plan->decision.fallback;
  plan->compressed = false;
  *path = "uncompressed (the exact dense allreduce)";
  if (fallback.spec != "none") {
    Codec* codec = nullptr;
    TERSE_CHECK(codec_for(fallback.spec, fallback.name, fallback.params, &codec));
    const CompressedAlgorithmInfo* algorithm =
        algorithm_for(*codec, plan->key.count, dtype_size(plan->dtype));
    if (algorithm->accepts(*codec, plan->key.count)) {
      plan->compressed = true;
      plan->codec = codec;
      plan->algorithm = algorithm;
      *path = "with its rule's fallback codec " + fallback.spec + " (memory none) through " +
              algorithm->name;
    } else {
      *path += " (TERSE_COMPRESSED_ALGO=" + std::string(algorithm->name) +
               " cannot run its fallback codec " + fallback.spec + ")";
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
  TERSE_CHECK(switch_to_fallback(plan, &path));
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
  TERSE_CHECK(this->plan(args, &plan));
  advance_clock(plan);
  log_first_decision(plan, args);
  if (!plan.compressed) return ncclSuccess;

  std::shared_ptr<ResidualEntry> entry;
  if (needs_entry(plan)) {
    Admission admission;
    TERSE_CHECK(residuals_->acquire(plan.key, *plan.codec, plan.decision.memory,
                                    entry_options(plan), &entry, &admission));
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
      mix(mix(transport_->communicator()) ^ (uint64_t{context.sequence} << 20) ^ plan.step);
  compressed.encode.step = plan.step;
  compressed.encode.warmup_progress = plan.decision.warmup_progress;
  compressed.encode.shape = plan.shape;

  CompressedContext compressed_context;
  compressed_context.transport = transport_;
  compressed_context.sequence = context.sequence;
  compressed_context.deadline = context.deadline;
  compressed_context.group = whole_group();
  compressed_context.piece_bytes = piece_bytes_;
  compressed_context.scratch = &scratch_;
  CompressionCounters counters;
  compressed_context.counters = &counters;

  *handled = true;
  const uint64_t sent_before = transport_->bytes_sent();
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t result =
      run_compressed_algorithm(*plan.algorithm, compressed, compressed_context);
  if (result != ncclSuccess) return result;
  record(plan.decision.spec, plan.algorithm->name, args.count * dtype_size(plan.dtype),
         transport_->bytes_sent() - sent_before, counters, seconds_since(start), true);
  stats_.last_seed = compressed.encode.seed;
  stats_.last_step = plan.step;
  stats_.last_piece_bytes = piece_bytes_;
  return ncclSuccess;
}

void CompressionEngine::record_dense(const CollectiveArgs& args, const char* algorithm,
                                     uint64_t wire_bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  record("none", algorithm, args.count * nccl_type_size(args.type), wire_bytes,
         CompressionCounters{}, seconds, false);
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
  TERSE_CHECK(this->plan(args, &plan));
  // As allreduce() would find residual memory at that step (an entry of the tensor that exists
  // counts as admitted).
  if (plan.compressed && needs_entry(plan) && !residuals_->contains(plan.key)) {
    const uint64_t bytes = ResidualMemory::entry_bytes(plan.key, *plan.codec, plan.decision.memory,
                                                       entry_options(plan));
    if (!residuals_->would_admit(bytes, std::max(comm_step_, step_base_ + plan.step))) {
      std::string path;
      TERSE_CHECK(switch_to_fallback(&plan, &path));
    }
  }
  *codec = plan.compressed ? plan.codec->spec() : "none";
  *algorithm = plan.compressed ? plan.algorithm->name : "";
  return ncclSuccess;
}

ResidualStats CompressionEngine::residual_stats() const {
  return residuals_->stats();
}

size_t CompressionEngine::tracked_tensors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_.size();
}

}  // namespace terse
