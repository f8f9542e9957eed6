# Writes a C++ source file that returns the text of IN from the function NAME (namespace NS):
#   cmake -DIN=page.html -DOUT=page.cpp -DNS=tangram::server -DNAME=chat_page_html -DHEADER=server/chat_page.h -P embed_text.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")TANGRAM_EMBED\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )TANGRAM_EMBED\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake: do not edit.\n#include \"${HEADER}\"\n\nnamespace ${NS} {\n\nstd::string_view ${NAME}() {\n  static constexpr std::string_view kText = R\"TANGRAM_EMBED(${content})TANGRAM_EMBED\";\n  return kText;\n}\n\n}  // namespace ${NS}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
