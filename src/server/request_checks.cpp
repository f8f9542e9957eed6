#include "server/request_checks.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace tangram::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_ipv4(const std::string& s) {
  in_addr a{};
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}

bool is_ipv6(const std::string& s) {
  in6_addr a{};
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

struct HostPart {
  std::string name;  // lower case, without the port, the brackets of an IPv6 literal or a final dot
  bool bracketed = false;
};

// The host part of a Host value; an empty name when malformed.
HostPart host_part(std::string_view value) {
  value = trim(value);
  if (!value.empty() && value.front() == '[') {  // [IPv6]:port
    const size_t close = value.find(']');
    if (close == std::string_view::npos) return {};
    const std::string_view rest = value.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return {};
    return {lower(value.substr(1, close - 1)), true};
  }
  if (const size_t colon = value.rfind(':'); colon != std::string_view::npos) {
    const std::string_view port = value.substr(colon + 1);
    if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return {};
    value = value.substr(0, colon);
  }
  if (!value.empty() && value.back() == '.') value.remove_suffix(1);
  return {lower(value), false};
}

}  // namespace

bool allowed_host(std::string_view host_header, std::string_view bound_host,
                  const std::vector<std::string>& allowed) {
  const HostPart part = host_part(host_header);
  const std::string& host = part.name;
  if (host.empty()) return false;
  if (part.bracketed) return is_ipv6(host);
  if (is_ipv4(host)) return true;
  if (host == "localhost" || ends_with(host, ".localhost")) return true;
  if (host == lower(bound_host)) return true;
  for (const std::string& a : allowed) {
    const std::string name = lower(a);
    if (name == "*" || name == host) return true;
    if (name.size() > 2 && name.compare(0, 2, "*.") == 0 && ends_with(host, name.substr(1)))
      return true;
  }
  return false;
}

bool is_json_media_type(std::string_view content_type) {
  const std::string type = lower(trim(content_type.substr(0, content_type.find(';'))));
  if (type == "application/json") return true;
  return type.compare(0, 12, "application/") == 0 && ends_with(type, "+json");
}

}  // namespace tangram::server
