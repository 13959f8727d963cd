// How the ranks of train_fmnist keep their models together (--sync): a gradient allreduce per
// step (issue 14's data parallelism), or one of the parameter-server update schemes of issue 15
// (perf/train/ps_schemes), with one parameter-server tensor per layer.
//
//   allreduce                        every step averages the gradients over the ranks
//   downpour[:send=N,fetch=M]        push updates every N steps, fetch the centre every M (1, 1)
//   easgd[:tau=T,beta=B]             elastic pull every T steps, alpha = B / ranks (4, 0.9)
//   ssp:S                            push every step, run at most S steps ahead of the slowest
#pragma once

#include <cstdint>
#include <string>

namespace terse {
namespace train {

struct SyncScheme {
  enum class Kind { kAllreduce, kDownpour, kEasgd, kStaleSynchronous };
  Kind kind = Kind::kAllreduce;
  int send_every = 1;  // downpour
  int fetch_every = 1;
  int tau = 4;  // easgd
  float beta = 0.9f;
  uint64_t staleness = 0;  // ssp

  bool uses_parameter_server() const { return kind != Kind::kAllreduce; }
  // Whether the ranks never wait for one another during an epoch (downpour, easgd), so that the
  // epoch's batches go to whichever rank is free (job_progress.h).
  bool asynchronous() const { return kind == Kind::kDownpour || kind == Kind::kEasgd; }
  // Every parameter spelled out: "allreduce", "downpour:send=1,fetch=1", "easgd:tau=4,beta=0.9",
  // "ssp:2".
  std::string describe() const;
};

// false with a sentence (naming the spec) when `text` is not one of the forms above.
bool parse_sync_scheme(const std::string& text, SyncScheme* scheme, std::string* error);

}  // namespace train
}  // namespace terse
