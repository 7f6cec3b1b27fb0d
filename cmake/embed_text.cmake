# Embeds a text file into C++ as one raw string literal, at build time with
# no tool but CMake (an sdist builds without Python):
#   cmake -DINPUT=page.html -DOUTPUT=page.inc -DNAME=page_template -P embed_text.cmake
# OUTPUT then defines davincirun::detail::<NAME>, a std::string_view.
file(READ "${INPUT}" text)
set(delimiter "dvr_embed")  # at most 16 characters
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains )${delimiter}\", the end of the literal it is embedded in")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_text.cmake: edit that file instead.\n"
  "#pragma once\n#include <string_view>\n"
  "namespace davincirun::detail {\n"
  "inline constexpr std::string_view ${NAME} = R\"${delimiter}(${text})${delimiter}\";\n"
  "}  // namespace davincirun::detail\n")
# Only a change touches the output: what includes it is not rebuilt for nothing.
configure_file("${OUTPUT}.tmp" "${OUTPUT}" COPYONLY)
file(REMOVE "${OUTPUT}.tmp")
