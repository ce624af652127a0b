# Whether the Python module (tools/python) is built: decided before the libraries are declared,
# since the module links them into a shared object and so needs them position-independent.
# DTSIM_PYTHON_MODULE: AUTO (when pybind11 and the interpreter's headers are found), ON (required),
# OFF. Never under the sanitizers or the fuzzer build: their runtimes cannot be loaded into an
# interpreter that was not started with them.
set(DTSIM_PYTHON_MODULE "AUTO" CACHE STRING
    "Build the Python module for DTSIM_PYTHON_EXECUTABLE: AUTO (when pybind11 is found), ON, OFF")
set_property(CACHE DTSIM_PYTHON_MODULE PROPERTY STRINGS AUTO ON OFF)
set(DTSIM_PYTHON_EXECUTABLE "/usr/bin/python3" CACHE FILEPATH
    "The interpreter the Python module is built for (Debian's, which has matplotlib and pandas)")

set(DTSIM_HAVE_PYTHON_MODULE OFF)
if(NOT DTSIM_PYTHON_MODULE STREQUAL "OFF")
  if(DTSIM_SANITIZE OR DTSIM_FUZZ)
    set(reason "not under DTSIM_SANITIZE or DTSIM_FUZZ")
  else()
    set(Python_EXECUTABLE "${DTSIM_PYTHON_EXECUTABLE}")
    set(PYBIND11_FINDPYTHON ON)
    find_package(Python COMPONENTS Interpreter Development.Module QUIET)
    if(Python_FOUND)
      find_package(pybind11 2.10 CONFIG QUIET)
    endif()
    if(Python_FOUND AND pybind11_FOUND)
      set(DTSIM_HAVE_PYTHON_MODULE ON)
    elseif(NOT Python_FOUND)
      set(reason "no Python headers for ${DTSIM_PYTHON_EXECUTABLE} (python3-dev)")
    else()
      set(reason "pybind11 not found (pybind11-dev)")
    endif()
  endif()
  if(NOT DTSIM_HAVE_PYTHON_MODULE AND DTSIM_PYTHON_MODULE STREQUAL "ON")
    message(FATAL_ERROR "DTSIM_PYTHON_MODULE=ON, but ${reason}")
  endif()
endif()
if(DTSIM_HAVE_PYTHON_MODULE)
  message(STATUS "dtsim Python module: ON (Python ${Python_VERSION}, ${Python_EXECUTABLE})")
  # Position-independent code everywhere; no semantic interposition, so calls between dtsim's
  # own functions stay direct (as in an executable) and may be inlined.
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  add_compile_options(-fno-semantic-interposition)
elseif(DTSIM_PYTHON_MODULE STREQUAL "OFF")
  message(STATUS "dtsim Python module: OFF")
else()
  message(STATUS "dtsim Python module: OFF (${reason})")
endif()
