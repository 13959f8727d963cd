// Whether one allreduce of the soak came back right. Every rank recomputes every rank's inputs
// (soak_workload.h) and checks its own output, by what the call was:
//   exact    small integers (casts, "none", int32): bit for bit the exact sum;
//   dense    uncompressed floats (a schedule's off step, a refused tensor without fallback):
//            within (n + 1) unit roundoffs of the sum of magnitudes of the float64 sum;
//   model    compressed, in the rotation of soak_workload.h, from empty memory (its residual
//            reset before the call) or with a fallback codec (memory none): element for element
//            the reference model of model/, replaying the codec, algorithm, seed, step and
//            piece size terseCommGetStats reports;
//   finite   every other compressed call (with memory the model does not follow): every
//            element finite (the output is filled with NaN before the call, so an element the
//            call did not write fails).
#pragma once

#include <terse/terse.h>

#include <cstdint>
#include <string>

#include "perf/soak/soak_workload.h"

namespace terse {
namespace soak {

enum CheckKind { kExact = 0, kDense, kModel, kFinite, kCheckKinds };

// "exact", "dense", "model", "finite".
const char* check_kind_name(int kind);

struct CallCheck {
  CheckKind kind = kFinite;
  std::string failure;  // empty when the output is right
};

// `before` and `after`: terseCommGetStats around the call; `recv` its output.
CallCheck check_call(const PlannedCall& call, uint64_t iteration, int rank, int nranks,
                     const terseStats& before, const terseStats& after, const void* recv);

}  // namespace soak
}  // namespace terse
