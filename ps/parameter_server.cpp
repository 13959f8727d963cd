#include "ps/parameter_server.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "codecs/codec_registry.h"
#include "collectives/communicator.h"
#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "common/text_hash.h"
#include "ps/shard_update.h"

namespace terse {
namespace {

// One server per communicator and process, alive while a tensor of it is: the handles own it.
// The mutex guards the map alone and is never held across a collective: ranks that are threads
// of one process create their servers at once, each over allgathers that need the others. An
// entry is made and erased only under its communicator's call lock (ps_init, ps_free), which
// serialises them per communicator; each handle holds a use of its communicator, so no other
// communicator can take the address while the entry lives.
std::mutex g_servers_mutex;
std::map<Communicator*, std::weak_ptr<PsServer>> g_servers;

// Erases `communicator`'s entry once its server is gone (the caller holds the call lock).
void forget_server_if_gone(Communicator* communicator) {
  std::lock_guard<std::mutex> lock(g_servers_mutex);
  auto found = g_servers.find(communicator);
  if (found != g_servers.end() && found->second.expired()) g_servers.erase(found);
}

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

// The caller holds the communicator's call lock (see g_servers).
ncclResult_t server_for(Communicator* communicator, std::shared_ptr<PsServer>* server) {
  {
    std::lock_guard<std::mutex> lock(g_servers_mutex);
    auto found = g_servers.find(communicator);
    *server = found != g_servers.end() ? found->second.lock() : nullptr;
  }
  if (*server != nullptr) return ncclSuccess;
  std::unique_ptr<PsServer> made;
  TERSE_CHECK(PsServer::create(communicator->transport(), &made));
  *server = std::move(made);
  std::lock_guard<std::mutex> lock(g_servers_mutex);
  g_servers[communicator] = *server;
  return ncclSuccess;
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

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = (a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2))) * 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

std::unique_ptr<PsClientMessage> new_message(const PsHandle& handle, size_t shard,
                                             PsRequestKind kind,
                                             const std::shared_ptr<PsRequest>& request) {
  auto message = std::make_unique<PsClientMessage>();
  message->owner = handle.tensor->shards[shard].owner;
  message->header.kind = uint8_t(kind);
  message->header.tensor = handle.tensor->id;
  message->header.shard = uint32_t(shard);
  message->header.sequence = handle.server->next_sequence();
  message->reply.resize(sizeof(PsReplyHeader));
  message->tensor = handle.tensor;
  message->request = request;
  message->deadline = Deadline::after_seconds(handle.server->timeout_seconds());
  return message;
}

// Shards with elements: a split tensor of fewer rows than ranks leaves some empty.
std::vector<size_t> used_shards(const PsTensor& tensor) {
  std::vector<size_t> used;
  for (size_t shard = 0; shard < tensor.shards.size(); ++shard) {
    if (tensor.shards[shard].count > 0) used.push_back(shard);
  }
  return used;
}

std::shared_ptr<PsRequest> new_request(const PsHandle& handle, size_t parts,
                                       bool end_at_first_failure) {
  return std::make_shared<PsRequest>(
      int(parts), Deadline::after_seconds(handle.server->timeout_seconds()), end_at_first_failure);
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

ncclResult_t ps_send(const PsHandle& handle, const void* data, PsRule rule,
                     std::shared_ptr<PsRequest>* request) {
  PsTensor& tensor = *handle.tensor;
  const std::vector<size_t> shards = used_shards(tensor);
  *request = new_request(handle, shards.size(), true);
  // Counted once the messages are submitted (terse.h: tersePsStats).
  uint64_t value_bytes = 0, uncompressed_bytes = 0, header_bytes = 0;
  std::vector<std::unique_ptr<PsClientMessage>> messages;
  for (size_t shard : shards) {
    auto message = new_message(handle, shard, PsRequestKind::kSend, *request);
    message->header.rule = uint8_t(rule);
    const ShardSpan& span = tensor.shards[shard];
    const uint8_t* slice = rule == PsRule::kZero ? nullptr
                                                 : static_cast<const uint8_t*>(data) +
                                                       span.offset * tensor.element_bytes;
    constexpr size_t prefix = sizeof(PsPayloadPrefix);
    if (rule == PsRule::kAdd && tensor.push_encoder != nullptr) {
      // Error feedback: this push carries what the codec dropped from the previous ones, and the
      // residual keeps what it drops now (Codec::encode_compensated, one pass).
      std::lock_guard<std::mutex> lock(tensor.client_mutex);
      std::vector<float>& residual = tensor.residuals[shard];
      if (residual.empty()) residual.assign(span.count, 0.0f);
      message->payload.resize(
          prefix + tensor.push_encoder->max_encoded_bytes(span.count, tensor.codec_dtype));
      EncodeContext context;
      context.seed =
          mix(mix(tensor.id, shard), mix(uint64_t(handle.server->rank()), tensor.pushes[shard]++));
      size_t bytes = 0;
      TERSE_CHECK(tensor.push_encoder->encode_compensated(
          slice, tensor.codec_dtype, residual.data(), span.count, context,
          message->payload.data() + prefix, message->payload.size() - prefix, &bytes));
      message->payload.resize(prefix + bytes);
      message->header.encoding = uint8_t(PsEncoding::kCodec);
    } else if (rule != PsRule::kZero) {
      message->payload.resize(prefix);
      message->payload.insert(message->payload.end(), slice, slice + tensor.shard_bytes(shard));
    }
    if (!message->payload.empty()) {
      // The whole sequence, which the tag holds only modulo its width (ps_wire.h).
      const PsPayloadPrefix stamp{message->header.sequence, message->header.tensor};
      std::memcpy(message->payload.data(), &stamp, sizeof(stamp));
    }
    message->header.payload_bytes = message->payload.size();
    header_bytes += sizeof(PsRequestHeader);
    if (!message->payload.empty()) {
      header_bytes += prefix;
      value_bytes += message->payload.size() - prefix;
      uncompressed_bytes += tensor.shard_bytes(shard);
    }
    messages.push_back(std::move(message));
  }
  handle.server->submit(std::move(messages));
  tensor.traffic.sends += 1;
  tensor.traffic.send_bytes += value_bytes;
  tensor.traffic.send_uncompressed_bytes += uncompressed_bytes;
  tensor.traffic.header_bytes += header_bytes;
  return ncclSuccess;
}

ncclResult_t ps_receive(const PsHandle& handle, void* data, std::shared_ptr<PsRequest>* request) {
  PsTensor& tensor = *handle.tensor;
  const std::vector<size_t> shards = used_shards(tensor);
  *request = new_request(handle, shards.size(), false);
  std::vector<std::unique_ptr<PsClientMessage>> messages;
  for (size_t shard : shards) {
    auto message = new_message(handle, shard, PsRequestKind::kReceive, *request);
    const ShardSpan& span = tensor.shards[shard];
    const size_t payload =
        tensor.receive_codec != nullptr
            ? tensor.receive_codec->max_encoded_bytes(span.count, tensor.codec_dtype)
            : tensor.shard_bytes(shard);
    message->reply.resize(sizeof(PsReplyHeader) + payload);
    message->destination = static_cast<uint8_t*>(data) + span.offset * tensor.element_bytes;
    messages.push_back(std::move(message));
  }
  // The answers' values are counted as they arrive (PsServer::take_answer).
  tensor.traffic.header_bytes += messages.size() * sizeof(PsRequestHeader);
  handle.server->submit(std::move(messages));
  tensor.traffic.receives += 1;
  return ncclSuccess;
}

ncclResult_t ps_clock(const PsHandle& handle, uint64_t clock, uint64_t staleness,
                      std::shared_ptr<PsRequest>* request) {
  PsTensor& tensor = *handle.tensor;
  // Held until the messages are submitted: two threads' clocks reach each owner in the order
  // they were checked here, so the later (larger) one is never refused as going back.
  std::lock_guard<std::mutex> lock(tensor.client_mutex);
  {
    if (clock < tensor.clock) {
      return fail(ncclInvalidArgument,
                  "tersePsClock: clock %llu is behind this rank's last clock %llu of tensor '%s' "
                  "(clocks never go back)",
                  (unsigned long long)clock, (unsigned long long)tensor.clock, tensor.name.c_str());
    }
    tensor.clock = clock;
  }
  // One message per owner (clocks are the owner's, not the shard's): to its first shard.
  std::vector<size_t> first_shard_of_owner;
  std::set<int> owners;
  for (size_t shard : used_shards(tensor)) {
    if (owners.insert(tensor.shards[shard].owner).second) first_shard_of_owner.push_back(shard);
  }
  *request = new_request(handle, first_shard_of_owner.size(), true);
  std::vector<std::unique_ptr<PsClientMessage>> messages;
  for (size_t shard : first_shard_of_owner) {
    auto message = new_message(handle, shard, PsRequestKind::kClock, *request);
    message->header.clock = clock;
    message->header.staleness = staleness;
    messages.push_back(std::move(message));
  }
  tensor.traffic.header_bytes += messages.size() * sizeof(PsRequestHeader);
  handle.server->submit(std::move(messages));
  return ncclSuccess;
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
