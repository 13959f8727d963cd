/*
 * terse.h: terse's own C API, next to the NCCL API that libterse.so also exports.
 *
 * An application that only calls ncclAllReduce gets compression from the environment
 * (TERSE_CODEC=int8, TERSE_POLICY=policy.yaml); this header adds what an anonymous buffer cannot
 * say: a tensor's name and shape (policy rules match names; PowerSGD views a tensor as a
 * matrix), a per-call codec override, statistics, residual resets and policy changes at run
 * time. Link with -lterse. Every call returns an ncclResult_t; on failure ncclGetLastError()
 * holds a sentence naming the argument at fault.
 */
#ifndef TERSE_TERSE_H_
#define TERSE_TERSE_H_

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a tensor descriptor may give. */
#define TERSE_MAX_DIMS 8
/* Room for a codec or algorithm name in the statistics, terminator included. */
#define TERSE_NAME_BYTES 32
/* Rows of terseStats::rows: one per (codec, algorithm) pair seen on a communicator. */
#define TERSE_STATS_MAX_ROWS 32

/* What the application knows about one tensor. Every member may be left zero/NULL. */
typedef struct {
  /* The tensor's name, e.g. "encoder.layer0.weight.grad". Policy rules match it (a full match
   * of the rule's regular expression), and the residual memory of a named tensor follows the
   * name, not the buffer's address, so it survives the framework moving the buffer. NULL or ""
   * for an anonymous tensor (keyed by its recvbuff, like ncclAllReduce's). */
  const char* name;
  /* The tensor's shape, outermost dimension first; ndims 0 for none. The product must equal the
   * count. PowerSGD views the tensor as shape[0] x (the product of the rest); without a shape it
   * picks a near-square view. */
  int ndims;
  int64_t shape[TERSE_MAX_DIMS];
  /* A codec for this call only, overriding the policy: "int8", "topk:ratio=0.01", "none" (no
   * compression). NULL to let the policy decide. The memory kind is the codec's default. */
  const char* codec;
} terseTensor;

/* ncclAllReduce of a described tensor (NULL `tensor` behaves exactly as ncclAllReduce). The
 * policy (or tensor->codec) decides whether and how it is compressed; sum and avg of fp32, fp16
 * and bf16 can be compressed, everything else is reduced exactly. Every rank must describe the
 * tensor alike (same name, shape and codec), since they must all run the same algorithm. */
ncclResult_t terseAllReduceTensor(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op,
                                  const terseTensor* tensor, ncclComm_t comm, cudaStream_t stream);

/* Totals of the allreduce calls of one (codec, algorithm) pair on a communicator. */
typedef struct {
  char codec[TERSE_NAME_BYTES];     /* codec name, "none" for uncompressed calls */
  char algorithm[TERSE_NAME_BYTES]; /* algorithm name, e.g. "sra", "ring" */
  uint64_t calls;
  uint64_t raw_bytes;  /* count * element size, summed over the calls */
  uint64_t wire_bytes; /* bytes this rank sent for them, headers included */
  /* What an uncompressed ring allreduce would have sent: 2 (n-1)/n raw_bytes.
   * wire_bytes / dense_wire_bytes is the traffic ratio. */
  uint64_t dense_wire_bytes;
  double encode_seconds; /* in encodes (and error-feedback compensation) */
  double decode_seconds; /* in decodes */
  double seconds;        /* wall time of the calls */
} terseStatsRow;

/* What a communicator's allreduces did since it was created (or since terseCommResetStats). */
typedef struct {
  uint64_t calls;            /* every allreduce, compressed or not */
  uint64_t compressed_calls; /* those the policy compressed */
  uint64_t raw_bytes;        /* sums over rows */
  uint64_t wire_bytes;
  uint64_t dense_wire_bytes;
  double encode_seconds;
  double decode_seconds;
  double seconds;
  int nrows; /* rows used */
  terseStatsRow rows[TERSE_STATS_MAX_ROWS];
  /* The last allreduce: its codec spec (every parameter spelled out) and algorithm. */
  char last_codec[128];
  char last_algorithm[TERSE_NAME_BYTES];
  /* This communicator's residual (error-feedback) memory: one entry per compressed tensor that
   * keeps a residual or codec state, under a cap of TERSE_MEMORY_MAX_BYTES per communicator.
   * residual_bytes exceeds residual_max_bytes only when admitted codec states grew past it.
   * residual_evictions counts entries evicted to make room; only entries whose tensors were not
   * used for more than TERSE_MEMORY_IDLE_STEPS steps are ever evicted (admission, below). */
  uint64_t residual_entries;
  uint64_t residual_bytes;
  uint64_t residual_max_bytes;
  uint64_t residual_evictions;
  /* The last compressed allreduce's seed (the same on every rank), its tensor's step and its
   * pipeline piece size in bytes: with the codec spec and algorithm above, all a checker needs to
   * recompute what the call must return (perf/'s #wrong does). */
  uint64_t last_seed;
  uint64_t last_step;
  uint64_t last_piece_bytes;
  /* Admission. A tensor's entry is made when it fits under the cap after evicting idle entries;
   * one that does not fit is not admitted (nothing in use is evicted for it) and is tried again
   * at its next call. Its calls meanwhile run without memory, alike on every rank: with its
   * policy rule's fallback codec (`fallback:`, memory none) or else uncompressed, exactly; one
   * WARN per tensor names it, the bytes it needs and the cap.
   * residual_admitted: entries made (a tensor admitted; its entry recreated after its count,
   *   dtype, codec or layout changed counts again); not zeroed by terseCommResetStats.
   * residual_refused: tensors not admitted, each counted once (as its WARN).
   * fallback_calls: calls that ran without memory because their tensor was not admitted, every
   *   such call counted (their rows are those of the fallback codec, or "none").
   * residual_idle_steps: TERSE_MEMORY_IDLE_STEPS; residual_step: the communicator's step, the
   *   clock of idleness: the largest step of any of its tensors (the training iteration when
   *   every tensor is reduced once per iteration). A tensor not reduced for 1024 of these steps
   *   (or residual_idle_steps, when larger) has its step forgotten: if it comes back, its step
   *   (last_step, policy schedules) starts again at 0; its residual entry, unless evicted
   *   meanwhile, is kept. */
  uint64_t residual_admitted;
  uint64_t residual_refused;
  uint64_t fallback_calls;
  uint64_t residual_idle_steps;
  uint64_t residual_step;
  /* The planner's plan of the last compressed allreduce: the algorithm between node leaders when
   * last_algorithm is "hierarchical" ("" otherwise), and the time its cost model predicted for
   * the call, in seconds (TERSE_DEBUG=INFO logs every candidate's prediction, once per tensor). */
  char last_inner_algorithm[TERSE_NAME_BYTES];
  double last_predicted_seconds;
  /* Bytes copied between the GPU and host memory for this communicator's collectives on device
   * buffers (CUDA builds): where the device backend runs a compressed allreduce, its encoded
   * messages only (those it sends copied to the host, those it receives copied to the device);
   * where a call is staged through pinned host memory, its whole inputs to the host and its
   * whole outputs to the device. 0 for host buffers. Zeroed by terseCommResetStats. */
  uint64_t pcie_bytes_to_host;
  uint64_t pcie_bytes_to_device;
} terseStats;

/* Copies the communicator's statistics into *stats. */
ncclResult_t terseCommGetStats(ncclComm_t comm, terseStats* stats);
/* Zeroes them; the residual memory's own figures (residual_entries, residual_bytes,
 * residual_max_bytes, residual_evictions, residual_admitted, residual_idle_steps,
 * residual_step) are not statistics and stay, while residual_refused and fallback_calls go. */
ncclResult_t terseCommResetStats(ncclComm_t comm);

/* Forgets the error-feedback residual (and codec state, e.g. PowerSGD's warm start) of the tensor
 * named `name` on `comm`, or of every tensor of `comm` when `name` is NULL, freeing its room in
 * the communicator's residual memory; the next allreduce of it starts from zero (and is admitted
 * anew). Call it on every rank alike, e.g. when the optimizer is reset: admission decisions
 * depend on what each rank's memory holds. */
ncclResult_t terseResidualReset(ncclComm_t comm, const char* name);

/* Replaces the communicator's policy with the rules of a YAML document (the format of
 * TERSE_POLICY files, codecs/policy_file.cpp) or, with terseCommSetCodec, with one rule naming
 * a codec as TERSE_CODEC does ("none" turns compression off). Refused, keeping the old policy,
 * when the text does not parse (the message names the line). Every rank must set the same
 * policy before its next allreduce. */
ncclResult_t terseCommSetPolicy(ncclComm_t comm, const char* yaml);
ncclResult_t terseCommSetCodec(ncclComm_t comm, const char* codec);

/* What the policy would decide for a tensor on this communicator at the tensor's next step:
 * the codec spec ("none" when it stays uncompressed) and the algorithm, written into the given
 * buffers (truncated to their sizes); for a tensor without residual memory that would not be
 * admitted now, its fallback. */
ncclResult_t terseCommDecide(ncclComm_t comm, const terseTensor* tensor, size_t count,
                             ncclDataType_t datatype, ncclRedOp_t op, char* codec,
                             size_t codec_bytes, char* algorithm, size_t algorithm_bytes);

/* The stated error bound of a compressed allreduce, for tools that check results (the perf
 * binaries' #wrong): per encode |C(x)_i - x_i| <= factor * S(x), with S the largest magnitude
 * (*l2 = 0) or the L2 norm (*l2 = 1) of the encoded tensor; through an algorithm that encodes a
 * value at most `steps` times (terseAlgorithmLossySteps) the result is within
 * S_sum ((1 + factor)^steps - 1) of the exact sum, S_sum being the sum over ranks of S(input). */
ncclResult_t terseCodecErrorBound(const char* codec, size_t count, double* factor, int* l2);
ncclResult_t terseAlgorithmLossySteps(const char* algorithm, int nranks, int* steps);

#ifdef __cplusplus
}
#endif

#endif /* TERSE_TERSE_H_ */
