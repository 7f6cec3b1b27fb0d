#include "report_command.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "davincirun/environment.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/platform_environment.hpp"
#include "davincirun/report.hpp"

namespace davincirun::cli {

namespace {

constexpr std::string_view subcommand = "report";

void say(const std::string& text) {
  const std::string line = "davincirun: " + text + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

bool spelled_as_job_id(std::string_view text) {
  return !text.empty() && text.size() <= 200 && text[0] != '-' && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

// The newest run directory of `log_dir` for `job_id`: run directories are
// named "<UTC time>-<job id>" (or "<job id>" on every server alike), so the
// greatest name is the newest.
std::string run_of_job(const std::string& log_dir, const std::string& job_id) {
  DIR* dir = ::opendir(log_dir.c_str());
  if (dir == nullptr) {
    throw JobRecordError(fmt::format("no run of job {}: cannot read the log directory {}", job_id, log_dir));
  }
  std::vector<std::string> found;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    const bool named = name == job_id || (name.size() > job_id.size() &&
                                          name.compare(name.size() - job_id.size(), job_id.size(), job_id) == 0 &&
                                          name[name.size() - job_id.size() - 1] == '-');
    if (named && is_directory(log_dir + "/" + name)) found.push_back(name);
  }
  ::closedir(dir);
  if (found.empty()) {
    throw JobRecordError(
        fmt::format("no run of job {} in the log directory {} (give the run directory instead)", job_id, log_dir));
  }
  std::sort(found.begin(), found.end());
  if (found.size() > 1)
    say(fmt::format("{} runs of job {}: reporting the newest, {}", found.size(), job_id, found.back()));
  return log_dir + "/" + found.back();
}

std::string run_directory(int argc, char** argv) {
  const std::string log_dir = default_log_dir(usable_cache_dir(Environment::current()));
  if (argc < 3) {
    const std::string latest = log_dir + "/latest";
    if (!is_directory(latest)) {
      throw JobRecordError(
          fmt::format("no {}: no job has run with the default log directory here (give "
                      "davincirun report RUN_DIR, or a JOB_ID)",
                      latest));
    }
    return latest;
  }
  const std::string target = argv[2];
  return is_directory(target) ? target : run_of_job(log_dir, target);
}

// The run directory itself rather than `latest` or a relative path: the
// page's path stays valid to copy after the next job.
std::string resolved(const std::string& path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : path;
}

}  // namespace

bool is_report_command(int argc, char** argv) {
  if (argc < 2 || argv[1] != subcommand || argc > 3) return false;
  if (argc == 2) return true;
  const std::string target = argv[2];
  if (is_directory(target)) return true;
  return !exists(target) && spelled_as_job_id(target);
}

int run_report_command(int argc, char** argv) {
  std::string run;
  try {
    run = resolved(run_directory(argc, argv));
    const std::string record_path = run + "/job.json";
    const std::string record = read_job_record(record_path);
    const std::string page = run + "/report.html";
    write_report(page, record, record_path);
    const std::string text = report_summary(record, record_path) + "report: " + page + "\n";
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return 0;
  } catch (const JobRecordError& e) {
    say(fmt::format("cannot make the job report: {}", e.what()));
  } catch (const Error& e) {  // SystemError (the page), ConfigError (DAVINCIRUN_CACHE_ROOT)
    say(fmt::format("cannot make the job report{}: {}", run.empty() ? "" : " of " + run, e.what()));
  }
  return 1;
}

std::string report_usage() {
  return R"(
davincirun report [RUN_DIR | JOB_ID] writes the report of a finished job,
RUN_DIR/report.html (one file, opens offline in any browser: a timeline of
every rank, the first failure and its log lines, metrics), from the job's
record RUN_DIR/job.json, and prints a summary. Without an argument: the
latest run of the default log directory (LOG_DIR/latest); a JOB_ID: the
newest run directory of that job there. Only `report` alone, or followed by
one directory or one job id (that is no file here), is this command: anything
else launches (davincirun report.py; davincirun -- report runs a program named
report). Exit status 1 when the run or its record cannot be found or read.
)";
}

}  // namespace davincirun::cli
