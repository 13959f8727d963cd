// tersePsInit and tersePsFree: the collective calls that describe, agree on, place and create a
// communicator's tensors, and release them (the communicator's server with its last tensor).
#include "ps/parameter_server.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codecs/codec_registry.h"
#include "collectives/communicator.h"
#include "common/env.h"
#include "common/result.h"
#include "common/text_hash.h"
#include "ps/ps_server_registry.h"

namespace terse {
namespace {

// What every rank must agree on about one tensor before anything is placed (its id follows
// from the order of the inits, the rest from the arguments and the policy).
struct Agreement {
  uint64_t id = 0;
  uint64_t count = 0;
  uint64_t type = 0;
  uint64_t row_elements = 0;
  uint64_t split_bytes = 0;
  uint64_t name_hash = 0;
  uint64_t push_codec_hash = 0;
  uint64_t receive_codec_hash = 0;
};

const char* disagreement(const Agreement& a, const Agreement& b) {
  if (a.id != b.id) return "the order of tersePsInit calls (tensor ids differ)";
  if (a.count != b.count) return "count";
  if (a.type != b.type) return "datatype";
  if (a.row_elements != b.row_elements) return "row_elements";
  if (a.split_bytes != b.split_bytes) return "TERSE_PS_SPLIT_BYTES";
  if (a.name_hash != b.name_hash) return "name";
  if (a.push_codec_hash != b.push_codec_hash) return "the push codec (policy or push_codec)";
  if (a.receive_codec_hash != b.receive_codec_hash) return "receive_codec";
  return nullptr;
}

// The codec of `spec` for a tensor, null for "none"; refuses what a parameter server cannot use.
ncclResult_t make_codec(const PsTensorSpec& spec, const std::string& codec_spec, const char* role,
                        std::unique_ptr<Codec>* codec) {
  codec->reset();
  if (codec_spec.empty() || codec_spec == "none") return ncclSuccess;
  DType dtype;
  if (!dtype_from_nccl(spec.type, &dtype)) {
    return fail(ncclInvalidArgument,
                "tersePsInit: tensor '%s': %s codec '%s' needs an fp32, fp16 or bf16 tensor",
                spec.name.c_str(), role, codec_spec.c_str());
  }
  if (create_codec(codec_spec, codec) != ncclSuccess) {
    return fail(ncclInvalidArgument, "tersePsInit: tensor '%s': %s codec: %s", spec.name.c_str(),
                role, last_error());
  }
  if ((*codec)->stateful(spec.count, dtype, MatrixShape{})) {
    return fail(ncclInvalidArgument,
                "tersePsInit: tensor '%s': %s codec '%s' keeps per-tensor state, which a "
                "parameter server's many clients cannot share",
                spec.name.c_str(), role, codec_spec.c_str());
  }
  return ncclSuccess;
}

// The push codec: the spec's, else what the communicator's policy gives the tensor's name as a
// sum allreduce of its size and type.
ncclResult_t push_codec_of(Communicator* communicator, const PsTensorSpec& spec,
                           std::string* codec) {
  DType dtype;
  if (spec.push_codec_given || !dtype_from_nccl(spec.type, &dtype)) {
    *codec = spec.push_codec_given ? spec.push_codec : "none";
    return ncclSuccess;
  }
  CollectiveArgs args;
  args.kind = CollectiveKind::kAllReduce;
  args.count = spec.count;
  args.type = spec.type;
  auto tensor = std::make_shared<TensorRequest>();
  tensor->name = spec.name;
  args.tensor = tensor;
  std::string algorithm;
  return communicator->compression()->decide(args, codec, &algorithm);
}

// The local checks' outcome of every rank, before anything else collective: a rank that refused
// its own arguments still takes part, so that every rank fails alike (the lowest failing rank's
// result) and the control channel stays in step for the next call.
ncclResult_t agree_on_local_checks(Transport* control, ncclResult_t mine) {
  const std::string my_error = mine != ncclSuccess ? last_error() : "";
  const int32_t local = int32_t(mine);
  std::vector<int32_t> all(size_t(control->nranks()), 0);
  TERSE_CHECK(control->allgather(&local, sizeof(local), all.data()));
  for (int rank = 0; rank < control->nranks(); ++rank) {
    const ncclResult_t theirs = ncclResult_t(all[size_t(rank)]);
    if (theirs == ncclSuccess) continue;
    if (rank == control->rank()) return fail(theirs, "%s", my_error.c_str());
    if (mine != ncclSuccess) {
      return fail(theirs, "%s (and rank %d refused its own arguments first)", my_error.c_str(),
                  rank);
    }
    return fail(theirs,
                "tersePsInit: rank %d refused its arguments (see its log); every rank fails "
                "alike",
                rank);
  }
  return ncclSuccess;
}

// This rank's tensors and their agreements, from its own arguments alone (no collective).
ncclResult_t describe_locally(Communicator* communicator, const std::vector<PsTensorSpec>& specs,
                              uint64_t* split_bytes,
                              std::vector<std::shared_ptr<PsTensor>>* out_tensors,
                              std::vector<Agreement>* out_mine) {
  TERSE_CHECK(env_bytes("TERSE_PS_SPLIT_BYTES", kDefaultPsSplitBytes, split_bytes));
  std::vector<std::shared_ptr<PsTensor>>& tensors = *out_tensors;
  std::vector<Agreement>& mine = *out_mine;
  for (const PsTensorSpec& spec : specs) {
    auto tensor = std::make_shared<PsTensor>();
    tensor->name = spec.name;
    tensor->count = spec.count;
    tensor->type = spec.type;
    tensor->element_bytes = nccl_type_size(spec.type);
    tensor->row_elements = spec.row_elements;
    std::string push_codec;
    TERSE_CHECK(push_codec_of(communicator, spec, &push_codec));
    TERSE_CHECK(make_codec(spec, push_codec, "push", &tensor->push_encoder));
    TERSE_CHECK(make_codec(spec, push_codec, "push", &tensor->push_decoder));
    // A policy's receive codec reaches only the types codecs take (fp32/fp16/bf16): a rule that
    // matches an fp64 tensor by name leaves its receives exact instead of failing its init.
    DType policy_dtype;
    const std::string receive_codec =
        spec.receive_codec_given ? spec.receive_codec
        : dtype_from_nccl(spec.type, &policy_dtype)
            ? communicator->compression()->ps_receive_codec(spec.name, spec.count, spec.type)
            : "none";
    TERSE_CHECK(make_codec(spec, receive_codec, "receive", &tensor->receive_codec));
    if (tensor->push_encoder != nullptr || tensor->receive_codec != nullptr) {
      dtype_from_nccl(spec.type, &tensor->codec_dtype);
    }
    Agreement agreement;
    agreement.count = spec.count;
    agreement.type = uint64_t(spec.type);
    agreement.row_elements = spec.row_elements;
    agreement.split_bytes = *split_bytes;
    agreement.name_hash = fnv1a(spec.name);
    agreement.push_codec_hash = fnv1a(tensor->push_encoder ? tensor->push_encoder->spec() : "");
    agreement.receive_codec_hash =
        fnv1a(tensor->receive_codec ? tensor->receive_codec->spec() : "");
    mine.push_back(agreement);
    tensors.push_back(std::move(tensor));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t ps_init(Communicator* communicator, const std::vector<PsTensorSpec>& specs,
                     ncclResult_t local_result, std::vector<std::unique_ptr<PsHandle>>* handles) {
  uint64_t split_bytes = 0;
  std::vector<std::shared_ptr<PsTensor>> tensors;
  std::vector<Agreement> mine;
  if (local_result == ncclSuccess) {
    local_result = describe_locally(communicator, specs, &split_bytes, &tensors, &mine);
  }

  std::unique_lock<std::mutex> call = communicator->hold_transport();
  if (communicator->async_error() != ncclSuccess) {
    return fail(communicator->async_error(), "tersePsInit: the communicator is broken: %s",
                communicator->async_error_message().c_str());
  }
  Transport* control = communicator->transport();
  const int nranks = control->nranks();
  TERSE_CHECK(agree_on_local_checks(control, local_result));
  std::shared_ptr<PsServer> server;
  const ncclResult_t made = server_for(communicator, &server);
  if (made != ncclSuccess) {
    forget_server_if_gone(communicator);
    return made;
  }
  // A failed init leaves no server behind when it made the communicator's first.
  struct Forget {
    Communicator* communicator;
    std::shared_ptr<PsServer>* server;
    ~Forget() {
      server->reset();
      forget_server_if_gone(communicator);
    }
  } forget{communicator, &server};

  // Agree: the number of tensors, then each one's description, compared with rank 0's.
  const uint64_t ntensors = specs.size();
  std::vector<uint64_t> counts(static_cast<size_t>(nranks));
  TERSE_CHECK(control->allgather(&ntensors, sizeof(ntensors), counts.data()));
  for (int rank = 0; rank < nranks; ++rank) {
    if (counts[size_t(rank)] != ntensors) {
      return fail(ncclInvalidUsage,
                  "tersePsInitList: rank %d initialises %llu tensors, rank %d %llu: every rank "
                  "must make the same calls",
                  rank, (unsigned long long)counts[size_t(rank)], control->rank(),
                  (unsigned long long)ntensors);
    }
  }
  // Ids only once every rank knows the others init as many tensors: they must stay equal.
  for (size_t t = 0; t < tensors.size(); ++t) mine[t].id = server->take_tensor_id();
  std::vector<Agreement> all(mine.size() * size_t(nranks));
  TERSE_CHECK(control->allgather(mine.data(), mine.size() * sizeof(Agreement), all.data()));
  for (int rank = 0; rank < nranks; ++rank) {
    for (size_t t = 0; t < mine.size(); ++t) {
      const char* what = disagreement(all[t], all[size_t(rank) * mine.size() + t]);
      if (what != nullptr) {
        return fail(ncclInvalidUsage,
                    "tersePsInit: tensor %zu ('%s'): rank %d and rank 0 differ in %s; every "
                    "rank must describe a tensor alike",
                    t, specs[t].name.c_str(), rank, what);
      }
    }
  }

  std::vector<PlacementInput> inputs;
  for (const auto& tensor : tensors) {
    inputs.push_back(PlacementInput{tensor->count, tensor->row_elements, tensor->element_bytes});
  }
  const std::vector<uint64_t> load_before = *server->load();
  std::vector<std::vector<ShardSpan>> placed = place_tensors(inputs, split_bytes, server->load());
  handles->clear();
  for (size_t t = 0; t < tensors.size(); ++t) {
    PsTensor& tensor = *tensors[t];
    tensor.id = uint32_t(mine[t].id);
    tensor.shards = placed[t];
    tensor.storage.resize(tensor.shards.size());
    tensor.clocks.assign(size_t(nranks), 0);
    tensor.residuals.resize(tensor.shards.size());
    tensor.pushes.assign(tensor.shards.size(), 0);
    for (size_t shard = 0; shard < tensor.shards.size(); ++shard) {
      if (tensor.shards[shard].owner != control->rank()) continue;
      const uint8_t* source = static_cast<const uint8_t*>(specs[t].data) +
                              tensor.shards[shard].offset * tensor.element_bytes;
      tensor.storage[shard].assign(source, source + tensor.shard_bytes(shard));
    }
    server->add_tensor(tensors[t]);
    auto handle = std::make_unique<PsHandle>();
    handle->communicator = communicator;
    handle->server = server;
    handle->tensor = tensors[t];
    handles->push_back(std::move(handle));
  }
  // No rank sends to a shard before its owner serves it.
  const ncclResult_t agreed = control->barrier();
  if (agreed != ncclSuccess) {
    for (const auto& tensor : tensors) server->remove_tensor(tensor->id);
    *server->load() = load_before;  // what these tensors took is not held by anyone
    handles->clear();
  }
  return agreed;
}

ncclResult_t ps_free(PsHandle* handle, bool communicator_closing) {
  ncclResult_t result = ncclSuccess;
  Communicator* communicator = handle->communicator;
  std::unique_lock<std::mutex> call = communicator->hold_transport();
  if (communicator_closing) {
    // Destroyed or aborted: the other ranks may be gone, so nobody is waited for, and the
    // server's endpoints are closed by force when it goes.
    handle->server->close_by_force();
  } else {
    // Every rank is done with the tensor before any owner lets its shards go.
    result = communicator->transport()->barrier();
  }
  std::vector<uint64_t>& load = *handle->server->load();
  const PsTensor& tensor = *handle->tensor;
  for (const ShardSpan& span : tensor.shards) {
    load[size_t(span.owner)] -= uint64_t(span.count) * tensor.element_bytes;
  }
  handle->server->remove_tensor(handle->tensor->id);
  handle->tensor.reset();
  // The communicator's last tensor takes the server (thread, worker, endpoints) with it, and
  // its entry: under the call lock, so that no init of the communicator races the erase.
  handle->server.reset();
  forget_server_if_gone(communicator);
  return result;
}

}  // namespace terse
