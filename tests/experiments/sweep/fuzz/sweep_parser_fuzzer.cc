// libFuzzer entry point for the sweep parser (issue 7). Built only with
// -DBAKEOFF_FUZZ=ON and clang; the seed corpus is tests/experiments/sweep/fuzz/corpus/.
#include "tests/experiments/sweep/fuzz/sweep_parser_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bakeoff::spec::FuzzSweepParser(data, size);
  return 0;
}
