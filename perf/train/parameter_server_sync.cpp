#include "perf/train/parameter_server_sync.h"

#include <algorithm>

#include "perf/train/ps_schemes/centre_fetch.h"
#include "perf/train/ps_schemes/downpour.h"
#include "perf/train/ps_schemes/easgd.h"
#include "perf/train/ps_schemes/stale_synchronous.h"

namespace terse {
namespace train {

ParameterServerSync::ParameterServerSync(ncclComm_t comm, const std::vector<Parameter*>& parameters,
                                         const SyncScheme& scheme, int nranks)
    : comm_(comm), parameters_(parameters), scheme_spec_(scheme), nranks_(nranks) {}

ParameterServerSync::~ParameterServerSync() {
  if (!handles_.empty()) free();
}

ncclResult_t ParameterServerSync::init() {
  std::vector<tersePsTensorDesc> descriptions;
  for (Parameter* parameter : parameters_) {
    tersePsTensorDesc description{};
    description.name = parameter->name.c_str();
    description.data = parameter->value.data();
    description.count = parameter->size();
    description.datatype = ncclFloat32;
    size_t row = 1;
    for (size_t d = 1; d < parameter->shape.size(); ++d) row *= parameter->shape[d];
    description.row_elements = row;
    descriptions.push_back(description);
  }
  std::vector<tersePsHandle_t> handles(parameters_.size(), nullptr);
  const ncclResult_t result = tersePsInitList(
      comm_, descriptions.data(), static_cast<int>(descriptions.size()), handles.data());
  if (result != ncclSuccess) return result;
  handles_ = handles;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    tensors_.push_back({handles_[i], parameters_[i]->value.data(), parameters_[i]->size()});
  }
  // Pushes carry 1 / nranks of each worker's update, so that the centre takes the ranks' mean
  // step, as the allreduce does (perf/train/ps_schemes/downpour.h).
  const float mean = 1.0f / static_cast<float>(nranks_);
  switch (scheme_spec_.kind) {
    case SyncScheme::Kind::kDownpour:
      scheme_ = std::make_unique<ps::Downpour>(
          tensors_, ps::DownpourSettings{scheme_spec_.send_every, scheme_spec_.fetch_every, mean});
      break;
    case SyncScheme::Kind::kEasgd:
      scheme_ = std::make_unique<ps::Easgd>(
          tensors_, ps::EasgdSettings{scheme_spec_.tau, scheme_spec_.beta * mean});
      break;
    case SyncScheme::Kind::kStaleSynchronous:
      scheme_ = std::make_unique<ps::StaleSynchronous>(
          tensors_, ps::StaleSynchronousSettings{scheme_spec_.staleness, mean});
      break;
    case SyncScheme::Kind::kAllreduce:
      return ncclInvalidUsage;
  }
  return scheme_->start();
}

ncclResult_t ParameterServerSync::load_centre() {
  worker_values_.clear();
  std::vector<float*> centre;
  for (Parameter* parameter : parameters_) {
    worker_values_.push_back(parameter->value);
    centre.push_back(parameter->value.data());
  }
  return ps::fetch_centre(tensors_, centre);
}

void ParameterServerSync::restore_worker_values() {
  for (size_t i = 0; i < parameters_.size() && i < worker_values_.size(); ++i) {
    std::copy(worker_values_[i].begin(), worker_values_[i].end(), parameters_[i]->value.begin());
  }
}

ncclResult_t ParameterServerSync::free() {
  ncclResult_t result = scheme_ ? scheme_->flush() : ncclSuccess;
  scheme_.reset();
  for (tersePsHandle_t handle : handles_) {
    const ncclResult_t freed = tersePsFree(handle);
    if (result == ncclSuccess) result = freed;
  }
  handles_.clear();
  tensors_.clear();
  return result;
}

}  // namespace train
}  // namespace terse
