// Helpers shared by the libFuzzer harnesses (fuzz/fuzz_<name>.cpp).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace tangram::fuzz {

// A file under the repository's data/, or under $TANGRAM_DATA_DIR. A harness
// without its vocabulary or templates cannot run at all, so it stops at start-up, saying which
// file it needs, rather than fuzzing nothing.
inline std::string shared_file(std::string_view relative) {
  const char* env = std::getenv("TANGRAM_DATA_DIR");
  const std::filesystem::path dir = env && *env ? env : TANGRAM_SHARED_DEFAULT;
  const std::filesystem::path p = dir / relative;
  if (!std::filesystem::exists(p)) {
    std::fprintf(stderr, "fuzz harness: %s is missing (set TANGRAM_DATA_DIR)\n", p.c_str());
    std::exit(2);
  }
  return p.string();
}

// Fails loudly on a broken invariant: libFuzzer records the input as a crash.
#define TG_FUZZ_CHECK(cond)                                                                \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

}  // namespace tangram::fuzz
