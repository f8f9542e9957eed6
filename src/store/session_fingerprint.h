// Fingerprints of what a serialised session's KV depends on: the model that computed it, the
// element type it is stored in, the compression profile that shaped it and the head-group map
// that lays it out in pages. A session restores only where all four are equal; otherwise it is
// recomputed from its token history.
//
// Each fingerprint is a 64-bit XXH3 hash. They are cheap to compute once at load time (the model
// fingerprint reads the GGUF's metadata, tensor directory and a few bytes of every tensor, never
// the whole weights) and stable across processes and machines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kv/head_group_map.h"
#include "kv/kv_cache.h"

namespace tangram {

class GgufFile;

struct SessionFingerprint {
  uint64_t model = 0;  // model_fingerprint()
  KvType kv_type = KvType::F16;
  uint64_t profile = 0;    // bytes_fingerprint() of the profile (and any policy settings), or 0
  uint64_t group_map = 0;  // group_map_fingerprint()
};

// The first field that differs, as a reason ("model fingerprint differs (session 0x.., expected
// 0x..)"), or an empty string when a and b are equal.
std::string fingerprint_mismatch(const SessionFingerprint& session,
                                 const SessionFingerprint& expected);

// Hash of the file size, every metadata key and value, every tensor's name, type, shape and
// offset, and up to 3 x 64 bytes (start, middle, end) of every tensor's data. Two files differ
// unless they agree on all of that, which distinguishes models, quantisations and fine-tunes.
uint64_t model_fingerprint(const GgufFile& gguf);

// Hash of the map's layer and head counts, group size and every group's members in column order.
uint64_t group_map_fingerprint(const HeadGroupMap& map);

// Hash of arbitrary bytes (e.g. a profile file's contents); 0 for no bytes, so "no profile" has
// a fixed fingerprint.
uint64_t bytes_fingerprint(std::string_view bytes);

}  // namespace tangram
