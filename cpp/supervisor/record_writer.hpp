// The job record's writer on each server (record/job_record.hpp): this
// server's part, and on rank 0's server the parts the others sent over the
// peer channel, joined on one clock into <run>/job.json and report.html.
#pragma once

#include <string>

#include "davincirun/console_sink.hpp"
#include "job/job_protocol.hpp"
#include "job_journal.hpp"
#include "job_peers.hpp"
#include "output/job_progress.hpp"
#include "record/job_record.hpp"
#include "run_dir.hpp"

namespace davincirun::detail {

/// What this server knows of its ranks for the record; refers to its arguments.
ServerRecordInput record_input(const JobSpec& spec, const RunDir& run_dir, const JobResult& result,
                               const JobJournal* journal, const JobProgress* progress);

/// A member's part of the record, as it goes to the hub (JobPeers::PartMaker).
std::string part_for_hub(const JobSpec& spec, const ServerRecordInput& input);

/// Writes job.json and report.html (`peers`: the hub's gathered parts; null
/// on a job of one server). A failure is a notice, never the job's end.
void write_record(const JobSpec& spec, const RunDir& run_dir, const ServerRecordInput& input, const JobPeers* peers,
                  LineSink& console);

}  // namespace davincirun::detail
