#include <gtest/gtest.h>

#include "topology/link_class.h"

namespace terse {
namespace {

TEST(LinkClass, NamesRoundTrip) {
  for (LinkClass link : {LinkClass::kAny, LinkClass::kIntra, LinkClass::kInter}) {
    LinkClass parsed = LinkClass::kAny;
    ASSERT_TRUE(parse_link_class(link_class_name(link), &parsed)) << link_class_name(link);
    EXPECT_EQ(parsed, link);
  }
  EXPECT_STREQ(link_class_name(LinkClass::kInter), "inter");
  LinkClass untouched = LinkClass::kIntra;
  EXPECT_FALSE(parse_link_class("Inter", &untouched));
  EXPECT_FALSE(parse_link_class("", &untouched));
  EXPECT_EQ(untouched, LinkClass::kIntra);
}

}  // namespace
}  // namespace terse
