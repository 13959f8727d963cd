#include "perf/nccl_tests/options.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace terse {
namespace perf {
namespace {

// One flag: its letters, what its value looks like, and what it does with the value (returning
// an error sentence, "" when accepted).
struct Flag {
  char letter;
  const char* long_name;
  const char* value_help;
  const char* help;
  std::function<std::string(const std::string& value, Options* options)> apply;
};

std::string flag_name(const Flag& flag) {
  return std::string("-") + flag.letter + " (--" + flag.long_name + ")";
}

bool parse_int(const std::string& text, long long* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long parsed = strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *value = parsed;
  return true;
}

// A flag taking a whole number in [low, high].
std::function<std::string(const std::string&, Options*)> int_flag(char letter, long long low,
                                                                  long long high,
                                                                  int Options::*field) {
  return [=](const std::string& text, Options* options) -> std::string {
    long long value = 0;
    if (!parse_int(text, &value)) {
      return std::string("-") + letter + ": '" + text + "' is not a whole number";
    }
    if (value < low || value > high) {
      return std::string("-") + letter + ": " + text + " is outside [" + std::to_string(low) +
             ", " + std::to_string(high) + "]";
    }
    options->*field = static_cast<int>(value);
    return "";
  };
}

std::function<std::string(const std::string&, Options*)> size_flag(char letter,
                                                                   size_t Options::*field) {
  return [=](const std::string& text, Options* options) -> std::string {
    size_t bytes = 0;
    if (!parse_size(text, &bytes)) {
      return std::string("-") + letter + ": '" + text +
             "' is not a size (a number of bytes, optionally with K, M or G, 1024-based)";
    }
    options->*field = bytes;
    return "";
  };
}

std::string apply_ops(const std::string& text, Options* options) {
  if (text == "all") {
    options->ops = reductions();
    return "";
  }
  Reduction op;
  if (!find_reduction(text, &op)) {
    return "-o: unknown operator '" + text + "' (sum, prod, max, min, avg, mulsum or all)";
  }
  options->ops = {op};
  return "";
}

std::string apply_types(const std::string& text, Options* options) {
  if (text == "all") {
    options->types.clear();
    for (const DataTypeInfo& info : data_types()) options->types.push_back(info.type);
    return "";
  }
  const DataTypeInfo* info = find_data_type(text);
  if (info == nullptr) {
    std::string known;
    for (const DataTypeInfo& candidate : data_types()) known += std::string(candidate.name) + " ";
    return "-d: unknown datatype '" + text + "' (" + known + "or all)";
  }
  options->types = {info->type};
  return "";
}

std::string apply_gpus(const std::string& text, Options* options) {
  long long value = 0;
  if (!parse_int(text, &value)) return "-g: '" + text + "' is not a whole number";
  if (value != 1) {
    return "-g " + text +
           ": only 1 rank per thread is supported (one thread drives one GPU); use -t for more "
           "ranks per process";
  }
  options->gpus = 1;
  return "";
}

std::string apply_step_factor(const std::string& text, Options* options) {
  long long value = 0;
  if (!parse_int(text, &value)) return "-f: '" + text + "' is not a whole number";
  if (value < 1) return "-f: " + text + " is not a step factor (1 steps by -i, 2 or more multiply)";
  options->step_factor = static_cast<size_t>(value);
  return "";
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {'t', "nthreads", "<n>", "ranks per process, one thread each (default 1)",
       int_flag('t', 1, 1024, &Options::threads)},
      {'g', "ngpus", "<n>", "ranks per thread: only 1 (use -t)", apply_gpus},
      {'b', "minbytes", "<size>", "smallest size; K, M, G are 1024-based (default 32M)",
       size_flag('b', &Options::min_bytes)},
      {'e', "maxbytes", "<size>", "largest size (default 32M)",
       size_flag('e', &Options::max_bytes)},
      {'i', "stepbytes", "<size>", "increment between sizes when -f is 1 (default 1M)",
       size_flag('i', &Options::step_bytes)},
      {'f', "stepfactor", "<n>", "multiply the size by n between rows (default 1: use -i)",
       apply_step_factor},
      {'n', "iters", "<n>", "timed iterations per measurement (default 20)",
       int_flag('n', 1, INT_MAX, &Options::iters)},
      {'w', "warmup_iters", "<n>", "untimed iterations per size first (default 1)",
       int_flag('w', 0, INT_MAX, &Options::warmup_iters)},
      {'m', "agg_iters", "<n>", "calls per timed iteration, inside one group (default 1)",
       int_flag('m', 1, INT_MAX, &Options::agg_iters)},
      {'c', "check", "<n>", "validation passes per measurement, 0 for none (default 1)",
       int_flag('c', 0, INT_MAX, &Options::check)},
      {'o', "op", "<op>", "sum, prod, max, min, avg, mulsum or all (default sum)", apply_ops},
      {'d', "datatype", "<type>",
       "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2 or all "
       "(default float)",
       apply_types},
      {'r', "root", "<rank>", "root of broadcast and reduce, -1 for every rank in turn (default 0)",
       int_flag('r', -1, INT_MAX, &Options::root)},
      {'z', "blocking", "<0/1>", "1: wait and barrier after every call (default 0)",
       int_flag('z', 0, 1, &Options::blocking)},
      {'T', "timeout", "<seconds>",
       "abort the communicators and exit when one call takes longer (default 0: no limit)",
       int_flag('T', 0, INT_MAX, &Options::timeout_s)},
      {'a', "average", "<0/1/2/3>",
       "time reported across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)",
       int_flag('a', 0, 3, &Options::average)},
      {'Z', "codec", "<codec>",
       "compress allreduces with this codec spec, e.g. int8 or topk:ratio=0.01 (sets "
       "TERSE_CODEC; adds the codec, ratio, rel_err and mean_err columns; #wrong counts elements "
       "that differ from the reference model of the call)",
       [](const std::string& text, Options* options) -> std::string {
         if (text.empty()) return "-Z: the codec is empty";
         options->codec = text;
         return "";
       }},
      // -B: nccl-tests has no such flag (its -M is the memory report), so none clashes.
      {'B', "buffers", "<host|device|managed>",
       "where each rank's buffers live: -B device allocates them with cudaMalloc on the rank's "
       "GPU (as nccl-tests does), managed with cudaMallocManaged, host in host memory (default: "
       "device when this build has CUDA and a GPU is present, else host; TERSE_PERF_BUFFERS "
       "sets it too)",
       [](const std::string& text, Options* options) -> std::string {
         if (!parse_buffer_memory(text, &options->memory)) {
           return "-B: '" + text + "' is not host, device or managed";
         }
         return "";
       }},
      {'J', "output_file", "<file.json>", "also write every row to this JSON file",
       [](const std::string& text, Options* options) -> std::string {
         if (text.empty()) return "-J: the file name is empty";
         options->json_path = text;
         return "";
       }},
  };
  return table;
}

bool allowed_letter(char letter, const std::string& allowed) {
  return allowed.empty() || allowed.find(letter) != std::string::npos;
}

// The checks that need more than one flag.
std::string check_combination(const Options& options) {
  if (options.min_bytes > options.max_bytes) {
    return "-b " + std::to_string(options.min_bytes) + " is larger than -e " +
           std::to_string(options.max_bytes);
  }
  if (options.step_factor == 1 && options.step_bytes == 0) {
    return "-i 0 with -f 1 would never reach -e (give -i a positive size or -f 2 or more)";
  }
  if (options.step_factor > 1 && options.min_bytes == 0) {
    return "-b 0 with -f " + std::to_string(options.step_factor) +
           " would never grow (give -b a positive size)";
  }
  return "";
}

}  // namespace

bool parse_buffer_memory(const std::string& text, BufferMemory* memory) {
  for (BufferMemory candidate :
       {BufferMemory::kHost, BufferMemory::kDevice, BufferMemory::kManaged}) {
    if (text == buffer_memory_name(candidate)) {
      *memory = candidate;
      return true;
    }
  }
  return false;
}

const char* buffer_memory_name(BufferMemory memory) {
  switch (memory) {
    case BufferMemory::kHost:
      return "host";
    case BufferMemory::kDevice:
      return "device";
    case BufferMemory::kManaged:
      return "managed";
    default:
      return "auto";
  }
}

bool parse_size(const std::string& text, size_t* bytes) {
  size_t position = 0;
  while (position < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[position])) || text[position] == '.')) {
    ++position;
  }
  const std::string number = text.substr(0, position);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) return false;
  double units = 1;
  std::string suffix = text.substr(position);
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K':
        units = 1024.0;
        break;
      case 'M':
        units = 1024.0 * 1024;
        break;
      case 'G':
        units = 1024.0 * 1024 * 1024;
        break;
      default:
        return false;
    }
    suffix = suffix.substr(1);
    if (suffix == "B" || suffix == "b") suffix.clear();
    if (!suffix.empty()) return false;
  }
  const double value = std::strtod(number.c_str(), nullptr) * units;
  if (!std::isfinite(value) || value >= 18446744073709551615.0) return false;
  *bytes = static_cast<size_t>(value);
  return true;
}

ParseOutcome parse_options(int argc, const char* const* argv, Options* options, std::string* error,
                           const std::string& allowed) {
  options->command_line.assign(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const Flag* flag = nullptr;
    std::string value;
    bool has_value = false;
    if (arg == "-h" || arg == "--help") return ParseOutcome::kHelp;
    if (arg.rfind("--", 0) == 0) {
      const size_t equals = arg.find('=');
      const std::string name = arg.substr(2, equals == std::string::npos ? arg.npos : equals - 2);
      for (const Flag& candidate : flags()) {
        if (name == candidate.long_name) flag = &candidate;
      }
      if (flag == nullptr || !allowed_letter(flag->letter, allowed)) {
        *error = "unknown option '" + arg + "'";
        return ParseOutcome::kError;
      }
      if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
        has_value = true;
      }
    } else if (arg.size() >= 2 && arg[0] == '-') {
      for (const Flag& candidate : flags()) {
        if (arg[1] == candidate.letter) flag = &candidate;
      }
      if (flag == nullptr || !allowed_letter(flag->letter, allowed)) {
        *error = "unknown option '" + arg.substr(0, 2) + "'";
        return ParseOutcome::kError;
      }
      if (arg.size() > 2) {
        value = arg.substr(2);
        has_value = true;
      }
    } else {
      *error = "unexpected argument '" + arg + "' (every option is a flag with a value)";
      return ParseOutcome::kError;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        *error = flag_name(*flag) + " needs a value";
        return ParseOutcome::kError;
      }
      value = argv[++i];
    }
    *error = flag->apply(value, options);
    if (!error->empty()) return ParseOutcome::kError;
  }
  *error = check_combination(*options);
  return error->empty() ? ParseOutcome::kRun : ParseOutcome::kError;
}

std::string usage_text(const std::string& program, const std::string& allowed) {
  std::string text = "Usage: " + program + " [options]\n";
  for (const Flag& flag : flags()) {
    if (!allowed_letter(flag.letter, allowed)) continue;
    std::string left =
        std::string("  -") + flag.letter + ", --" + flag.long_name + " " + flag.value_help;
    left.resize(std::max<size_t>(left.size() + 2, 36), ' ');
    text += left + flag.help + "\n";
  }
  text += "  -h, --help                        this text\n";
  return text;
}

}  // namespace perf
}  // namespace terse
