#include "common/huge_pages.h"

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tangram {

void HugePageFree::operator()(uint8_t* p) const {
  ::operator delete (p, std::align_val_t{kHugePageBytes});
}

Result<HugePageBuffer> allocate_huge_page_buffer(size_t bytes, std::string_view what) {
  const size_t rounded = round_up_to(bytes, kHugePageBytes);
  HugePageBuffer buf(static_cast<uint8_t*>(
      ::operator new (rounded, std::align_val_t{kHugePageBytes}, std::nothrow)));
  if (!buf) return make_error("{}: could not allocate {} bytes", what, rounded);
#if defined(__linux__)
  (void)madvise(buf.get(), rounded, MADV_HUGEPAGE);
#endif
  return buf;
}

}  // namespace tangram
