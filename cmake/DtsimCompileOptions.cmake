# Compile options shared by every dtsim target, applied through dtsim_configure_target().

add_library(dtsim_compile_options INTERFACE)
target_compile_options(dtsim_compile_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       -Wnon-virtual-dtor -Wimplicit-fallthrough
                       # Designated initializers that leave members at their defaults are intended.
                       -Wno-missing-field-initializers)
if(DTSIM_WERROR)
  target_compile_options(dtsim_compile_options INTERFACE -Werror)
endif()
if(DTSIM_SANITIZE)
  target_compile_options(dtsim_compile_options INTERFACE -fsanitize=address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(dtsim_compile_options INTERFACE -fsanitize=address,undefined)
endif()

if(DTSIM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DTSIM_FUZZ needs clang (libFuzzer): CXX=clang++ (tools/dev/fuzz.sh)")
  endif()
  # Every library is instrumented for coverage and checked by ASan and UBSan; the harnesses
  # add libFuzzer's main (tests/fuzz/CMakeLists.txt).
  target_compile_options(dtsim_compile_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer
                         -fsized-deallocation)  # clang enables it by default only from 19
  target_link_options(dtsim_compile_options INTERFACE -fsanitize=address,undefined)
endif()

# Makes a library target for one module: dtsim_add_module(NAME SOURCES ... DEPS ...).
# Public includes are rooted at the repository top, so code includes "sim/base/time.h".
function(dtsim_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE dtsim_compile_options)
endfunction()
