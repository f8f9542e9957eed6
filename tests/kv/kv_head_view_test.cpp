// KvHeadView::for_each_run against the addressing its comment states, entry by entry: every
// entry of [begin, end) is reported once, in order, at its page's run, for pages of one run
// and of several runs, ranges starting and ending inside runs and pages, and dense heads.
#include "kv/kv_head_view.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tangram {
namespace {

// Where the header says entry e's key and value rows are.
struct Rows {
  const uint8_t* k;
  const uint8_t* v;
};
Rows stated_rows(const KvHeadView& view, int64_t e) {
  if (view.pages == nullptr)
    return {view.k_base + static_cast<size_t>(e) * view.k_row_bytes,
            view.v_base + static_cast<size_t>(e) * view.v_row_bytes};
  const int64_t run = view.run_tokens > 0 ? view.run_tokens : view.page_tokens;
  const int64_t s = e % view.page_tokens;
  const size_t base = static_cast<size_t>(view.pages[e / view.page_tokens]) * view.page_bytes +
                      static_cast<size_t>(s / run) * view.run_bytes;
  return {view.k_base + base + static_cast<size_t>(s % run) * view.k_row_bytes,
          view.v_base + base + static_cast<size_t>(s % run) * view.v_row_bytes};
}

void check_runs(const KvHeadView& view, int64_t begin, int64_t end) {
  int64_t next = begin;
  view.for_each_run(
      begin, end, [&](int64_t first, const uint8_t* k, const uint8_t* v, int64_t count) {
        ASSERT_EQ(first, next) << "begin " << begin << " end " << end;
        ASSERT_GT(count, 0);
        for (int64_t i = 0; i < count; ++i) {
          const Rows want = stated_rows(view, first + i);
          ASSERT_EQ(k + static_cast<size_t>(i) * view.k_row_bytes, want.k) << "entry " << first + i;
          ASSERT_EQ(v + static_cast<size_t>(i) * view.v_row_bytes, want.v) << "entry " << first + i;
        }
        next = first + count;
      });
  EXPECT_EQ(next, std::max(begin, end)) << "begin " << begin << " end " << end;
}

TEST(KvHeadView, ForEachRunReportsEveryEntryAtItsStatedRow) {
  std::vector<uint8_t> arena(1 << 20);
  const std::vector<PageId> pages = {7, 2, 11, 0, 5, 9, 3, 1};
  struct Layout {
    int64_t page_tokens, run_tokens;
  };
  for (const Layout l : {Layout{16, 0}, Layout{16, 16}, Layout{128, 32}, Layout{96, 32},
                         Layout{12, 4}, Layout{5, 0}}) {
    KvHeadView view;
    view.k_row_bytes = 34;
    view.v_row_bytes = 40;
    const int64_t run = l.run_tokens > 0 ? l.run_tokens : l.page_tokens;
    view.run_bytes = static_cast<size_t>(run) * (view.k_row_bytes + view.v_row_bytes) + 6;
    view.page_bytes = static_cast<size_t>(l.page_tokens / run) * view.run_bytes + 10;
    view.page_tokens = l.page_tokens;
    view.run_tokens = l.run_tokens;
    view.k_base = arena.data();
    view.v_base = arena.data() + static_cast<size_t>(run) * view.k_row_bytes;
    view.pages = pages.data();
    view.length = l.page_tokens * static_cast<int64_t>(pages.size());
    for (int64_t begin = 0; begin < view.length; begin += 3)
      for (const int64_t len : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{31}, int64_t{32},
                                int64_t{33}, int64_t{64}, int64_t{200}})
        check_runs(view, begin, std::min(view.length, begin + len));
  }
  KvHeadView dense;
  dense.k_base = arena.data();
  dense.v_base = arena.data() + 4096;
  dense.k_row_bytes = 34;
  dense.v_row_bytes = 34;
  dense.length = 100;
  check_runs(dense, 5, 77);
  check_runs(dense, 9, 9);
}

}  // namespace
}  // namespace tangram
