# One shared library per layer of kiln/layers.txt, each linking only the
# layers the table allows it, so a call into a layer it may not use fails to
# link (-z defs: every symbol must resolve among the declared libraries).
# Ops, kernels and components register themselves from static initialisers,
# hence shared libraries: every object file is kept.
#
# kiln_layer_target(<folder> <out>): the target name of a layer.
function(kiln_layer_target folder out)
  string(REPLACE "/" "_" name "${folder}")
  set(${out} kiln_${name} PARENT_SCOPE)
endfunction()

set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kiln/layers.txt)
file(STRINGS ${PROJECT_SOURCE_DIR}/kiln/layers.txt KILN_LAYER_LINES REGEX "^[a-z_/]+:")
set(KILN_LAYER_TARGETS)
foreach(line ${KILN_LAYER_LINES})
  string(REGEX MATCH "^([a-z_/]+):(.*)$" _ "${line}")
  set(folder ${CMAKE_MATCH_1})
  # Header restrictions ({...}) are the include test's business.
  string(REGEX REPLACE "{[^}]*}" "" uses "${CMAKE_MATCH_2}")
  separate_arguments(uses)
  # The CUDA backend and NCCL's process groups exist only where the toolkit
  # does (cmake/Cuda.cmake).
  if(folder MATCHES "^backend/(cuda|nccl)$" AND NOT KILN_HAVE_CUDA)
    continue()
  endif()
  kiln_layer_target(${folder} target)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kiln/${folder}/*.cc
    ${PROJECT_SOURCE_DIR}/kiln/${folder}/*.cu)
  add_library(${target} SHARED ${sources})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${target} PUBLIC KILN_VERSION="${PROJECT_VERSION}")
  # Not in the fuzz build: clang links the sanitizer runtimes into the
  # executables only, so its libraries have undefined sanitizer symbols.
  if(NOT KILN_FUZZ)
    target_link_options(${target} PRIVATE -Wl,-z,defs)
  endif()
  target_link_libraries(${target} PUBLIC Threads::Threads)
  foreach(dep ${uses})
    kiln_layer_target(${dep} dep_target)
    if(NOT TARGET ${dep_target})
      message(FATAL_ERROR "kiln/layers.txt: layer '${folder}' uses '${dep}', "
        "which is not a layer listed above it")
    endif()
    target_link_libraries(${target} PRIVATE ${dep_target})
  endforeach()
  list(APPEND KILN_LAYER_TARGETS ${target})
endforeach()

# `kiln`: every layer built, for the CLI, tests and benchmarks. --no-as-needed
# keeps the libraries whose only job is to register (the backends' kernels).
add_library(kiln INTERFACE)
target_link_libraries(kiln INTERFACE -Wl,--no-as-needed ${KILN_LAYER_TARGETS} -Wl,--as-needed)
