// TERSE_POLICY files: the compression policy in YAML (loaded with yaml-cpp).
//
//   rules:                          # tried in order; the first whose match accepts a tensor wins
//     - match:                      # every key optional; absent = any (op: sum and avg)
//         name: "encoder\\..*weight"  # RE2 syntax (linear time), full match; unnamed: ""
//         min_bytes: 1M             # tensor size in bytes, both bounds inclusive;
//         max_bytes: 1G             #   K/M/G suffixes are 1024-based
//         dtype: [float, bfloat16]  # float|float32|fp32, half|float16|fp16, bfloat16|bf16,
//                                   # float8e4m3|fp8e4m3|e4m3, float8e5m2|fp8e5m2|e5m2
//         op: [sum, avg]            # sum, avg; prod/max/min are refused (not compressible)
//         comm_size: {min: 2, max: 1024}  # ranks in the communicator, both bounds inclusive
//         link: inter               # any | intra (one node) | inter (crosses the network)
//       codec: int8                 # a registry name, "name:k=v,...", or auto (cost model)
//       max_rel_err: 0.01           # auto only: the error bound its choice must keep
//                                   #   (also auto:max_rel_err=0.01; default 0.01)
//       params: {block: 128, rounding: stochastic}  # codec parameters (also allowed in codec)
//       memory: residual            # none | residual | momentum (dgc); default per codec,
//                                   #   see default_memory_kind() in memory_kind.h
//       schedule: {start: 100, end: 0, every: 1, warmup: 50}
//                                   # active from step start to end (exclusive, 0 = forever),
//                                   # every N-th step, ramping in over `warmup` active steps;
//                                   # inactive steps are reduced uncompressed
//       fallback: "qsgd:levels=15"  # what a tensor that residual memory did not admit runs
//                                   #   (memory none): an unbiased, stateless codec, or none
//                                   #   (the default: uncompressed); CodecChoice::make_fallback
//       ps_receive: bf16            # parameter-server receives of the tensors it matches
//                                   #   (terse.h, tersePs*): any codec; default none (exact)
//     - match: {max_bytes: 64K}
//       codec: none                 # an explicit "do not compress"
//
// A single value may stand for a one-element list (dtype: float). Unknown or repeated keys are
// refused anywhere, and every codec is created once at load, so a typo fails at init. Every
// error reads "<file>:<line>: rule <n>: <reason>" (line and rule 1-based).
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/compressed/policy/policy.h"
#include "common/env.h"
#include "common/result.h"

namespace terse {
namespace {

bool parse_dtype(const std::string& text, DType* dtype) {
  if (text == "float" || text == "float32" || text == "fp32") {
    *dtype = DType::kFloat32;
  } else if (text == "half" || text == "float16" || text == "fp16") {
    *dtype = DType::kFloat16;
  } else if (text == "bfloat16" || text == "bf16") {
    *dtype = DType::kBFloat16;
  } else if (text == "float8e4m3" || text == "fp8e4m3" || text == "e4m3") {
    *dtype = DType::kFloat8E4M3;
  } else if (text == "float8e5m2" || text == "fp8e5m2" || text == "e5m2") {
    *dtype = DType::kFloat8E5M2;
  } else {
    return false;
  }
  return true;
}

bool parse_op(const std::string& text, ncclRedOp_t* op) {
  static const std::pair<const char*, ncclRedOp_t> kOps[] = {
      {"sum", ncclSum}, {"prod", ncclProd}, {"max", ncclMax}, {"min", ncclMin}, {"avg", ncclAvg}};
  for (const auto& entry : kOps) {
    if (text == entry.first) {
      *op = entry.second;
      return true;
    }
  }
  return false;
}

std::string join(const std::vector<const char*>& names) {
  std::string list;
  for (const char* name : names) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

// Walks one YAML document, turning every problem into "<source>:<line>: [rule <n>: ]<reason>".
class PolicyFileParser {
 public:
  explicit PolicyFileParser(std::string source) : source_(std::move(source)) {}

  ncclResult_t parse(const YAML::Node& root, Policy* policy) {
    if (!root.IsMap()) {
      return refuse(root, "expected a map with a 'rules' list at the top, found %s", kind_of(root));
    }
    std::optional<YAML::Node> rules;  // a default YAML::Node is a defined null, not "absent"
    TERSE_CHECK(for_each_key(root, "the top level", {"rules"},
                             [&](const std::string&, const YAML::Node& value) {
                               rules.emplace(value);
                               return ncclSuccess;
                             }));
    if (!rules) return refuse(root, "no 'rules' list");
    if (!rules->IsSequence()) {
      return refuse(*rules, "'rules' must be a list, found %s", kind_of(*rules));
    }
    Policy made;
    for (const YAML::Node& rule : *rules) {
      ++rule_;
      PolicyRule parsed;
      TERSE_CHECK(parse_rule(rule, &parsed));
      TERSE_CHECK(made.add_rule(std::move(parsed)));  // re-checks; parse_rule already did
    }
    *policy = std::move(made);
    return ncclSuccess;
  }

  // Refuses at `node`'s line (1-based).
  ncclResult_t refuse(const YAML::Node& node, const char* format, ...)
      __attribute__((format(printf, 3, 4))) {
    char reason[768];
    va_list args;
    va_start(args, format);
    vsnprintf(reason, sizeof(reason), format, args);
    va_end(args);
    return refuse_at(line_of(node), reason);
  }

  ncclResult_t refuse_at(int line, const std::string& reason) {
    std::string rule = rule_ > 0 ? "rule " + std::to_string(rule_) + ": " : "";
    return fail(ncclInvalidArgument, "%s:%d: %s%s", source_.c_str(), line, rule.c_str(),
                reason.c_str());
  }

  // Refuses at `node` with the error another function just recorded.
  ncclResult_t refuse_with_last_error(const YAML::Node& node) {
    return refuse_at(line_of(node), last_error());
  }

 private:
  using Handler = std::function<ncclResult_t(const std::string& key, const YAML::Node& value)>;

  int line_of(const YAML::Node& node) const {
    if (!node || node.Mark().is_null()) return last_line_;
    return node.Mark().line + 1;
  }

  static const char* kind_of(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Null:
        return "nothing";
      case YAML::NodeType::Scalar:
        return "a single value";
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a map";
      default:
        return "an undefined node";
    }
  }

  // Calls handle(key, value) per entry of map `node`, refusing keys outside `known` and repeats.
  ncclResult_t for_each_key(const YAML::Node& node, const char* where,
                            const std::vector<const char*>& known, const Handler& handle) {
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const YAML::Node& key = entry.first;
      last_line_ = line_of(key);
      if (!key.IsScalar()) return refuse(key, "%s: a key must be a name", where);
      const std::string& name = key.Scalar();
      bool is_known = false;
      for (const char* candidate : known) is_known = is_known || name == candidate;
      if (!is_known) {
        return refuse(key, "unknown key '%s' in %s (known: %s)", name.c_str(), where,
                      join(known).c_str());
      }
      if (!seen.insert(name).second)
        return refuse(key, "key '%s' given twice in %s", name.c_str(), where);
      TERSE_CHECK(handle(name, entry.second));
    }
    return ncclSuccess;
  }

  ncclResult_t scalar(const YAML::Node& node, const char* what, std::string* text) {
    if (!node.IsScalar())
      return refuse(node, "%s: expected a single value, found %s", what, kind_of(node));
    *text = node.Scalar();
    return ncclSuccess;
  }

  ncclResult_t unsigned_number(const YAML::Node& node, const char* what, uint64_t max,
                               uint64_t* value) {
    std::string text;
    TERSE_CHECK(scalar(node, what, &text));
    errno = 0;
    char* end = nullptr;
    unsigned long long number = strtoull(text.c_str(), &end, 10);
    if (text.empty() || text[0] < '0' || text[0] > '9' || errno != 0 || *end != '\0' ||
        number > max) {
      if (max == UINT64_MAX) {
        return refuse(node, "%s: '%s' is not a whole number of at least 0", what, text.c_str());
      }
      return refuse(node, "%s: '%s' is not a whole number in [0, %llu]", what, text.c_str(),
                    static_cast<unsigned long long>(max));
    }
    *value = number;
    return ncclSuccess;
  }

  ncclResult_t byte_count(const YAML::Node& node, const char* what, uint64_t* value) {
    std::string text;
    TERSE_CHECK(scalar(node, what, &text));
    if (!parse_bytes(text, value)) {
      return refuse(node, "%s: '%s' is not a byte count (expected e.g. 4096, 64K, 2M, 1G)", what,
                    text.c_str());
    }
    return ncclSuccess;
  }

  // A list, or a single value standing for a one-element list.
  ncclResult_t items(const YAML::Node& node, const char* what, std::vector<YAML::Node>* list) {
    list->clear();
    if (node.IsScalar()) {
      list->push_back(node);
    } else if (node.IsSequence()) {
      for (const YAML::Node& item : node) {
        if (!item.IsScalar())
          return refuse(item, "%s: expected names, found %s", what, kind_of(item));
        list->push_back(item);
      }
    } else {
      return refuse(node, "%s: expected a name or a list of names, found %s", what, kind_of(node));
    }
    if (list->empty()) return refuse(node, "%s: the list is empty, so nothing could match", what);
    return ncclSuccess;
  }

  ncclResult_t parse_rule(const YAML::Node& node, PolicyRule* rule) {
    if (!node.IsMap()) return refuse(node, "expected a map with 'codec', found %s", kind_of(node));
    rule->origin = source_ + ":" + std::to_string(line_of(node));
    std::optional<YAML::Node> match, codec, params, memory, schedule, fallback, max_rel_err,
        ps_receive;
    TERSE_CHECK(for_each_key(
        node, "rule",
        {"match", "codec", "params", "memory", "schedule", "fallback", "max_rel_err", "ps_receive"},
        [&](const std::string& key, const YAML::Node& value) {
          if (key == "match") match.emplace(value);
          if (key == "codec") codec.emplace(value);
          if (key == "params") params.emplace(value);
          if (key == "memory") memory.emplace(value);
          if (key == "schedule") schedule.emplace(value);
          if (key == "fallback") fallback.emplace(value);
          if (key == "max_rel_err") max_rel_err.emplace(value);
          if (key == "ps_receive") ps_receive.emplace(value);
          return ncclSuccess;
        }));
    if (!codec) return refuse(node, "no 'codec' (a codec name, or none to leave tensors alone)");
    if (match) TERSE_CHECK(parse_match(*match, &rule->match));
    TERSE_CHECK(parse_codec(*codec, params, memory, max_rel_err, &rule->codec));
    if (schedule) TERSE_CHECK(parse_schedule(*schedule, &rule->schedule));
    if (fallback) TERSE_CHECK(parse_fallback(*fallback, &rule->fallback));
    if (ps_receive) TERSE_CHECK(parse_ps_receive(*ps_receive, &rule->ps_receive));
    return ncclSuccess;
  }

  // A codec spec in one value ("bf16"), any codec the registry makes, stored canonical.
  ncclResult_t parse_ps_receive(const YAML::Node& node, std::string* spec) {
    std::string text;
    TERSE_CHECK(scalar(node, "ps_receive", &text));
    std::unique_ptr<Codec> codec;
    if (create_codec(text, &codec) != ncclSuccess) return refuse_with_last_error(node);
    *spec = codec->spec();
    return ncclSuccess;
  }

  // A codec spec in one value ("qsgd:levels=15"), held to CodecChoice::make_fallback.
  ncclResult_t parse_fallback(const YAML::Node& node, CodecChoice* choice) {
    std::string spec, name;
    CodecParams params;
    TERSE_CHECK(scalar(node, "fallback", &spec));
    if (parse_codec_spec(spec, &name, &params) != ncclSuccess ||
        CodecChoice::make_fallback(name, params, choice) != ncclSuccess) {
      return refuse_with_last_error(node);
    }
    return ncclSuccess;
  }

  ncclResult_t parse_match(const YAML::Node& node, RuleMatch* match) {
    if (!node.IsMap()) return refuse(node, "match: expected a map, found %s", kind_of(node));
    TERSE_CHECK(for_each_key(
        node, "match", {"name", "min_bytes", "max_bytes", "dtype", "op", "comm_size", "link"},
        [&](const std::string& key, const YAML::Node& value) -> ncclResult_t {
          if (key == "name") {
            std::string pattern;
            TERSE_CHECK(scalar(value, "name", &pattern));
            if (match->set_name_pattern(pattern) != ncclSuccess)
              return refuse_with_last_error(value);
          } else if (key == "min_bytes") {
            TERSE_CHECK(byte_count(value, "min_bytes", &match->min_bytes));
          } else if (key == "max_bytes") {
            TERSE_CHECK(byte_count(value, "max_bytes", &match->max_bytes));
          } else if (key == "dtype") {
            return parse_dtypes(value, match);
          } else if (key == "op") {
            return parse_ops(value, match);
          } else if (key == "comm_size") {
            return parse_comm_size(value, match);
          } else if (key == "link") {
            std::string text;
            TERSE_CHECK(scalar(value, "link", &text));
            if (!parse_link_class(text, &match->link)) {
              return refuse(value, "link: '%s' is not one of any, intra, inter", text.c_str());
            }
          }
          return ncclSuccess;
        }));
    if (match->validate() != ncclSuccess) return refuse_with_last_error(node);
    return ncclSuccess;
  }

  ncclResult_t parse_dtypes(const YAML::Node& node, RuleMatch* match) {
    std::vector<YAML::Node> list;
    TERSE_CHECK(items(node, "dtype", &list));
    std::vector<DType> dtypes;
    for (const YAML::Node& item : list) {
      DType dtype;
      if (!parse_dtype(item.Scalar(), &dtype)) {
        return refuse(item,
                      "dtype: '%s' is not a float type (float, half, bfloat16; integer tensors "
                      "are never compressed)",
                      item.Scalar().c_str());
      }
      dtypes.push_back(dtype);
    }
    return match->set_dtypes(dtypes);
  }

  ncclResult_t parse_ops(const YAML::Node& node, RuleMatch* match) {
    std::vector<YAML::Node> list;
    TERSE_CHECK(items(node, "op", &list));
    std::vector<ncclRedOp_t> ops;
    for (const YAML::Node& item : list) {
      ncclRedOp_t op;
      if (!parse_op(item.Scalar(), &op)) {
        return refuse(item,
                      "op: '%s' is not a reduction (known: sum, prod, max, min, avg; only sum "
                      "and avg can be compressed)",
                      item.Scalar().c_str());
      }
      // One at a time, so a refusal points at the offending item's line.
      RuleMatch single;
      if (single.set_ops({op}) != ncclSuccess) return refuse_with_last_error(item);
      ops.push_back(op);
    }
    return match->set_ops(ops);
  }

  ncclResult_t parse_comm_size(const YAML::Node& node, RuleMatch* match) {
    if (!node.IsMap()) {
      return refuse(node, "comm_size: expected a map like {min: 2, max: 64}, found %s",
                    kind_of(node));
    }
    TERSE_CHECK(for_each_key(
        node, "comm_size", {"min", "max"},
        [&](const std::string& key, const YAML::Node& value) -> ncclResult_t {
          uint64_t number = 0;
          TERSE_CHECK(unsigned_number(value, key == "min" ? "comm_size min" : "comm_size max",
                                      INT32_MAX, &number));
          (key == "min" ? match->min_comm_size : match->max_comm_size) = static_cast<int>(number);
          return ncclSuccess;
        }));
    // Checked here rather than with the whole match, so the error points at this line.
    RuleMatch sizes_only;
    sizes_only.min_comm_size = match->min_comm_size;
    sizes_only.max_comm_size = match->max_comm_size;
    if (sizes_only.validate() != ncclSuccess) return refuse_with_last_error(node);
    return ncclSuccess;
  }

  ncclResult_t parse_codec(const YAML::Node& codec_node,
                           const std::optional<YAML::Node>& params_node,
                           const std::optional<YAML::Node>& memory_node,
                           const std::optional<YAML::Node>& max_rel_err_node, CodecChoice* choice) {
    std::string spec;
    TERSE_CHECK(scalar(codec_node, "codec", &spec));
    std::string name;
    CodecParams params;
    if (parse_codec_spec(spec, &name, &params) != ncclSuccess) {
      return refuse_with_last_error(codec_node);
    }
    if (params_node) {
      if (!params_node->IsMap()) {
        return refuse(*params_node, "params: expected a map like {block: 128}, found %s",
                      kind_of(*params_node));
      }
      for (const auto& entry : *params_node) {
        std::string key, value;
        TERSE_CHECK(scalar(entry.first, "params key", &key));
        TERSE_CHECK(scalar(entry.second, "params value", &value));
        if (params.has(key)) {
          return refuse(entry.first, "params: '%s' given twice (in codec or params)", key.c_str());
        }
        params.set(key, value);
      }
    }
    // `max_rel_err: 0.01` beside `codec: auto` is the same as the parameter.
    if (max_rel_err_node) {
      std::string value;
      TERSE_CHECK(scalar(*max_rel_err_node, "max_rel_err", &value));
      if (name != kAutoCodec) {
        return refuse(*max_rel_err_node,
                      "max_rel_err: only codec auto takes an error bound to choose by (codec '%s' "
                      "is fixed)",
                      name.c_str());
      }
      if (params.has(kAutoMaxRelErr)) {
        return refuse(*max_rel_err_node, "max_rel_err: given twice (in codec or params too)");
      }
      params.set(kAutoMaxRelErr, value);
    }
    std::optional<MemoryKind> memory;
    if (memory_node) {
      std::string text;
      MemoryKind kind;
      TERSE_CHECK(scalar(*memory_node, "memory", &text));
      if (!parse_memory_kind(text, &kind)) {
        return refuse(*memory_node, "memory: '%s' is not one of none, residual, momentum",
                      text.c_str());
      }
      memory = kind;
    }
    if (CodecChoice::make(name, params, memory, choice) != ncclSuccess) {
      // Point at what was wrong: an unknown codec at `codec`, a memory that does not fit the
      // codec at `memory`, any other complaint about a known codec at its parameters.
      const YAML::Node* where = &codec_node;
      std::string reason = last_error();
      if (name == kAutoCodec || find_codec(name) != nullptr) {
        if (memory_node && reason.find("memory") != std::string::npos) {
          where = &*memory_node;
        } else if (max_rel_err_node && reason.find(kAutoMaxRelErr) != std::string::npos) {
          where = &*max_rel_err_node;
        } else if (params_node) {
          where = &*params_node;
        }
      }
      return refuse_with_last_error(*where);
    }
    return ncclSuccess;
  }

  ncclResult_t parse_schedule(const YAML::Node& node, Schedule* schedule) {
    if (!node.IsMap()) {
      return refuse(node, "schedule: expected a map like {start: 0, every: 1}, found %s",
                    kind_of(node));
    }
    TERSE_CHECK(for_each_key(node, "schedule", {"start", "end", "every", "warmup"},
                             [&](const std::string& key, const YAML::Node& value) {
                               uint64_t* field = key == "start"   ? &schedule->start
                                                 : key == "end"   ? &schedule->end
                                                 : key == "every" ? &schedule->every
                                                                  : &schedule->warmup;
                               std::string what = "schedule " + key;
                               return unsigned_number(value, what.c_str(), UINT64_MAX, field);
                             }));
    if (schedule->validate() != ncclSuccess) return refuse_with_last_error(node);
    return ncclSuccess;
  }

  std::string source_;
  int rule_ = 0;       // 1-based index of the rule being parsed; 0 outside the rules
  int last_line_ = 1;  // for nodes without a mark (empty values): the line of their key
};

}  // namespace

ncclResult_t Policy::from_yaml(const std::string& text, const std::string& source, Policy* policy) {
  PolicyFileParser parser(source);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    int line = error.mark.is_null() ? 1 : error.mark.line + 1;
    return parser.refuse_at(line, "not valid YAML: " + error.msg);
  }
  if (root.IsNull()) {
    return parser.refuse_at(1, "the policy is empty (expected a map with a 'rules' list)");
  }
  try {
    return parser.parse(root, policy);
  } catch (const YAML::Exception& error) {
    int line = error.mark.is_null() ? 1 : error.mark.line + 1;
    return parser.refuse_at(line, error.msg);
  }
}

ncclResult_t Policy::from_file(const std::string& path, Policy* policy) {
  std::ifstream file(path);
  if (!file) {
    return fail(ncclInvalidArgument, "policy file '%s' cannot be read: %s", path.c_str(),
                strerror(errno));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) {
    return fail(ncclInvalidArgument, "policy file '%s' cannot be read: %s", path.c_str(),
                strerror(errno));
  }
  return from_yaml(text.str(), path, policy);
}

}  // namespace terse
