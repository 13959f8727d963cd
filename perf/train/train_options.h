// train_fmnist's command line.
#pragma once

#include <cstdint>
#include <string>

#include "perf/train/sync_scheme.h"

namespace terse {
namespace train {

struct TrainOptions {
  int epochs = 10;
  int ranks = 0;  // 0: one per process of the launch (1 alone)
  std::string model = "mlp";
  std::string json_path;
  int batch = 32;  // per rank; the step averages ranks x batch samples
  float learning_rate = 0.05f;
  float momentum = 0.9f;
  uint64_t seed = 1;
  int max_steps = 0;  // per epoch; 0: the whole training set
  std::string data_dir;
  SyncScheme sync;  // --sync: allreduce unless given
};

enum class ParseOutcome { kRun, kHelp, kError };

// Fills *options from argv; kError with a sentence naming the argument in *error.
ParseOutcome parse_train_options(int argc, char** argv, TrainOptions* options, std::string* error);

std::string train_usage(const std::string& program);

}  // namespace train
}  // namespace terse
