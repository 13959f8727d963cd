#include "compressed_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>

#include "codecs/codec_registry.h"
#include "collectives/communicator.h"
#include "collectives/compressed/compressed_error_bound.h"
#include "collectives/compressed/memory/tensor_key.h"
#include "collectives/compressed/run_compressed_algorithm.h"
#include "common/counter_rng.h"
#include "common/result.h"
#include "heap_allocations.h"

namespace terse {
namespace test {
namespace {

constexpr uint64_t kTestComm = 0x7e57;

// The one tensor every call of the harness reduces.
TensorKey test_key(size_t count, DType dtype) {
  TensorKey key;
  key.comm = kTestComm;
  key.name = "test.tensor";
  key.count = count;
  key.dtype = dtype;
  return key;
}

}  // namespace

std::vector<float> make_rank_input(int rank, size_t count, uint64_t salt) {
  std::vector<float> values(count);
  const uint64_t seed = salt * 1000003u + static_cast<uint64_t>(rank) * 7919u + 17u;
  for (size_t i = 0; i < count; ++i) {
    const double smooth = 0.5 * std::sin(0.01 * double(i) + double(rank));
    const double noise = 2.0 * counter_uniform(seed, i) - 1.0;
    values[i] = static_cast<float>(smooth + 0.5 * noise);
  }
  return values;
}

std::vector<uint8_t> to_dtype(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) store_element(bytes.data(), dtype, i, values[i]);
  return bytes;
}

std::vector<double> from_dtype(const std::vector<uint8_t>& bytes, DType dtype, size_t count) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = load_element(bytes.data(), dtype, i);
  return values;
}

CompressedRanks::CompressedRanks(int nranks, const std::string& codec_spec, MemoryKind memory,
                                 std::vector<std::string> hosts)
    : ranks_(static_cast<size_t>(nranks)), memory_(memory), hosts_(std::move(hosts)) {
  world_ = std::make_unique<CommunicatorWorld>(nranks);
  if (!world_->ok()) {
    ok_ = false;
    error_ = world_->error();
    return;
  }
  use_codec(codec_spec, memory);
}

void CompressedRanks::use_codec(const std::string& codec_spec, MemoryKind memory) {
  memory_ = memory;
  for (Rank& rank : ranks_) {
    if (create_codec(codec_spec, &rank.codec) != ncclSuccess) {
      ok_ = false;
      error_ = last_error();
      return;
    }
    rank.residuals = std::make_unique<ResidualMemory>();
  }
  model_ = std::make_unique<model::CompressedModel>(codec_spec, nranks(), memory);
  if (!model_->ok()) {
    ok_ = false;
    error_ = model_->error();
  }
}

void CompressedRanks::reset_memory() {
  for (Rank& rank : ranks_) rank.residuals->reset_all();
  model_->reset();
}

CompressedRanks::~CompressedRanks() = default;

std::vector<ncclResult_t> CompressedRanks::allreduce(
    const CompressedAlgorithmInfo& algorithm, DType dtype, size_t count,
    const std::vector<std::vector<uint8_t>>& inputs, std::vector<std::vector<uint8_t>>* outputs,
    double result_scale, bool in_place, uint64_t step, std::vector<std::string>* errors) {
  const int n = nranks();
  std::vector<ncclResult_t> results(static_cast<size_t>(n), ncclSuccess);
  outputs->assign(static_cast<size_t>(n), std::vector<uint8_t>(count * dtype_size(dtype)));
  if (errors != nullptr) errors->assign(static_cast<size_t>(n), "");
  const uint32_t sequence = next_sequence_++;
  world_->run([&](Communicator& comm) {
    const int r = comm.rank();
    Rank& rank = ranks_[static_cast<size_t>(r)];
    std::vector<uint8_t>& out = (*outputs)[static_cast<size_t>(r)];
    if (in_place) out = inputs[static_cast<size_t>(r)];

    CompressedArgs args;
    args.send = in_place ? out.data() : inputs[static_cast<size_t>(r)].data();
    args.recv = out.data();
    args.count = count;
    args.dtype = dtype;
    args.result_scale = result_scale;
    args.codec = rank.codec.get();
    args.encode.seed = 0x5eed0000u + step;
    args.encode.step = step;

    const std::unique_lock<std::mutex> held = comm.hold_transport();
    CompressedContext context;
    context.transport = comm.transport();
    context.sequence = sequence;
    context.deadline = comm.transport()->default_deadline();
    context.group = PeerGroup::whole(r, n);
    context.group.hosts = hosts_;

    // The entry as the compression engine asks for it: with the algorithm's stage residual.
    std::shared_ptr<ResidualEntry> entry;
    ncclResult_t result = ncclSuccess;
    const bool needs_entry =
        memory_ != MemoryKind::kNone || rank.codec->stateful(count, dtype, MatrixShape{});
    if (needs_entry) {
      EntryOptions options;
      if (memory_ == MemoryKind::kResidual) {
        options.stage_count = algorithm.stage_elements(*rank.codec, count, dtype, context.group);
      }
      result =
          rank.residuals->acquire(test_key(count, dtype), *rank.codec, memory_, options, &entry);
      if (result == ncclSuccess && entry == nullptr) {
        result = fail(ncclInternalError, "the harness's residual memory did not admit the tensor");
      }
      args.entry = entry.get();
    }
    context.piece_bytes = piece_bytes_;
    context.scratch = &rank.scratch;
    context.counters = &rank.counters;
    if (result == ncclSuccess) {
      HeapAllocationScope heap;
      result = run_compressed_algorithm(algorithm, args, context);
      rank.allocations = heap.count();
    }
    results[static_cast<size_t>(r)] = result;
    if (result != ncclSuccess && errors != nullptr)
      (*errors)[static_cast<size_t>(r)] = last_error();
  });
  model::CallSpec spec;
  spec.algorithm = algorithm.name;
  spec.dtype = dtype;
  spec.count = count;
  spec.seed = 0x5eed0000u + step;
  spec.step = step;
  spec.piece_bytes = piece_bytes_;
  spec.result_scale = result_scale;
  spec.hosts = hosts_;
  expected_ = model_->call(spec, inputs);
  last_dtype_ = dtype;
  last_count_ = count;
  last_sra_ = std::string(algorithm.name) == "sra" ||
              std::string(algorithm.name) == "hierarchical" ||
              std::string(algorithm.name) == "rail";
  return results;
}

std::vector<float> CompressedRanks::owner_residual(int rank, size_t chunk) {
  const std::shared_ptr<ResidualEntry> entry =
      ranks_[static_cast<size_t>(rank)].residuals->find(test_key(last_count_, last_dtype_));
  if (entry == nullptr || entry->stage_residual() == nullptr || entry->stage_count() < chunk) {
    return {};
  }
  return std::vector<float>(entry->stage_residual(), entry->stage_residual() + chunk);
}

ModelCheck CompressedRanks::check_against_model(const std::vector<std::vector<uint8_t>>& outputs) {
  ModelCheck check;
  const model::Comparison results = model::compare_all(expected_, last_dtype_, outputs);
  check.result_mismatches = results.mismatches;
  check.max_relative_error =
      results.max_expected > 0 ? results.max_error / results.max_expected : results.max_error;
  if (!results.first.empty()) check.first = results.first;
  if (memory_ != MemoryKind::kResidual) return check;
  for (int r = 0; r < nranks(); ++r) {
    const std::string who = "rank " + std::to_string(r) + " ";
    model::Comparison residual =
        model::compare_residual(model_->residual(r), this->residual(r, last_count_, last_dtype_),
                                expected_.residual_tolerance);
    // An entry never used still reads as zeros: the model's untouched residual.
    check.residual_mismatches += residual.mismatches;
    if (!residual.first.empty() && check.first.size() < 400)
      check.first += "; " + who + residual.first;
    const std::vector<float>& model_owner = model_->owner_residual(r);
    if (last_sra_ || !model_owner.empty()) {
      model::Comparison owner = model::compare_residual(
          model_owner, owner_residual(r, model_owner.size()), expected_.residual_tolerance);
      if (model_owner.empty()) owner = model::Comparison{};
      check.residual_mismatches += owner.mismatches;
      if (!owner.first.empty() && check.first.size() < 400) {
        check.first += "; " + who + "owner " + owner.first;
      }
    }
  }
  return check;
}

std::vector<float> CompressedRanks::residual(int rank, size_t count, DType dtype) {
  const std::shared_ptr<ResidualEntry> entry =
      ranks_[static_cast<size_t>(rank)].residuals->find(test_key(count, dtype));
  if (entry == nullptr || entry->residual() == nullptr || entry->key().count != count) return {};
  return std::vector<float>(entry->residual(), entry->residual() + count);
}

CaseReport check_case(const std::string& label, const Codec& codec, int lossy_steps, DType dtype,
                      size_t count, const std::vector<std::vector<uint8_t>>& inputs,
                      const std::vector<std::vector<uint8_t>>& outputs, double result_scale) {
  CaseReport report;
  CodecErrorBound codec_bound;
  EXPECT_EQ(codec_error_bound(codec, count, &codec_bound), ncclSuccess) << last_error();
  std::vector<double> exact(count, 0.0);
  double norm_sum = 0;
  for (const auto& input : inputs) {
    const std::vector<double> values = from_dtype(input, dtype, count);
    for (size_t i = 0; i < count; ++i) exact[i] += values[i];
    norm_sum += bound_norm(codec_bound.norm, values.data(), count);
  }
  double max_abs = 0;
  for (double& value : exact) {
    value *= result_scale;
    max_abs = std::max(max_abs, std::fabs(value));
  }
  report.bound =
      allreduce_error_bound(codec_bound, lossy_steps, norm_sum, result_scale, max_abs, dtype);
  int reported = 0;
  for (size_t r = 0; r < outputs.size(); ++r) {
    const std::vector<double> got = from_dtype(outputs[r], dtype, count);
    for (size_t i = 0; i < count; ++i) {
      const double error = std::fabs(got[i] - exact[i]);
      if (!(error <= report.bound)) {
        ++report.outside;
        if (reported++ < 3) {
          ADD_FAILURE() << label << ": rank " << r << " element " << i << " = " << got[i]
                        << ", exact " << exact[i] << ", error " << error << " > bound "
                        << report.bound;
        }
      }
      if (std::isfinite(error)) report.max_error = std::max(report.max_error, error);
    }
    if (outputs[r] != outputs[0]) {
      report.identical = false;
      ADD_FAILURE() << label << ": rank " << r << "'s result differs from rank 0's";
    }
  }
  return report;
}

CaseReport run_and_check(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                         DType dtype, size_t count, uint64_t salt, double result_scale,
                         bool in_place) {
  const int n = ranks.nranks();
  ranks.reset_memory();
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(to_dtype(make_rank_input(r, count, salt), dtype));
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<std::string> errors;
  const std::string label = std::string(algorithm.name) + " " + ranks.codec(0).spec() +
                            " n=" + std::to_string(n) + " count=" + std::to_string(count) + " " +
                            dtype_name(dtype) + (in_place ? " in place" : "");
  const std::vector<ncclResult_t> results = ranks.allreduce(
      algorithm, dtype, count, inputs, &outputs, result_scale, in_place, salt, &errors);
  for (int r = 0; r < n; ++r) {
    if (results[static_cast<size_t>(r)] != ncclSuccess) {
      ADD_FAILURE() << label << ": rank " << r << " failed: " << errors[static_cast<size_t>(r)];
      return CaseReport{};
    }
  }
  CaseReport report = check_case(label, ranks.codec(0), algorithm.lossy_steps(n), dtype, count,
                                 inputs, outputs, result_scale);
  report.model = ranks.check_against_model(outputs);
  EXPECT_TRUE(report.model.ok()) << label << ": " << report.model.result_mismatches
                                 << " result and " << report.model.residual_mismatches
                                 << " residual elements differ from the model: "
                                 << report.model.first;
  return report;
}

namespace {

// One call on fresh inputs; false (with `failure` set) when a rank failed.
bool call_once(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm, DType dtype,
               size_t count, uint64_t salt, double result_scale,
               std::vector<std::vector<uint8_t>>* inputs,
               std::vector<std::vector<uint8_t>>* outputs, std::string* failure) {
  const int n = ranks.nranks();
  inputs->clear();
  for (int r = 0; r < n; ++r) inputs->push_back(to_dtype(make_rank_input(r, count, salt), dtype));
  std::vector<std::string> errors;
  const std::vector<ncclResult_t> results = ranks.allreduce(
      algorithm, dtype, count, *inputs, outputs, result_scale, false, salt, &errors);
  for (int r = 0; r < n; ++r) {
    if (results[static_cast<size_t>(r)] != ncclSuccess) {
      *failure = "rank " + std::to_string(r) + " failed: " + errors[static_cast<size_t>(r)];
      return false;
    }
  }
  return true;
}

}  // namespace

ModelCheck run_model_steps(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                           DType dtype, size_t count, int steps, uint64_t salt,
                           double result_scale) {
  ranks.reset_memory();
  std::vector<std::vector<uint8_t>> inputs, outputs;
  ModelCheck worst;
  for (int step = 0; step < steps; ++step) {
    std::string failure;
    if (!call_once(ranks, algorithm, dtype, count, salt + static_cast<uint64_t>(step), result_scale,
                   &inputs, &outputs, &failure)) {
      worst.failure = failure;
      worst.first = failure;
      return worst;
    }
    ModelCheck check = ranks.check_against_model(outputs);
    worst.max_relative_error = std::max(worst.max_relative_error, check.max_relative_error);
    if (!check.ok()) {
      check.first = "step " + std::to_string(step) + ": " + check.first;
      return check;
    }
  }
  return worst;
}

ConservationReport run_conservation(CompressedRanks& ranks,
                                    const CompressedAlgorithmInfo& algorithm, size_t count,
                                    int steps, uint64_t salt) {
  const int n = ranks.nranks();
  ranks.reset_memory();
  ConservationReport report;
  std::vector<double> results(count, 0.0), inputs_sum(count, 0.0), magnitude(count, 0.0);
  std::vector<std::vector<uint8_t>> inputs, outputs;
  for (int step = 0; step < steps; ++step) {
    if (!call_once(ranks, algorithm, DType::kFloat32, count, salt + static_cast<uint64_t>(step),
                   1.0, &inputs, &outputs, &report.failure)) {
      return report;
    }
    for (int r = 0; r < n; ++r) {
      const std::vector<double> input = from_dtype(inputs[r], DType::kFloat32, count);
      for (size_t i = 0; i < count; ++i) {
        inputs_sum[i] += input[i];
        magnitude[i] += std::fabs(input[i]);
      }
    }
    const std::vector<double> result = from_dtype(outputs[0], DType::kFloat32, count);
    for (size_t i = 0; i < count; ++i) {
      results[i] += result[i];
      magnitude[i] += std::fabs(result[i]);
    }
    // Rounding happens at the size of what is encoded: inputs plus residuals.
    for (int r = 0; r < n; ++r) {
      const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
      for (size_t i = 0; i < residual.size(); ++i) magnitude[i] += std::fabs(residual[i]);
    }
  }
  for (int r = 0; r < n; ++r) {
    const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
    for (size_t i = 0; i < residual.size(); ++i) results[i] += residual[i];
    // The owner residual covers this rank's chunk of the group it owned (all ranks, or the
    // node leaders of a hierarchical call): the model knows which, and how long it is.
    const std::vector<float>& model_owner = ranks.reference().owner_residual(r);
    if (model_owner.empty()) continue;
    const std::vector<float> owner = ranks.owner_residual(r, model_owner.size());
    const size_t offset = ranks.reference().owner_offset(r);
    for (size_t i = 0; i < owner.size(); ++i) results[offset + i] += owner[i];
  }
  for (size_t i = 0; i < count; ++i) {
    const double gap = std::fabs(results[i] - inputs_sum[i]);
    const double tolerance = std::ldexp(magnitude[i], -20) + 1e-30;
    if (!(gap <= tolerance)) ++report.violations;
    if (!(gap <= report.gap)) {
      report.gap = gap;
      report.tolerance = tolerance;
    }
  }
  return report;
}

const std::vector<std::string>& reencoding_codecs() {
  static const std::vector<std::string> codecs = {"none",
                                                  "fp16",
                                                  "bf16",
                                                  "int8",
                                                  "int4",
                                                  "int2",
                                                  "int8:mode=absmax,rounding=stochastic",
                                                  "qsgd",
                                                  "terngrad",
                                                  "sign",
                                                  "topk:ratio=0.1",
                                                  "randomk:ratio=0.1",
                                                  "threshold:threshold=0.5",
                                                  "mxfp8",
                                                  "mxfp8:elem=e5m2,rounding=stochastic",
                                                  "mxfp4",
                                                  "nvfp4:rounding=stochastic"};
  return codecs;
}

void expect_result_is_sum_less_residuals(CompressedRanks& ranks,
                                         const CompressedAlgorithmInfo& algorithm, size_t count) {
  const int n = ranks.nranks();
  ranks.reset_memory();
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<double> exact(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> values = make_rank_input(r, count, 6);
    for (size_t i = 0; i < count; ++i) exact[i] += values[i];
    inputs.push_back(to_dtype(values, DType::kFloat32));
  }
  std::vector<std::vector<uint8_t>> outputs;
  ASSERT_EQ(ranks.allreduce(algorithm, DType::kFloat32, count, inputs, &outputs),
            std::vector<ncclResult_t>(static_cast<size_t>(n), ncclSuccess));
  const std::vector<double> got = from_dtype(outputs[0], DType::kFloat32, count);
  std::vector<double> residual_sum(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<float> residual = ranks.residual(r, count, DType::kFloat32);
    ASSERT_EQ(residual.size(), count) << algorithm.name << " n=" << n << " rank " << r;
    size_t nonzero = 0;
    for (size_t i = 0; i < count; ++i) {
      residual_sum[i] += residual[i];
      if (residual[i] != 0.0f) ++nonzero;
    }
    EXPECT_GT(nonzero, count / 2) << algorithm.name << " n=" << n << " rank " << r;
  }
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(got[i], exact[i] - residual_sum[i], 1e-5)
        << algorithm.name << " n=" << n << " element " << i;
  }
}

void expect_scratch_stops_growing(CompressedRanks& ranks, const CompressedAlgorithmInfo& algorithm,
                                  size_t count) {
  const int n = ranks.nranks();
  run_and_check(ranks, algorithm, DType::kFloat32, count, 1);
  std::vector<uint64_t> growths;
  for (int r = 0; r < n; ++r) growths.push_back(ranks.scratch(r).growths());
  for (int call = 0; call < 3; ++call) {
    run_and_check(ranks, algorithm, DType::kFloat32, count, 2);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ranks.allocations(r), 0u)
          << algorithm.name << " rank " << r << ": heap allocations in warm call " << call;
    }
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks.scratch(r).growths(), growths[static_cast<size_t>(r)])
        << algorithm.name << " rank " << r;
  }
}

}  // namespace test
}  // namespace terse
