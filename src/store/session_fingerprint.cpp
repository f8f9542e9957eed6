#include "store/session_fingerprint.h"

#include <algorithm>
#include <bit>
#include <cstring>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <fmt/format.h>

#include "gguf/gguf_file.h"

namespace tangram {

namespace {

// Streaming XXH3-64 of a sequence of fields; strings and arrays carry their length so that
// ("ab", "c") and ("a", "bc") hash differently.
class Hasher {
 public:
  Hasher() {
    XXH3_INITSTATE(&state_);
    XXH3_64bits_reset(&state_);
  }
  void bytes(const void* p, size_t n) { XXH3_64bits_update(&state_, p, n); }
  void u64(uint64_t v) { bytes(&v, sizeof(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  uint64_t digest() const { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

void hash_value(Hasher& h, const GgufValue& v) {
  h.u64(static_cast<uint64_t>(v.type));
  h.u64(static_cast<uint64_t>(v.elem_type));
  h.i64(v.i);
  h.u64(v.u);
  h.f64(v.f);
  h.u64(v.b ? 1 : 0);
  h.str(v.s);
  h.u64(v.strings.size());
  for (const std::string& s : v.strings) h.str(s);
  h.u64(v.ints.size());
  h.bytes(v.ints.data(), v.ints.size() * sizeof(int64_t));
  h.u64(v.floats.size());
  for (const double f : v.floats) h.f64(f);
}

std::string hex(uint64_t v) { return fmt::format("{:#018x}", v); }

}  // namespace

std::string fingerprint_mismatch(const SessionFingerprint& session,
                                 const SessionFingerprint& expected) {
  if (session.model != expected.model)
    return fmt::format("model fingerprint differs (session {}, expected {})", hex(session.model),
                       hex(expected.model));
  if (session.kv_type != expected.kv_type)
    return fmt::format("KV element type differs (session {}, expected {})",
                       kv_type_name(session.kv_type), kv_type_name(expected.kv_type));
  if (session.profile != expected.profile)
    return fmt::format("profile fingerprint differs (session {}, expected {})",
                       hex(session.profile), hex(expected.profile));
  if (session.group_map != expected.group_map)
    return fmt::format("head-group map fingerprint differs (session {}, expected {})",
                       hex(session.group_map), hex(expected.group_map));
  return {};
}

uint64_t model_fingerprint(const GgufFile& gguf) {
  Hasher h;
  h.str("tangram model fingerprint 1");
  h.u64(gguf.file_size());
  h.u64(gguf.version());
  h.u64(gguf.metadata().size());
  for (const GgufKV& kv : gguf.metadata()) {
    h.str(kv.key);
    hash_value(h, kv.value);
  }
  h.u64(gguf.tensors().size());
  constexpr size_t kSample = 64;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    h.str(t.name);
    h.u64(static_cast<uint64_t>(t.type));
    h.i64(t.n_dims);
    for (const int64_t n : t.ne) h.i64(n);
    h.u64(t.offset);
    h.u64(t.nbytes);
    const TensorView v = gguf.view(t);
    if (v.empty()) continue;
    // The file's bytes, whatever layout the loader rewrote them into: a session saved with
    // the weights in huge pages restores with --mmap and the other way round.
    const size_t n = std::min(kSample, v.nbytes);
    uint8_t sample[kSample];
    for (const size_t offset : {size_t{0}, (v.nbytes - n) / 2, v.nbytes - n}) {
      v.copy_bytes(offset, n, sample);
      h.bytes(sample, n);
    }
  }
  return h.digest();
}

uint64_t group_map_fingerprint(const HeadGroupMap& map) {
  Hasher h;
  // Version 2: groups of flat heads (layer·n_kv_head + kv_head), which may span layers.
  h.str("tangram head-group map 2");
  h.i64(map.n_layers());
  h.i64(map.n_kv_head());
  h.i64(map.group_size());
  h.i64(map.total_groups());
  for (int g = 0; g < map.total_groups(); ++g) {
    const std::span<const int> members = map.members(g);
    h.u64(members.size());
    for (const int m : members) h.i64(m);
  }
  return h.digest();
}

uint64_t bytes_fingerprint(std::string_view bytes) {
  return bytes.empty() ? 0 : XXH3_64bits(bytes.data(), bytes.size());
}

}  // namespace tangram
