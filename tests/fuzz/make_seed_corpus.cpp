// Writes the seed corpora of the fuzz targets under <corpus_dir>/<target>/ (committed in
// tests/fuzz/corpus; run it again after a wire format or a codec's parameters change):
//
//   make_seed_corpus <corpus_dir>
//
// fuzz_decode_<codec>  valid messages of every registered codec: each of its variants
//                      (decoder_input.h) on fp32, fp16 and bf16 inputs of awkward lengths, and
//                      one with NaN/Inf (an escape section), each behind its input prefix.
//                      libFuzzer mutates these; from valid messages it reaches the checks deep
//                      in a payload far sooner than from random bytes.
// fuzz_codec_spec      every variant's spec as written and in canonical form, and TERSE_CODEC
//                      forms with fallbacks; plus fuzz_codec_spec.dict (codec names, parameter
//                      names and values from the registry).
// fuzz_policy_yaml     policy files covering every key (and perf/policies/example.yaml); plus
//                      fuzz_policy_yaml.dict.
//
// Files it writes are named seed-*; it first deletes the seed-* files of each directory, and
// leaves any other file there (regression inputs from crashes the fuzzers found: name them
// regression-*). It fails when a registered codec has no fuzz_decode_<codec>.cpp target.
// Output is deterministic: the same build writes the same bytes.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "codecs/wire_format.h"
#include "common/result.h"
#include "decoder_input.h"

namespace fs = std::filesystem;

namespace terse::fuzz {
namespace {

bool write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) {
    fprintf(stderr, "make_seed_corpus: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// Creates `dir` and deletes the seeds a previous run wrote there.
bool fresh_seed_dir(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    fprintf(stderr, "make_seed_corpus: cannot create %s: %s\n", dir.c_str(),
            error.message().c_str());
    return false;
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("seed-", 0) == 0) fs::remove(entry.path());
  }
  return true;
}

struct SeedCase {
  DType dtype;
  size_t count;
  bool accumulate;
  bool nonfinite;
};

// Lengths that leave partial blocks and partial code bytes, an empty tensor, one element, and
// a message with an escape section.
const SeedCase kSeedCases[] = {
    {DType::kFloat32, 300, false, false}, {DType::kFloat16, 64, true, false},
    {DType::kBFloat16, 7, false, false},  {DType::kFloat32, 1, false, false},
    {DType::kFloat32, 0, false, false},   {DType::kFloat32, 33, true, true},
};

std::string encode_seed(Codec& codec, uint8_t variant, const SeedCase& seed_case, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> input(seed_case.count * dtype_size(seed_case.dtype));
  for (size_t i = 0; i < seed_case.count; ++i) {
    store_element(input.data(), seed_case.dtype, i, normal(engine));
  }
  if (seed_case.nonfinite) {
    store_element(input.data(), seed_case.dtype, 3, NAN);
    store_element(input.data(), seed_case.dtype, 10, INFINITY);
    store_element(input.data(), seed_case.dtype, 11, -INFINITY);
  }
  std::unique_ptr<CodecState> state =
      codec.make_state(seed_case.count, seed_case.dtype, MatrixShape{});
  EncodeContext context;
  context.seed = seed;
  context.state = state.get();
  std::vector<uint8_t> message(codec.max_encoded_bytes(seed_case.count, seed_case.dtype));
  size_t bytes = 0;
  if (codec.encode(input.data(), seed_case.count, seed_case.dtype, context, message.data(),
                   message.size(), &bytes) != ncclSuccess) {
    fprintf(stderr, "make_seed_corpus: %s: encode of %zu elements failed: %s\n",
            codec.spec().c_str(), seed_case.count, last_error());
    return "";
  }
  DecoderPrefix prefix;
  prefix.variant = variant;
  prefix.dtype = seed_case.dtype;
  prefix.accumulate = seed_case.accumulate;
  prefix.count = static_cast<uint16_t>(seed_case.count);
  std::vector<uint8_t> out = write_decoder_prefix(prefix);
  out.insert(out.end(), message.begin(), message.begin() + bytes);
  return std::string(out.begin(), out.end());
}

bool write_decoder_corpora(const fs::path& corpus) {
  for (const CodecInfo& info : codec_table()) {
    const std::string target = std::string("fuzz_decode_") + info.name;
    const fs::path source = fs::path(TERSE_SOURCE_DIR) / "tests/fuzz" / (target + ".cpp");
    if (!fs::exists(source)) {
      fprintf(stderr,
              "make_seed_corpus: codec '%s' has no fuzz target: add %s (a copy of another "
              "fuzz_decode_*.cpp) and its variants in decoder_input.cpp\n",
              info.name, source.c_str());
      return false;
    }
    const fs::path dir = corpus / target;
    if (!fresh_seed_dir(dir)) return false;
    const std::vector<std::string>& variants = decoder_variants(info.name);
    for (size_t v = 0; v < variants.size(); ++v) {
      std::unique_ptr<Codec> codec;
      if (create_codec(variants[v], &codec) != ncclSuccess) {
        fprintf(stderr, "make_seed_corpus: %s: %s\n", variants[v].c_str(), last_error());
        return false;
      }
      uint64_t seed = 1000 * (v + 1);
      for (const SeedCase& seed_case : kSeedCases) {
        const std::string bytes = encode_seed(*codec, static_cast<uint8_t>(v), seed_case, ++seed);
        if (bytes.empty()) return false;
        std::string name = "seed-v" + std::to_string(v) + "-" + dtype_name(seed_case.dtype) + "-n" +
                           std::to_string(seed_case.count) +
                           (seed_case.nonfinite ? "-nonfinite" : "");
        if (!write_file(dir / name, bytes)) return false;
      }
    }
  }
  return true;
}

// The names and choices in a registry parameter text: "block=256 (8..), mode=minmax|absmax"
// gives the keys block and mode and the values minmax and absmax.
void parameter_words(const std::string& text, std::set<std::string>* keys,
                     std::set<std::string>* values) {
  auto word_char = [](char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  size_t i = 0;
  while (i < text.size()) {
    if (!isalpha(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && word_char(text[end])) ++end;
    const char before = i > 0 ? text[i - 1] : ' ';
    const char after = end < text.size() ? text[end] : ' ';
    if (after == '=') {
      keys->insert(text.substr(i, end - i));
    } else if (before == '|' || after == '|') {
      values->insert(text.substr(i, end - i));
    }
    i = end;
  }
}

// One line of a libFuzzer dictionary: the token quoted, with quotes, backslashes and
// non-printable bytes escaped.
std::string dict_entry(const std::string& token) {
  std::string line = "\"";
  for (unsigned char c : token) {
    if (c == '"' || c == '\\') {
      line += '\\';
      line += static_cast<char>(c);
    } else if (isprint(c)) {
      line += static_cast<char>(c);
    } else {
      char escaped[5];
      snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      line += escaped;
    }
  }
  return line + "\"\n";
}

bool write_spec_corpus(const fs::path& corpus) {
  const fs::path dir = corpus / "fuzz_codec_spec";
  if (!fresh_seed_dir(dir)) return false;
  int index = 0;
  std::string dict =
      "# Codec names, parameter names and values (make_seed_corpus, from the registry)\n";
  std::set<std::string> keys, values;
  for (const CodecInfo& info : codec_table()) {
    dict += dict_entry(info.name);
    parameter_words(info.parameters, &keys, &values);
    for (const std::string& spec : decoder_variants(info.name)) {
      std::unique_ptr<Codec> codec;
      if (create_codec(spec, &codec) != ncclSuccess) {
        fprintf(stderr, "make_seed_corpus: %s: %s\n", spec.c_str(), last_error());
        return false;
      }
      for (const std::string& text : {spec, codec->spec()}) {
        if (!write_file(dir / ("seed-" + std::to_string(index++)), text)) return false;
      }
    }
  }
  for (const std::string& key : keys) dict += dict_entry(key + "=");
  for (const std::string& value : values) dict += dict_entry(value);
  for (const char* token : {":", ",", "=", "k=", ";fallback=", "auto", "1e-30", "1e308", "65536",
                            "4294967295", "-1", "nan", "inf", "0x10"}) {
    dict += dict_entry(token);
  }
  for (const char* text : {"sign;fallback=qsgd:levels=15", "int8:block=128;fallback=none",
                           "terngrad;fallback=int4:rounding=stochastic", "auto", "none",
                           " topk : ratio = 0.5 , method = exact ", "int8:block=7", "bogus:x=1",
                           "topk:ratio=0.1,k=3"}) {
    if (!write_file(dir / ("seed-" + std::to_string(index++)), text)) return false;
  }
  return write_file(corpus / "fuzz_codec_spec.dict", dict);
}

bool write_policy_corpus(const fs::path& corpus) {
  const fs::path dir = corpus / "fuzz_policy_yaml";
  if (!fresh_seed_dir(dir)) return false;
  const char* kPolicies[] = {
      ("rules:\n"
       "  - match:\n"
       "      name: \"encoder\\\\..*weight\"\n"
       "      min_bytes: 1M\n"
       "      max_bytes: 1G\n"
       "      dtype: [float, bfloat16]\n"
       "      op: [sum, avg]\n"
       "      comm_size: {min: 2, max: 1024}\n"
       "      link: inter\n"
       "    codec: int8\n"
       "    params: {block: 128, rounding: stochastic}\n"
       "    memory: residual\n"
       "    schedule: {start: 100, end: 0, every: 1, warmup: 50}\n"
       "    fallback: \"qsgd:levels=15\"\n"
       "  - match: {max_bytes: 64K}\n"
       "    codec: none\n"),
      "rules:\n  - codec: topk:ratio=0.01\n",
      "rules:\n  - match: {dtype: half, op: sum}\n    codec: dgc\n    memory: momentum\n",
      ("rules:\n  - match: {link: intra}\n    codec: auto\n  - codec: powersgd\n"
       "    params: {rank: 2, iterations: 1, warm_start: false}\n"),
      "rules:\n  - codec: sign\n    fallback: terngrad\n    schedule: {every: 2}\n",
      "rules: []\n",
      "rules:\n  - match: {name: \"(a|b)*\"}\n    codec: randomk\n    params: {ratio: 0.1}\n",
      "{rules: [{codec: fp16}, {codec: bf16, match: {comm_size: {min: 1}}}]}\n",
  };
  int index = 0;
  for (const char* text : kPolicies) {
    if (!write_file(dir / ("seed-" + std::to_string(index++)), text)) return false;
  }
  std::ifstream example(fs::path(TERSE_SOURCE_DIR) / "perf/policies/example.yaml",
                        std::ios::binary);
  if (example) {
    std::stringstream text;
    text << example.rdbuf();
    if (!write_file(dir / "seed-example", text.str())) return false;
  }
  std::string dict = "# Policy file keys and values (make_seed_corpus, from policy_file.cpp)\n";
  for (const char* token : {"rules:",
                            "match:",
                            "codec:",
                            "params:",
                            "memory:",
                            "schedule:",
                            "fallback:",
                            "name:",
                            "min_bytes:",
                            "max_bytes:",
                            "dtype:",
                            "op:",
                            "comm_size:",
                            "link:",
                            "min:",
                            "max:",
                            "start:",
                            "end:",
                            "every:",
                            "warmup:",
                            "- ",
                            "{",
                            "}",
                            "[",
                            "]",
                            ": ",
                            "\n  ",
                            "none",
                            "residual",
                            "momentum",
                            "intra",
                            "inter",
                            "any",
                            "float",
                            "half",
                            "bfloat16",
                            "sum",
                            "avg",
                            "max",
                            "1K",
                            "1M",
                            "1G",
                            "18446744073709551615",
                            "auto",
                            "&a",
                            "*a",
                            "!!str",
                            "---",
                            "...",
                            "\"",
                            "'",
                            "#",
                            "|",
                            ">"}) {
    dict += dict_entry(token);
  }
  for (const CodecInfo& info : codec_table()) dict += dict_entry(info.name);
  return write_file(corpus / "fuzz_policy_yaml.dict", dict);
}

}  // namespace
}  // namespace terse::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <corpus_dir>   (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  setenv("TERSE_DEBUG", "NONE", 0);
  const fs::path corpus = argv[1];
  if (!terse::fuzz::write_decoder_corpora(corpus) || !terse::fuzz::write_spec_corpus(corpus) ||
      !terse::fuzz::write_policy_corpus(corpus)) {
    return 1;
  }
  printf("make_seed_corpus: seeds written under %s\n", corpus.c_str());
  return 0;
}
