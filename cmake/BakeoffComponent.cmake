# Helpers that keep each component's CMakeLists.txt short: a component library is every
# .cc in its folder, and each tests/<component>/<name>_test.cc is one test executable.
# A file named *_slow_test.cc gets the ctest label "slow" (CI runs it; `-LE slow` skips).

# bakeoff_unity(TARGET...): compile each target's sources in batches, one translation
# unit per batch (CMake's unity build), when BAKEOFF_UNITY is ON. The Asio, Beast and
# nlohmann-json templates a folder's files share are then instantiated and optimised once
# a batch instead of once a file (docs/build.md, "Unity batches"). A file's
# anonymous-namespace names must therefore be unique within its library.
function(bakeoff_unity)
  foreach(target ${ARGN})
    set_target_properties(${target} PROPERTIES UNITY_BUILD ${BAKEOFF_UNITY}
      UNITY_BUILD_BATCH_SIZE ${BAKEOFF_UNITY_BATCH})
    # In a batch each .cc is an included file, and GCC then warns about every type of a
    # file's anonymous namespace that a coroutine frame or class of that file holds.
    if(BAKEOFF_UNITY AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endforeach()
endfunction()

# bakeoff_component_library(NAME DIR LIBS...)
function(bakeoff_component_library name dir)
  file(GLOB sources CONFIGURE_DEPENDS ${dir}/*.cc)
  if(sources)
    add_library(${name} STATIC ${sources})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    bakeoff_unity(${name})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
  endif()
  if(ARGN)
    if(sources)
      target_link_libraries(${name} PUBLIC ${ARGN})
    else()
      target_link_libraries(${name} INTERFACE ${ARGN})
    endif()
  endif()
endfunction()

# bakeoff_register_test(NAME SOURCE DISCOVERY_TIMEOUT): what every test executable gets,
# here and in tests/experiments/trainer: where the built binaries and the source tree
# are, and its ctest registration with its labels.
function(bakeoff_register_test test_name test_source discovery_timeout)
  # Tests find the built binaries and the source tree through these.
  target_compile_definitions(${test_name} PRIVATE
    BAKEOFF_BINARY_DIR="${CMAKE_BINARY_DIR}" BAKEOFF_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # Tests name the fields they set with designated initializers and leave the rest to
  # their defaults on purpose; GCC 12 warns about each one left out.
  target_compile_options(${test_name} PRIVATE -Wno-missing-field-initializers)
  # A test's own translation unit at -O1: it takes about half of -O3's compile time (the
  # suites' sources are most of the build), and what a test times or loops over is the
  # product's code, which its libraries keep at the build type's level (docs/build.md).
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
    target_compile_options(${test_name} PRIVATE -O1)
  endif()
  # One label per test (gtest_discover_tests cannot pass a list value). Slow suites
  # start coordinators, workers and rank processes on loopback ports (some from fixed
  # ranges): they take turns, while fast suites run in parallel.
  # Suites start many workers side by side on one host on purpose: host-wide claims of
  # CPUs and uids (worker/host_claims.h) are off for them (store ports are claimed even
  # so); the tests of the claims themselves give their workers a lock directory of their own.
  set(host_claims ENVIRONMENT BAKEOFF_HOST_LOCK_DIR=off)
  set(properties LABELS fast ${host_claims})
  if(test_name MATCHES "_slow_test$")
    set(properties LABELS slow RESOURCE_LOCK bakeoff_loopback_processes ${host_claims})
  endif()
  if(test_name MATCHES "^slurm_.*_slow_test$")
    # Tests against a real slurmctld and slurmd that the test configures and starts
    # itself (tests/integration/slurm_cluster.h): slow and slurm. A GTEST_SKIP (not
    # root, Slurm or munge not installed) shows as skipped.
    gtest_add_tests(TARGET ${test_name} SOURCES ${test_source} TEST_LIST listed)
    set_tests_properties(${listed} PROPERTIES LABELS "slow;slurm" ${host_claims}
      RESOURCE_LOCK bakeoff_loopback_processes SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  elseif(test_name MATCHES "^multihost_")
    # Tests on network-namespace hosts (tests/integration/test_hosts.h) carry two labels,
    # slow and multihost; gtest_discover_tests cannot pass a list, so their names are
    # read from the source instead. A GTEST_SKIP (not root, no `ip netns`) shows as
    # skipped.
    gtest_add_tests(TARGET ${test_name} SOURCES ${test_source} TEST_LIST listed)
    set_tests_properties(${listed} PROPERTIES LABELS "slow;multihost" ${host_claims}
      RESOURCE_LOCK bakeoff_loopback_processes SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  else()
    gtest_discover_tests(${test_name} PROPERTIES ${properties} DISCOVERY_TIMEOUT ${discovery_timeout})
  endif()
endfunction()

# bakeoff_component_tests(DIR LIBS...): one gtest executable per *_test.cc in DIR.
function(bakeoff_component_tests dir)
  file(GLOB tests CONFIGURE_DEPENDS ${dir}/*_test.cc)
  foreach(test_source ${tests})
    get_filename_component(test_name ${test_source} NAME_WE)
    add_executable(${test_name} ${test_source})
    target_link_libraries(${test_name} PRIVATE GTest::gtest_main GTest::gmock ${ARGN})
    target_include_directories(${test_name} PRIVATE ${PROJECT_SOURCE_DIR})
    bakeoff_register_test(${test_name} ${test_source} 60)
  endforeach()
endfunction()
