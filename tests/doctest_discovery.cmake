# Included by ctest (a TEST_INCLUDE_FILES script, see tests/CMakeLists.txt) each time it
# starts: lists the test cases of the doctest binary and registers one test per case.
#
# Inputs: KILN_TEST_EXECUTABLE, KILN_TEST_WORKING_DIR, KILN_TEST_TIMEOUT.
#
# Names are "<file>/<case>" or "<file>/<suite>/<case>", with <file> the source file's
# name without "test_" and ".cpp". When the binary is missing or cannot list its test
# cases, one failing test, `kiln_tests_discovery`, reports why.

function(_kiln_discovery_failed reason)
  message(WARNING "kiln_tests: ${reason}")
  add_test(kiln_tests_discovery "${KILN_TEST_EXECUTABLE}" --list-test-cases)
  # Always fails (the reason is the warning above), showing what the binary prints.
  set_tests_properties(kiln_tests_discovery PROPERTIES
    WORKING_DIRECTORY "${KILN_TEST_WORKING_DIR}" TIMEOUT 120
    PASS_REGULAR_EXPRESSION "kiln: test discovery failed, this never matches")
endfunction()

if(NOT EXISTS "${KILN_TEST_EXECUTABLE}")
  _kiln_discovery_failed("${KILN_TEST_EXECUTABLE} does not exist: build the project first")
  return()
endif()

execute_process(
  COMMAND "${KILN_TEST_EXECUTABLE}" --list-test-cases --reporters=xml
  WORKING_DIRECTORY "${KILN_TEST_WORKING_DIR}"
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _err
  RESULT_VARIABLE _rc
  TIMEOUT 120)
if(NOT _rc EQUAL 0)
  _kiln_discovery_failed("listing the test cases failed (${_rc}): ${_err}")
  return()
endif()

# CMake lists split at ';' and treat '[' ']' specially: hide them while splitting.
string(REPLACE ";" "@KILN_SC@" _out "${_out}")
string(REPLACE "[" "@KILN_LB@" _out "${_out}")
string(REPLACE "]" "@KILN_RB@" _out "${_out}")
string(REGEX MATCHALL "<TestCase [^\n]*/>" _cases "${_out}")

function(_kiln_xml_decode var text)
  foreach(_pair "&quot;|\"" "&apos;|'" "&lt;|<" "&gt;|>" "@KILN_LB@|[" "@KILN_RB@|]" "@KILN_SC@|?")
    string(FIND "${_pair}" "|" _bar)
    string(SUBSTRING "${_pair}" 0 ${_bar} _from)
    math(EXPR _bar "${_bar} + 1")
    string(SUBSTRING "${_pair}" ${_bar} -1 _to)
    string(REPLACE "${_from}" "${_to}" text "${text}")
  endforeach()
  string(REPLACE "&amp;" "&" text "${text}")
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

set(_count 0)
foreach(_case IN LISTS _cases)
  # Attributes: name, testsuite (left out when empty), filename, line, skipped.
  foreach(_attr name testsuite filename skipped)
    set(_${_attr} "")
    if(_case MATCHES " ${_attr}=\"([^\"]*)\"")
      _kiln_xml_decode(_${_attr} "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(_name STREQUAL "" OR _filename STREQUAL "")
    _kiln_discovery_failed("cannot parse the test listing line: ${_case}")
    return()
  endif()
  set(_suite "${_testsuite}")
  set(_file "${_filename}")
  string(REGEX REPLACE "^.*[/\\\\]" "" _file "${_file}")
  string(REGEX REPLACE "\\.[^.]*$" "" _stem "${_file}")
  string(REGEX REPLACE "^test_" "" _stem "${_stem}")

  if(_suite STREQUAL "")
    set(_test "${_stem}/${_name}")
  else()
    set(_test "${_stem}/${_suite}/${_name}")
  endif()
  # Two cases of one name in one file: keep ctest names unique.
  # (Names may hold '[' and ';', which CMake lists mishandle: remember them by hash.)
  set(_unique "${_test}")
  set(_n 1)
  string(MD5 _key "${_unique}")
  while(DEFINED _kiln_seen_${_key})
    math(EXPR _n "${_n} + 1")
    set(_unique "${_test} #${_n}")
    string(MD5 _key "${_unique}")
  endwhile()
  set(_kiln_seen_${_key} 1)

  # doctest filters: ',' separates and '\' escapes; '*' and '?' are wildcards.
  string(REPLACE "\\" "\\\\" _filter "${_name}")
  string(REPLACE "," "\\," _filter "${_filter}")
  string(REPLACE "\\" "\\\\" _file_filter "${_file}")
  string(REPLACE "," "\\," _file_filter "${_file_filter}")

  add_test("${_unique}" "${KILN_TEST_EXECUTABLE}"
    "--test-case=${_filter}" "--source-file=*${_file_filter}" --no-version)
  set_tests_properties("${_unique}" PROPERTIES
    WORKING_DIRECTORY "${KILN_TEST_WORKING_DIR}"
    TIMEOUT "${KILN_TEST_TIMEOUT}"
    # A filter that selects nothing would "pass"; sanitizer reports fail even when a
    # runtime option let the process exit 0.
    FAIL_REGULAR_EXPRESSION "test cases: +0 \\|;ERROR: AddressSanitizer;ERROR: LeakSanitizer;WARNING: ThreadSanitizer;runtime error:"
    # A case that only skipped (kiln::test::skip, tests/skip.h, with no assertion and no
    # failure) exits 77 (tests/main.cpp): reported as skipped, not as passed. A printed
    # "skipped:" line alone decides nothing: a failure after it still fails.
    SKIP_RETURN_CODE 77)
  if(_skipped STREQUAL "true")
    set_tests_properties("${_unique}" PROPERTIES DISABLED TRUE)
  endif()
  math(EXPR _count "${_count} + 1")
endforeach()
