// Checks of a request's head that need no state: which Host names the server answers to, and
// which media types count as JSON. The server applies them before it reads a body.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tangram::server {

// Whether a Host header value (a name or an IP literal, with an optional port) names this server:
// any IP literal (a DNS-rebinding page reaches the server by a name it controls, never by an
// address), "localhost" and names under ".localhost", `bound_host` (what --host gave), and the
// names in `allowed` (case-insensitive; "*" allows any, "*.example.com" any name under it).
bool allowed_host(std::string_view host_header, std::string_view bound_host,
                  const std::vector<std::string>& allowed);

// "application/json" or an "application/...+json" type, parameters (charset) allowed, any case.
bool is_json_media_type(std::string_view content_type);

}  // namespace tangram::server
