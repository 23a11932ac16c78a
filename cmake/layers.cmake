# The layers of src/: one static library per folder, each linking only the
# layers it names (and, through them, theirs). A layer's code may include
# and call the layers below it, never one above: the link order makes a
# call upward fail to link, and tests/support/layers_test.cpp checks every
# #include of src/ and include/tensorjit/ against this table
# (${CMAKE_BINARY_DIR}/layers.txt, written here).
#
#   tj_layer(NAME [DEPS layer...] [HEADERS public header...])
#
# NAME is a folder of src/ (the library is tj_NAME); HEADERS are the files of
# include/tensorjit/ whose declarations that layer defines.
set(TJ_LAYERS_TEXT "")
function(tj_layer name)
  cmake_parse_arguments(L "" "" "DEPS;HEADERS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(tj_${name} STATIC ${sources} ${L_UNPARSED_ARGUMENTS})
  target_include_directories(tj_${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
                                         PRIVATE ${PROJECT_SOURCE_DIR}/src)
  set_target_properties(tj_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  foreach(dep ${L_DEPS})
    target_link_libraries(tj_${name} PUBLIC tj_${dep})
  endforeach()
  string(JOIN " " deps ${L_DEPS})
  string(JOIN " " headers ${L_HEADERS})
  set(TJ_LAYERS_TEXT "${TJ_LAYERS_TEXT}${name}: ${deps} | ${headers}\n" PARENT_SCOPE)
  set(TJ_LAYER_TARGETS ${TJ_LAYER_TARGETS} tj_${name} PARENT_SCOPE)
endfunction()

# Bottom to top (docs/architecture.md explains the order).
tj_layer(support HEADERS error.h dtype.h)
tj_layer(io DEPS support HEADERS ndarray.h safetensors.h)
tj_layer(ir DEPS io HEADERS dim.h type.h graph.h)
tj_layer(reference DEPS ir)
tj_layer(frontend DEPS reference HEADERS tensor.h nn.h)
tj_layer(passes DEPS reference)
tj_layer(autodiff DEPS passes)
tj_layer(schedule DEPS ir)
tj_layer(memory DEPS schedule)
tj_layer(cost DEPS schedule)
tj_layer(codegen ${TJ_EMBEDDED_TEXT} DEPS schedule)
tj_layer(runtime DEPS codegen memory passes)
tj_layer(tune DEPS runtime cost)
tj_layer(compiler DEPS tune)
tj_layer(jit DEPS compiler autodiff frontend HEADERS jit.h)
tj_layer(train DEPS compiler autodiff)
tj_layer(models DEPS frontend)
tj_layer(api DEPS compiler frontend HEADERS compile.h onnx.h)
# Benchmarks, reports, conformance runners and demos: what tjc runs and the
# tests share (tjc itself parses arguments). Only where they are built: pip
# install . (neither) skips its 15 files, a fifth of that build.
if(TJ_BUILD_TOOLS OR TJ_BUILD_TESTS)
  tj_layer(bench DEPS api jit train models)
endif()
file(WRITE ${CMAKE_BINARY_DIR}/layers.txt "${TJ_LAYERS_TEXT}")

# What each layer needs from outside, for itself.
find_library(XXHASH_LIBRARY xxhash REQUIRED)
target_link_libraries(tj_support PUBLIC Threads::Threads PRIVATE ${XXHASH_LIBRARY} ${CMAKE_DL_LIBS})
target_link_libraries(tj_io PRIVATE nlohmann_json::nlohmann_json)
target_link_libraries(tj_ir PRIVATE ${XXHASH_LIBRARY})
target_link_libraries(tj_passes PRIVATE ${XXHASH_LIBRARY})
# The ONNX importer's header shows onnx-ml.pb.h's types.
target_link_libraries(tj_frontend PUBLIC onnx onnx_proto)
target_link_libraries(tj_codegen PRIVATE nlohmann_json::nlohmann_json ${XXHASH_LIBRARY} ${CMAKE_DL_LIBS})
target_include_directories(tj_runtime PRIVATE ${CBLAS_INCLUDE_DIR} ${DNNL_INCLUDE_DIR})
target_link_libraries(tj_runtime PRIVATE ${BLAS_LIBRARIES} ${DNNL_LIBRARY} ${CMAKE_DL_LIBS})
target_link_libraries(tj_tune PRIVATE nlohmann_json::nlohmann_json)
target_link_libraries(tj_compiler PRIVATE nlohmann_json::nlohmann_json ${XXHASH_LIBRARY})
if(TARGET tj_bench)
  target_link_libraries(tj_bench PUBLIC nlohmann_json::nlohmann_json)
endif()
