#include <gtest/gtest.h>

#include "topology/path_class.h"

namespace terse {
namespace {

DeviceLocation at(const char* bus, std::vector<int> switches, int locality) {
  return DeviceLocation{bus, std::move(switches), locality};
}

TEST(PathClass, NamesAreNcclsAndOrderedClosestFirst) {
  EXPECT_STREQ(path_class_name(PathClass::kLoc), "LOC");
  EXPECT_STREQ(path_class_name(PathClass::kNvl), "NVL");
  EXPECT_STREQ(path_class_name(PathClass::kPix), "PIX");
  EXPECT_STREQ(path_class_name(PathClass::kPxb), "PXB");
  EXPECT_STREQ(path_class_name(PathClass::kPhb), "PHB");
  EXPECT_STREQ(path_class_name(PathClass::kSys), "SYS");
  EXPECT_LT(PathClass::kPix, PathClass::kPxb);
  EXPECT_LT(PathClass::kPhb, PathClass::kSys);
}

TEST(PathClass, ByTheSwitchesBetween) {
  const DeviceLocation a = at("0000:05:00.0", {3, 1}, 0);  // leaf 3 under top 1
  EXPECT_EQ(classify_path(a, at("0000:06:00.0", {3, 1}, 0)), PathClass::kPix);
  EXPECT_EQ(classify_path(a, at("0000:09:00.0", {4, 1}, 0)), PathClass::kPxb);  // via top 1
  EXPECT_EQ(classify_path(a, at("0000:02:00.0", {1}, 0)), PathClass::kPxb);     // on top 1 itself
  EXPECT_EQ(classify_path(at("0000:02:00.0", {1}, 0), at("0000:02:01.0", {1}, 0)), PathClass::kPix);
  EXPECT_EQ(classify_path(a, at("0000:15:00.0", {6, 5}, 0)), PathClass::kPhb);
  EXPECT_EQ(classify_path(a, at("0000:80:00.0", {}, 0)), PathClass::kPhb);  // on a root port
  EXPECT_EQ(classify_path(a, at("0000:45:00.0", {7, 8}, 1)), PathClass::kSys);
  EXPECT_EQ(classify_path(a, a), PathClass::kLoc);
  // Two functions of one card (a dual-port NIC's mlx5_0 and mlx5_1) are one device.
  EXPECT_EQ(classify_path(at("0000:06:00.0", {3, 1}, 0), at("0000:06:00.1", {3, 1}, 0)),
            PathClass::kLoc);
  EXPECT_EQ(classify_path(at("0000:06:00.0", {3, 1}, 0), at("0000:06:01.0", {3, 1}, 0)),
            PathClass::kPix);
}

TEST(PathClass, UnknownLocalityIsTheWorstCase) {
  EXPECT_EQ(classify_path(at("0000:05:00.0", {}, -1), at("0000:06:00.0", {}, 0)), PathClass::kSys);
  EXPECT_EQ(classify_path(at("", {}, 0), at("", {}, 0)), PathClass::kPhb);  // no bus id: not LOC
}

}  // namespace
}  // namespace terse
