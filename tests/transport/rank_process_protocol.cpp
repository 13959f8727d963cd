#include "rank_process_protocol.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/hex_bytes.h"
#include "common/log.h"
#include "common/result.h"
#include "transport/transport_settings.h"

namespace terse {
namespace test {

bool start_rank_process(int argc, char** argv, RankProcessArguments* arguments) {
  if (argc != 5 || !unique_id_from_hex(argv[4], &arguments->id)) {
    fprintf(stderr, "usage: %s <scenario> <rank> <nranks> <unique id in hex>\n", argv[0]);
    return false;
  }
  arguments->scenario = argv[1];
  arguments->rank = atoi(argv[2]);
  arguments->nranks = atoi(argv[3]);
  if (transport_timeout_seconds(&arguments->timeout_seconds) != Result::kSuccess) return false;
  alarm(static_cast<unsigned>(3 * arguments->timeout_seconds + 20));
  set_log_rank(arguments->rank);
  return true;
}

std::string unique_id_to_hex(const UniqueId& id) {
  return terse::bytes_to_hex(id.internal, kUniqueIdBytes);
}

bool unique_id_from_hex(const std::string& hex, UniqueId* id) {
  return terse::hex_to_bytes(hex, id->internal, kUniqueIdBytes);
}

std::vector<RankProcessResult> run_rank_processes(const char* scenario, int nranks,
                                                  const UniqueId& id, double seconds_allowed,
                                                  int expendable_rank) {
  const std::string hex = unique_id_to_hex(id);
  std::vector<CommandLine> ranks;
  for (int rank = 0; rank < nranks; ++rank) {
    ranks.push_back(
        {TERSE_RANK_PROCESS_PATH, scenario, std::to_string(rank), std::to_string(nranks), hex});
  }
  return run_processes(ranks, seconds_allowed, expendable_rank);
}

}  // namespace test
}  // namespace terse
