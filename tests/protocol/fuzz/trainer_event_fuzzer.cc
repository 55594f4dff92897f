// libFuzzer entry point for the trainer-event parser and the events frame it feeds
// (issue 7). Built with -DBAKEOFF_FUZZ=ON and clang (scripts/fuzz); seed corpus in
// tests/protocol/fuzz/event_corpus/.
#include "tests/protocol/fuzz/protocol_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bakeoff::protocol::FuzzTrainerEvents(data, size);
  return 0;
}
