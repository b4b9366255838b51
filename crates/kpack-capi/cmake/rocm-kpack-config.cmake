# CMake package for librocm_kpack (kpack's drop-in for ROCm's rocm-kpack runtime).
#   find_package(rocm-kpack REQUIRED)
#   target_link_libraries(app PRIVATE rocm::rocm_kpack)         # shared library
#   target_link_libraries(app PRIVATE rocm::rocm_kpack_static)  # static archive
# Relocatable: paths are derived from this file's location, <prefix>/lib/cmake/rocm-kpack.
# On Windows the DLL is <prefix>/bin/rocm_kpack.dll and programs link its import library from
# <prefix>/lib: rocm_kpack.lib for MSVC, librocm_kpack.dll.a for MinGW.
get_filename_component(_rocm_kpack_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET rocm::rocm_kpack AND WIN32)
  if(MSVC)
    set(_rocm_kpack_implib "${_rocm_kpack_prefix}/lib/rocm_kpack.lib")
  else()
    set(_rocm_kpack_implib "${_rocm_kpack_prefix}/lib/librocm_kpack.dll.a")
  endif()
  add_library(rocm::rocm_kpack SHARED IMPORTED)
  set_target_properties(rocm::rocm_kpack PROPERTIES
    IMPORTED_LOCATION "${_rocm_kpack_prefix}/bin/rocm_kpack.dll"
    IMPORTED_IMPLIB "${_rocm_kpack_implib}"
    INTERFACE_INCLUDE_DIRECTORIES "${_rocm_kpack_prefix}/include")
  unset(_rocm_kpack_implib)
elseif(NOT TARGET rocm::rocm_kpack)
  add_library(rocm::rocm_kpack SHARED IMPORTED)
  set_target_properties(rocm::rocm_kpack PROPERTIES
    IMPORTED_LOCATION "${_rocm_kpack_prefix}/lib/librocm_kpack.so.@VERSION@"
    IMPORTED_SONAME "librocm_kpack.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${_rocm_kpack_prefix}/include")
endif()

if(NOT TARGET rocm::rocm_kpack_static)
  add_library(rocm::rocm_kpack_static STATIC IMPORTED)
  set_target_properties(rocm::rocm_kpack_static PROPERTIES
    IMPORTED_LOCATION "${_rocm_kpack_prefix}/lib/librocm_kpack.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_rocm_kpack_prefix}/include"
    # The header's declarations without __declspec(dllimport) (Windows).
    INTERFACE_COMPILE_DEFINITIONS "KPACK_STATIC"
    # What the Rust standard library needs from the system when linked statically.
    INTERFACE_LINK_LIBRARIES "@STATIC_LIBS@")
endif()

set(rocm-kpack_INCLUDE_DIR "${_rocm_kpack_prefix}/include")
unset(_rocm_kpack_prefix)
