#include <gtest/gtest.h>

#include "codecs/codec_params.h"
#include "common/result.h"

namespace terse {
namespace {

TEST(CodecSpec, SplitsNameAndParameters) {
  std::string name;
  CodecParams params;
  ASSERT_EQ(parse_codec_spec("int8: block = 128 ,rounding=stochastic", &name, &params),
            ncclSuccess);
  EXPECT_EQ(name, "int8");
  long long block = 0;
  std::string rounding;
  EXPECT_EQ(params.get_int("block", 256, 2, 65536, &block), ncclSuccess);
  EXPECT_EQ(block, 128);
  EXPECT_EQ(params.get_choice("rounding", {"nearest", "stochastic"}, "nearest", &rounding),
            ncclSuccess);
  EXPECT_EQ(rounding, "stochastic");
  EXPECT_EQ(params.finish(), ncclSuccess);
}

TEST(CodecSpec, RefusesMalformedSpecs) {
  std::string name;
  CodecParams params;
  EXPECT_EQ(parse_codec_spec("", &name, &params), ncclInvalidArgument);
  EXPECT_EQ(parse_codec_spec("int8:block", &name, &params), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("'block' is not key=value"), std::string::npos);
  EXPECT_EQ(parse_codec_spec("int8:block=1,,x=2", &name, &params), ncclInvalidArgument);
  EXPECT_EQ(parse_codec_spec("int8:block=1,block=2", &name, &params), ncclInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("given twice"), std::string::npos);
  EXPECT_EQ(parse_codec_spec("int8:=3", &name, &params), ncclInvalidArgument);
}

TEST(CodecParams, DefaultsApplyWhenAbsent) {
  CodecParams params("topk");
  double ratio = 0;
  bool flag = false;
  EXPECT_EQ(params.get_double("ratio", 0.01, 0, 1, &ratio), ncclSuccess);
  EXPECT_EQ(ratio, 0.01);
  EXPECT_EQ(params.get_bool("shared_seed", true, &flag), ncclSuccess);
  EXPECT_TRUE(flag);
}

TEST(CodecParams, RangeAndTypeErrorsNameCodecKeyAndValue) {
  CodecParams params;
  ASSERT_EQ(CodecParams::parse("int8", "block=0,ratio=abc,flag=maybe,mode=x", &params),
            ncclSuccess);
  long long block = 0;
  EXPECT_EQ(params.get_int("block", 256, 2, 65536, &block), ncclInvalidArgument);
  EXPECT_STREQ(last_error(), "codec int8: parameter block=0 is outside [2, 65536]");
  double ratio = 0;
  EXPECT_EQ(params.get_double("ratio", 0.1, 0, 1, &ratio), ncclInvalidArgument);
  EXPECT_STREQ(last_error(), "codec int8: parameter ratio=abc is not a number");
  bool flag = false;
  EXPECT_EQ(params.get_bool("flag", false, &flag), ncclInvalidArgument);
  std::string mode;
  EXPECT_EQ(params.get_choice("mode", {"minmax", "absmax"}, "minmax", &mode), ncclInvalidArgument);
  EXPECT_STREQ(last_error(), "codec int8: parameter mode=x is not one of: minmax, absmax");
}

TEST(CodecParams, FinishRefusesKeysNobodyAskedFor) {
  CodecParams params;
  ASSERT_EQ(CodecParams::parse("int8", "block=64,blok=3", &params), ncclSuccess);
  long long block = 0;
  EXPECT_EQ(params.get_int("block", 256, 2, 65536, &block), ncclSuccess);
  EXPECT_EQ(params.finish(), ncclInvalidArgument);
  EXPECT_STREQ(last_error(), "codec int8: unknown parameter 'blok' (known: block)");
}

}  // namespace
}  // namespace terse
