#include "recording_ps.h"

#include <algorithm>
#include <cstdio>
#include <memory>

struct tersePsTensor {
  std::string name;
  std::vector<float> centre;
};

struct tersePsRequest {
  std::string kind;  // send, receive, clock
  tersePsTensor* tensor = nullptr;
  std::vector<float> snapshot;  // a receive's centre as issued
  float* destination = nullptr;
};

namespace terse {
namespace test {
namespace {

bool g_hold_receives = false;

std::vector<std::string>& log_lines() {
  static std::vector<std::string> lines;
  return lines;
}

std::string number(double value) {
  char text[32];
  snprintf(text, sizeof(text), "%g", value);
  return text;
}

}  // namespace

tersePsHandle_t recording_ps_tensor(const std::string& name, const std::vector<float>& initial) {
  return new tersePsTensor{name, initial};
}

void recording_ps_free(tersePsHandle_t handle) {
  delete handle;
}

std::vector<float> recording_ps_centre(tersePsHandle_t handle) {
  return handle->centre;
}

void recording_ps_add(tersePsHandle_t handle, const std::vector<float>& values) {
  for (size_t i = 0; i < handle->centre.size(); ++i) handle->centre[i] += values[i];
}

void recording_ps_hold_receives(bool hold) {
  g_hold_receives = hold;
}

const std::vector<std::string>& recording_ps_log() {
  return log_lines();
}
void recording_ps_clear_log() {
  log_lines().clear();
}

}  // namespace test
}  // namespace terse

using terse::test::g_hold_receives;
using terse::test::log_lines;
using terse::test::number;

extern "C" {

ncclResult_t tersePsSend(tersePsHandle_t handle, const void* tensor, tersePsRule_t rule,
                         tersePsRequest_t* sync) {
  if (handle == nullptr || sync == nullptr || rule != tersePsAdd) return ncclInvalidArgument;
  const float* values = static_cast<const float*>(tensor);
  std::string line = "send add " + handle->name;
  for (size_t i = 0; i < std::min<size_t>(handle->centre.size(), 4); ++i) {
    line += " " + number(values[i]);
  }
  log_lines().push_back(line);
  for (size_t i = 0; i < handle->centre.size(); ++i) handle->centre[i] += values[i];
  *sync = new tersePsRequest{"send", handle, {}, nullptr};
  return ncclSuccess;
}

ncclResult_t tersePsReceive(tersePsHandle_t handle, void* tensor, tersePsRequest_t* sync) {
  if (handle == nullptr || sync == nullptr || tensor == nullptr) return ncclInvalidArgument;
  log_lines().push_back("receive " + handle->name);
  *sync = new tersePsRequest{"receive", handle, handle->centre, static_cast<float*>(tensor)};
  return ncclSuccess;
}

ncclResult_t tersePsClock(tersePsHandle_t handle, uint64_t clock, uint64_t staleness,
                          tersePsRequest_t* sync) {
  if (handle == nullptr || sync == nullptr) return ncclInvalidArgument;
  log_lines().push_back("clock " + handle->name + " " + std::to_string(clock) + " " +
                        std::to_string(staleness));
  *sync = new tersePsRequest{"clock", handle, {}, nullptr};
  return ncclSuccess;
}

ncclResult_t tersePsSync(tersePsRequest_t sync) {
  if (sync == nullptr) return ncclInvalidArgument;
  std::unique_ptr<tersePsRequest> request(sync);
  log_lines().push_back("sync " + request->kind + " " + request->tensor->name);
  if (request->destination != nullptr) {
    std::copy(request->snapshot.begin(), request->snapshot.end(), request->destination);
  }
  return ncclSuccess;
}

ncclResult_t tersePsTest(tersePsRequest_t sync, int* done) {
  if (g_hold_receives && sync != nullptr && sync->kind == "receive") {
    log_lines().push_back("test receive " + sync->tensor->name + ": running");
    *done = 0;
    return ncclSuccess;
  }
  *done = 1;
  return tersePsSync(sync);
}

}  // extern "C"
