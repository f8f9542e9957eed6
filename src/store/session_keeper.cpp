#include "store/session_keeper.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "store/session_codec.h"

namespace tangram {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The tiers' options: Redis under a namespace shared by the replicas of one deployment (same
// model, KV type, policy and layout) unless a prefix is given.
Result<SessionTierOptions> tier_options(const SessionKeeperOptions& o,
                                        const SessionFingerprint& f) {
  SessionTierOptions to;
  to.host_bytes = o.kv_host_memory;
  to.disk_dir = o.kv_disk_dir;
  to.disk_bytes = o.kv_disk_bytes;
  if (!o.kv_redis.empty()) {
    RedisStoreOptions ro;
    TG_ASSIGN(ro.endpoint, parse_redis_url(o.kv_redis));
    const uint64_t ns =
        bytes_fingerprint(fmt::format("{:016x} {} {:016x} {:016x}", f.model,
                                      static_cast<int>(f.kv_type), f.profile, f.group_map));
    ro.key_prefix =
        o.kv_redis_prefix.empty() ? fmt::format("tangram:{:016x}:", ns) : o.kv_redis_prefix;
    ro.ttl_seconds = o.kv_redis_ttl_seconds;
    ro.warn = o.warn;
    to.redis = std::move(ro);
  }
  return to;
}

}  // namespace

Status SessionKeeperOptions::validate() const {
  if (kv_idle_offload_seconds < 0)
    return make_error("--kv-idle-offload must be 0 (off) or positive seconds");
  if (kv_idle_offload_seconds > 0 && !tiered())
    return make_error(
        "--kv-idle-offload needs a tier to move idle sessions to: give --kv-host-memory, --kv-disk "
        "or "
        "--kv-redis");
  return Status::Ok();
}

SessionKeeper::SessionKeeper(SessionKeeperOptions options, SessionPool pool,
                             const SessionFingerprint& fingerprint)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      fingerprint_(fingerprint),
      store_(std::max<size_t>(options_.max_sessions, 1)) {}

SessionKeeper::~SessionKeeper() = default;

Result<std::unique_ptr<SessionKeeper>> SessionKeeper::create(
    SessionKeeperOptions options, SessionPool pool, const SessionFingerprint& fingerprint) {
  TG_TRY(options.validate());
  if (!options.warn)
    options.warn = [](const std::string& m) {
      fmt::print(stderr, "level=warn event=kv_tier msg=\"{}\"\n", m);
    };
  std::unique_ptr<SessionKeeper> k(
      new SessionKeeper(std::move(options), std::move(pool), fingerprint));
  if (!k->options_.tiered()) return k;
  TG_ASSIGN(SessionTierOptions to, tier_options(k->options_, fingerprint));
  TG_ASSIGN(k->tiers_, SessionTiers::create(std::move(to)));
  // Sessions a previous run left on disk: known again, restored on their next turn.
  for (auto& [id, tokens] : k->tiers_->disk_sessions())
    k->store_.get_or_create(id, /*anonymous=*/false).tokens = std::move(tokens);
  return k;
}

void SessionKeeper::claim(Session& session) {
  session.busy = true;
  if (!session.cache) restore(session);
}

void SessionKeeper::unclaim(Session& session, std::span<const int32_t> tokens,
                            std::unique_ptr<PagedKvCache> cache) {
  if (!session.cache && cache && cache->n_positions() > 0) {
    session.tokens.assign(tokens.begin(), tokens.begin() + cache->n_positions());
    session.cache = std::move(cache);
  }
  session.busy = false;
}

std::string SessionKeeper::give_back(const std::string& id, std::span<const int32_t> tokens,
                                     std::unique_ptr<PagedKvCache> cache, Clock::time_point now) {
  Session* session = id.empty() ? nullptr : store_.find(id);
  if (cache) {
    if (session == nullptr)
      session = &store_.get_or_create(store_.new_anonymous_id(), /*anonymous=*/true);
    cache->truncate(cache->n_positions());  // hands back pages reserved beyond the end
    session->tokens.assign(tokens.begin(), tokens.begin() + cache->n_positions());
    session->cache = std::move(cache);
    persist(*session);
  } else if (session != nullptr) {
    session->tokens.clear();
  }
  if (session == nullptr) return {};
  session->busy = false;
  session->last_used = ++tick_;
  session->idle_since = now;
  return session->id;
}

void SessionKeeper::prefetch(const std::string& id) {
  if (!tiers_) return;
  const Session* session = store_.find(id);
  if (session == nullptr || (!session->cache && !session->busy)) tiers_->prefetch(id);
}

bool SessionKeeper::forget(const std::string& id) {
  const bool known = store_.find(id) != nullptr;
  if (tiers_) tiers_->erase(id);
  // Lent only to a request submitted after the forgetting began; that one starts it afresh.
  if (const Session* s = store_.find(id); s != nullptr && !s->busy) store_.erase(id);
  return known;
}

int64_t SessionKeeper::evict_one() {
  if (!tiers_) return store_.evict_lru();
  Session* victim = store_.lru_idle_resident();
  if (victim == nullptr) return -1;
  return offload(*victim);
}

int64_t SessionKeeper::evict_idle() {
  int64_t freed = 0;
  for (int64_t p; (p = evict_one()) >= 0;) freed += p;
  return freed;
}

int64_t SessionKeeper::offload(Session& victim) {
  const auto t0 = Clock::now();
  if (encode_session_into(*victim.cache, victim.tokens, fingerprint_, spill_buffer_).ok())
    tiers_->offload(victim.id, spill_buffer_);
  tiers_->counters().offload_seconds += seconds_since(t0);
  const int64_t pages = victim.cache->pages_held();
  victim.cache.reset();
  store_.count_eviction();
  return pages;
}

int64_t SessionKeeper::offload_idle(Clock::time_point now) {
  if (!tiers_ || options_.kv_idle_offload_seconds <= 0) return 0;
  const auto cutoff = now - std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(options_.kv_idle_offload_seconds));
  int64_t moved = 0;
  for (Session* s : store_.idle_resident_before(cutoff)) {
    offload(*s);
    ++moved;
  }
  return moved;
}

std::optional<SessionKeeper::Clock::duration> SessionKeeper::housekeeping_period() const {
  const double idle = options_.kv_idle_offload_seconds;
  if (!tiers_ || (idle <= 0 && !tiers_->writes_through())) return std::nullopt;
  // Idle offload is checked at a tenth of the idle time (at least every second), so a session
  // moves within about 10% of its deadline without the engine scanning sessions on every wake-up.
  const double period = idle > 0 ? std::min(1.0, idle / 10) : 1.0;
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period));
}

bool SessionKeeper::restore(Session& session) {
  if (!tiers_ || session.cache) return false;
  const auto t0 = Clock::now();
  std::optional<SessionTiers::Fetched> fetched = tiers_->fetch(session.id);
  if (!fetched) {
    if (!session.tokens.empty()) ++tiers_->counters().recomputes;
    return false;
  }
  std::string& blob = fetched->blob;
  // Room for the session as if uncompressed (an upper bound); idle sessions move down for it.
  auto summary = inspect_session(blob);
  if (!summary) {
    // A damaged header, or a blob of another format version: never served; the turn is recomputed.
    ++tiers_->counters().restore_failures;
    options_.warn(fmt::format("session {} from the {} tier not restored: {}", session.id,
                              fetched->tier, summary.message()));
    tiers_->erase(session.id);
    return false;
  }
  const auto n = static_cast<int64_t>(summary->tokens.size());
  const int64_t P = pool_.pool.geometry().page_tokens;
  const int64_t uncompressed_pages = pool_.map->total_groups() * ((n + P - 1) / P);
  bool fits = n <= pool_.context;
  while (fits && pool_.pool.free_pages() < uncompressed_pages) fits = evict_one() >= 0;
  if (!fits) {
    if (std::string_view(fetched->tier) == "host")
      tiers_->offload(session.id, std::move(blob));  // stays in a tier
    return false;
  }
  auto decoded =
      decode_session(blob, fingerprint_, pool_.pool, pool_.map, pool_.shape, pool_.context);
  tiers_->counters().restore_seconds += seconds_since(t0);
  if (!decoded) {
    // Another model or policy, or a damaged blob: never served; the turn is recomputed.
    ++tiers_->counters().restore_failures;
    options_.warn(fmt::format("session {} from the {} tier not restored: {}", session.id,
                              fetched->tier, decoded.message()));
    tiers_->erase(session.id);
    return false;
  }
  SessionTierStats& c = tiers_->counters();
  ++c.restores;
  const std::string_view tier = fetched->tier;
  ++(tier == "host" ? c.restores_host : tier == "disk" ? c.restores_disk : c.restores_redis);
  session.cache = std::move(decoded->cache);
  session.tokens = std::move(decoded->tokens);
  return true;
}

void SessionKeeper::persist(const Session& session) {
  if (!tiers_ || !tiers_->writes_through() || !session.cache) return;
  const auto t0 = Clock::now();
  // A blob of its own (not spill_buffer_): the I/O thread keeps it until it is written.
  std::string blob;
  if (encode_session_into(*session.cache, session.tokens, fingerprint_, blob).ok())
    tiers_->persist(session.id, std::move(blob));
  tiers_->counters().offload_seconds += seconds_since(t0);
}

SessionTiers::Location SessionKeeper::where(const std::string& id) {
  if (const Session* s = store_.find(id); s != nullptr && s->cache)
    return {"resident",
            s->cache->pages_held() * static_cast<int64_t>(pool_.pool.geometry().page_bytes())};
  if (tiers_) return tiers_->where(id);
  return {};
}

std::vector<std::pair<std::string, std::vector<int32_t>>> SessionKeeper::named_sessions() const {
  std::vector<std::pair<std::string, std::vector<int32_t>>> out;
  store_.for_each([&](const Session& s) {
    if (!s.anonymous) out.emplace_back(s.id, s.tokens);
  });
  return out;
}

void SessionKeeper::flush_writes() {
  if (tiers_) tiers_->flush();
}

bool SessionKeeper::wait_written(const std::string& id, std::chrono::milliseconds timeout) const {
  return tiers_ == nullptr || tiers_->wait_written(id, timeout);  // tiers_ is fixed after create()
}

SessionTierStats SessionKeeper::tier_stats() const {
  return tiers_ ? tiers_->stats() : SessionTierStats{};
}

}  // namespace tangram
