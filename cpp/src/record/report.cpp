// The page: the template compiled in (report_page.html, embedded by CMake
// into report_page.inc in the build tree), the record compacted into it.
#include "davincirun/report.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/atomic_file.hpp"
#include "record/job_record.hpp"
#include "record/report_page.inc"  // report_page_template
#include "record_json.hpp"

namespace davincirun {

namespace {

constexpr std::string_view record_slot = "{{record}}";
constexpr std::string_view title_slot = "{{title}}";

// JSON that no HTML parser can end early: '<' cannot start "</script" or
// "<!--", '>' and '&' are escaped for good measure, and U+2028/U+2029 (line
// ends to old JavaScript) never appear raw. Outside strings JSON has none of
// these characters, so each is inside a string, where \uXXXX means the same.
std::string script_safe(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 64);
  std::size_t done = 0;  // json[done, i) is copied as it is, in one append
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c != '<' && c != '>' && c != '&' && c != '\xE2') continue;
    const bool line_end =
        c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' && (json[i + 2] == '\xA8' || json[i + 2] == '\xA9');
    if (c == '\xE2' && !line_end) continue;
    out.append(json, done, i - done);
    out += c == '<'                ? "\\u003c"
           : c == '>'              ? "\\u003e"
           : c == '&'              ? "\\u0026"
           : json[i + 2] == '\xA8' ? "\\u2028"
                                   : "\\u2029";
    i += line_end ? 2 : 0;
    done = i + 1;
  }
  out.append(json, done);
  return out;
}

std::string html_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void fill(std::string& page, std::string_view slot, const std::string& value) {
  const auto at = page.find(slot);
  if (at != std::string::npos) page.replace(at, slot.size(), value);
}

}  // namespace

std::string read_job_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    throw JobRecordError(error == ENOENT ? fmt::format("{}: no job record there (the job may still run, or its "
                                                       "supervisor was killed before the end)",
                                                       path)
                                         : fmt::format("{}: cannot read: {}", path, std::strerror(error)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw JobRecordError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  return text.str();
}

std::string render_report(std::string_view job_record_json, const std::string& source) {
  const nlohmann::json record = detail::parse_job_record(job_record_json, source);
  // Compact, and invalid UTF-8 in rank output replaced rather than refused.
  const std::string json = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return detail::report_page(json, detail::text_or(record, "job_id", "job"));
}

void write_report(const std::string& path, std::string_view job_record_json, const std::string& source) {
  const std::string page = render_report(job_record_json, source);
  detail::write_file_atomically(path, page, 0600, "cannot write the job report " + path,
                                detail::Durability::page_cache);
}

namespace detail {

std::string report_page(std::string_view text, std::string_view job_id) {
  std::string page(report_page_template);
  fill(page, title_slot, html_text(job_id));
  fill(page, record_slot, script_safe(text));
  return page;
}

void write_report_page(const std::string& path, std::string_view text, std::string_view job_id) {
  write_file_atomically(path, report_page(text, job_id), 0600, "cannot write the job report " + path,
                        Durability::page_cache);
}

}  // namespace detail

}  // namespace davincirun
