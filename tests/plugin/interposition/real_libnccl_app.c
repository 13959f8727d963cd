/* A C program compiled and linked against the real libnccl.so of the CUDA toolkit, nothing of
 * terse in it (issue 12's evidence for LD_PRELOAD=libterse.so):
 *
 *   real_libnccl_app plain      creates a one-rank communicator; without a GPU the real NCCL
 *                               must refuse (exit 0 when it does, 77 "skipped" when it worked:
 *                               this machine has a GPU, so the claim cannot be checked here).
 *   real_libnccl_app run N      N ranks as processes (this program again, spawned), each
 *                               running every collective on host memory and checking it against
 *                               values computed here: allreduce with every op, allgather,
 *                               broadcast, reduce, reduce-scatter, all-to-all as grouped
 *                               send/recv, and a send/recv ring. Meant to run under
 *                               LD_PRELOAD=libterse.so TERSE_MODE=engine; exits 0 when every
 *                               rank's every check passed. */
#include <nccl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char** environ;

#define COUNT 37

static int failures = 0;

#define CHECK(rank, call)                                                                        \
  do {                                                                                           \
    ncclResult_t result_ = (call);                                                               \
    if (result_ != ncclSuccess) {                                                                \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(result_), \
              ncclGetLastError(NULL));                                                           \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

static void expect(int rank, const char* what, int i, double got, double want) {
  if (got != want) {
    fprintf(stderr, "rank %d: %s element %d is %g, expected %g\n", rank, what, i, got, want);
    ++failures;
  }
}

/* Rank r's input element i for the reductions: small integers, exact in float. */
static int input(int r, int i) {
  return (r + 1) * ((i % 5) + 1);
}

static int check_reductions(int rank, int n, ncclComm_t comm) {
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const char* names[] = {"sum", "prod", "max", "min", "avg"};
  int o, i, r;
  for (o = 0; o < 5; ++o) {
    int ints[COUNT];
    float floats[COUNT];
    for (i = 0; i < COUNT; ++i) {
      ints[i] = input(rank, i);
      floats[i] = (float)input(rank, i);
    }
    CHECK(rank, ncclAllReduce(ints, ints, COUNT, ncclInt32, ops[o], comm, NULL));
    CHECK(rank, ncclAllReduce(floats, floats, COUNT, ncclFloat, ops[o], comm, NULL));
    for (i = 0; i < COUNT; ++i) {
      double want = ops[o] == ncclProd  ? 1
                    : ops[o] == ncclMin ? 1e300
                    : ops[o] == ncclMax ? -1e300
                                        : 0;
      for (r = 0; r < n; ++r) {
        const double v = input(r, i);
        if (ops[o] == ncclSum || ops[o] == ncclAvg) want += v;
        if (ops[o] == ncclProd) want *= v;
        if (ops[o] == ncclMax && v > want) want = v;
        if (ops[o] == ncclMin && v < want) want = v;
      }
      if (ops[o] == ncclAvg) {
        expect(rank, names[o], i, ints[i], (double)((long)want / n)); /* integers: sum / n */
        expect(rank, names[o], i, floats[i], (double)(float)(want / n));
      } else {
        expect(rank, names[o], i, ints[i], want);
        expect(rank, names[o], i, floats[i], want);
      }
    }
  }
  return 0;
}

static int check_others(int rank, int n, ncclComm_t comm) {
  int i, r;
  int mine[COUNT], all[COUNT * 8], block[COUNT], out[COUNT * 8];
  /* allgather */
  for (i = 0; i < COUNT; ++i) mine[i] = rank * 1000 + i;
  CHECK(rank, ncclAllGather(mine, all, COUNT, ncclInt32, comm, NULL));
  for (r = 0; r < n; ++r)
    for (i = 0; i < COUNT; ++i)
      expect(rank, "allgather", r * COUNT + i, all[r * COUNT + i], r * 1000 + i);
  /* broadcast from the last rank */
  for (i = 0; i < COUNT; ++i) block[i] = rank == n - 1 ? 7 * i : -1;
  CHECK(rank, ncclBroadcast(block, block, COUNT, ncclInt32, n - 1, comm, NULL));
  for (i = 0; i < COUNT; ++i) expect(rank, "broadcast", i, block[i], 7 * i);
  /* reduce (sum) to rank 0 */
  for (i = 0; i < COUNT; ++i) block[i] = -5;
  CHECK(rank, ncclReduce(mine, block, COUNT, ncclInt32, ncclSum, 0, comm, NULL));
  for (i = 0; rank == 0 && i < COUNT; ++i)
    expect(rank, "reduce", i, block[i], 1000 * n * (n - 1) / 2 + n * i);
  /* reduce-scatter (sum): rank r's block is sum over ranks of their block r */
  for (i = 0; i < COUNT * n; ++i) all[i] = rank + i;
  CHECK(rank, ncclReduceScatter(all, block, COUNT, ncclInt32, ncclSum, comm, NULL));
  for (i = 0; i < COUNT; ++i)
    expect(rank, "reduce-scatter", i, block[i], n * (n - 1) / 2 + n * (rank * COUNT + i));
  /* all-to-all as grouped send/recv: block r goes to rank r */
  for (r = 0; r < n; ++r)
    for (i = 0; i < COUNT; ++i) all[r * COUNT + i] = rank * 100 + r * 10000 + i;
  CHECK(rank, ncclGroupStart());
  for (r = 0; r < n; ++r) {
    CHECK(rank, ncclSend(all + r * COUNT, COUNT, ncclInt32, r, comm, NULL));
    CHECK(rank, ncclRecv(out + r * COUNT, COUNT, ncclInt32, r, comm, NULL));
  }
  CHECK(rank, ncclGroupEnd());
  for (r = 0; r < n; ++r)
    for (i = 0; i < COUNT; ++i)
      expect(rank, "all-to-all", r * COUNT + i, out[r * COUNT + i], r * 100 + rank * 10000 + i);
  /* send/recv ring */
  CHECK(rank, ncclGroupStart());
  CHECK(rank, ncclSend(mine, COUNT, ncclInt32, (rank + 1) % n, comm, NULL));
  CHECK(rank, ncclRecv(block, COUNT, ncclInt32, (rank + n - 1) % n, comm, NULL));
  CHECK(rank, ncclGroupEnd());
  for (i = 0; i < COUNT; ++i)
    expect(rank, "send/recv", i, block[i], ((rank + n - 1) % n) * 1000 + i);
  return 0;
}

static int run_rank(int n, int rank, const char* hex) {
  ncclUniqueId id;
  ncclComm_t comm;
  int i, count = 0;
  unsigned int byte;
  for (i = 0; i < (int)sizeof(id.internal); ++i) {
    sscanf(hex + 2 * i, "%2x", &byte);
    id.internal[i] = (char)byte;
  }
  CHECK(rank, ncclCommInitRank(&comm, n, id, rank));
  CHECK(rank, ncclCommCount(comm, &count));
  if (count != n) {
    fprintf(stderr, "rank %d: ncclCommCount says %d\n", rank, count);
    return 1;
  }
  if (check_reductions(rank, n, comm) != 0 || check_others(rank, n, comm) != 0) return 1;
  CHECK(rank, ncclCommDestroy(comm));
  return failures == 0 ? 0 : 1;
}

static int spawn_ranks(const char* self, int n) {
  ncclUniqueId id;
  char hex[2 * sizeof(id.internal) + 1], n_text[16], rank_text[16];
  pid_t children[8];
  int rank, i, failed = 0;
  CHECK(-1, ncclGetUniqueId(&id));
  for (i = 0; i < (int)sizeof(id.internal); ++i)
    sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
  snprintf(n_text, sizeof(n_text), "%d", n);
  for (rank = 0; rank < n; ++rank) {
    char* argv[] = {(char*)self, "rank", n_text, rank_text, hex, NULL};
    snprintf(rank_text, sizeof(rank_text), "%d", rank);
    if (posix_spawn(&children[rank], self, NULL, NULL, argv, environ) != 0) {
      fprintf(stderr, "cannot spawn rank %d\n", rank);
      return 1;
    }
  }
  for (rank = 0; rank < n; ++rank) {
    int status = 0;
    waitpid(children[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed == 0) printf("%d ranks: every collective correct\n", n);
  return failed == 0 ? 0 : 1;
}

static int plain(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result == ncclSuccess) result = ncclCommInitRank(&comm, 1, id, 0);
  if (result != ncclSuccess) {
    printf("the real NCCL refused to create a communicator, as it must without a GPU: %s (%s)\n",
           ncclGetErrorString(result), ncclGetLastError(NULL));
    return 0;
  }
  ncclCommDestroy(comm);
  printf("skipped: the real NCCL created a communicator, so this machine has a GPU\n");
  return 77;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "plain") == 0) return plain();
  if (argc >= 3 && strcmp(argv[1], "run") == 0) {
    const int n = atoi(argv[2]);
    if (n < 1 || n > 8) return 2;
    return spawn_ranks(argv[0], n);
  }
  if (argc >= 5 && strcmp(argv[1], "rank") == 0)
    return run_rank(atoi(argv[2]), atoi(argv[3]), argv[4]);
  fprintf(stderr, "usage: %s plain | run N\n", argv[0]);
  return 2;
}
