// cuBLAS loaded on first use (codecs/cuda/cublas_library.h): the library terse was built against,
// with every entry point PowerSGD calls, loaded once. Needs no GPU: loading cuBLAS does not touch
// the device.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#if TERSE_HAVE_CUDA
#include "codecs/cuda/cublas_library.h"
#include "common/result.h"

namespace terse {
namespace {

bool cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libcublas.so") != std::string::npos) return true;
  }
  return false;
}

TEST(CublasLibrary, LoadsOnFirstUseWithEveryEntryPoint) {
  // Only this test loads cuBLAS, and CTest runs each test in a process of its own.
  const bool mapped_before = cublas_mapped();
  const CublasLibrary* library = nullptr;
  ASSERT_EQ(load_cublas(&library), ncclSuccess) << last_error();
  ASSERT_NE(library, nullptr);
  EXPECT_NE(library->create, nullptr);
  EXPECT_NE(library->destroy, nullptr);
  EXPECT_NE(library->set_math_mode, nullptr);
  EXPECT_NE(library->set_stream, nullptr);
  EXPECT_NE(library->sgemm, nullptr);
  EXPECT_TRUE(cublas_mapped());
  const CublasLibrary* again = nullptr;
  ASSERT_EQ(load_cublas(&again), ncclSuccess);
  EXPECT_EQ(again, library);
  if (::testing::GTEST_FLAG(filter) != "*") {
    EXPECT_FALSE(mapped_before) << "cuBLAS was mapped before its first use";
  }
}

}  // namespace
}  // namespace terse
#endif
