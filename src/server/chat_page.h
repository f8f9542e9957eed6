// The self-contained chat page served at GET / (src/server/assets/chat.html, embedded at build
// time).
#pragma once

#include <string_view>

namespace tangram::server {

std::string_view chat_page_html();

}  // namespace tangram::server
