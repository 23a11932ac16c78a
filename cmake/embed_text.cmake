# A header compiled into tensorjit and, as text, into every generated
# program: one source for both sides. tj_embed_text(VAR SYMBOL HEADER) writes
# a .cpp defining `const char* const tj::cpp::SYMBOL` (HEADER's text, relative
# to src/) into the build folder and appends its path to VAR; an edit of the
# header reconfigures.
function(tj_embed_text var symbol header)
  set(root ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/..)
  file(READ ${root}/src/${header} TJ_EMBED_TEXT)
  set(TJ_EMBED_SYMBOL ${symbol})
  set(TJ_EMBED_HEADER ${header})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${root}/src/${header})
  configure_file(${root}/src/codegen/cpp/embedded_text.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/gen/${symbol}.cpp @ONLY)
  set(${var} ${${var}} ${CMAKE_CURRENT_BINARY_DIR}/gen/${symbol}.cpp PARENT_SCOPE)
endfunction()
