# Checks that #include "..." lines only point down the layers of the library (README,
# "Layout"). Run by ctest as `layers`:
#
#   cmake -DROOT=<source tree> -P tests/check_layers.cmake
#
# The layers, bottom to top. A file may include files of its own layer and of the layers
# below it, never above. Besides that:
#   - a tier's own folder (tiers/interp, tiers/asmjit, tiers/llvm, ...) never includes another
#     tier's folder, nor profiling/ (tiers compile and run code; they do not observe);
#   - the public headers (include/kiln) include only the standard library and each other.
# Includes that name no layer (a file beside the includer, a system header) are not checked.
set(KILN_LAYERS
  src/support   # assert, logging, hashing
  src/core      # dtype, tensor storage, allocator, parallel loops, scalar op formulas
  src/cpu       # the host's compute kernels the CPU tiers share (GEMM, im2col, depthwise rows)
  src/ir        # the graph IR
  src/trace     # the tracer: C++ API -> graph IR
  src/onnx      # the ONNX importer: .onnx -> graph IR
  src/passes    # graph passes (fusion)
  src/kir       # the kernel IR and the lowering of fused groups into it
  profiling     # shape and timing profiles, Chrome trace
  tiers         # the tier interface and the tiers (interp, asmjit, llvm)
  jit/exec      # the executor: the pipeline, plans, memory plans, running a call
  jit/tiering   # the JIT: tier-up policy, compile queue, persistent cache
  jit/api       # the implementation of include/kiln (Engine, Function, Options, stats)
)

if(NOT ROOT)
  message(FATAL_ERROR "check_layers.cmake: pass -DROOT=<source tree>")
endif()

# The index of the layer that holds `path` (the longest matching folder), or -1.
function(_kiln_layer_of path out)
  set(best -1)
  set(best_len 0)
  set(i 0)
  foreach(layer IN LISTS KILN_LAYERS)
    string(LENGTH "${layer}" len)
    if(path MATCHES "^${layer}/" AND len GREATER best_len)
      set(best ${i})
      set(best_len ${len})
    endif()
    math(EXPR i "${i} + 1")
  endforeach()
  set(${out} ${best} PARENT_SCOPE)
endfunction()

# tiers/<name>/...: the tier's folder name; "" for files at the top of tiers/ (the interface).
function(_kiln_tier_of path out)
  if(path MATCHES "^tiers/([^/]+)/")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

set(violations "")
set(checked 0)
set(includes 0)
file(GLOB_RECURSE files RELATIVE "${ROOT}" LIST_DIRECTORIES false
  "${ROOT}/src/*" "${ROOT}/profiling/*" "${ROOT}/tiers/*" "${ROOT}/jit/*" "${ROOT}/include/kiln/*")
foreach(f IN LISTS files)
  if(NOT f MATCHES "\\.(h|hpp|cpp|def|inc)$")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS "${ROOT}/${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  _kiln_layer_of("${f}" from)
  _kiln_tier_of("${f}" from_tier)
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "#[ \t]*include[ \t]*([\"<])([^\">]+)[\">]")
      continue()
    endif()
    set(quote "${CMAKE_MATCH_1}")
    set(target "${CMAKE_MATCH_2}")
    math(EXPR includes "${includes} + 1")
    if(f MATCHES "^include/kiln/")
      if(quote STREQUAL "\"" OR target MATCHES "^(src|jit|tiers|profiling)/")
        string(APPEND violations "  ${f}: includes \"${target}\": public headers include only <kiln/...> and the standard library\n")
      endif()
      continue()
    endif()
    if(NOT quote STREQUAL "\"")
      continue()
    endif()
    _kiln_layer_of("${target}" to)
    if(to EQUAL -1)
      continue()
    endif()
    list(GET KILN_LAYERS ${from} from_name)
    list(GET KILN_LAYERS ${to} to_name)
    if(to GREATER from)
      string(APPEND violations "  ${f}: includes \"${target}\": ${from_name} may not look up at ${to_name}\n")
      continue()
    endif()
    if(from_name STREQUAL "tiers")
      _kiln_tier_of("${target}" to_tier)
      if(NOT from_tier STREQUAL "" AND NOT to_tier STREQUAL "" AND NOT from_tier STREQUAL to_tier)
        string(APPEND violations "  ${f}: includes \"${target}\": one tier never includes another\n")
      elseif(to_name STREQUAL "profiling")
        string(APPEND violations "  ${f}: includes \"${target}\": tiers do not include profiling/\n")
      endif()
    endif()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "check_layers: no source files under ${ROOT}")
endif()
if(violations)
  message(FATAL_ERROR "check_layers: includes that point up a layer (README, \"Layout\"):\n${violations}")
endif()
message(STATUS "check_layers: ${checked} files, ${includes} includes, all point down the layers")
