// Distributed PowerSGD (powersgd_allreduce.cpp) in double precision, from the paper's steps:
//   Q = the warm start (or the step's initial Q), columns normalised (the codec's primitives);
//   P = sum_r M_r Q; orthonormalise P (Gram-Schmidt); Q_r = M_r^T P; Q = sum_r Q_r;
//   result = P Q^T; position r's residual = M_r - P Q_r^T (last iteration); warm start = Q.
// Dense plans and non-finite factors give the exact sum and clear the residuals. The code under
// test computes in fp32 with BLAS, so the model states a tolerance: 1e-4 of the largest
// magnitude of the result (or of the exact sum), far below what a dropped or doubled
// contribution, or a zero result, changes.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "codecs/powersgd.h"
#include "common/result.h"
#include "model_steps.h"

namespace terse {
namespace model {
namespace {

using Parameters = LowRankParams;

Parameters parameters_of(const Codec& codec) {
  const LowRankParams* low_rank = codec.low_rank();
  if (low_rank == nullptr) throw std::runtime_error("model: powersgd codec states no parameters");
  return *low_rank;
}

// Column-major rows x r matrices in double.
using Matrix = std::vector<double>;

void orthonormalise(Matrix* p, size_t rows, int r) {
  for (int c = 0; c < r; ++c) {
    double* v = p->data() + static_cast<size_t>(c) * rows;
    for (int pass = 0; pass < 2; ++pass) {
      for (int k = 0; k < c; ++k) {
        const double* q = p->data() + static_cast<size_t>(k) * rows;
        double dot = 0;
        for (size_t i = 0; i < rows; ++i) dot += q[i] * v[i];
        for (size_t i = 0; i < rows; ++i) v[i] -= dot * q[i];
      }
    }
    double norm = 0;
    for (size_t i = 0; i < rows; ++i) norm += v[i] * v[i];
    norm = std::sqrt(norm);
    for (size_t i = 0; i < rows; ++i) v[i] /= norm;
  }
}

// The exact sum. Its tolerance is the low-rank path's (1e-4 of the largest magnitude) rather
// than a sum's rounding: the contributions hold residuals the model computed in double and the
// code under test in fp32.
GroupResult dense_sum(GroupCall& call) {
  GroupResult result = position_order_sum(call.contributions);
  double largest = 0;
  for (float v : result.sum) {
    if (std::isfinite(v)) largest = std::max(largest, std::fabs(double(v)));
  }
  for (double& tolerance : result.tolerance) tolerance = std::max(tolerance, 1e-4 * largest);
  for (std::vector<float>* residual : call.residuals) {
    if (residual != nullptr) std::fill(residual->begin(), residual->end(), 0.0f);
  }
  return result;
}

}  // namespace

GroupResult model_powersgd(GroupCall& call) {
  const Parameters parameters = parameters_of(*call.codec);
  PowerSgdPlan plan;
  if (plan_powersgd(call.count, DType::kFloat32, call.shape, parameters.rank, &plan) !=
      ncclSuccess) {
    throw std::runtime_error(std::string("model: powersgd plan: ") + last_error());
  }
  if (plan.dense) return dense_sum(call);
  const size_t rows = plan.rows, cols = plan.cols;
  const int r = plan.rank;
  const int n = call.size();
  std::vector<float> q(cols * static_cast<size_t>(r));
  if (call.warm_q != nullptr && parameters.warm_start) {
    if (call.warm_q->empty()) {
      call.warm_q->resize(q.size());
      powersgd_initial_q(call.warm_q->data(), cols, r, 0, Memory::kHost, nullptr);
    }
    q = *call.warm_q;
  } else {
    powersgd_initial_q(q.data(), cols, r, call.step, Memory::kHost, nullptr);
  }
  Matrix p, q_sum;
  std::vector<Matrix> q_local(n);
  for (int iteration = 0; iteration < parameters.iterations; ++iteration) {
    if (iteration > 0) {
      for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(q_sum[i]);
    }
    powersgd_prepare_q(q.data(), cols, r, call.step, Memory::kHost, nullptr);
    p.assign(rows * static_cast<size_t>(r), 0.0);
    for (int rank = 0; rank < n; ++rank) {
      const std::vector<float>& m = call.contributions[rank];
      for (int c = 0; c < r; ++c) {
        for (size_t i = 0; i < rows; ++i) {
          double dot = 0;
          for (size_t j = 0; j < cols; ++j) dot += double(m[i * cols + j]) * q[c * cols + j];
          p[c * rows + i] += dot;
        }
      }
    }
    orthonormalise(&p, rows, r);
    q_sum.assign(cols * static_cast<size_t>(r), 0.0);
    for (int rank = 0; rank < n; ++rank) {
      const std::vector<float>& m = call.contributions[rank];
      q_local[rank].assign(cols * static_cast<size_t>(r), 0.0);
      for (int c = 0; c < r; ++c) {
        for (size_t j = 0; j < cols; ++j) {
          double dot = 0;
          for (size_t i = 0; i < rows; ++i) dot += double(m[i * cols + j]) * p[c * rows + i];
          q_local[rank][c * cols + j] = dot;
          q_sum[c * cols + j] += dot;
        }
      }
    }
  }
  for (double v : q_sum) {
    if (!std::isfinite(v)) return dense_sum(call);
  }
  for (double v : p) {
    if (!std::isfinite(v)) return dense_sum(call);
  }
  const auto product = [&](const Matrix& left, const Matrix& right, size_t i, size_t j) {
    double value = 0;
    for (int c = 0; c < r; ++c) value += left[c * rows + i] * right[c * cols + j];
    return value;
  };
  for (int rank = 0; rank < n; ++rank) {
    std::vector<float>* residual = call.residuals[rank];
    if (residual == nullptr) continue;
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < cols; ++j) {
        (*residual)[i * cols + j] = static_cast<float>(
            double(call.contributions[rank][i * cols + j]) - product(p, q_local[rank], i, j));
      }
    }
  }
  if (call.warm_q != nullptr && parameters.warm_start) {
    for (size_t i = 0; i < q_sum.size(); ++i) (*call.warm_q)[i] = static_cast<float>(q_sum[i]);
  }
  GroupResult result;
  result.sum.resize(call.count);
  double largest = 0;
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      result.sum[i * cols + j] = static_cast<float>(product(p, q_sum, i, j));
      largest = std::max(largest, std::fabs(double(result.sum[i * cols + j])));
    }
  }
  result.tolerance.assign(call.count, 1e-4 * largest);
  return result;
}

}  // namespace model
}  // namespace terse
