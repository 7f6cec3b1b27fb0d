// The job record's writer on each server (record/job_record.hpp): this
// server's part, and on rank 0's server the parts the others sent over the
// peer channel, joined on one clock into <run>/job.json and report.html,
// which it sends back so that every server's run directory holds the job's.
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

/// Writes job.json and report.html. `peers` (null on a job of one server,
/// else after JobPeers::stop()): on the hub, the gathered parts, and the
/// joined record goes back to the members; on a member, the hub's record
/// is awaited and written instead of this server's part when it comes.
/// A failure is a notice, never the job's end.
void write_record(const JobSpec& spec, const RunDir& run_dir, const ServerRecordInput& input, JobPeers* peers,
                  LineSink& console);

}  // namespace davincirun::detail
