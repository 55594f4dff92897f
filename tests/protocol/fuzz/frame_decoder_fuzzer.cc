// libFuzzer entry point for the worker protocol's frame decoder and message parsers
// (issue 7). Built with -DBAKEOFF_FUZZ=ON and clang (scripts/fuzz); seed corpus in
// tests/protocol/fuzz/frame_corpus/.
#include "tests/protocol/fuzz/protocol_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bakeoff::protocol::FuzzFrameDecoder(data, size);
  return 0;
}
