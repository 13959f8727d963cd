/* A program built against terse.h 0.1.0 (include_0_1_0/, a frozen copy of that header) and run
 * against this libterse: the ABI check of the growing public API. It uses what 0.1.0 had and
 * later versions renamed or grew: terseStats and terseTensor of their 0.1.0 sizes,
 * terseResidualReset, terseCodecErrorBound with an int, tersePsSync_t. Exits non-zero and says
 * why when any call or value is wrong. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <terse/terse.h>

#include "../c_check.h"

#define EXPECT(condition)                                             \
  do {                                                                \
    if (!(condition)) {                                               \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #condition); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main(void) {
  enum { kRanks = 2, kCount = 4096 };
  static float data[kRanks][kCount];
  ncclComm_t comms[kRanks];
  terseTensor tensor = TERSE_TENSOR_INITIALIZER;
  terseStats stats = TERSE_STATS_INITIALIZER;
  double factor = 0;
  int l2 = -1, version = 0, rank, i;
  tersePsSync_t no_request = NULL;

  /* The library is this version or a later one of the same major. */
  CHECK(terseGetVersion(&version));
  EXPECT(version >= TERSE_VERSION && version / 10000 == TERSE_MAJOR);

  CHECK(ncclCommInitAll(comms, kRanks, NULL));
  for (rank = 0; rank < kRanks; ++rank) {
    CHECK(terseCommSetCodec(comms[rank], "int8"));
    /* Constant blocks: int8 carries them exactly, so the sum is exact. */
    for (i = 0; i < kCount; ++i) data[rank][i] = (float)(rank + 1);
  }
  tensor.name = "abi.weight";
  CHECK(ncclGroupStart());
  for (rank = 0; rank < kRanks; ++rank) {
    CHECK(terseAllReduceTensor(data[rank], data[rank], kCount, ncclFloat, ncclSum, &tensor,
                               comms[rank], NULL));
  }
  CHECK(ncclGroupEnd());
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < kCount; ++i) EXPECT(data[rank][i] == 3.0f);
  }

  /* Statistics into the 0.1.0 struct: filled up to its size, nothing written past it. */
  {
    unsigned char guarded[sizeof(terseStats) + 64];
    terseStats* in_place = (terseStats*)guarded;
    memset(guarded, 0xA5, sizeof guarded);
    memcpy(guarded, &stats, sizeof(stats.size));
    CHECK(terseCommGetStats(comms[0], in_place));
    for (i = (int)sizeof(terseStats); i < (int)sizeof guarded; ++i) EXPECT(guarded[i] == 0xA5);
    memcpy(&stats, in_place, sizeof stats);
  }
  EXPECT(stats.size == sizeof(terseStats));
  EXPECT(stats.calls == 1 && stats.compressed_calls == 1);
  EXPECT(stats.nrows == 1 && strcmp(stats.rows[0].codec, "int8") == 0);
  EXPECT(strncmp(stats.last_codec, "int8:", 5) == 0);
  EXPECT(stats.residual_entries == 1);

  /* The renamed and retyped calls under their 0.1.0 names and types. */
  CHECK(terseCodecErrorBound(stats.last_codec, kCount, &factor, &l2));
  EXPECT(l2 == 0 && factor > 0);
  CHECK(terseCodecErrorBound("powersgd", kCount, &factor, &l2));
  EXPECT(l2 == 1);
  for (rank = 0; rank < kRanks; ++rank) CHECK(terseResidualReset(comms[rank], NULL));
  CHECK(terseCommGetStats(comms[0], &stats));
  EXPECT(stats.residual_entries == 0);
  EXPECT(tersePsSync(no_request) == ncclInvalidArgument);

  for (rank = 0; rank < kRanks; ++rank) CHECK(ncclCommDestroy(comms[rank]));
  printf("a program built against terse.h 0.1.0 runs against terse %d: ok\n", version);
  return 0;
}
