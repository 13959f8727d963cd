// Where a topology comes from (an explicit file, TERSE_TOPO_FILE, this machine) and how a bad
// file is refused: Result::kInvalidArgument with the file and the reason, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include "common/result.h"
#include "topology_fixtures.h"

namespace terse {
namespace {

// A file under the test's temporary directory, removed at the end of the scope.
class TempFile {
 public:
  TempFile(const char* name, const std::string& content) : path_(testing::TempDir() + name) {
    std::ofstream(path_) << content;
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void expect_refused(const std::string& path, const char* reason) {
  MachineTopology topology;
  EXPECT_EQ(load_machine_topology(path, &topology), Result::kInvalidArgument) << path;
  const std::string message = last_error();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(reason), std::string::npos) << message;
}

TEST(TopologyLoading, BadFilesAreRefusedWithTheFileAndTheReason) {
  expect_refused("/nonexistent/terse/machine.xml", "No such file or directory");
  expect_refused(testing::TempDir(), "not a regular file");
  TempFile garbage("terse_topology_garbage.xml", "this is not XML\n");
  expect_refused(garbage.path(), "hwloc cannot read it as an XML topology export");
  TempFile empty("terse_topology_empty.xml", "");
  expect_refused(empty.path(), "hwloc cannot read it");
  // Cut in the middle of an object: not well-formed.
  std::ifstream whole(fixture_path("hgx-8gpu-8nic-2socket.xml"));
  std::string text((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  TempFile cut("terse_topology_cut.xml", text.substr(0, text.size() / 2));
  expect_refused(cut.path(), "hwloc cannot read it");
  // Well-formed, but no machine in it.
  TempFile bare("terse_topology_bare.xml",
                "<?xml version=\"1.0\"?>\n<topology version=\"2.0\"></topology>\n");
  expect_refused(bare.path(), "hwloc rejected its content");
}

TEST(TopologyLoading, TerseTopoFileIsReadAndNamedInErrors) {
  {
    ScopedEnv file("TERSE_TOPO_FILE", fixture_path("workstation-4gpu-1nic.xml"));
    MachineTopology topology;
    ASSERT_EQ(load_machine_topology("", &topology), Result::kSuccess) << last_error();
    EXPECT_EQ(topology.gpus.size(), 4u);
    EXPECT_EQ(topology.source, fixture_path("workstation-4gpu-1nic.xml"));
    EXPECT_FALSE(topology.live);
    // An explicit path wins over the variable.
    ASSERT_EQ(load_machine_topology(fixture_path("hgx-8gpu-8nic-2socket.xml"), &topology),
              Result::kSuccess)
        << last_error();
    EXPECT_EQ(topology.gpus.size(), 8u);
  }
  ScopedEnv missing("TERSE_TOPO_FILE", std::string("/nonexistent/terse.xml"));
  MachineTopology topology;
  EXPECT_EQ(load_machine_topology("", &topology), Result::kInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("TERSE_TOPO_FILE=/nonexistent/terse.xml"),
            std::string::npos)
      << last_error();
}

TEST(TopologyLoading, ThisMachineLoads) {
  // Whatever this machine holds (often no GPU and no RDMA), loading it is not an error.
  ScopedEnv file("TERSE_TOPO_FILE", std::nullopt);
  MachineTopology topology;
  ASSERT_EQ(load_machine_topology("", &topology), Result::kSuccess) << last_error();
  EXPECT_TRUE(topology.live);
  EXPECT_NE(topology.source.find("this machine"), std::string::npos);
  EXPECT_FALSE(topology.localities.empty() && !topology.nics.empty());
}

TEST(TopologyLoading, NullOutputIsRefused) {
  EXPECT_EQ(load_machine_topology("", nullptr), Result::kInvalidArgument);
}

}  // namespace
}  // namespace terse
