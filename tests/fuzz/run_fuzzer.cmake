# Runs one libFuzzer target for a bounded time (the ctest of tests/fuzz/CMakeLists.txt) and fails
# on any finding: a crash, a sanitizer report, a broken invariant, a timeout or a leak.
#
#   cmake -DFUZZER=exe -DSEEDS=dir -DREGRESSIONS=dir -DDICT=file -DWORK_DIR=dir -DSECONDS=n -P run_fuzzer.cmake
#
# The environment variable KILN_FUZZ_SECONDS, when set, replaces SECONDS (the long mode).
# libFuzzer starts from every input of SEEDS and REGRESSIONS and writes the inputs it finds
# only into the first directory it is given, WORK_DIR/corpus, emptied here first, so the
# committed seeds are never changed and each run starts from them alone. A finding's input is
# written to WORK_DIR/artifacts/.
set(seconds "${SECONDS}")
if(NOT "$ENV{KILN_FUZZ_SECONDS}" STREQUAL "")
  set(seconds "$ENV{KILN_FUZZ_SECONDS}")
endif()
if(NOT seconds MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "KILN_FUZZ_SECONDS='${seconds}': expected a whole number of seconds >= 1")
endif()

file(REMOVE_RECURSE "${WORK_DIR}/corpus")
file(MAKE_DIRECTORY "${WORK_DIR}/corpus" "${WORK_DIR}/artifacts")
set(args
  -max_total_time=${seconds}
  -timeout=60              # one input running longer is a finding (a hang)
  -rss_limit_mb=4096
  -print_final_stats=1
  -artifact_prefix=${WORK_DIR}/artifacts/)
if(EXISTS "${DICT}")
  list(APPEND args -dict=${DICT})
endif()
set(dirs "${WORK_DIR}/corpus" "${SEEDS}")
if(IS_DIRECTORY "${REGRESSIONS}")
  list(APPEND dirs "${REGRESSIONS}")
endif()

message(STATUS "fuzzing for ${seconds} s: ${FUZZER} ${args} ${dirs}")
math(EXPR limit "${seconds} + 300")  # past that, the run hangs (outside any one input)
execute_process(COMMAND "${FUZZER}" ${args} ${dirs} RESULT_VARIABLE rc TIMEOUT ${limit})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} exited with ${rc}: a finding (its input is in ${WORK_DIR}/artifacts/; "
                      "rerun it with `${FUZZER} <file>`)")
endif()
