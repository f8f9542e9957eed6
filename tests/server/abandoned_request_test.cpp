// Non-streamed generations whose clients hang up are cancelled, not run to the end (the outside
// probe found ten 200-token requests generating on after their clients had gone). The model is a
// generated one large enough that an uncancelled request runs for many seconds, so the check
// (tokens generated far below what was asked) has a wide margin on any machine, and nothing
// waits on a clock to decide it.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/model.h"
#include "server/http_server.h"
#include "support/loopback_socket.h"
#include "support/test_support.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

namespace tangram::server {
namespace {

using nlohmann::json;

using testing::connect_loopback;

std::string http_get(int port, const std::string& path) {
  return testing::raw_exchange(
      port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

TEST(HttpServer, AbandonedNonStreamedRequestsAreCancelled) {
  SynthSpec spec;
  spec.n_layers = 4;
  spec.n_embd = 512;
  spec.n_ff = 1024;
  spec.n_head = 8;
  spec.n_kv_head = 2;
  spec.head_dim = 64;
  spec.ctx = 8192;
  const auto path = tangram::testing::temp_path("abandon-test.gguf");
  ASSERT_TRUE(write_synth_model(spec, path.string(), 2).ok());
  auto model = Model::load(path.string());
  ASSERT_TRUE(model.ok()) << model.message();
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  ASSERT_TRUE(tok.ok()) << tok.message();
  EngineOptions eo;
  eo.threads = 2;
  eo.scheduler.kv_memory = size_t{128} << 20;
  eo.scheduler.max_running = 4;
  auto engine = Engine::create(**model, **tok, eo);
  ASSERT_TRUE(engine.ok()) << engine.message();
  ServerOptions so;
  so.port = 0;
  so.log_level = LogLevel::Off;
  auto tmpl = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(tmpl.ok());
  auto server = HttpServer::create(**engine, **tok, std::move(tmpl).value(), so);
  ASSERT_TRUE(server.ok()) << server.message();
  auto port = (*server)->bind();
  ASSERT_TRUE(port.ok());
  HttpServer* raw = server->get();
  std::thread serving([raw] { (void)raw->serve(); });

  // Four requests that would each generate 8000 tokens; every client sends and hangs up.
  constexpr int kClients = 4;
  constexpr int kAsked = 8000;
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", kAsked}, {"ignore_eos", true}}.dump();
  const std::string wire =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  for (int i = 0; i < kClients; ++i) {
    const int fd = connect_loopback(*port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(wire.size()));
    ::close(fd);
  }
  // Every request is seen (counted as 499) and cancelled; the engine drains.
  std::string m;
  for (int i = 0; i < 6000; ++i) {
    m = http_get(*port, "/metrics");
    if (metric(m, "tangram_http_requests_total{endpoint=\"/v1/completions\",status=\"499\"}") >=
        kClients)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (*engine)->wait_idle();
  m = http_get(*port, "/metrics");
  EXPECT_EQ(metric(m, "tangram_http_requests_total{endpoint=\"/v1/completions\",status=\"499\"}"),
            kClients);
  EXPECT_EQ(metric(m, "tangram_client_disconnects_total"), kClients);
  EXPECT_EQ(metric(m, "tangram_requests_running"), 0);
  EXPECT_EQ(metric(m, "tangram_http_requests_inflight"), 0);
  // Far fewer tokens than the clients asked for: they were cancelled, not run to the end.
  EXPECT_LT((*engine)->stats().decode_tokens, kClients * kAsked / 4);

  (*server)->stop();
  serving.join();
  server->reset();
  engine->reset();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tangram::server
