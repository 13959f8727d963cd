#include "plugin/net/connection_setup.h"

#include <netinet/in.h>

#include <cstring>
#include <random>
#include <set>

#include "common/result.h"
#include "plugin/net/compression_setting.h"
#include "plugin/net/eager_setting.h"
#include "plugin/net/net_devices.h"
#include "plugin/net/net_log.h"
#include "plugin/net/recv_comm.h"
#include "plugin/net/send_comm.h"
#include "plugin/net/ucx_for_plugin.h"
#include "transport/host_identity.h"
#include "transport/transport_settings.h"

namespace terse::net {
namespace {

ncclResult_t device_at(int dev, const NetDevice** out) {
  const std::vector<NetDevice>* devices = nullptr;
  TERSE_CHECK(net_devices(&devices));
  if (dev < 0 || static_cast<size_t>(dev) >= devices->size()) {
    return NET_FAIL(ncclInvalidArgument, "dev %d: this plugin has devices 0 to %zu", dev,
                    devices->size() - 1);
  }
  *out = &(*devices)[dev];
  return ncclSuccess;
}

// The connects in progress in this process: a handle's stage pointer is followed only when it
// is one of them (a handle NCCL copied from elsewhere, or garbage, is refused instead).
std::set<ConnectStage*>& live_stages() {
  static std::set<ConnectStage*> stages;
  return stages;
}

uint64_t random_nonce() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// Same host and TERSE_UCX_ERROR_MODE=auto: UCX may use shared memory, which cannot report a dead
// peer, so the lifeline does (kNone). Otherwise UCX reports it (kPeer).
ncclResult_t error_mode_for(const std::string& peer_host, UcxErrorMode* mode) {
  UcxErrorModeSetting setting = UcxErrorModeSetting::kAuto;
  TERSE_CHECK(ucx_error_mode(&setting));
  if (setting == UcxErrorModeSetting::kAuto) {
    *mode = peer_host == host_identity() ? UcxErrorMode::kNone : UcxErrorMode::kPeer;
  } else {
    *mode = setting == UcxErrorModeSetting::kPeer ? UcxErrorMode::kPeer : UcxErrorMode::kNone;
  }
  return ncclSuccess;
}

// A link and the frame this side sends: its worker address, the nonce and, when it accepts (it
// will receive), whether it wants framed messages; when it connects (it will send), its eager
// bound.
ncclResult_t start_stage(Socket socket, uint64_t nonce, bool framed, size_t eager_bytes,
                         SetupStage* stage) {
  std::shared_ptr<UcxContext> context;
  TERSE_CHECK(plugin_ucx_context(&context));
  TERSE_CHECK(Link::create(context, &stage->link));
  Handshake mine;
  mine.nonce = nonce;
  mine.host = host_identity();
  mine.framed = framed;
  mine.eager_bytes = eager_bytes;
  TERSE_CHECK(stage->link->address(&mine.worker_address));
  stage->socket = std::move(socket);
  stage->exchange = FrameExchange(encode_handshake(mine));
  stage->nonce = nonce;
  double timeout = kDefaultTransportTimeoutSeconds;
  TERSE_CHECK(transport_timeout_seconds(&timeout));
  stage->deadline = Deadline::after_seconds(timeout);
  return ncclSuccess;
}

// Steps the swap; once through, checks the peer's frame and opens the endpoint.
ncclResult_t finish_stage(SetupStage* stage, bool* done) {
  TERSE_CHECK(stage->exchange.step(stage->socket, done));
  if (!*done) {
    if (stage->deadline.expired()) {
      return NET_FAIL(ncclRemoteError,
                      "the peer at %s did not complete the handshake within TERSE_TIMEOUT_S",
                      stage->socket.peer_address().to_string().c_str());
    }
    return ncclSuccess;
  }
  Handshake theirs;
  if (!decode_handshake(stage->exchange.received(), &theirs) || theirs.nonce != stage->nonce) {
    return NET_FAIL(ncclRemoteError,
                    "the peer at %s answered the handshake with a frame that is not this "
                    "listen comm's (wrong nonce or format)",
                    stage->socket.peer_address().to_string().c_str());
  }
  if (theirs.eager_bytes > kMaxEagerBytes) {
    return NET_FAIL(ncclRemoteError,
                    "the peer at %s announced an eager bound of %llu bytes (this plugin's bound "
                    "is %zu)",
                    stage->socket.peer_address().to_string().c_str(),
                    static_cast<unsigned long long>(theirs.eager_bytes), kMaxEagerBytes);
  }
  stage->peer_framed = theirs.framed;
  stage->peer_eager_bytes = theirs.eager_bytes;
  UcxErrorMode mode = UcxErrorMode::kPeer;
  TERSE_CHECK(error_mode_for(theirs.host, &mode));
  const ucs_status_t status = stage->link->connect(theirs.worker_address, mode, 0);
  if (status != UCS_OK) {
    return NET_FAIL(ncclSystemError, "UCX cannot open an endpoint to the peer at %s: %s%s",
                    stage->socket.peer_address().to_string().c_str(), ucs_status_string(status),
                    status == UCS_ERR_UNREACHABLE
                        ? " (no transport both sides allow reports peer failure; try "
                          "TERSE_UCX_ERROR_MODE=none)"
                        : "");
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t listen_on(int dev, void* handle, ListenComm** out) {
  if (handle == nullptr || out == nullptr) {
    return NET_FAIL(ncclInvalidArgument, "listen: handle and listenComm must not be NULL");
  }
  const NetDevice* device = nullptr;
  TERSE_CHECK(device_at(dev, &device));
  CompressMode mode = CompressMode::kAuto;
  TERSE_CHECK(compress_mode(&mode));
  auto listen = std::make_unique<ListenComm>();
  TERSE_CHECK(Socket::listen(device->address, &listen->listener));
  listen->dev = dev;
  listen->nonce = random_nonce();
  listen->framed = wants_framing(mode, device->speed_mbps);
  SocketAddress bound = listen->listener.local_address();
  ListenHandle record{};
  record.magic = kHandleMagic;
  record.family = AF_INET;
  record.port = bound.port();
  memcpy(record.address, &reinterpret_cast<const sockaddr_in*>(bound.get())->sin_addr, 4);
  record.nonce = listen->nonce;
  record.stage = nullptr;
  memset(handle, 0, netabi::kHandleMaxBytes);
  memcpy(handle, &record, sizeof(record));
  NET_INFO("listening on %s (%s), compression %s, %s", bound.to_string().c_str(),
           device->name.c_str(), compress_mode_name(mode),
           listen->framed ? "framed receives" : "plain receives");
  *out = listen.release();
  return ncclSuccess;
}

ncclResult_t connect_to(int dev, void* handle, SendComm** out) {
  *out = nullptr;
  if (handle == nullptr) return NET_FAIL(ncclInvalidArgument, "connect: handle is NULL");
  const NetDevice* device = nullptr;
  TERSE_CHECK(device_at(dev, &device));
  ListenHandle record;
  memcpy(&record, handle, sizeof(record));
  if (record.magic != kHandleMagic || record.family != AF_INET) {
    return NET_FAIL(ncclInvalidArgument,
                    "connect: the handle (magic 0x%08x) was not made by this plugin's listen",
                    record.magic);
  }
  if (record.stage != nullptr && live_stages().count(record.stage) == 0) {
    return NET_FAIL(ncclInvalidArgument,
                    "connect: the handle names a connect in progress (%p) that this process does "
                    "not have",
                    static_cast<void*>(record.stage));
  }
  auto forget = [&] {
    live_stages().erase(record.stage);
    delete record.stage;
    record.stage = nullptr;
    memcpy(handle, &record, sizeof(record));
  };
  if (record.stage == nullptr) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(record.port);
    memcpy(&address.sin_addr, record.address, 4);
    SocketAddress peer =
        SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&address), sizeof(address));
    // Read once per connect: the receive comm learns it from the handshake and relies on it.
    size_t eager = 0;
    TERSE_CHECK(eager_bytes(&eager));
    Socket socket;
    TERSE_CHECK(Socket::start_connect(peer, &socket));
    auto stage = std::make_unique<ConnectStage>();
    stage->eager_bytes = eager;
    TERSE_CHECK(start_stage(std::move(socket), record.nonce, false, eager, stage.get()));
    record.stage = stage.release();
    live_stages().insert(record.stage);
    memcpy(handle, &record, sizeof(record));
  }
  ncclResult_t result = ncclSuccess;
  if (!record.stage->connected) {
    bool up = false;
    result = record.stage->socket.connect_finished(&up);
    if (result == ncclSuccess && !up && record.stage->deadline.expired()) {
      result = NET_FAIL(ncclRemoteError, "connect: no TCP connection to %s within TERSE_TIMEOUT_S",
                        record.stage->socket.peer_address().to_string().c_str());
    }
    if (result != ncclSuccess) {
      forget();
      return result;
    }
    if (!up) return ncclSuccess;
    record.stage->connected = true;
  }
  bool done = false;
  result = finish_stage(record.stage, &done);
  if (result != ncclSuccess) {
    forget();
    return result;
  }
  if (!done) return ncclSuccess;
  CompressMode mode = CompressMode::kAuto;
  int level = 1;
  const size_t eager = record.stage->eager_bytes;
  if ((result = compress_mode(&mode)) != ncclSuccess ||
      (result = zstd_level(&level)) != ncclSuccess) {
    forget();
    return result;
  }
  std::string peer = record.stage->socket.peer_address().to_string();
  auto comm = std::make_unique<SendComm>(dev, std::move(record.stage->link),
                                         std::move(record.stage->socket), peer, mode, level,
                                         record.stage->peer_framed, eager);
  forget();
  TERSE_CHECK(comm->start());
  NET_INFO("send comm to %s on %s connected, eager up to %zu bytes", peer.c_str(),
           device->name.c_str(), eager);
  *out = comm.release();
  return ncclSuccess;
}

ncclResult_t accept_from(ListenComm* listen, RecvComm** out) {
  *out = nullptr;
  if (!listen->pending) {
    Socket socket;
    SocketAddress peer;
    int error = listen->listener.accept(&socket, &peer);
    if (error != 0) {
      return NET_FAIL(ncclSystemError, "accept on the listen comm failed: %s", strerror(error));
    }
    if (!socket.is_open()) return ncclSuccess;  // nobody yet: NCCL calls again
    auto stage = std::make_unique<SetupStage>();
    TERSE_CHECK(start_stage(std::move(socket), listen->nonce, listen->framed, 0, stage.get()));
    listen->pending = std::move(stage);
  }
  bool done = false;
  ncclResult_t result = finish_stage(listen->pending.get(), &done);
  if (result != ncclSuccess) {
    listen->pending.reset();
    return result;
  }
  if (!done) return ncclSuccess;
  std::string peer = listen->pending->socket.peer_address().to_string();
  const uint64_t peer_eager = listen->pending->peer_eager_bytes;
  auto comm = std::make_unique<RecvComm>(listen->dev, std::move(listen->pending->link),
                                         std::move(listen->pending->socket), peer, listen->framed,
                                         peer_eager);
  listen->pending.reset();
  TERSE_CHECK(comm->start());
  NET_INFO("receive comm from %s accepted; its sender sends up to %zu bytes eagerly", peer.c_str(),
           static_cast<size_t>(peer_eager));
  *out = comm.release();
  return ncclSuccess;
}

}  // namespace terse::net
