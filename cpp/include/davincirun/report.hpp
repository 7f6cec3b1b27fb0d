// The job's report: `<run>/report.html`, one self-contained page drawn from
// the job-wide record `<run>/job.json` (format "davincirun-job/1"), and the
// terminal summary `davincirun report` prints.
//
// The page needs no network: its template (cpp/src/record/report_page.html:
// HTML, CSS and plain JavaScript drawing SVG) is compiled into the library,
// and the record goes into it as JSON in a <script type="application/json">
// element. Rank output in the record is untrusted: the embedded JSON has
// every '<', '>', '&', U+2028 and U+2029 escaped (\u003c...), so no record
// text can close the element, open a comment or reach the markup, and the
// page's script only ever sets text and SVG attributes from it.
#pragma once

#include <string>
#include <string_view>

#include "davincirun/errors.hpp"

namespace davincirun {

/// A job record that cannot be read or is not one: the file is missing or
/// unreadable, its text is not JSON, or it is not format "davincirun-job/1"
/// with the keys the report reads. `what()` names the file (or "job record"
/// for text given directly) and what is wrong, e.g.
/// `/log/latest/job.json: not JSON: syntax error at byte 12 ...`.
class JobRecordError : public Error {
 public:
  using Error::Error;
};

/// The record at `path`, read whole. Throws JobRecordError naming `path`
/// when it is missing or cannot be read.
std::string read_job_record(const std::string& path);

/// The HTML of the report page for `job_record_json`. `source` names the
/// record in errors. Throws JobRecordError when the text is not a job record.
/// Size: the record, compacted, plus the 25 KB template (a 1,024-rank
/// /bin/true job: docs/usage.md, "The job report").
std::string render_report(std::string_view job_record_json, const std::string& source = "job record");

/// Renders the page and writes it to `path` atomically (a reader sees the old
/// page or the new one), mode 0600 whatever the umask; an existing file or
/// symlink at `path` is replaced. Throws JobRecordError (the record) or
/// SystemError (the file).
void write_report(const std::string& path, std::string_view job_record_json, const std::string& source = "job record");

/// The report in words for a terminal: job id, result, duration, ranks per
/// server, how the ranks ended (counts), the first failure and the lines of
/// its root cause, slow ranks, the number of events. Lines end in '\n'; no
/// colours. Throws JobRecordError.
std::string report_summary(std::string_view job_record_json, const std::string& source = "job record");

}  // namespace davincirun
