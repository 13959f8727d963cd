// create_unique_id and the NCCL_COMM_ID path (declared in unique_id.h).
#include <string>

#include "common/env.h"
#include "common/log.h"
#include "common/result.h"
#include "common/text_hash.h"
#include "transport/bootstrap_key.h"
#include "transport/bootstrap_root.h"
#include "transport/interface_address.h"
#include "transport/root_registry.h"
#include "transport/transport_settings.h"
#include "transport/unique_id.h"

namespace terse {
namespace {

Result random_secret(uint64_t* secret) {
  if (random_bytes(secret, sizeof(*secret)) != Result::kSuccess) {
    return fail(Result::kSystemError, "cannot draw the bootstrap secret: %s", last_error());
  }
  return Result::kSuccess;
}

}  // namespace

Result unique_id_from_environment(UniqueIdFields* fields, bool* present) {
  const char* variable = "TERSE_COMM_ID";
  std::string text = env_string(variable, "");
  if (text.empty()) {
    variable = "NCCL_COMM_ID";
    text = env_string(variable, "");
  }
  *present = !text.empty();
  if (!*present) return Result::kSuccess;
  TERSE_CHECK(SocketAddress::parse(text, variable, &fields->root));
  fields->secret = fnv1a("terse comm id " + text);
  fields->root_started_by_rank_zero = true;
  return Result::kSuccess;
}

Result create_unique_id(UniqueId* id) {
  if (id == nullptr) return fail(Result::kInvalidArgument, "unique id pointer is NULL");
  UniqueIdFields fields;
  bool from_environment = false;
  TERSE_CHECK(unique_id_from_environment(&fields, &from_environment));
  if (from_environment) {
    encode_unique_id(fields, id);
    TERSE_INFO("unique id names %s from the environment; rank 0 starts the bootstrap root",
               fields.root.to_string().c_str());
    return Result::kSuccess;
  }
  return create_unique_id_with_own_root(id);
}

Result create_unique_id_with_own_root(UniqueId* id) {
  if (id == nullptr) return fail(Result::kInvalidArgument, "unique id pointer is NULL");
  UniqueIdFields fields;
  InterfaceAddress interface;
  TERSE_CHECK(find_interface_address(&interface));
  double timeout_seconds = 0;
  TERSE_CHECK(transport_timeout_seconds(&timeout_seconds));
  TERSE_CHECK(random_secret(&fields.secret));
  std::unique_ptr<BootstrapRoot> root;
  TERSE_CHECK(BootstrapRoot::start(interface.address, fields.secret, timeout_seconds, &root));
  fields.root = root->address();
  encode_unique_id(fields, id);
  TERSE_INFO("bootstrap root on interface %s at %s", interface.interface_name.c_str(),
             fields.root.to_string().c_str());
  keep_root_until_finished(std::move(root));
  return Result::kSuccess;
}

}  // namespace terse
