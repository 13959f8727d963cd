#include "perf/train/epoch_report.h"

#include <unistd.h>

#include <cstdio>

namespace terse {
namespace train {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

}  // namespace

bool EpochReport::open(const RunDescription& run, const std::string& json_path,
                       bool may_show_progress, std::string* error) {
  run_ = run;
  json_path_ = json_path;
  terminal_ = may_show_progress && isatty(STDOUT_FILENO) == 1;
  return json_path_.empty() || write_json(error);
}

void EpochReport::progress(int epoch, int step, int steps, double mean_loss) {
  if (!terminal_) return;
  printf("\r\033[Kepoch %d step %d/%d train_loss %.4f", epoch, step, steps, mean_loss);
  fflush(stdout);
}

void EpochReport::epoch_done(const EpochFigures& figures) {
  if (terminal_) printf("\r\033[K");
  printf("epoch %d train_loss %.4f test_acc %.4f wire_ratio %.4f\n", figures.epoch,
         figures.train_loss, figures.test_accuracy, figures.wire_ratio());
  fflush(stdout);
  epochs_.push_back(figures);
  std::string error;
  if (!json_path_.empty() && !write_json(&error))
    fprintf(stderr, "train_fmnist: %s\n", error.c_str());
}

bool EpochReport::write_json(std::string* error) const {
  const std::string partial = json_path_ + ".partial";
  FILE* file = fopen(partial.c_str(), "w");
  if (file == nullptr) {
    *error = "--json " + json_path_ + ": cannot be written";
    return false;
  }
  fprintf(file,
          "{\n  \"program\": \"train_fmnist\",\n  \"model\": %s,\n  \"ranks\": %d,\n"
          "  \"epochs_requested\": %d,\n  \"batch_per_rank\": %d,\n  \"steps_per_epoch\": %d,\n"
          "  \"learning_rate\": %g,\n  \"momentum\": %g,\n  \"seed\": %llu,\n"
          "  \"codec\": %s,\n  \"policy\": %s,\n  \"launcher\": %s,\n  \"sync\": %s,\n"
          "  \"epochs\": [",
          quoted(run_.model).c_str(), run_.ranks, run_.epochs, run_.batch, run_.steps_per_epoch,
          run_.learning_rate, run_.momentum, static_cast<unsigned long long>(run_.seed),
          quoted(run_.codec).c_str(), quoted(run_.policy).c_str(), quoted(run_.launcher).c_str(),
          quoted(run_.sync).c_str());
  uint64_t cumulative = 0;
  for (size_t i = 0; i < epochs_.size(); ++i) {
    const EpochFigures& e = epochs_[i];
    cumulative += e.wire_bytes;
    fprintf(file,
            "%s\n    {\"epoch\": %d, \"train_loss\": %.6f, \"test_accuracy\": %.6f, "
            "\"bytes_sent\": %llu, \"bytes_sent_cumulative\": %llu, "
            "\"uncompressed_bytes\": %llu, \"wire_ratio\": %.6f, \"seconds\": %.3f}",
            i ? "," : "", e.epoch, e.train_loss, e.test_accuracy,
            static_cast<unsigned long long>(e.wire_bytes),
            static_cast<unsigned long long>(cumulative),
            static_cast<unsigned long long>(e.dense_wire_bytes), e.wire_ratio(), e.seconds);
  }
  fprintf(file, "\n  ]\n}\n");
  const bool written = fclose(file) == 0 && rename(partial.c_str(), json_path_.c_str()) == 0;
  if (!written) *error = "--json " + json_path_ + ": cannot be written";
  return written;
}

}  // namespace train
}  // namespace terse
