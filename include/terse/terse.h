/*
 * terse.h: terse's own C API, next to the NCCL API that libterse.so also exports.
 *
 * An application that only calls ncclAllReduce gets compression from the environment
 * (TERSE_CODEC=int8, TERSE_POLICY=policy.yaml); this header adds what an anonymous buffer cannot
 * say: a tensor's name and shape (policy rules match names; PowerSGD views a tensor as a
 * matrix), a per-call codec override, statistics, residual resets and policy changes at run
 * time, and a parameter server (tersePs*). Link with -lterse. Every call returns an
 * ncclResult_t; on failure ncclGetLastError() holds a sentence naming the argument at fault.
 */
#ifndef TERSE_TERSE_H_
#define TERSE_TERSE_H_

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version: TERSE_VERSION is TERSE_VERSION_CODE(TERSE_MAJOR, TERSE_MINOR,
 * TERSE_PATCH) of the header a program was compiled with; terseGetVersion gives the library's. */
#define TERSE_MAJOR 0
#define TERSE_MINOR 3
#define TERSE_PATCH 0
#define TERSE_VERSION_CODE(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define TERSE_VERSION TERSE_VERSION_CODE(TERSE_MAJOR, TERSE_MINOR, TERSE_PATCH)

/* *version = the library's TERSE_VERSION_CODE. */
ncclResult_t terseGetVersion(int* version);

/* Structs that grow. Every struct a caller fills in or receives (terseTensor, terseStats,
 * tersePsTensorDesc, tersePsStats) begins with `size`: set it to sizeof the struct, as the
 * TERSE_*_INITIALIZER macros do, so that a later library, whose struct has more members at the
 * end, reads and writes only the members the caller's header knows. The library reads (or writes)
 * the first `size` bytes and ignores the rest of a struct larger than its own; a size smaller
 * than this first growing layout is refused with ncclInvalidArgument naming it. A size of 0 is
 * read as this first layout's (a zeroed struct, `terseStats s = {0};`, keeps working). Arrays of
 * them (tersePsInitList) step by the first element's size, which every element must share. */

/* The most dimensions a tensor descriptor may give. */
#define TERSE_MAX_DIMS 8
/* Room for a codec or algorithm name in the statistics, terminator included. */
#define TERSE_NAME_BYTES 32
/* Rows of terseStats::rows: one per (codec, algorithm) pair seen on a communicator. */
#define TERSE_STATS_MAX_ROWS 32
/* Entries of terseStats::planner_codecs: one per codec whose speed the planner knows. */
#define TERSE_STATS_MAX_CODECS 16

/* What the application knows about one tensor. Every member but size may be left zero/NULL. */
typedef struct {
  size_t size; /* sizeof(terseTensor) (Structs that grow, above) */
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
#define TERSE_TENSOR_INITIALIZER \
  { sizeof(terseTensor), NULL, 0, {0}, NULL }

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

/* What a communicator's allreduces did since it was created (or since terseCommResetStats). Its
 * members by concern (their order is the ABI's, so concerns interleave where members were added):
 *   traffic       calls, compressed_calls, the byte and time totals, nrows, rows, rows_beyond;
 *   the last call last_codec, last_algorithm, last_seed, last_step, last_piece_bytes,
 *                 last_inner_algorithm, last_predicted_seconds;
 *   memory        residual_* and fallback_calls (residual memory and its admission);
 *   device copies pcie_bytes_to_host, pcie_bytes_to_device;
 *   the planner   planner_* and the links' figures (since 0.3.0). */
typedef struct {
  size_t size;               /* sizeof(terseStats) (Structs that grow, above) */
  uint64_t calls;            /* every allreduce, compressed or not */
  uint64_t compressed_calls; /* those the policy compressed */
  uint64_t raw_bytes;        /* sums over rows */
  uint64_t wire_bytes;
  uint64_t dense_wire_bytes;
  double encode_seconds;
  double decode_seconds;
  double seconds;
  int nrows; /* rows used; pairs beyond TERSE_STATS_MAX_ROWS count in the totals and rows_beyond */
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
   * pipeline piece size in bytes (TERSE_COMPRESSED_PIECE_BYTES): with the codec spec and
   * algorithm above, all a checker needs to recompute what the call must return (perf/'s #wrong
   * does). The seed is m(m(c) ^ (n << 20) ^ last_step), where m(x) is SplitMix64's output for
   * the state x (x + 0x9e3779b97f4a7c15, then its finaliser), n the call's index among the
   * communicator's collectives (from 0, mod 2^18) and c the communicator's number: the unique id's
   * secret s (bytes 32-39, little-endian) folded as (s ^ s >> 16 ^ s >> 32 ^ s >> 48) mod 2^16. A
   * tensor's first call is its step 0. */
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
   * messages (those it sends copied to the host, those it receives copied to the device), and
   * for a hierarchical or rail plan also the tensor bytes its uncompressed intra-node phases
   * exchange with the node's other ranks through host memory;
   * where a call is staged through pinned host memory, its whole inputs to the host and its
   * whole outputs to the device. 0 for host buffers. Zeroed by terseCommResetStats. */
  uint64_t pcie_bytes_to_host;
  uint64_t pcie_bytes_to_device;
  /* Since 0.2.0. (codec, algorithm) pairs that did not fit in rows (more than
   * TERSE_STATS_MAX_ROWS were used): they count in the totals above, not in a row. */
  uint64_t rows_beyond;
  /* Since 0.3.0. The planner's current estimates, which every rank agreed on. It starts from the
   * nominal figures (the links' from topology or TERSE_NET_GBPS and kin, each codec's speed from
   * a probe times the ranks' share of a core) and, unless TERSE_PLANNER_LEARN=off, refines them
   * from the times its calls on host buffers measured: calls that depart from their predictions
   * move them within a few calls; plans made on figures that moved are made again
   * (planner_plan_changes counts the choices that changed), and now and then a call runs a
   * rejected candidate predicted close to the best (planner_explorations) to keep its figures
   * fresh. Links: latency in seconds and bandwidth in bytes per second, inside a node and
   * between nodes; the additions and the codecs: bytes of fp32 input per second on one rank as the
   * calls ran, and how many encodes of all ranks were measured into them. Not zeroed by
   * terseCommResetStats. */
  int planner_learning; /* 1 while the figures are learned */
  int planner_ncodecs;  /* entries of planner_codecs used */
  uint64_t planner_agreements;
  uint64_t planner_plan_changes;
  uint64_t planner_explorations;
  double intra_latency_s, intra_bytes_per_s, nominal_intra_latency_s, nominal_intra_bytes_per_s;
  double inter_latency_s, inter_bytes_per_s, nominal_inter_latency_s, nominal_inter_bytes_per_s;
  /* An fp32 addition of two buffers on one rank, bytes per second. */
  double reduce_bytes_per_s, nominal_reduce_bytes_per_s;
  struct {
    char codec[TERSE_NAME_BYTES]; /* canonical spec, cut to fit */
    double encode_bytes_per_s, decode_bytes_per_s;
    double probed_encode_bytes_per_s, probed_decode_bytes_per_s; /* the nominal figures */
    uint64_t observations;
  } planner_codecs[TERSE_STATS_MAX_CODECS];
} terseStats;
#define TERSE_STATS_INITIALIZER \
  { sizeof(terseStats) }

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
ncclResult_t terseCommResetResidual(ncclComm_t comm, const char* name);
/* The name of terseCommResetResidual before 0.2.0, kept so that programs built against it run. */
ncclResult_t terseResidualReset(ncclComm_t comm, const char* name);

/* Replaces the communicator's policy with the rules of a YAML document (the format of
 * TERSE_POLICY files, below) or, with terseCommSetCodec, with one rule naming a codec as
 * TERSE_CODEC does ("none" turns compression off). Refused, keeping the old policy, when the text
 * does not parse (the message names the line). Every rank must set the same policy before its
 * next allreduce.
 *
 * The policy format (YAML). Rules are tried in order; the first whose match accepts a tensor
 * decides. Every key is optional except codec; an absent match key accepts anything.
 *
 *   rules:
 *     - match:
 *         name: "encoder\\..*weight"  # RE2 syntax, full match of the tensor's name ("" unnamed)
 *         min_bytes: 1M                # tensor size in bytes, both bounds inclusive,
 *         max_bytes: 1G                #   K/M/G suffixes 1024-based
 *         dtype: [float, bfloat16]     # float|float32|fp32, half|float16|fp16, bfloat16|bf16,
 *                                      #   float8e4m3|fp8e4m3|e4m3, float8e5m2|fp8e5m2|e5m2
 *         op: [sum, avg]               # sum and avg (the default); prod/max/min are refused
 *         comm_size: {min: 2, max: 1024}  # ranks in the communicator, both bounds inclusive
 *         link: inter                  # any | intra (one node) | inter (crosses the network)
 *       codec: int8                    # a codec name, "name:key=value,...", none, or auto
 *       max_rel_err: 0.01              # auto only: the error bound its choice must keep
 *       params: {block: 128, rounding: stochastic}  # codec parameters (or in codec)
 *       memory: residual               # none | residual | momentum (dgc); default per codec
 *       schedule: {start: 100, end: 0, every: 1, warmup: 50}
 *                                      # active from step start to end (exclusive, 0 = for
 *                                      #   ever), every N-th step, ramping in over `warmup`
 *                                      #   active steps; inactive steps run uncompressed
 *       fallback: "qsgd:levels=15"     # what a tensor residual memory did not admit runs
 *                                      #   (memory none): an unbiased stateless codec, or none
 *       ps_receive: bf16               # parameter-server receives of the tensors it matches
 *     - match: {max_bytes: 64K}
 *       codec: none
 *
 * A single value may stand for a one-element list. Unknown or repeated keys are refused, and
 * every codec is made when the policy loads, so a typo fails then, as "<where>:<line>: rule <n>:
 * <reason>". */
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
 * (*norm = terseNormMax) or the L2 norm (*norm = terseNormL2) of the encoded tensor; through an
 * algorithm that encodes a value at most `steps` times (terseAlgorithmLossySteps) the result is
 * within
 * S_sum ((1 + factor)^steps - 1) of the exact sum, S_sum being the sum over ranks of S(input). */
typedef enum {
  terseNormMax = 0, /* S(x) is the largest magnitude of x */
  terseNormL2 = 1   /* S(x) is the L2 norm of x */
} terseNorm_t;
ncclResult_t terseCodecErrorBound(const char* codec, size_t count, double* factor,
                                  terseNorm_t* norm);
ncclResult_t terseAlgorithmLossySteps(const char* algorithm, int nranks, int* steps);

/* ---- Parameter server (docs/design.md section 12; include/terse/README.md) ----------------------
 *
 * A tensor sharded over a communicator's ranks, as in TorchMPI: every rank may send to it with
 * an update rule that its owners apply (zero, copy, add) and receive it, asynchronously, while
 * the owners serve those requests in the background (a progress thread per process over UCX of
 * its own: no rank has to call anything for its shards to be served). Every call is thread-safe.
 *
 * Placement. A tensor larger than TERSE_PS_SPLIT_BYTES (default 1M) is split by rows into one
 * shard per rank, shard i owned by rank i, rows balanced (rank i holds rows
 * [i*rows/nranks, (i+1)*rows/nranks)); a smaller one is placed whole on the rank that owns the
 * fewest bytes of this communicator's parameter-server tensors so far (ties: the lowest rank;
 * tersePsInitList places its small tensors largest first). tersePsGetLayout says where each
 * shard went. Every rank computes the same placement.
 *
 * Atomicity. An owner applies the requests of one shard one at a time, each whole: a receive
 * sees a shard before or after any send, never half of one. A client's requests to one owner
 * are applied in the order it made them. A tensor split over several owners is read shard by
 * shard, so a receive may see one shard before and another after a concurrent send.
 *
 * Compression. An `add` may travel through a codec: the handle's push codec, the tensor's
 * tersePsTensorDesc::push_codec or else what the communicator's
 * policy decides for the tensor's name (as an fp32/fp16/bf16 sum allreduce of its size), with
 * error feedback on each client: what the codec drops from one push is added to the next, so
 * the owner's shard plus every client's residual always holds the exact sum of the pushes, as
 * long as every push succeeds. A compressed push that fails (ncclRemoteError: its owner died or
 * timed out) breaks that: the residual gave up what the push's message carried when it was
 * encoded, and the owner may or may not have applied it, so that part is lost (or applied) and
 * is not restored; only what the codec dropped stays in the residual.
 * Receives may be compressed too (e.g. "bf16"), without feedback (a receive reads): by
 * tersePsTensorDesc::receive_codec, or else the matching policy rule's `ps_receive` key. Copies
 * and zeroes always travel exactly.
 *
 * Failure. Every request ends within TERSE_TIMEOUT_S: a dead or silent owner turns it into
 * ncclRemoteError (sooner where the transport notices the death), never a hang. */

/* An initialised parameter-server tensor; owned by the library until tersePsFree. */
typedef struct tersePsTensor* tersePsHandle_t;
/* One request in flight (a send, receive or clock); ends with tersePsSync or a tersePsTest that
 * reports it done, which also release it. */
typedef struct tersePsRequest* tersePsRequest_t;
/* The name of tersePsRequest_t before 0.2.0. */
typedef tersePsRequest_t tersePsSync_t;

/* The update rules a send asks the owners to apply to their shards. */
typedef enum {
  tersePsZero = 0, /* shard = 0 (the send's tensor is not read and may be NULL) */
  tersePsCopy = 1, /* shard = the sender's slice, exactly */
  tersePsAdd = 2   /* shard += the sender's slice (through the push codec, if any) */
} tersePsRule_t;

/* One tensor of tersePsInitList. */
typedef struct {
  size_t size; /* sizeof(tersePsTensorDesc) (Structs that grow, above) */
  /* For policy rules, logs and messages; must be the same on every rank. NULL or "" allowed. */
  const char* name;
  /* The initial values: each owner initialises its shard from its own copy of its slice. */
  const void* data;
  size_t count;
  ncclDataType_t datatype; /* ncclFloat32, ncclFloat64, ncclFloat16 or ncclBfloat16 */
  /* Elements per row (the product of the dimensions after the first); 0 means 1. A split tensor
   * is cut between rows only. Must divide count. */
  size_t row_elements;
  /* Codec spec for `add` sends ("int8", "topk:ratio=0.01", "none"); NULL asks the communicator's
   * policy (by name, size and type). Codecs that keep per-tensor state (dgc, powersgd) are
   * refused. */
  const char* push_codec;
  /* Codec spec for receives ("bf16"), "none" for exact receives; NULL asks the policy: the
   * `ps_receive` codec of the rule that matches the tensor (as for push_codec), else none. */
  const char* receive_codec;
} tersePsTensorDesc;
#define TERSE_PS_TENSOR_DESC_INITIALIZER \
  { sizeof(tersePsTensorDesc), NULL, NULL, 0, ncclFloat32, 0, NULL, NULL }

/* Collective over every rank of `comm`, in the same order on every rank: creates a parameter-
 * server tensor of `count` elements, shards it (placement above) and initialises each shard from
 * its owner's `tensor`. Every rank must pass the same name, count and datatype (a difference
 * fails every rank with ncclInvalidUsage). Rows are single elements here; tersePsInitList takes
 * a row length and codecs. */
ncclResult_t tersePsInit(ncclComm_t comm, const char* name, const void* tensor, size_t count,
                         ncclDataType_t datatype, tersePsHandle_t* handle);
/* The same for `ntensors` tensors at once (handles[i] for tensors[i]). */
ncclResult_t tersePsInitList(ncclComm_t comm, const tersePsTensorDesc* tensors, int ntensors,
                             tersePsHandle_t* handles);

/* Asks every owner to apply `rule` to its shard with this rank's slice of `tensor` (count
 * elements of the handle's datatype). `tensor` is read (and, for a compressed add, encoded)
 * before the call returns, so it may be reused at once. *request completes when every owner has
 * applied it. */
ncclResult_t tersePsSend(tersePsHandle_t handle, const void* tensor, tersePsRule_t rule,
                         tersePsRequest_t* request);
/* Fetches every shard into `tensor` (count elements). `tensor` is written while the request
 * runs and holds the values once *request completes successfully; leave it alone until then. */
ncclResult_t tersePsReceive(tersePsHandle_t handle, void* tensor, tersePsRequest_t* request);

/* Bounded staleness (stale synchronous parallel): tells every owner of the handle's shards that
 * this rank has completed `clock` steps (a rank's clock starts at 0 and never goes back: a
 * smaller value than the last is refused), and completes *request once every rank's clock, as the
 * owners hold them, is at least clock - staleness. So a rank that calls it before each step runs
 * at most `staleness` steps ahead of the slowest; staleness 0 is a barrier per step. A rank that
 * stops advancing (dead, or finished) holds the others back until their requests time out. */
ncclResult_t tersePsClock(tersePsHandle_t handle, uint64_t clock, uint64_t staleness,
                          tersePsRequest_t* request);

/* Waits for the request to finish and releases it. ncclRemoteError when an owner failed or did
 * not answer within TERSE_TIMEOUT_S of the request's start (the message names the owner),
 * ncclInvalidArgument/ncclInvalidUsage when an owner refused it. */
ncclResult_t tersePsSync(tersePsRequest_t request);
/* Polls: *done = 0 while the request runs (the call returns ncclSuccess and the request stays
 * yours); *done = 1 once it finished, returning what tersePsSync would and releasing it. */
ncclResult_t tersePsTest(tersePsRequest_t request, int* done);

/* Where one shard lives: elements [offset, offset + count) of the tensor, on rank `owner`. */
typedef struct {
  int owner;
  size_t offset;
  size_t count;
} tersePsShard;
/* The handle's placement: *nshards shards (1 for a tensor placed whole, nranks for a split one),
 * up to `max_shards` of them written to `shards` (which may be NULL when max_shards is 0). */
ncclResult_t tersePsGetLayout(tersePsHandle_t handle, tersePsShard* shards, int max_shards,
                              int* nshards);

/* What this rank's client moved for one handle since its init: terseCommGetStats counts
 * collectives only. Values are the bytes of the shards' elements or of the codec messages that
 * stand for them; the protocol's own bytes (request and reply headers, the 8-byte prefix of each
 * payload) are left out of them and counted in header_bytes alone, so that send_bytes /
 * send_uncompressed_bytes is the push codec's ratio and an uncompressed handle's is exactly 1.
 * A send to a shard this rank owns counts like any other (it goes through the same transport).
 * Each counter only grows; the struct is not one atomic snapshot of them (a request in flight
 * may be counted in one field and not yet in another). */
typedef struct {
  size_t size;    /* sizeof(tersePsStats) (Structs that grow, above) */
  uint64_t sends; /* tersePsSend calls that were handed to the server (every rule) */
  /* Value bytes those sends put on the wire, counted when the send is made (whether or not an
   * owner later fails it): each shard's codec message for a compressed add, its slice's
   * elements for a copy or an exact add, nothing for a zero. */
  uint64_t send_bytes;
  /* What the same sends would have carried without codecs: each shard's slice as the tensor's
   * elements (count * element size) for a copy or add, nothing for a zero. */
  uint64_t send_uncompressed_bytes;
  uint64_t receives; /* tersePsReceive calls that were handed to the server */
  /* Value bytes of the answers that came back for them (one per shard, counted as it arrives
   * intact and accepted by the client): the receive codec's message, or the shard's elements. */
  uint64_t receive_bytes;
  /* What the same answers would have carried without codecs: each shard's elements. */
  uint64_t receive_uncompressed_bytes;
  /* The rest of this client's traffic for the handle, every request kind (clocks included):
   * request headers and payload prefixes it sent, reply headers it received. */
  uint64_t header_bytes;
} tersePsStats;
#define TERSE_PS_STATS_INITIALIZER \
  { sizeof(tersePsStats) }
/* Copies the handle's counters into *stats. */
ncclResult_t tersePsGetStats(tersePsHandle_t handle, tersePsStats* stats);

/* Collective over every rank that initialised the handle: waits until every rank has called it
 * (so no rank frees a shard another may still use), then releases the shards, the client's
 * residuals and, with the communicator's last tensor, the server thread and its UCX worker.
 * Call it after syncing the handle's requests and before destroying the communicator. The
 * handle is released even when it fails (a dead peer: ncclRemoteError). A handle keeps its
 * communicator's memory until it is freed: after ncclCommAbort, tersePsFree releases this rank's
 * side at once without waiting for the others (ncclSuccess); after ncclCommDestroy it does the
 * same and returns ncclInvalidUsage, since the order above was not kept. */
ncclResult_t tersePsFree(tersePsHandle_t handle);

#ifdef __cplusplus
}
#endif

#endif /* TERSE_TERSE_H_ */
