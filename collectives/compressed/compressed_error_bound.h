// The stated error bounds of compressed allreduces, in one place for the tests and the perf
// binaries' #wrong column.
//
// Per encode, every codec states a bound (Codec::error_bound, codecs/*.cpp) of the form
//   |C(x)_i - x_i| <= c * S(x) + a          for every element i,
// with S the largest magnitude (max |x|) or the L2 norm of the whole tensor x and a tiny
// absolute term a (fp32 rounding). Examples: int8 minmax nearest c = 1/255 (half a step of
// (max - min)/255 <= 2 max|x| / 255), qsgd c = 1/levels (x^ lies on a level next to x),
// sign/terngrad/top-k/threshold c = 1 (a dropped or rescaled element moves by at most max|x|),
// powersgd c = 1 in L2 (an orthogonal projection: ||M - M^||_F <= ||M||_F).
//
// Through a collective, a value that went through k lossy encodes of partial sums, each of norm
// at most S_sum = sum over ranks of S(g_r) plus the errors before it, is off by at most
//   S_sum ((1 + c)^k - 1)
// (induction on k; S is subadditive). k is the algorithm's lossy_steps(n)
// (compressed_algorithm_table.h): 2 for sra, n for ring, ceil(log2 n) (+1) for recursive
// doubling, the tree's depth + 1, 1 for sparse allgather, Random-K and PowerSGD. Averages divide
// the bound by n; a 16-bit output adds its rounding.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "codecs/codec.h"
#include "codecs/dtype.h"

namespace terse {

// The codec's own statement (Codec::error_bound, codec_capabilities.h): factor c and norm S.
using CodecErrorBound = ErrorBound;

// The per-encode bound of `codec` on tensors of `count` elements (Random-K's depends on the
// count through its strata), as the codec states it. ncclInvalidArgument for a codec that
// states none.
ncclResult_t codec_error_bound(const Codec& codec, size_t count, CodecErrorBound* bound);

// S(x) for `count` values.
double bound_norm(BoundNorm norm, const float* values, size_t count);
double bound_norm(BoundNorm norm, const double* values, size_t count);

// The largest |result_i - exact_i| a compressed allreduce may show, given the codec's bound,
// the algorithm's lossy steps, S_sum (sum over ranks of bound_norm of their inputs), the
// result's scale (1/n for avg) and the largest |exact_i| (for the output dtype's rounding).
double allreduce_error_bound(const CodecErrorBound& bound, int lossy_steps, double norm_sum,
                             double result_scale, double max_abs_result, DType output);

}  // namespace terse
