// POST /v1/embeddings (OpenAI) and POST /api/embed (Ollama): every input of a request goes to
// the engine as one batch of embedding requests (Request::embed), which run beside generation
// in the same steps, and the handler waits for all of their vectors.
#include "server/embeddings_request.h"
#include "server/http_server_impl.h"

namespace tangram::server {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The vector's float32 values, little-endian, in base64 (OpenAI's encoding_format "base64").
std::string base64_floats(const std::vector<float>& v) {
  std::string bytes;
  bytes.reserve(v.size() * 4);
  for (float f : v) {
    uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((u >> (8 * b)) & 0xff));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = 0;
    for (size_t k = 0; k < 3; ++k)
      w = (w << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out.push_back(k <= n ? kBase64[(w >> (18 - 6 * k)) & 63] : '=');
  }
  return out;
}

// What the handler waits on: one slot per input, filled on the engine's thread.
struct EmbeddingWait {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestResult> results;
  size_t left = 0;
};

}  // namespace

std::variant<EmbeddingBatch, ApiError> HttpServer::Impl::embed(const EmbeddingsRequest& r,
                                                               const char* model_field) {
  if (!embedding_pooling)
    return ApiError{400,         embedding_pooling.message(), "invalid_request_error",
                    model_field, "model_cannot_embed",        0};
  const int64_t dim = engine.model().config().n_embd;
  if (r.dimensions && *r.dimensions != dim)
    return bad_request(fmt::format("this model's embeddings have {} dimensions and cannot be "
                                   "shortened to {}: leave 'dimensions' out",
                                   dim, *r.dimensions),
                       "dimensions", "invalid_value");
  const int64_t ctx = engine.context();
  EmbeddingBatch batch;
  std::vector<Request> requests(r.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const EmbeddingInput& in = r.inputs[i];
    Request& q = requests[i];
    q.prompt = in.tokenized() ? in.ids
                              : tok.encode(in.text, /*add_special=*/true, /*parse_special=*/false);
    if (static_cast<int64_t>(q.prompt.size()) >= ctx) {
      if (!r.truncate)
        return bad_request(
            fmt::format("input {} has {} tokens but the context holds {}: shorten it by at least "
                        "{} tokens",
                        i, q.prompt.size(), ctx, static_cast<int64_t>(q.prompt.size()) - ctx + 1),
            r.inputs.size() == 1 ? "input" : fmt::format("input[{}]", i),
            "context_length_exceeded");
      q.prompt.resize(static_cast<size_t>(ctx - 1));  // Ollama's truncate: keep the start
    }
    q.embed = *embedding_pooling;
    batch.prompt_tokens += static_cast<int64_t>(q.prompt.size());
  }
  // One request of the server's queue, however many inputs it carries.
  const int64_t limit = engine.options().max_running + opt.max_queue;
  if (pending.fetch_add(1) >= limit) {
    pending.fetch_sub(1);
    return queue_full();
  }
  auto wait = std::make_shared<EmbeddingWait>();
  wait->results.resize(requests.size());
  wait->left = requests.size();
  for (size_t i = 0; i < requests.size(); ++i)
    requests[i].on_finish = [wait, i](const RequestResult& res) {
      std::lock_guard lock(wait->mu);
      wait->results[i] = res;
      if (--wait->left == 0) wait->cv.notify_all();
    };
  auto ids = engine.submit_batch(std::move(requests));
  if (!ids) {
    pending.fetch_sub(1);
    return bad_request(ids.message(), "input", "invalid_request");
  }
  {
    std::unique_lock lock(wait->mu);
    wait->cv.wait(lock, [&] { return wait->left == 0; });
  }
  pending.fetch_sub(1);
  for (RequestResult& res : wait->results) {
    if (res.finish != FinishReason::Stop || res.embedding.empty())
      return ApiError{
          res.finish == FinishReason::Cancelled ? 503 : 500,
          "embedding failed: " + (res.error.empty() ? std::string("cancelled") : res.error),
          "server_error",
          "",
          "",
          0};
    batch.vectors.push_back(std::move(res.embedding));
    batch.seconds = std::max(batch.seconds, res.timing.total_seconds);
  }
  return batch;
}

void HttpServer::Impl::handle_embeddings(const http::Request& req, http::Response& res) {
  auto parsed = parse_openai_embeddings(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const EmbeddingsRequest& r = std::get<EmbeddingsRequest>(parsed);
  if (auto e = check_model(r.model)) return send_error(res, *e);
  auto done = embed(r, "model");
  if (auto* e = std::get_if<ApiError>(&done)) return send_error(res, *e);
  const EmbeddingBatch& b = std::get<EmbeddingBatch>(done);
  ordered_json data = ordered_json::array();
  for (size_t i = 0; i < b.vectors.size(); ++i) {
    ordered_json item = {{"object", "embedding"}, {"index", i}};
    if (r.base64)
      item["embedding"] = base64_floats(b.vectors[i]);
    else
      item["embedding"] = b.vectors[i];
    data.push_back(std::move(item));
  }
  send_json(
      res, ordered_json{
               {"object", "list"},
               {"data", std::move(data)},
               {"model", opt.model_name},
               {"usage", {{"prompt_tokens", b.prompt_tokens}, {"total_tokens", b.prompt_tokens}}}});
}

void HttpServer::Impl::handle_ollama_embed(const http::Request& req, http::Response& res) {
  auto parsed = parse_ollama_embed(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e, ErrorShape::Ollama);
  const EmbeddingsRequest& r = std::get<EmbeddingsRequest>(parsed);
  if (auto e = check_ollama_model(r.model)) return send_error(res, *e, ErrorShape::Ollama);
  auto done = embed(r, "model");
  if (auto* e = std::get_if<ApiError>(&done)) return send_error(res, *e, ErrorShape::Ollama);
  const EmbeddingBatch& b = std::get<EmbeddingBatch>(done);
  send_json(res, ordered_json{{"model", r.model},
                              {"embeddings", b.vectors},
                              {"total_duration", static_cast<int64_t>(b.seconds * 1e9)},
                              {"load_duration", 0},
                              {"prompt_eval_count", b.prompt_tokens}});
}

}  // namespace tangram::server
