#include "common/file_text.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/units.h"

namespace tangram {

Result<std::string> read_file_text(const std::string& path, std::string_view what,
                                   size_t max_bytes) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return make_error("cannot read {} '{}'{}", what, path,
                      err != 0 ? fmt::format(": {}", std::strerror(err)) : std::string());
  }
  // Blocks rather than rdbuf() or istreambuf_iterator: the cap is checked as bytes arrive (a pipe
  // has no size to ask for), and GCC 12 at -O3 flags istreambuf_iterator with a false
  // -Wnull-dereference.
  std::string text;
  std::array<char, 1 << 16> block;
  do {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    text.append(block.data(), static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
      return make_error("{} '{}' is larger than {}, the most this reads", what, path,
                        format_bytes(static_cast<double>(max_bytes)));
  } while (in);
  if (in.bad()) return make_error("reading {} '{}' failed", what, path);
  return text;
}

}  // namespace tangram
