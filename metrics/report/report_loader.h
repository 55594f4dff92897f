// Maps one sweep's typed records, read through a ResultsReader (metrics/store/
// results_reader.h) in one read transaction, into a ReportInput: a report never writes
// to results.db and can run while the coordinator writes (WAL). Only each trial's
// current attempt (trials.attempts_used) counts, as in the schema's trial_results view.
//
// Thread-safety: a loader call uses only the reader it is given, which must not be used
// by two threads at once.
#pragma once

#include <memory>
#include <string>

#include "metrics/report/report_model.h"
#include "metrics/store/results_reader.h"
#include "protocol/status.h"

namespace bakeoff::metrics {

// Fills the ReportInput of the sweep named by `sweep_id_or_name` (the reader's one
// id-or-name rule, ResultsReader::FindSweep). NotFound names what was looked for and how
// to list sweeps.
Result<ReportInput> LoadReportInput(ResultsReader& reader, const std::string& sweep_id_or_name);

// Opens `db_path` with ResultsReader::Open and loads as above.
Result<ReportInput> LoadReportInputFromFile(const std::string& db_path,
                                            const std::string& sweep_id_or_name);

}  // namespace bakeoff::metrics
