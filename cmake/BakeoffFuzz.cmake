# libFuzzer targets (issue 7). Configure with clang and -DBAKEOFF_FUZZ=ON (scripts/fuzz
# does); each target is a ctest with the label "fuzz" that runs for BAKEOFF_FUZZ_SECONDS
# from its seed corpus in the source tree, writing new inputs to the build tree only.
# Every build also replays the corpora through the same fuzz bodies as plain gtests
# (tests/*/fuzz_corpus_test.cc), so a fixed crash stays fixed without clang.
option(BAKEOFF_FUZZ "Build libFuzzer targets (needs clang)" OFF)
set(BAKEOFF_FUZZ_SECONDS 20 CACHE STRING "Seconds each fuzz target runs under ctest")
set(bakeoff_fuzz_flags -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined)

if(BAKEOFF_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "BAKEOFF_FUZZ needs clang: configure with -DCMAKE_CXX_COMPILER=clang++")
endif()

# bakeoff_fuzz_target(NAME CORPUS DIR SOURCES files... [LIBS libs...]): SOURCES are the
# entry point and the code under test, compiled here with the fuzzer's coverage
# instrumentation and sanitizers; LIBS (instrumented too) link in whole libraries. The
# protocol fuzzers compile only the pure codec sources: clang 14 cannot build Boost
# 1.74's Asio coroutines that the rest of bakeoff_protocol uses.
function(bakeoff_fuzz_target name)
  cmake_parse_arguments(FUZZ "" "CORPUS" "SOURCES;LIBS" ${ARGN})
  if(NOT BAKEOFF_FUZZ)
    return()
  endif()
  foreach(lib ${FUZZ_LIBS})
    target_compile_options(${lib} PRIVATE ${bakeoff_fuzz_flags})
  endforeach()
  add_executable(${name} ${FUZZ_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${bakeoff_fuzz_flags})
  target_link_libraries(${name} PRIVATE ${FUZZ_LIBS} nlohmann_json::nlohmann_json -fsanitize=fuzzer,address,undefined)
  set(work ${CMAKE_CURRENT_BINARY_DIR}/${name}_corpus)
  file(MAKE_DIRECTORY ${work})
  add_test(NAME ${name}
           COMMAND ${name} -max_total_time=${BAKEOFF_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048
                   -max_len=65536 ${work} ${FUZZ_CORPUS})
  set_tests_properties(${name} PROPERTIES LABELS "fuzz")
endfunction()
