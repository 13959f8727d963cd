// What rank 0 tells about the run: one line per epoch on stdout (exactly
// "epoch E train_loss L test_acc A wire_ratio R"), a progress line while an epoch runs when
// stdout is a terminal, and the JSON file (rewritten after every epoch, so that an interrupted
// run keeps the epochs it finished).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace terse {
namespace train {

struct EpochFigures {
  int epoch = 0;
  double train_loss = 0.0;     // mean over the epoch's steps and ranks
  double test_accuracy = 0.0;  // fraction of the 10000 test images
  // Bytes all ranks sent in the epoch to keep their models together (traffic_meter.h): gradient
  // allreduces, or the parameter server's pushes and fetches.
  uint64_t wire_bytes = 0;
  // The same without codecs: uncompressed ring allreduces, or the tensors' own elements.
  uint64_t dense_wire_bytes = 0;
  double seconds = 0.0;  // the epoch's training steps, without the evaluation
  double wire_ratio() const {
    return dense_wire_bytes ? static_cast<double>(wire_bytes) / dense_wire_bytes : 0.0;
  }
};

struct RunDescription {
  std::string model;
  int ranks = 0;
  int epochs = 0;
  int batch = 0;
  int steps_per_epoch = 0;
  double learning_rate = 0.0;
  double momentum = 0.0;
  uint64_t seed = 0;
  std::string codec;   // TERSE_CODEC, "" when unset
  std::string policy;  // TERSE_POLICY, "" when unset
  std::string launcher;
  std::string sync;  // SyncScheme::describe()
};

class EpochReport {
 public:
  // false with a sentence when the JSON file cannot be written. `may_show_progress` false
  // keeps the progress line off even on a terminal (Open MPI gives every rank a
  // pseudo-terminal, also when mpirun's own output goes to a file).
  bool open(const RunDescription& run, const std::string& json_path, bool may_show_progress,
            std::string* error);
  // mean_loss: rank 0's mean over the epoch's steps so far (no exchange between ranks mid-epoch;
  // the epoch line averages every rank).
  void progress(int epoch, int step, int steps, double mean_loss);
  void epoch_done(const EpochFigures& figures);

 private:
  RunDescription run_;
  std::string json_path_;
  std::vector<EpochFigures> epochs_;
  bool terminal_ = false;

  bool write_json(std::string* error) const;
};

}  // namespace train
}  // namespace terse
