// The perf binaries' command line: sizes, defaults, every flag, and the refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/nccl_tests/options.h"

namespace terse {
namespace perf {
namespace {

ParseOutcome parse(std::vector<const char*> args, Options* options, std::string* error,
                   const std::string& allowed = "") {
  args.insert(args.begin(), "all_reduce_perf");
  return parse_options(static_cast<int>(args.size()), args.data(), options, error, allowed);
}

TEST(PerfSizes, AcceptBytesAndBinaryUnits) {
  size_t bytes = 0;
  EXPECT_TRUE(parse_size("8", &bytes));
  EXPECT_EQ(bytes, 8u);
  EXPECT_TRUE(parse_size("1K", &bytes));
  EXPECT_EQ(bytes, 1024u);
  EXPECT_TRUE(parse_size("64m", &bytes));
  EXPECT_EQ(bytes, 64u << 20);
  EXPECT_TRUE(parse_size("2G", &bytes));
  EXPECT_EQ(bytes, size_t{2} << 30);
  EXPECT_TRUE(parse_size("1.5K", &bytes));
  EXPECT_EQ(bytes, 1536u);
  EXPECT_TRUE(parse_size("64MB", &bytes));
  EXPECT_EQ(bytes, 64u << 20);
  EXPECT_TRUE(parse_size("0", &bytes));
  EXPECT_EQ(bytes, 0u);
}

TEST(PerfSizes, RefuseAnythingElse) {
  size_t bytes = 7;
  for (const char* text : {"", "-8", "K", "1Q", "1KK", "1.2.3", "1 K", "0x10", "1KiB", "."}) {
    EXPECT_FALSE(parse_size(text, &bytes)) << text;
  }
  EXPECT_EQ(bytes, 7u);
}

TEST(PerfOptions, DefaultsAreNcclTests) {
  Options options;
  std::string error;
  ASSERT_EQ(parse({}, &options, &error), ParseOutcome::kRun) << error;
  EXPECT_EQ(options.min_bytes, 32u << 20);
  EXPECT_EQ(options.max_bytes, 32u << 20);
  EXPECT_EQ(options.step_factor, 1u);
  EXPECT_EQ(options.step_bytes, 1u << 20);
  EXPECT_EQ(options.iters, 20);
  EXPECT_EQ(options.warmup_iters, 1);
  EXPECT_EQ(options.check, 1);
  EXPECT_EQ(options.average, 1);
  EXPECT_EQ(options.root, 0);
  EXPECT_EQ(options.types, std::vector<ncclDataType_t>{ncclFloat32});
  EXPECT_EQ(options.ops, std::vector<Reduction>{Reduction::kSum});
}

TEST(PerfOptions, EveryFlagShortAndLong) {
  Options options;
  std::string error;
  ASSERT_EQ(parse({"-b", "8", "-e", "1M", "-f", "4",   "-i", "16",       "-n", "3",       "-w", "2",
                   "-m", "5", "-c", "0",  "-o", "max", "-d", "bfloat16", "-t", "3",       "-g", "1",
                   "-a", "3", "-z", "1",  "-T", "9",   "-r", "-1",       "-J", "out.json"},
                  &options, &error),
            ParseOutcome::kRun)
      << error;
  EXPECT_EQ(options.min_bytes, 8u);
  EXPECT_EQ(options.max_bytes, 1u << 20);
  EXPECT_EQ(options.step_factor, 4u);
  EXPECT_EQ(options.step_bytes, 16u);
  EXPECT_EQ(options.iters, 3);
  EXPECT_EQ(options.warmup_iters, 2);
  EXPECT_EQ(options.agg_iters, 5);
  EXPECT_EQ(options.check, 0);
  EXPECT_EQ(options.ops, std::vector<Reduction>{Reduction::kMax});
  EXPECT_EQ(options.types, std::vector<ncclDataType_t>{ncclBfloat16});
  EXPECT_EQ(options.threads, 3);
  EXPECT_EQ(options.average, 3);
  EXPECT_EQ(options.blocking, 1);
  EXPECT_EQ(options.timeout_s, 9);
  EXPECT_EQ(options.root, -1);
  EXPECT_EQ(options.json_path, "out.json");

  Options long_form;
  ASSERT_EQ(parse({"--minbytes=16", "--maxbytes", "2K", "--nthreads=2", "--op", "prod",
                   "--datatype=int8", "-n7"},
                  &long_form, &error),
            ParseOutcome::kRun)
      << error;
  EXPECT_EQ(long_form.min_bytes, 16u);
  EXPECT_EQ(long_form.max_bytes, 2048u);
  EXPECT_EQ(long_form.threads, 2);
  EXPECT_EQ(long_form.ops, std::vector<Reduction>{Reduction::kProd});
  EXPECT_EQ(long_form.types, std::vector<ncclDataType_t>{ncclInt8});
  EXPECT_EQ(long_form.iters, 7);
}

TEST(PerfOptions, AllMeansNcclTestsLists) {
  Options options;
  std::string error;
  ASSERT_EQ(parse({"-d", "all", "-o", "all"}, &options, &error), ParseOutcome::kRun) << error;
  ASSERT_EQ(options.types.size(), 12u);
  EXPECT_EQ(options.types.front(), ncclInt8);
  EXPECT_EQ(options.types.back(), ncclFloat8e5m2);
  ASSERT_EQ(options.ops.size(), 6u);
  EXPECT_EQ(options.ops.back(), Reduction::kMulSum);
}

TEST(PerfOptions, BuffersSayWhereTheBuffersLive) {
  Options options;
  std::string error;
  ASSERT_EQ(parse({}, &options, &error), ParseOutcome::kRun) << error;
  EXPECT_EQ(options.memory, BufferMemory::kAuto);
  ASSERT_EQ(parse({"-B", "device"}, &options, &error), ParseOutcome::kRun) << error;
  EXPECT_EQ(options.memory, BufferMemory::kDevice);
  ASSERT_EQ(parse({"--buffers=managed"}, &options, &error), ParseOutcome::kRun) << error;
  EXPECT_EQ(options.memory, BufferMemory::kManaged);
  ASSERT_EQ(parse({"-Bhost"}, &options, &error), ParseOutcome::kRun) << error;
  EXPECT_EQ(options.memory, BufferMemory::kHost);
  // gpu_check.sh finds the device mode by this text in -h.
  EXPECT_NE(usage_text("all_reduce_perf").find("-B device"), std::string::npos);
}

// nccl-tests' own getopt string (2.19): terse's additions must not take a letter it gives
// another meaning (its -M is the memory report, so -B names the buffers' memory).
TEST(PerfOptions, OurOwnFlagsAreFreeInNcclTests) {
  const std::string nccl_tests = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:";
  for (char ours : {'B', 'Z'}) EXPECT_EQ(nccl_tests.find(ours), std::string::npos) << ours;
}

TEST(PerfOptions, HelpIsNotAnError) {
  Options options;
  std::string error;
  EXPECT_EQ(parse({"-b", "8", "-h"}, &options, &error), ParseOutcome::kHelp);
  EXPECT_NE(usage_text("all_reduce_perf").find("--nthreads"), std::string::npos);
  EXPECT_EQ(usage_text("mpi_allreduce_perf", "be").find("--nthreads"), std::string::npos);
}

struct BadCommandLine {
  std::vector<const char*> args;
  const char* says;  // part of the message
};

class PerfOptionsRefuse : public ::testing::TestWithParam<BadCommandLine> {};

TEST_P(PerfOptionsRefuse, WithASentenceNamingTheFlag) {
  Options options;
  std::string error;
  EXPECT_EQ(parse(GetParam().args, &options, &error), ParseOutcome::kError);
  EXPECT_NE(error.find(GetParam().says), std::string::npos) << error;
}

INSTANTIATE_TEST_SUITE_P(
    Flags, PerfOptionsRefuse,
    ::testing::Values(BadCommandLine{{"-x", "1"}, "unknown option '-x'"},
                      BadCommandLine{{"--bogus=1"}, "unknown option '--bogus=1'"},
                      BadCommandLine{{"-n", "abc"}, "-n: 'abc' is not a whole number"},
                      BadCommandLine{{"-n", "0"}, "-n: 0 is outside"},
                      BadCommandLine{{"-n"}, "-n (--iters) needs a value"},
                      BadCommandLine{{"-b", "10Q"}, "-b: '10Q' is not a size"},
                      BadCommandLine{{"-g", "2"}, "only 1 rank per thread"},
                      BadCommandLine{{"-d", "fp16"}, "unknown datatype 'fp16'"},
                      BadCommandLine{{"-o", "xor"}, "unknown operator 'xor'"},
                      BadCommandLine{{"-z", "2"}, "-z: 2 is outside [0, 1]"},
                      BadCommandLine{{"-a", "4"}, "-a: 4 is outside [0, 3]"},
                      BadCommandLine{{"-r", "-2"}, "-r: -2 is outside"},
                      BadCommandLine{{"-t", "0"}, "-t: 0 is outside"},
                      BadCommandLine{{"-f", "0"}, "-f: 0 is not a step factor"},
                      BadCommandLine{{"-b", "2M", "-e", "1M"}, "is larger than -e"},
                      BadCommandLine{{"-f", "1", "-i", "0"}, "-i 0 with -f 1"},
                      BadCommandLine{{"-b", "0", "-f", "2"}, "would never grow"},
                      BadCommandLine{{"-J", ""}, "-J: the file name is empty"},
                      BadCommandLine{{"-B", "gpu"}, "-B: 'gpu' is not host, device or managed"},
                      BadCommandLine{{"8"}, "unexpected argument '8'"}));

TEST(PerfOptions, ASubsetRefusesTheRest) {
  Options options;
  std::string error;
  EXPECT_EQ(parse({"-t", "2"}, &options, &error, "befnwcdJ"), ParseOutcome::kError);
  EXPECT_NE(error.find("unknown option '-t'"), std::string::npos) << error;
  EXPECT_EQ(parse({"-b", "8", "-e", "16"}, &options, &error, "befnwcdJ"), ParseOutcome::kRun);
}

}  // namespace
}  // namespace perf
}  // namespace terse
