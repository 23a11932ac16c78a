# src/support/minifloat.h as the text every generated program carries
# (src/codegen/cpp/prelude.cpp): one source for the runtime's rounding and the
# generated code's. tj_minifloat_text(VAR) writes the .cpp that defines
# tj::cpp::kMinifloatText into the build folder and sets VAR to its path;
# an edit of the header reconfigures.
function(tj_minifloat_text var)
  set(root ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/..)
  file(READ ${root}/src/support/minifloat.h TJ_MINIFLOAT_H)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${root}/src/support/minifloat.h)
  configure_file(${root}/src/codegen/cpp/minifloat_text.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/gen/minifloat_text.cpp @ONLY)
  set(${var} ${CMAKE_CURRENT_BINARY_DIR}/gen/minifloat_text.cpp PARENT_SCOPE)
endfunction()
