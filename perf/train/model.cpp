#include "perf/train/model.h"

#include "perf/train/cnn.h"
#include "perf/train/mlp.h"

namespace terse {
namespace train {

std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed) {
  SeededRandom random(seed);
  if (name == "mlp") return std::make_unique<Mlp>(&random);
  if (name == "cnn") return std::make_unique<Cnn>(&random);
  return nullptr;
}

}  // namespace train
}  // namespace terse
