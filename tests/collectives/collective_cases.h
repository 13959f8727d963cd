// The thread tests' runner of collective_case.h: every rank of a CommunicatorWorld (ranks as
// threads) runs a list of cases, all ranks together, and every problem a rank finds becomes a
// GoogleTest failure.
#pragma once

#include <vector>

#include "collective_case.h"
#include "communicator_test_support.h"

namespace terse {
namespace test {

// Runs every case on every rank of `world` (in order, all ranks together) and checks each as
// run_collective_case does. A rank whose call fails stops the test (the others time out).
void run_collective_cases(CommunicatorWorld& world, const std::vector<CollectiveCase>& cases);

}  // namespace test
}  // namespace terse
