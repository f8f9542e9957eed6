// The attention inner loop (attend_heads) at every kernel level this CPU supports, against a
// plain double-precision attention over the same stored rows: every lane count a KV head can
// have (1 to 12 query vectors: G query heads x rows), ragged per-lane limits, lengths that end
// inside a block and inside a page, several heads of different lengths walked side by side,
// dense and paged (scattered pages) rows, F16 and F32, head sizes taking the AVX-512 loop
// (multiples of 16), the AVX2 loop (multiples of 8, with its fixed-size variants for 8 and 16,
// whose rows are prefetched a block at a time) and the scalar one. The rows are what the
// kernel reads, so the only differences are float vs double arithmetic and the vector exp:
// |out - ref| <= 2e-5 for outputs of size ~1.
#include "attention/attention_kernel.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "attention/attention_kernel_avx512.h"
#include "kernels/cpu_features.h"
#include "kernels/quant.h"

namespace tangram {
namespace {

constexpr double kTol = 2e-5;

// One KV head's rows in the layout a KvHeadView describes: dense, or in pages of page_tokens
// entries placed in a shuffled order inside one buffer (K and V of a page side by side).
struct HeadRows {
  KvType type;
  int hd, hdv;
  int64_t length;
  std::vector<float> k, v;  // [length][hd], [length][hdv]: the stored values, widened
  std::vector<uint8_t> bytes;
  std::vector<PageId> pages;
  KvHeadView view;

  size_t elem() const { return type == KvType::F16 ? 2 : 4; }
  void store(const float* src, int n, uint8_t* dst, float* widened) const {
    for (int i = 0; i < n; ++i) {
      if (type == KvType::F16) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(dst + 2 * static_cast<size_t>(i), &h, 2);
        widened[i] = fp16_to_fp32(h);
      } else {
        std::memcpy(dst + 4 * static_cast<size_t>(i), &src[i], 4);
        widened[i] = src[i];
      }
    }
  }

  HeadRows(KvType t, int hd_, int hdv_, int64_t len, int page_tokens, std::mt19937& rng)
      : type(t), hd(hd_), hdv(hdv_), length(len) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    k.resize(static_cast<size_t>(len * hd));
    v.resize(static_cast<size_t>(len * hdv));
    std::vector<float> src_k(k.size()), src_v(v.size());
    for (auto& x : src_k) x = dist(rng);
    for (auto& x : src_v) x = dist(rng);
    view.k_row_bytes = static_cast<size_t>(hd) * elem();
    view.v_row_bytes = static_cast<size_t>(hdv) * elem();
    view.length = len;
    view.tail_pos0 = 0;
    if (page_tokens <= 0) {  // dense
      bytes.resize(static_cast<size_t>(len) * (view.k_row_bytes + view.v_row_bytes) + 1);
      view.k_base = bytes.data();
      view.v_base = bytes.data() + static_cast<size_t>(len) * view.k_row_bytes;
      for (int64_t e = 0; e < len; ++e) {
        store(&src_k[static_cast<size_t>(e * hd)], hd,
              bytes.data() + static_cast<size_t>(e) * view.k_row_bytes,
              &k[static_cast<size_t>(e * hd)]);
        store(&src_v[static_cast<size_t>(e * hdv)], hdv,
              bytes.data() + static_cast<size_t>(len) * view.k_row_bytes +
                  static_cast<size_t>(e) * view.v_row_bytes,
              &v[static_cast<size_t>(e * hdv)]);
      }
      return;
    }
    const int64_t n_pages = (len + page_tokens - 1) / page_tokens;
    view.page_tokens = page_tokens;
    view.page_bytes = static_cast<size_t>(page_tokens) * (view.k_row_bytes + view.v_row_bytes);
    pages.resize(static_cast<size_t>(n_pages) + 1);
    std::iota(pages.begin(), pages.end(), PageId{0});
    std::shuffle(pages.begin(), pages.end(), rng);  // one spare page: ids need not be dense
    bytes.resize(pages.size() * view.page_bytes);
    view.pages = pages.data();
    view.k_base = bytes.data();
    view.v_base = bytes.data() + static_cast<size_t>(page_tokens) * view.k_row_bytes;
    for (int64_t e = 0; e < len; ++e) {
      const size_t page =
          static_cast<size_t>(pages[static_cast<size_t>(e / page_tokens)]) * view.page_bytes;
      const auto slot = static_cast<size_t>(e % page_tokens);
      store(&src_k[static_cast<size_t>(e * hd)], hd, bytes.data() + page + slot * view.k_row_bytes,
            &k[static_cast<size_t>(e * hd)]);
      store(&src_v[static_cast<size_t>(e * hdv)], hdv,
            const_cast<uint8_t*>(view.v_base) + page + slot * view.v_row_bytes,
            &v[static_cast<size_t>(e * hdv)]);
    }
  }
};

// softmax(q . k) v over entries [begin, limit) in double; zeros when the range is empty.
std::vector<double> reference(const HeadRows& h, const float* q, int64_t begin, int64_t limit) {
  std::vector<double> out(static_cast<size_t>(h.hdv), 0.0);
  if (limit <= begin) return out;
  std::vector<double> s;
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t e = begin; e < limit; ++e) {
    double d = 0.0;
    for (int i = 0; i < h.hd; ++i)
      d += double{q[i]} * double{h.k[static_cast<size_t>(e * h.hd + i)]};
    s.push_back(d);
    max = std::max(max, d);
  }
  double sum = 0.0;
  for (double& x : s) sum += (x = std::exp(x - max));
  for (int64_t e = begin; e < limit; ++e)
    for (int i = 0; i < h.hdv; ++i)
      out[static_cast<size_t>(i)] +=
          s[static_cast<size_t>(e - begin)] / sum * double{h.v[static_cast<size_t>(e * h.hdv + i)]};
  return out;
}

struct Case {
  KvType type;
  int hd, hdv;
  int lanes;
  int page_tokens;  // 0: dense
};

// Three heads of different lengths in one call (side by side, as a head group is walked), each
// lane with its own limit; the result of every lane against the reference.
void check_case(const Case& c, cpu::KernelLevel level, std::mt19937& rng) {
  const std::vector<int64_t> lengths = {1 + static_cast<int64_t>(rng() % 31), 97, 64};
  const int64_t begin = rng() % 3 == 0 ? 5 : 0;  // a split part starts inside the head
  std::vector<HeadRows> rows;
  for (const int64_t len : lengths) rows.emplace_back(c.type, c.hd, c.hdv, len, c.page_tokens, rng);
  const size_t n_heads = rows.size();
  const auto lanes = static_cast<size_t>(c.lanes);
  std::normal_distribution<float> dist(0.0f, 0.4f);
  std::vector<float> q(n_heads * lanes * static_cast<size_t>(c.hd));
  for (auto& x : q) x = dist(rng);
  std::vector<int64_t> limit(n_heads * lanes);
  std::vector<float> m(n_heads * lanes, -std::numeric_limits<float>::infinity());
  std::vector<float> l(n_heads * lanes, 0.0f);
  std::vector<float> acc(n_heads * lanes * static_cast<size_t>(c.hdv), 0.0f);
  std::vector<float> scores(n_heads * lanes * kAttentionBlock);
  std::vector<HeadLanes> heads;
  for (size_t h = 0; h < n_heads; ++h) {
    int64_t end = begin;
    for (size_t ln = 0; ln < lanes; ++ln) {
      // Ragged: the last lane sees everything, others a random prefix (sometimes none).
      const int64_t len = rows[h].length;
      const int64_t lim =
          ln + 1 == lanes ? len : static_cast<int64_t>(rng() % static_cast<uint32_t>(len + 1));
      limit[h * lanes + ln] = std::clamp(lim, std::min(begin, len), len);
      end = std::max(end, limit[h * lanes + ln]);
    }
    const size_t base = h * lanes;
    heads.push_back(HeadLanes{&rows[h].view, c.lanes, q.data() + base * static_cast<size_t>(c.hd),
                              limit.data() + base, end, m.data() + base, l.data() + base,
                              acc.data() + base * static_cast<size_t>(c.hdv),
                              scores.data() + base * kAttentionBlock});
  }
  attend_heads(heads, c.type, c.hd, c.hdv, begin, level);
  for (size_t h = 0; h < n_heads; ++h)
    for (size_t ln = 0; ln < lanes; ++ln) {
      const size_t lane = h * lanes + ln;
      const auto want =
          reference(rows[h], q.data() + lane * static_cast<size_t>(c.hd), begin, limit[lane]);
      double diff = 0.0;
      for (int i = 0; i < c.hdv; ++i) {
        const double got =
            l[lane] > 0.0f
                ? double{acc[lane * static_cast<size_t>(c.hdv) + static_cast<size_t>(i)]} /
                      double{l[lane]}
                : 0.0;
        diff = std::max(diff, std::abs(got - want[static_cast<size_t>(i)]));
      }
      ASSERT_LE(diff, kTol) << fmt::format(
          "level {}, {}, hd {} hdv {}, {} lanes, P {}, head {} (length {}), lane {} (limit {}), "
          "begin {}",
          cpu::level_name(level), c.type == KvType::F16 ? "F16" : "F32", c.hd, c.hdv, c.lanes,
          c.page_tokens, h, rows[h].length, ln, limit[lane], begin);
    }
}

TEST(AttentionKernel, EveryLevelMatchesReference) {
  std::mt19937 rng(31);
  // 8 and 16 take loops with the head size fixed at compile time (keys and values separately).
  const int dims[][2] = {{128, 128}, {64, 32}, {48, 80}, {40, 24}, {12, 20},
                         {8, 8},     {16, 16}, {8, 16},  {16, 24}, {24, 8}};
  for (const cpu::KernelLevel level : cpu::supported_levels())
    for (const KvType type : {KvType::F16, KvType::F32})
      for (const auto& d : dims)
        for (int lanes = 1; lanes <= 12; ++lanes)
          for (const int page_tokens : {0, 16, 5})
            check_case({type, d[0], d[1], lanes, page_tokens}, level, rng);
}

// The softmax exponentials (BlockKernels::exp_weights) against std::exp: the walk's own on
// every machine, and the AVX-512 one where the CPU runs it. Every padded length, scores from far
// below the running maximum (where the result is 0) to it, -inf padding, and the sum they
// return. 2 ulp of a float is 2.4e-7 relative.
TEST(AttentionKernel, ExpWeightsMatchExp) {
  std::vector<std::pair<const char*, float (*)(float*, int, float)>> loops = {
      {"walk", attention_exp_weights}};
  if (cpu::supports(cpu::KernelLevel::Avx512Vnni))
    loops.emplace_back("avx512", vec::avx512::attention_exp_weights);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> below(-95.0f, 0.0f);
  for (const auto& [name, exp_weights] : loops)
    for (int n_pad = 8; n_pad <= kAttentionBlock; n_pad += 8)
      for (int round = 0; round < 50; ++round) {
        const float m_new = round % 2 ? 3.5f : -20.0f;
        float s[kAttentionBlock + 1];
        for (int j = 0; j < n_pad; ++j) s[j] = m_new + below(rng);
        s[0] = m_new;  // the maximum itself: weight 1
        if (round % 3 == 0) s[n_pad - 1] = -std::numeric_limits<float>::infinity();  // padding
        s[n_pad] = 42.0f;  // not to be touched
        float want[kAttentionBlock];
        double want_sum = 0.0;
        for (int j = 0; j < n_pad; ++j) {
          const double x = static_cast<double>(s[j]) - static_cast<double>(m_new);
          want[j] = x < -87.3 ? 0.0f : static_cast<float>(std::exp(x));
          want_sum += static_cast<double>(want[j]);
        }
        const float sum = exp_weights(s, n_pad, m_new);
        for (int j = 0; j < n_pad; ++j)
          ASSERT_NEAR(s[j], want[j], 3e-7f * want[j] + 2e-38f)
              << name << ", n_pad " << n_pad << " slot " << j;
        EXPECT_NEAR(static_cast<double>(sum), want_sum, 1e-6 * want_sum)
            << name << ", n_pad " << n_pad;
        EXPECT_EQ(s[n_pad], 42.0f) << name << " wrote past n_pad";
      }
}

}  // namespace
}  // namespace tangram
