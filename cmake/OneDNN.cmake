# oneDNN as the imported target DNNL::dnnl, found by its header and library.
#
# Debian's libdnnl is built with oneDNN's OpenCL GPU runtime, so its CMake
# package config requires OpenCL's development files (libdnnl-dev only
# recommends them) and adds OpenCL::OpenCL to every consumer's link line.
# kiln uses oneDNN's CPU engine only; the library's own dependency on the
# OpenCL loader (libOpenCL.so.1) comes with the runtime package. Locating
# the two files directly keeps the build from needing anything setup.sh does
# not install, and fails here, naming the package, when oneDNN is missing.
find_path(DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp dnnl.hpp)
find_library(DNNL_LIBRARY NAMES dnnl)
if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN not found (header dnnl.hpp: ${DNNL_INCLUDE_DIR}, "
    "library libdnnl: ${DNNL_LIBRARY}). On Debian: apt-get install libdnnl-dev "
    "(scripts/setup.sh installs it).")
endif()
add_library(DNNL::dnnl UNKNOWN IMPORTED)
set_target_properties(DNNL::dnnl PROPERTIES
  IMPORTED_LOCATION "${DNNL_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
message(STATUS "oneDNN: ${DNNL_LIBRARY}")
