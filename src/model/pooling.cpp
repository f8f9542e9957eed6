#include "model/pooling.h"

#include <algorithm>
#include <cmath>

namespace tangram {

namespace {

constexpr std::pair<Pooling, std::string_view> kNames[] = {{Pooling::None, "none"},
                                                           {Pooling::Mean, "mean"},
                                                           {Pooling::Cls, "cls"},
                                                           {Pooling::Last, "last"},
                                                           {Pooling::Rank, "rank"}};

}  // namespace

std::string_view pooling_name(Pooling p) {
  for (const auto& [value, name] : kNames)
    if (value == p) return name;
  return "?";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  for (const auto& [value, n] : kNames)
    if (n == name) return value;
  return std::nullopt;
}

Result<Pooling> embedding_pooling(std::optional<Pooling> gguf, std::optional<Pooling> asked) {
  const Pooling p = asked.value_or(gguf.value_or(Pooling::Last));
  if (p == Pooling::Mean || p == Pooling::Cls || p == Pooling::Last) return p;
  if (asked)
    return make_error("--pooling {} gives no single vector per input: use mean, cls or last",
                      pooling_name(p));
  return make_error(
      "this model cannot embed: its GGUF says pooling_type {} ({}); start the server with "
      "--pooling mean, cls or last to pool its hidden states anyway",
      pooling_name(p), p == Pooling::Rank ? "a reranker's score" : "a vector per token");
}

PoolAccumulator::PoolAccumulator(Pooling pooling, int dim)
    : pooling_(pooling), dim_(dim), acc_(static_cast<size_t>(dim), 0.0) {}

void PoolAccumulator::add(const float* rows, int64_t n, int64_t pos0) {
  if (n <= 0) return;
  if (pos0 == 0) {
    std::fill(acc_.begin(), acc_.end(), 0.0);
    rows_ = 0;
  }
  const auto d = static_cast<size_t>(dim_);
  switch (pooling_) {
    case Pooling::Mean:
      for (int64_t t = 0; t < n; ++t)
        for (size_t i = 0; i < d; ++i)
          acc_[i] += static_cast<double>(rows[static_cast<size_t>(t) * d + i]);
      break;
    case Pooling::Cls:
      if (pos0 == 0) std::copy_n(rows, d, acc_.begin());
      break;
    default:  // Last
      std::copy_n(rows + static_cast<size_t>(n - 1) * d, d, acc_.begin());
      break;
  }
  rows_ += n;
}

std::vector<float> PoolAccumulator::normalized() const {
  std::vector<float> out(acc_.size(), 0.0f);
  if (rows_ == 0) return out;
  double norm = 0;
  for (double v : acc_) norm += v * v;
  norm = std::sqrt(norm);
  // Mean's division by the row count cancels in the normalisation.
  if (norm == 0 || !std::isfinite(norm)) return out;
  for (size_t i = 0; i < acc_.size(); ++i) out[i] = static_cast<float>(acc_[i] / norm);
  return out;
}

}  // namespace tangram
