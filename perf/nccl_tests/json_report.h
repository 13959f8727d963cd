// -J file.json: the run and every row of the table as JSON, for scripts and plots.
//
//   {"program": "all_reduce_perf", "command_line": ["all_reduce_perf", "-b", "8", ...],
//    "nranks": 4, "nprocs": 1, "nthreads": 4, "launcher": "threads",
//    "results": [
//      {"collective": "AllReduce", "nranks": 4, "size": 8, "count": 2, "type": "float",
//       "redop": "sum", "root": -1,
//       "out_of_place": {"time_us": 21.4, "algbw": 0.0004, "busbw": 0.0006, "wrong": 0},
//       "in_place": {"time_us": 20.9, "algbw": 0.0004, "busbw": 0.0006, "wrong": null}}, ...],
//    (with compression each half adds "codec", "ratio", "rel_err", "mean_err", "encode_us",
//    "decode_us", "algorithm" and "predicted_us", the planner's prediction for the call)
//    "out_of_bounds": 0, "avg_busbw": 1.234}
//
// "wrong" is null where the table prints N/A. Numbers are those the table rounds, unrounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace terse {
namespace perf {

struct HalfResult {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  bool checked = false;
  int64_t wrong = 0;
  // With compression (compression_figures.h): the codec, traffic ratio, largest relative error
  // and this rank's time in encodes and decodes per call; JSON only writes them when set.
  bool compressed = false;
  std::string codec;
  double ratio = 1;
  double rel_err = 0;   // largest |result - exact| / largest |exact|
  double mean_err = 0;  // mean |result - exact| / largest |exact|
  double encode_us = 0;
  double decode_us = 0;
  std::string algorithm;
  double predicted_us = 0;
};

struct ResultRow {
  std::string collective;  // "AllReduce", "AllGather", ...
  size_t size = 0;
  size_t count = 0;
  std::string type;
  std::string redop;
  int root = -1;
  HalfResult out_of_place;
  HalfResult in_place;
};

struct RunIdentity {
  std::string program;
  std::vector<std::string> command_line;
  int nranks = 1;
  int nprocs = 1;
  int nthreads = 1;
  std::string launcher;  // "threads", "mpirun", "torchrun"
};

class JsonReport {
 public:
  JsonReport() = default;
  ~JsonReport();
  JsonReport(const JsonReport&) = delete;
  JsonReport& operator=(const JsonReport&) = delete;

  // Opens `path` for writing now, so that a bad path is reported before any measurement.
  bool open(const std::string& path, std::string* error);
  bool is_open() const { return file_ != nullptr; }

  void add_row(const ResultRow& row) { rows_.push_back(row); }
  // Writes the whole document and closes the file.
  void finish(const RunIdentity& run, int64_t out_of_bounds, double avg_busbw);

 private:
  FILE* file_ = nullptr;
  std::vector<ResultRow> rows_;
};

// `text` as a JSON string literal, quotes included.
std::string json_string(const std::string& text);

}  // namespace perf
}  // namespace terse
