// The planner of every plugin and compressed test reads its codec speeds from
// tests/codec_speeds.txt (unless the environment names another table): a test that expects the
// algorithm a codec runs, or that auto leaves a tensor uncompressed, must get it from the cost
// model, not from speeds probed while the machine happens to be loaded (sra and the tree are
// predicted within a few percent of each other for some codecs and sizes). Set before any test
// runs: the speeds are read once per process, so a table one test names itself is ignored once
// an earlier test has planned. gtest_discover_tests cannot give its tests two environment
// variables, hence a static setting.
#include <cstdlib>

namespace {

[[maybe_unused]] const bool pinned = [] {
  return setenv("TERSE_CODEC_SPEED", TERSE_TEST_CODEC_SPEEDS, 0) == 0;
}();

}  // namespace
