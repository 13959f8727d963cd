#include <gtest/gtest.h>

#include "transport/tag_layout.h"

namespace terse {
namespace {

TEST(TagLayout, RoundTripsEveryField) {
  const uint16_t communicators[] = {0, 1, 0x1234, 0xffff};
  const uint32_t operations[] = {0, 1, 0x00abcdef, make_control_operation(7, 3), 0xffffffffu};
  const uint16_t sources[] = {0, 1, 4095, 0xffff};
  for (uint16_t communicator : communicators) {
    for (uint32_t operation : operations) {
      for (uint16_t source : sources) {
        TagFields fields = split_tag(make_tag(communicator, operation, source));
        EXPECT_EQ(fields.communicator, communicator);
        EXPECT_EQ(fields.operation, operation);
        EXPECT_EQ(fields.source_rank, source);
      }
    }
  }
}

TEST(TagLayout, FieldsOccupyDisjointBits) {
  EXPECT_EQ(make_tag(0xffff, 0, 0), 0xffff000000000000ull);
  EXPECT_EQ(make_tag(0, 0xffffffffu, 0), 0x0000ffffffff0000ull);
  EXPECT_EQ(make_tag(0, 0, 0xffff), 0x000000000000ffffull);
  EXPECT_EQ(make_tag(0xffff, 0xffffffffu, 0xffff), kMatchWholeTag);
}

TEST(TagLayout, DifferentSendersOrOperationsGiveDifferentTags) {
  EXPECT_NE(make_tag(1, make_operation(5, 0), 2), make_tag(1, make_operation(5, 0), 3));
  EXPECT_NE(make_tag(1, make_operation(5, 0), 2), make_tag(1, make_operation(5, 1), 2));
  EXPECT_NE(make_tag(1, make_operation(5, 0), 2), make_tag(1, make_operation(6, 0), 2));
  EXPECT_NE(make_tag(1, make_operation(5, 0), 2), make_tag(2, make_operation(5, 0), 2));
  EXPECT_NE(make_tag(1, make_operation(5, 0), 2), make_tag(1, make_control_operation(5, 0), 2));
}

TEST(TagLayout, OperationSplitsIntoSequenceAndStepThatWrap) {
  uint32_t operation = make_operation(0x12345, 0xabc);
  EXPECT_EQ(operation_sequence(operation), 0x12345u);
  EXPECT_EQ(operation_step(operation), 0xabcu);
  EXPECT_FALSE(is_control_operation(operation));
  // Wrapping drops the high bits instead of spilling into the neighbouring field.
  EXPECT_EQ(make_operation(kOperationSequenceMask + 1 + 9, 0), make_operation(9, 0));
  EXPECT_EQ(make_operation(3, kOperationStepMask + 1 + 4), make_operation(3, 4));
  EXPECT_FALSE(is_control_operation(make_operation(0xffffffffu, 0xffffffffu)));
}

TEST(TagLayout, ControlOperationsAreMarked) {
  uint32_t operation = make_control_operation(42, 5);
  EXPECT_TRUE(is_control_operation(operation));
  EXPECT_EQ(operation_sequence(operation), 42u);
  EXPECT_EQ(operation_step(operation), 5u);
}

static_assert(kTagCommunicatorBits + kTagOperationBits + kTagSourceBits == 64,
              "the fields fill the tag");
static_assert(1 + kOperationSequenceBits + kOperationStepBits == kTagOperationBits,
              "control bit, sequence and step fill the operation");
static_assert(split_tag(make_tag(3, 4, 5)).source_rank == 5, "usable at compile time");

}  // namespace
}  // namespace terse
