# kiln_embed_headers(<target> <namespace> <declaring header> <headers...>):
# adds to <target> a generated source defining
# `std::string_view <namespace>::embedded_headers()` (declared in the given
# header): the headers' text in order, which a code generator puts at the
# top of the source it compiles at run time, so a generated kernel uses
# exactly the math this build was compiled with and an installed kiln needs
# no source tree.
set(KILN_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_headers_script.cmake)
function(kiln_embed_headers target namespace declaring)
  string(REPLACE "::" "_" stem "${namespace}")
  set(out ${CMAKE_BINARY_DIR}/generated/${stem}_embedded_headers.cc)
  set(deps)
  foreach(h ${ARGN})
    list(APPEND deps ${PROJECT_SOURCE_DIR}/${h})
  endforeach()
  string(REPLACE ";" "," list "${ARGN}")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DHEADERS=${list}
            -DNAMESPACE=${namespace} -DDECLARING=${declaring} -DOUT=${out} -P ${KILN_EMBED_SCRIPT}
    DEPENDS ${deps} ${KILN_EMBED_SCRIPT}
    COMMENT "Embedding the headers of ${namespace}'s generated code"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
