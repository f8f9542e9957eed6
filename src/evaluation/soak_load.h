// The clients of `tangram bench-serve --soak`: each drives an OpenAI-compatible server for as
// long as it is told, with a seeded mix of what real clients do to a server over hours:
// multi-turn chats on /v1/chat/completions (streamed and not, one X-Session-Id per
// conversation), streams the client walks away from mid-answer, DELETEs of sessions (between
// turns, and from a second connection while a turn of the session streams), and requests that
// must fail (a prompt longer than the context, a body that is not JSON). Every request is
// handed back as a SoakRequest; the soak driver (benchmark/soak.cpp) counts them, restarts the
// server underneath, and judges the whole.
//
// The clients carry on through restarts: a request that finds no server is a connection error,
// the client waits a little and goes on with the same conversation (the server restores it from
// its disk tier). Whether a request overlapped a restart is known from server_epoch, a counter
// the driver bumps when a restart begins and again when the server is back (odd = down).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"
#include "evaluation/http_load.h"

namespace tangram {

enum class SoakAction {
  ChatStream,     // a streamed chat turn, read to [DONE]
  Chat,           // a non-streamed chat turn
  Disconnect,     // a streamed turn the client closes after the first piece of text
  StreamDeleted,  // a streamed turn whose session is DELETEd (below) while it runs
  DeleteMidTurn,  // that DELETE, sent from a second connection
  DeleteSession,  // a DELETE between turns, ending the conversation
  TooLong,        // a prompt longer than the server's context: must be refused (4xx)
  Malformed,      // a body that is not JSON: must be refused (4xx)
};
inline constexpr int kSoakActions = 8;
std::string_view soak_action_name(SoakAction a);

struct SoakRequest {
  SoakAction action = SoakAction::ChatStream;
  int status = 0;              // HTTP status; 0 = no response (connection failed)
  bool stream_broken = false;  // answered 200, then the stream failed or ended before [DONE]
  bool expected = true;  // an outcome this action may have (a must-fail that succeeded is not)
  bool around_restart = false;    // the server was down or restarted while it ran
  uint64_t server_epoch = 0;      // server_epoch() when it was sent
  double start_s = 0, end_s = 0;  // from the soak's start
  int64_t completion_tokens = 0;
  std::string error;  // "" when it went as it should
};

struct SoakClientOptions {
  HttpEndpoint endpoint;
  std::string api_key;           // "" = no Authorization header
  std::string run_tag = "soak";  // session-id prefix
  uint64_t seed = 1;
  int turns = 4;          // turns of a conversation before the client starts another
  int max_tokens = 24;    // per answer
  int64_t context = 0;    // the server's context per conversation (GET /v1/models)
  double timeout_s = 60;  // connect / read / write timeout of a request
  std::function<uint64_t()> server_epoch;  // required
};

// Runs client number `client` (its random stream is SeededRng(seed, client)) until `stop` is
// set, handing every request to `record` (called from this thread). `t0` is the soak's start.
void run_soak_client(const SoakClientOptions& opt, int client,
                     std::chrono::steady_clock::time_point t0, const std::atomic<bool>& stop,
                     const std::function<void(SoakRequest)>& record);

// Prometheus text format: every sample line "name{labels} value" as map["name{labels}"] = value
// (the labels as written). Comments, blank and unreadable lines are skipped.
std::map<std::string, double> parse_prometheus_text(std::string_view text);

// GET /metrics, parsed. Errors: no connection, a status other than 200.
Result<std::map<std::string, double>> fetch_metrics(const HttpEndpoint& endpoint,
                                                    const std::string& api_key,
                                                    double timeout_s = 10);

// The context_length of the first model GET /v1/models lists (Tangram's extension).
Result<int64_t> fetch_context_length(const HttpEndpoint& endpoint, const std::string& api_key,
                                     double timeout_s = 10);

}  // namespace tangram
