#include "topology/interface_speed.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "topology/natural_order.h"

namespace terse {
namespace {

// A name that stays inside net_dir: no separators, not "." or "..".
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

std::string first_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

}  // namespace

double interface_gbps(const std::string& net_dir, const std::string& name) {
  if (!plain_name(name)) return 0;
  const std::string text = first_line(net_dir + "/" + name + "/speed");
  if (text.empty()) return 0;
  char* end = nullptr;
  errno = 0;
  const long mbits = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || mbits <= 0) return 0;  // -1: the driver does not know
  return static_cast<double>(mbits) / 1000.0;
}

PortState interface_state(const std::string& net_dir, const std::string& name) {
  if (!plain_name(name)) return PortState::kUnknown;
  const std::string state = first_line(net_dir + "/" + name + "/operstate");
  if (state == "up") return PortState::kActive;
  if (state == "down" || state == "lowerlayerdown") return PortState::kDown;
  return PortState::kUnknown;
}

std::vector<std::string> virtual_interfaces(const std::string& net_dir) {
  std::vector<std::string> names;
  DIR* directory = opendir(net_dir.c_str());
  if (directory == nullptr) return names;
  while (dirent* entry = readdir(directory)) {
    const std::string name = entry->d_name;
    if (!plain_name(name) || name == "lo") continue;
    struct stat status {};
    if (stat((net_dir + "/" + name).c_str(), &status) != 0) continue;  // not an interface
    if (stat((net_dir + "/" + name + "/device").c_str(), &status) == 0) continue;  // hardware
    names.push_back(name);
  }
  closedir(directory);
  std::sort(names.begin(), names.end(), natural_less);
  return names;
}

}  // namespace terse
