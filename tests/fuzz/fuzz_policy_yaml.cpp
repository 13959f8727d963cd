// Fuzz target: TERSE_POLICY files, Policy::from_yaml (policy_file.cpp over yaml-cpp). The input
// bytes are the file's text.
//
// A policy file is read at init by every rank, so a bad one must come back as ncclInvalidArgument
// with "<file>:<line>: reason", never as a crash, a hang or an exception out of yaml-cpp; and a
// policy that loads must answer decide() for any tensor with one of its rules (or none).
#include <string>

#include "collectives/compressed/policy/policy.h"
#include "common/result.h"
#include "fuzz_support.h"

namespace {

constexpr char kSource[] = "fuzz.yaml";

// A few tensors that differ in everything a rule can match on.
std::vector<terse::TensorInfo> tensors() {
  using terse::DType;
  using terse::LinkClass;
  std::vector<terse::TensorInfo> list(4);
  list[0] = {"", 4096, DType::kFloat32, ncclSum, 2, LinkClass::kIntra, 0};
  list[1] = {"encoder.layer.0.weight", 64 << 20, DType::kBFloat16, ncclAvg, 16,
             LinkClass::kInter,        1000};
  list[2] = {"bias", 12, DType::kFloat16, ncclSum, 1, LinkClass::kIntra, 7};
  list[3] = {"ids", 1 << 20, std::nullopt, ncclMax, 8, LinkClass::kInter, 3};
  return list;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace terse;
  fuzz::quiet_logs();
  static const std::vector<TensorInfo> kTensors = tensors();
  const std::string text(reinterpret_cast<const char*>(data), size);

  Policy policy;
  clear_last_error();
  const ncclResult_t result = Policy::from_yaml(text, kSource, &policy);
  TERSE_FUZZ_REQUIRE(result == ncclSuccess || result == ncclInvalidArgument,
                     "from_yaml returned %d: %s", static_cast<int>(result), last_error());
  if (result != ncclSuccess) {
    const std::string reason = last_error();
    TERSE_FUZZ_REQUIRE(reason.compare(0, sizeof(kSource), std::string(kSource) + ":") == 0,
                       "a refusal that does not name the file and line: '%s'", reason.c_str());
    return 0;
  }
  const int rules = static_cast<int>(policy.rules().size());
  for (const TensorInfo& tensor : kTensors) {
    const Decision decision = policy.decide(tensor);
    TERSE_FUZZ_REQUIRE(decision.rule >= -1 && decision.rule < rules, "decide() chose rule %d of %d",
                       decision.rule, rules);
    TERSE_FUZZ_REQUIRE(tensor.dtype.has_value() || decision.rule == -1,
                       "a tensor without a float type matched rule %d", decision.rule);
  }
  return 0;
}
