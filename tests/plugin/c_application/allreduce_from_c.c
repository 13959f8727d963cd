/* An application as NCCL users write it: C, only <nccl.h>, linked with -lterse instead of
 * -lnccl. One thread drives two ranks (ncclCommInitAll, a group of allreduces); exits non-zero
 * and says why when any result is wrong. */
#include <nccl.h>
#include <stdio.h>

#include "../c_check.h"

int main(void) {
  enum { kRanks = 2, kCount = 100 };
  ncclComm_t comms[kRanks];
  float data[kRanks][kCount];
  int rank, i, version = 0;
  CHECK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "version %d, expected %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  CHECK(ncclCommInitAll(comms, kRanks, NULL));
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < kCount; ++i) data[rank][i] = (float)(rank + 1) * (float)i;
  }
  CHECK(ncclGroupStart());
  for (rank = 0; rank < kRanks; ++rank) {
    CHECK(ncclAllReduce(data[rank], data[rank], kCount, ncclFloat, ncclSum, comms[rank], NULL));
  }
  CHECK(ncclGroupEnd());
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < kCount; ++i) {
      if (data[rank][i] != 3.0f * (float)i) {
        fprintf(stderr, "rank %d element %d: %g, expected %g\n", rank, i, data[rank][i],
                3.0f * (float)i);
        return 1;
      }
    }
  }
  for (rank = 0; rank < kRanks; ++rank) CHECK(ncclCommDestroy(comms[rank]));
  printf("allreduce from C over libterse: ok\n");
  return 0;
}
