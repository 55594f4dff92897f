// The body of the sweep parser's fuzz target, shared by the libFuzzer executable
// (sweep_parser_fuzzer.cc, built with -DBAKEOFF_FUZZ=ON and clang) and by the corpus
// regression test that every build runs (fuzz_corpus_test.cc). Any input must give a
// SweepSpec or a Status: no crash, no exception, no unbounded time or memory.
// Thread-safety: reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "experiments/sweep/expanded_sweep.h"
#include "experiments/sweep/sweep_expander.h"
#include "experiments/sweep/sweep_parser.h"

namespace bakeoff::spec {

inline void FuzzSweepParser(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = ParseSweepText(text, "fuzz.yaml");
  if (!spec.ok()) {
    (void)spec.status().message().size();
    return;
  }
  // The expansion and the JSON that the coordinator serves must hold for any valid spec.
  (void)ToJson(*spec).dump();
  ExpandOptions options;
  options.max_trials = 2000;
  options.max_grid_points = 20000;
  auto expanded = Expand(*spec, options);
  if (expanded.ok()) (void)ToJson(*expanded).dump();
}

}  // namespace bakeoff::spec
