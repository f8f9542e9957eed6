// An HTTP load generator for OpenAI-compatible servers (`tangram bench-serve`): multi-turn
// clients that each replay one Conversation (workload.h) against POST /v1/completions, streamed,
// and record what a client sees of every turn.
//
// Each conversation runs on its own client thread, its turns in order. Open loop (concurrency 0):
// a conversation starts at its arrival_s; closed loop (concurrency N): N conversations are active
// at once and the next starts when one ends. Every turn is one streaming request
//   {"prompt": [token ids], "max_tokens": output_tokens, "temperature": 0, "stream": true,
//    "stream_options": {"include_usage": true}}
// whose prompt is the conversation so far: every earlier prompt, plus each earlier answer, plus
// this turn's user tokens. The stream returns text, not token ids, so an answer enters the
// history as encode_reply(text) (the model's tokenizer, no special tokens): what a chat client
// that keeps text would send. Where that re-tokenization differs from the tokens the server
// generated, the server's prefix match still reuses the common part; the cached_tokens the
// server reports say how much.
//
// Session reuse: with reuse On every turn of a conversation carries the same X-Session-Id, so
// the server keeps its KV between turns; with reuse Off every turn carries a fresh id, so the
// server cannot reuse anything and prefills the whole history each turn.
//
// Times are seconds from the run's start on a steady clock: submit = the first attempt's send,
// first token = the first response chunk with non-empty text (the finish time when none had
// any), finish = the end of the stream. A 429 is retried after its Retry-After (capped), up to
// max_429_retries times; the wait counts as queue time. A turn that fails (transport error,
// another HTTP status, a failure event, no [DONE], or still 429 after the retries) ends its
// conversation: the later turns are counted as skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "evaluation/metrics.h"
#include "evaluation/workload.h"
#include "tokenizer/tokenizer.h"

namespace tangram {

struct HttpEndpoint {
  std::string origin;     // "http://127.0.0.1:8080": scheme, host and port
  std::string base_path;  // prefix of the API paths: "" or e.g. "/proxy" (no trailing '/')
};
// "http://HOST[:PORT][/PATH]" or https. Errors: another scheme, no host, a port outside 1..65535.
Result<HttpEndpoint> parse_base_url(std::string_view url);

enum class SessionReuse { On, Off };
std::string_view session_reuse_name(SessionReuse reuse);  // "on" | "off"

// The X-Session-Id of one turn: "<tag>-<conversation>" (reuse On, the same for every turn) or
// "<tag>-<conversation>-t<turn>" (Off, a new conversation per turn). Characters outside the
// server's alphabet [A-Za-z0-9._:-] become '_'; at most 128 characters (the tail is kept, as it
// is what differs between turns).
std::string turn_session_id(std::string_view run_tag, std::string_view conversation_id, int turn,
                            SessionReuse reuse);

// Seconds to wait after a 429: the Retry-After header's delta-seconds, or fallback_s when it is
// absent or not a non-negative number (HTTP dates are not used by OpenAI-style servers), capped
// at max_wait_s.
double retry_wait_s(std::string_view retry_after, double fallback_s, double max_wait_s);

// The tokens an answer's text adds to the conversation's history.
using ReplyEncoder = std::function<std::vector<int32_t>(const std::string& reply_text)>;

// The tokens of text that continues earlier tokens: encode() without BOS or special-token
// parsing. SentencePiece vocabularies with add_space_prefix prepend a space to what they encode,
// while a continuation's leading space is already the text's own ("abc" after "x" streams as
// " abc"), so that space is dropped first: the result then equals the generated tokens whenever
// the text is what they decode to.
std::vector<int32_t> encode_continuation(const Tokenizer& tok, std::string_view text);

struct HttpLoadOptions {
  HttpEndpoint endpoint;
  std::string api_key;  // "" = no Authorization header
  std::string model;    // the request's "model"; "" = left out (the server's model)
  SessionReuse reuse = SessionReuse::On;
  std::string run_tag = "load";  // session-id prefix: unique per run, so runs never share KV
  int concurrency = 0;           // > 0: closed loop, this many conversations at once; 0: open loop
  ReplyEncoder encode_reply;     // required
  int max_429_retries = 8;       // per turn
  double max_retry_wait_s = 30;  // cap on one Retry-After wait
  double fallback_retry_s = 1;   // wait after a 429 without a usable Retry-After
  double timeout_s = 600;        // connect / read / write timeout of a request
};

struct HttpRequestRecord {
  RequestRecord record;       // queue_s: time spent waiting out 429s
  std::string session_id;     // the X-Session-Id sent
  int http_status = 0;        // of the last attempt; 0 = no response (connection failed)
  int rejections = 0;         // 429 answers before the last attempt
  std::string finish_reason;  // "stop" | "length" from the stream
  std::string error;          // "" when the turn completed
};

struct HttpLoadRun {
  std::vector<HttpRequestRecord> requests;  // one per turn sent, in finishing order
  double wall_s = 0;                        // run start to the last turn's end
  int64_t planned = 0;                      // turns in the workload
  int64_t skipped = 0;       // turns not sent: an earlier turn of their conversation failed
  int64_t rejected_429 = 0;  // 429 answers in all (retried or not)
  int64_t gave_up_429 = 0;   // turns still answered 429 after max_429_retries
};

// Runs every conversation to its end (or its first failed turn). on_progress(done, planned) is
// called, serialised, as turns end (sent or skipped). Errors: invalid options (no encoder,
// negative concurrency or retries, a bad timeout) or a conversation with a turn of no tokens;
// failed requests are records, not errors.
Result<HttpLoadRun> run_http_load(const HttpLoadOptions& options,
                                  const std::vector<Conversation>& conversations,
                                  const std::function<void(int64_t, int64_t)>& on_progress = {});

// The run's RequestRecords (a failed turn has error set), for compute_run_metrics.
std::vector<RequestRecord> request_records(const HttpLoadRun& run);

// Forgets every conversation the server keeps for this API key: GET /v1/sessions, then
// DELETE /v1/sessions/{id} for each. Returns how many were deleted (0 from a server without
// that API, which answers 404). Errors: no connection, or another failed answer.
Result<int64_t> delete_all_sessions(const HttpEndpoint& endpoint, const std::string& api_key,
                                    double timeout_s = 30);

}  // namespace tangram
