#include "store/session_redis_store.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>
#include <hiredis/hiredis.h>

namespace tangram {
namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

// Runs one command given as binary-safe arguments; null reply on a connection failure.
Reply command(redisContext* ctx, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> argl;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    argl.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), argl.data())));
}

bool parse_int(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string RedisEndpoint::describe() const { return fmt::format("{}:{}/{}", host, port, db); }

Result<RedisEndpoint> parse_redis_url(std::string_view url) {
  RedisEndpoint e;
  std::string_view rest = url;
  if (rest.substr(0, 8) == "redis://") rest.remove_prefix(8);
  if (rest.empty())
    return make_error(
        "empty Redis address: give host[:port] or redis://[:password@]host[:port][/db]");
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view auth = rest.substr(0, at);
    if (auto colon = auth.find(':'); colon != std::string_view::npos) auth.remove_prefix(colon + 1);
    e.password = std::string(auth);
    rest.remove_prefix(at + 1);
  }
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!parse_int(db, e.db) || e.db < 0))
      return make_error("Redis database '{}' is not a number >= 0", db);
    rest = rest.substr(0, slash);
  }
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    std::string_view port = rest.substr(colon + 1);
    if (!parse_int(port, e.port) || e.port < 1 || e.port > 65535)
      return make_error("Redis port '{}' is not a number from 1 to 65535", port);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return make_error("Redis address '{}' has no host", url);
  e.host = std::string(rest);
  return e;
}

SessionRedisStore::SessionRedisStore(RedisStoreOptions options) : options_(std::move(options)) {
  if (!options_.warn)
    options_.warn = [](const std::string& m) {
      fmt::print(stderr, "level=warn event=kv_redis msg=\"{}\"\n", m);
    };
}

SessionRedisStore::~SessionRedisStore() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

Result<std::unique_ptr<SessionRedisStore>> SessionRedisStore::open(RedisStoreOptions options) {
  if (options.endpoint.host.empty()) return make_error("the Redis host is empty");
  if (options.timeout.count() < 1) return make_error("the Redis timeout must be at least 1 ms");
  if (options.ttl_seconds < 0) return make_error("the Redis expiry must be 0 (none) or positive");
  std::unique_ptr<SessionRedisStore> s(new SessionRedisStore(std::move(options)));
  (void)s->connection();  // a Redis that is not up yet is retried on use
  return s;
}

std::string SessionRedisStore::key(std::string_view id) const {
  return options_.key_prefix + std::string(id);
}

Error SessionRedisStore::fail(const std::string& what) {
  ++stats_.errors;
  std::string message = fmt::format("Redis {}: {}", options_.endpoint.describe(), what);
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
    next_attempt_ = std::chrono::steady_clock::now() + options_.retry_after;
  }
  stats_.connected = false;
  if (!warned_) {
    warned_ = true;
    options_.warn(message + "; sessions use the local tiers until it is back");
  }
  return Error{message};
}

Status SessionRedisStore::connection() {
  if (ctx_ != nullptr) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) {
    ++stats_.errors;
    return Error{fmt::format("Redis {} unavailable (retrying)", options_.endpoint.describe())};
  }
  next_attempt_ = now + options_.retry_after;
  ++stats_.attempts;
  redisContext* c = redisConnectWithTimeout(options_.endpoint.host.c_str(), options_.endpoint.port,
                                            to_timeval(options_.timeout));
  if (c == nullptr) return fail("cannot allocate a connection");
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return fail("cannot connect: " + why);
  }
  redisSetTimeout(c, to_timeval(options_.timeout));
  ctx_ = c;
  auto check = [&](Reply r, const char* what) -> Status {
    if (!r) return fail(fmt::format("{} failed: {}", what, ctx_->errstr));
    if (r->type == REDIS_REPLY_ERROR)
      return fail(fmt::format("{} refused: {}", what, std::string(r->str, r->len)));
    return Status::Ok();
  };
  if (!options_.endpoint.password.empty())
    TG_TRY(check(command(ctx_, {"AUTH", options_.endpoint.password}), "AUTH"));
  if (options_.endpoint.db != 0) {
    const std::string db = std::to_string(options_.endpoint.db);
    TG_TRY(check(command(ctx_, {"SELECT", db}), "SELECT"));
  }
  ++stats_.connects;
  stats_.connected = true;
  if (warned_)
    options_.warn(
        fmt::format("Redis {} is back; sessions are shared again", options_.endpoint.describe()));
  warned_ = false;
  return Status::Ok();
}

Status SessionRedisStore::put(std::string_view id, std::string_view blob) {
  TG_TRY(connection());
  const std::string k = key(id);
  const std::string ttl = std::to_string(options_.ttl_seconds);
  Reply r = options_.ttl_seconds > 0 ? command(ctx_, {"SET", k, blob, "EX", ttl})
                                     : command(ctx_, {"SET", k, blob});
  if (!r) return fail(fmt::format("SET failed: {}", ctx_->errstr));
  if (r->type == REDIS_REPLY_ERROR) {
    // An error reply (out of memory, read-only replica) leaves the connection usable.
    ++stats_.errors;
    return make_error("Redis refused to store session: {}", std::string(r->str, r->len));
  }
  ++stats_.puts;
  stats_.bytes_put += static_cast<int64_t>(blob.size());
  return Status::Ok();
}

Result<std::optional<std::string>> SessionRedisStore::get(std::string_view id) {
  if (Status st = connection(); !st.ok()) return st.error();
  Reply r = command(ctx_, {"GET", key(id)});
  if (!r) return fail(fmt::format("GET failed: {}", ctx_->errstr));
  ++stats_.gets;
  if (r->type == REDIS_REPLY_NIL) return std::optional<std::string>{};
  if (r->type != REDIS_REPLY_STRING) {
    ++stats_.errors;
    return make_error("Redis answered GET with a non-string reply");
  }
  ++stats_.hits;
  return std::optional<std::string>(std::string(r->str, r->len));
}

Result<bool> SessionRedisStore::contains(std::string_view id) {
  if (Status st = connection(); !st.ok()) return st.error();
  Reply r = command(ctx_, {"EXISTS", key(id)});
  if (!r) return fail(fmt::format("EXISTS failed: {}", ctx_->errstr));
  return r->type == REDIS_REPLY_INTEGER && r->integer > 0;
}

Result<int64_t> SessionRedisStore::size_of(std::string_view id) {
  if (Status st = connection(); !st.ok()) return st.error();
  Reply r = command(ctx_, {"STRLEN", key(id)});
  if (!r) return fail(fmt::format("STRLEN failed: {}", ctx_->errstr));
  return r->type == REDIS_REPLY_INTEGER ? static_cast<int64_t>(r->integer) : int64_t{0};
}

Result<bool> SessionRedisStore::erase(std::string_view id) {
  if (Status st = connection(); !st.ok()) return st.error();
  Reply r = command(ctx_, {"DEL", key(id)});
  if (!r) return fail(fmt::format("DEL failed: {}", ctx_->errstr));
  return r->type == REDIS_REPLY_INTEGER && r->integer > 0;
}

}  // namespace tangram
