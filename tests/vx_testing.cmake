# Helpers every test directory uses, so that sanitizer builds and preloading
# work the same everywhere.
#
# vx_add_test(NAME name COMMAND cmd... [PRELOAD] [THREADED] [ENV k=v...]
#             [TIMEOUT s] [LABELS l...] [DRIVER V])
#   PRELOAD   run with build/libvx.so in LD_PRELOAD (the sanitizer runtime,
#             if any, goes first, as the dynamic linker requires);
#   THREADED  label "threaded": scripts/test.sh also runs it under TSan.
#   DRIVER V  run against the simulated driver of release V (12000, 12020,
#             12040, 12080 or 13000): tests/simcuda/driver-V/libcuda.so.1
#             first on LD_LIBRARY_PATH, SIMCUDA_DRIVER_VERSION=V.
# Every test sees the simulated driver first on LD_LIBRARY_PATH, skips with
# exit code 77, and gets VX_TEST_BIN_DIR (the build tree's root).
# TIMEOUT is how long the test takes on a quiet machine at most; CTest's
# limit is VX_TEST_TIMEOUT_SCALE (default 4) times that, so that a busy CI
# machine or a sanitizer build never turns a slow test into a failure:
# timeouts catch hangs, they are not timing assertions.
set(VX_TEST_TIMEOUT_SCALE 4 CACHE STRING "CTest timeout = TIMEOUT x this")

function(vx_add_test)
  cmake_parse_arguments(T "PRELOAD;THREADED" "NAME;TIMEOUT;DRIVER" "COMMAND;ENV;LABELS" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set(libpath "${CMAKE_BINARY_DIR}/tests/simcuda")
  if(T_DRIVER)
    set(libpath "${CMAKE_BINARY_DIR}/tests/simcuda/driver-${T_DRIVER}:${libpath}")
  endif()
  set(env
      "LD_LIBRARY_PATH=${libpath}"
      "VX_TEST_BIN_DIR=${CMAKE_BINARY_DIR}"
      "VX_TEST_SRC_DIR=${PROJECT_SOURCE_DIR}"
      "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
      "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1"
      # Check's per-test timeouts (4 s unless a suite sets one) scale the
      # same way: they catch hangs, not slowness.
      "CK_TIMEOUT_MULTIPLIER=${VX_TEST_TIMEOUT_SCALE}"
      # Every simulated device has the same UUID, so tests running side by
      # side would share one budget ledger; the ledger tests turn it on.
      "VX_LEDGER=off")
  if(T_PRELOAD)
    if(VX_SAN_RUNTIME)
      list(APPEND env "LD_PRELOAD=${VX_SAN_RUNTIME}:${CMAKE_BINARY_DIR}/libvx.so")
    else()
      list(APPEND env "LD_PRELOAD=${CMAKE_BINARY_DIR}/libvx.so")
    endif()
  endif()
  if(T_DRIVER)
    list(APPEND env "SIMCUDA_DRIVER_VERSION=${T_DRIVER}")
  endif()
  list(APPEND env ${T_ENV})
  set(labels ${T_LABELS})
  if(T_THREADED)
    list(APPEND labels threaded)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${VX_TEST_TIMEOUT_SCALE}")
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${env}" SKIP_RETURN_CODE 77
                       TIMEOUT ${T_TIMEOUT} LABELS "${labels}")
endfunction()

# A Check unit-test binary from sources, registered through vx_add_test.
function(vx_add_check_test name)
  cmake_parse_arguments(T "THREADED" "" "SOURCES;LIBS;ENV" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE PkgConfig::CHECK ${T_LIBS} Threads::Threads)
  if(T_THREADED)
    vx_add_test(NAME ${name} COMMAND ${name} THREADED ENV "CK_FORK=no" ${T_ENV})
  else()
    vx_add_test(NAME ${name} COMMAND ${name} ENV ${T_ENV})
  endif()
endfunction()
