#include "perf/nccl_tests/json_report.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace terse {
namespace perf {
namespace {

// JSON has no NaN or infinity: those become null.
std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::string json_half(const HalfResult& half) {
  std::string text = "{\"time_us\": " + json_number(half.time_us) +
                     ", \"algbw\": " + json_number(half.algbw) +
                     ", \"busbw\": " + json_number(half.busbw) +
                     ", \"wrong\": " + (half.checked ? std::to_string(half.wrong) : "null");
  if (half.compressed) {
    text += ", \"codec\": " + json_string(half.codec) + ", \"ratio\": " + json_number(half.ratio) +
            ", \"rel_err\": " + json_number(half.rel_err) +
            ", \"mean_err\": " + json_number(half.mean_err) +
            ", \"encode_us\": " + json_number(half.encode_us) +
            ", \"decode_us\": " + json_number(half.decode_us) +
            ", \"algorithm\": " + json_string(half.algorithm) +
            ", \"predicted_us\": " + json_number(half.predicted_us);
  }
  return text + "}";
}

}  // namespace

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\t':
        quoted += "\\t";
        break;
      default:
        if (c < 0x20) {
          char escaped[8];
          snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          quoted += escaped;
        } else {
          quoted += static_cast<char>(c);
        }
    }
  }
  return quoted + "\"";
}

JsonReport::~JsonReport() {
  if (file_ != nullptr) fclose(file_);
}

bool JsonReport::open(const std::string& path, std::string* error) {
  file_ = fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    *error = "-J " + path + ": cannot write the file (" + strerror(errno) + ")";
    return false;
  }
  return true;
}

void JsonReport::finish(const RunIdentity& run, int64_t out_of_bounds, double avg_busbw) {
  if (file_ == nullptr) return;
  std::string text = "{\"program\": " + json_string(run.program) + ",\n \"command_line\": [";
  for (size_t i = 0; i < run.command_line.size(); ++i) {
    text += (i ? ", " : "") + json_string(run.command_line[i]);
  }
  text += "],\n \"nranks\": " + std::to_string(run.nranks) +
          ", \"nprocs\": " + std::to_string(run.nprocs) +
          ", \"nthreads\": " + std::to_string(run.nthreads) +
          ", \"launcher\": " + json_string(run.launcher) + ",\n \"results\": [";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const ResultRow& row = rows_[i];
    text += std::string(i ? "," : "") + "\n  {\"collective\": " + json_string(row.collective) +
            ", \"nranks\": " + std::to_string(run.nranks) +
            ", \"size\": " + std::to_string(row.size) +
            ", \"count\": " + std::to_string(row.count) + ", \"type\": " + json_string(row.type) +
            ", \"redop\": " + json_string(row.redop) + ", \"root\": " + std::to_string(row.root) +
            ",\n   \"out_of_place\": " + json_half(row.out_of_place) +
            ",\n   \"in_place\": " + json_half(row.in_place) + "}";
  }
  text += "],\n \"out_of_bounds\": " + std::to_string(out_of_bounds) +
          ", \"avg_busbw\": " + json_number(avg_busbw) + "}\n";
  fputs(text.c_str(), file_);
  fclose(file_);
  file_ = nullptr;
}

}  // namespace perf
}  // namespace terse
