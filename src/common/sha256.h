// SHA-256 (FIPS 180-4), for identifiers that must be stable across restarts and replicas and
// must not reveal what they were derived from (an API key's owner id). Not for bulk data: the
// session blobs use XXH3 checksums.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tangram {

std::array<uint8_t, 32> sha256(std::string_view data);
// The digest in lowercase hex (64 characters).
std::string sha256_hex(std::string_view data);

}  // namespace tangram
