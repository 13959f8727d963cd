#include "perf/soak/soak_check.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "codecs/dtype.h"
#include "collectives/compressed/memory/memory_kind.h"
#include "model/compressed_model.h"
#include "model/last_call.h"

namespace terse {
namespace soak {
namespace {

// What a rank sent: the value rounded to the call's dtype.
double sent(DType dtype, double value) {
  uint8_t element[4];
  store_element(element, dtype, 0, static_cast<float>(value));
  return load_element(element, dtype, 0);
}

double unit_roundoff(DType dtype) {
  return dtype == DType::kFloat32 ? 0x1p-24 : dtype == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
}

std::string describe(const PlannedCall& call, uint64_t iteration, const terseStats& after,
                     bool compressed) {
  std::string text = "iteration " + std::to_string(iteration) + ", tensor '" +
                     (call.name.empty() ? std::string("(anonymous)") : call.name) + "' (" +
                     std::to_string(call.count) + " elements, ";
  text += compressed ? std::string(after.last_codec) + " through " + after.last_algorithm
                     : std::string("uncompressed");
  return text + ")";
}

std::string element_failure(size_t i, double got, double want) {
  return "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " +
         std::to_string(want);
}

// Small integers: the exact sum, whatever ran.
std::string check_exact(const PlannedCall& call, const Slot& slot, uint64_t iteration, int nranks,
                        const void* recv) {
  std::vector<uint64_t> seeds;
  for (int r = 0; r < nranks; ++r) seeds.push_back(input_seed(call, iteration, r));
  DType dtype = DType::kFloat32;
  const bool integer = slot.type == ncclInt32;
  if (!integer) dtype_from_nccl(slot.type, &dtype);
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < call.count; ++i) {
    double want = 0;
    for (int r = 0; r < nranks; ++r) want += input_value(slot.values, seeds[r], i);
    if (slot.average) want /= nranks;
    const double got = integer ? double(static_cast<const int32_t*>(recv)[i])
                               : double(load_element(recv, dtype, i));
    if (got != want) {
      if (wrong++ == 0) first = element_failure(i, got, want);
    }
  }
  return wrong == 0 ? "" : std::to_string(wrong) + " elements are not the exact sum; " + first;
}

// Uncompressed floats: the float64 sum within (n + 1) unit roundoffs of the magnitudes.
std::string check_dense(const PlannedCall& call, const Slot& slot, uint64_t iteration, int nranks,
                        DType dtype, const void* recv) {
  std::vector<uint64_t> seeds;
  for (int r = 0; r < nranks; ++r) seeds.push_back(input_seed(call, iteration, r));
  const double scale = slot.average ? 1.0 / nranks : 1.0;
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < call.count; ++i) {
    double want = 0, magnitude = 0;
    for (int r = 0; r < nranks; ++r) {
      const double x = sent(dtype, input_value(slot.values, seeds[r], i));
      want += x;
      magnitude += std::fabs(x);
    }
    want *= scale;
    const double allowed = (nranks + 1) * unit_roundoff(dtype) * magnitude * scale;
    const double got = load_element(recv, dtype, i);
    if (!(std::fabs(got - want) <= allowed)) {
      if (wrong++ == 0) first = element_failure(i, got, want);
    }
  }
  return wrong == 0 ? ""
                    : std::to_string(wrong) + " elements are off the uncompressed sum; " + first;
}

// Compressed: the reference model's replay from empty memory (`memory` the entry's kind).
std::string check_model(const PlannedCall& call, const Slot& slot, uint64_t iteration, int nranks,
                        DType dtype, const terseStats& after, MemoryKind memory,
                        bool default_memory, const void* recv) {
  std::unique_ptr<model::CompressedModel> reference =
      default_memory ? model::model_of_last_call(after, nranks)
                     : std::make_unique<model::CompressedModel>(after.last_codec, nranks, memory);
  if (reference == nullptr || !reference->ok()) {
    return std::string("the model cannot make codec ") + after.last_codec;
  }
  std::vector<std::vector<uint8_t>> inputs(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    const uint64_t seed = input_seed(call, iteration, r);
    inputs[r].resize(call.count * dtype_size(dtype));
    for (size_t i = 0; i < call.count; ++i) {
      store_element(inputs[r].data(), dtype, i,
                    static_cast<float>(input_value(slot.values, seed, i)));
    }
  }
  model::CallSpec spec =
      model::spec_of_last_call(after, dtype, call.count, slot.average ? 1.0 / nranks : 1.0);
  if (slot.rows > 0 && call.count % slot.rows == 0) {
    spec.shape = MatrixShape{slot.rows, call.count / slot.rows};
  }
  try {
    const model::Expected expected = reference->call(spec, inputs);
    const model::Comparison comparison =
        model::compare(expected, dtype, static_cast<const uint8_t*>(recv), call.count);
    if (comparison.mismatches == 0) return "";
    return std::to_string(comparison.mismatches) +
           " elements differ from the model: " + comparison.first;
  } catch (const std::exception& e) {
    return std::string("the model failed: ") + e.what();
  }
}

std::string check_finite(const PlannedCall& call, DType dtype, const void* recv) {
  for (size_t i = 0; i < call.count; ++i) {
    const float got = load_element(recv, dtype, i);
    if (!std::isfinite(got)) return "element " + std::to_string(i) + " is " + std::to_string(got);
  }
  return "";
}

}  // namespace

const char* check_kind_name(int kind) {
  static const char* names[kCheckKinds] = {"exact", "dense", "model", "finite"};
  return kind >= 0 && kind < kCheckKinds ? names[kind] : "?";
}

CallCheck check_call(const PlannedCall& call, uint64_t iteration, int rank, int nranks,
                     const terseStats& before, const terseStats& after, const void* recv) {
  (void)rank;
  const Slot& s = slot(call.slot);
  const bool compressed = after.compressed_calls > before.compressed_calls;
  const bool fell_back = after.fallback_calls > before.fallback_calls;
  CallCheck check;
  std::string failure;
  DType dtype = DType::kFloat32;
  if (s.values == Values::kIntegers) {
    check.kind = kExact;
    failure = check_exact(call, s, iteration, nranks, recv);
  } else if (!dtype_from_nccl(s.type, &dtype)) {
    failure = "noise inputs need a float type";
  } else if (!compressed) {
    check.kind = kDense;
    failure = check_dense(call, s, iteration, nranks, dtype, recv);
  } else if (call.model_check) {
    check.kind = kModel;
    failure = check_model(call, s, iteration, nranks, dtype, after, MemoryKind::kNone,
                          /*default_memory=*/!fell_back, recv);
  } else {
    check.kind = kFinite;
    failure = check_finite(call, dtype, recv);
  }
  if (!failure.empty()) {
    check.failure = describe(call, iteration, after, compressed) + ", " +
                    check_kind_name(check.kind) + " check: " + failure;
  }
  return check;
}

}  // namespace soak
}  // namespace terse
