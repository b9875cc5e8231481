# The consumer_package test (cmake -P): installs Kiln from a build tree into a fresh
# prefix, then configures, builds and runs tests/consumer/ against that prefix only,
# the way another project would use Kiln.
#
# Inputs (-D): KILN_BUILD_DIR, KILN_CONFIG, CONSUMER_SOURCE_DIR, WORK_DIR, GENERATOR,
# CXX_COMPILER, SANITIZE (the KILN_SANITIZE the library was built with; may be empty).
cmake_minimum_required(VERSION 3.20)

foreach(_var KILN_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${_var}=... is required")
  endif()
endforeach()

set(_prefix "${WORK_DIR}/prefix")
set(_build "${WORK_DIR}/build")
set(_out "${WORK_DIR}/out")
file(REMOVE_RECURSE "${_prefix}" "${_build}" "${_out}")
file(MAKE_DIRECTORY "${_out}")

function(_run step)
  string(REPLACE ";" " " _shown "${ARGN}")
  message(STATUS "[consumer] ${step}: ${_shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "[consumer] ${step} failed (${_rc})")
  endif()
endfunction()

# 1. Install.
set(_config_args "")
if(KILN_CONFIG)
  set(_config_args --config "${KILN_CONFIG}")
endif()
_run(install "${CMAKE_COMMAND}" --install "${KILN_BUILD_DIR}" --prefix "${_prefix}" ${_config_args})

# 2. Configure against the prefix only: no package registry, no build tree.
set(_configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${_build}" -G "${GENERATOR}"
  -DCMAKE_BUILD_TYPE=Release
  "-DCMAKE_PREFIX_PATH=${_prefix}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(CXX_COMPILER)
  list(APPEND _configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(SANITIZE)
  # A library built with sanitizers needs their runtime in the final link.
  list(APPEND _configure_args
    "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE} -fno-omit-frame-pointer"
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
_run(configure "${CMAKE_COMMAND}" ${_configure_args})

# The package must have come from the prefix we just installed.
file(STRINGS "${_build}/CMakeCache.txt" _kiln_dir REGEX "^kiln_DIR:")
string(REGEX REPLACE "^kiln_DIR:[A-Z]*=" "" _kiln_dir "${_kiln_dir}")
file(REAL_PATH "${_prefix}" _real_prefix)
file(REAL_PATH "${_kiln_dir}" _real_kiln_dir)
string(FIND "${_real_kiln_dir}" "${_real_prefix}/" _at)
if(NOT _at EQUAL 0)
  message(FATAL_ERROR "[consumer] find_package(kiln) found '${_kiln_dir}', not the installed prefix '${_prefix}'")
endif()
message(STATUS "[consumer] kiln_DIR = ${_kiln_dir}")

# 3. Build and run.
_run(build "${CMAKE_COMMAND}" --build "${_build}" --parallel 2)
_run(run "${_build}/kiln_consumer" "${_out}")
message(STATUS "[consumer] wrote ${_out}")
