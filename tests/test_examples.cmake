# The examples are built by examples/CMakeLists.txt (added before enable_testing(), so
# their tests are registered here). Each runs with small arguments; an example exits
# non-zero when a check of its own fails (an output shape, a NaN, a row sum).
set(KILN_EXAMPLE_TESTS
  "01_quickstart|1 4 --calls 12 --gap-ms 5"
  "02_dynamic_shapes|3 8 17")
if(KILN_HAVE_ONNX)  # 03 reads an exported model
  list(APPEND KILN_EXAMPLE_TESTS "03_gpt2_decode|${PROJECT_SOURCE_DIR}/tests/onnx/dynamic/models/gpt2_tiny_past --steps 64")
endif()
foreach(_entry IN LISTS KILN_EXAMPLE_TESTS)
  string(REPLACE "|" ";" _parts "${_entry}")
  list(GET _parts 0 _target)
  list(GET _parts 1 _args)
  separate_arguments(_args UNIX_COMMAND "${_args}")
  if(TARGET ${_target})
    add_test(NAME example_${_target} COMMAND ${_target} ${_args})
    set_tests_properties(example_${_target} PROPERTIES TIMEOUT 300)
  endif()
endforeach()
