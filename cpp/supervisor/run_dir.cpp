#include "run_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "common/private_file.hpp"
#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/job.hpp"

namespace davincirun::detail {

namespace {

void make_dirs(const std::string& path) {
  // mkdir -p: each missing component with mode 0755 (umask applies).
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      throw OptionError("log_dir", fmt::format("cannot create log directory '{}': {}", part, std::strerror(errno)));
    }
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw OptionError("log_dir", fmt::format("log directory '{}' is not a directory", path));
  }
}

std::string make_run_dir(const std::string& log_dir, const std::string& job_id, bool alike_everywhere) {
  // Each server's clock would name the same job differently.
  const std::string base =
      alike_everywhere ? fmt::format("{}/{}", log_dir, job_id)
                       : fmt::format("{}/{}-{}", log_dir, utc_time(std::time(nullptr), "%Y%m%d-%H%M%S"), job_id);
  // A new run never reuses a directory: mkdir fails on an existing one.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string dir = attempt == 0 ? base : fmt::format("{}.{}", base, attempt);
    if (::mkdir(dir.c_str(), 0700) == 0) return dir;
    if (errno != EEXIST) {
      throw OptionError("log_dir", fmt::format("cannot create run directory '{}': {}", dir, std::strerror(errno)));
    }
  }
  throw OptionError("log_dir", fmt::format("cannot create a new run directory next to '{}'", base));
}

}  // namespace

RunDir::RunDir(const std::string& log_dir, const std::string& job_id, const std::string& rank_table_json,
               bool alike_everywhere)
    : log_dir_(log_dir) {
  make_dirs(log_dir);
  path_ = make_run_dir(log_dir, job_id, alike_everywhere);
  // The ranks read a copy the job owns: strictly formatted for HCCL, and
  // immune to a platform rewriting its own file in place mid-job.
  table_path_ = path_ + "/rank_table.json";
  try {
    write_private_file(table_path_, rank_table_json + "\n", "create rank table " + table_path_);
  } catch (const SystemError& e) {
    ::rmdir(path_.c_str());
    // Typically a full disk: the log directory cannot hold this run.
    throw OptionError("log_dir", fmt::format("cannot write the ranks' rank table '{}' in the log directory: {}",
                                             table_path_, std::strerror(e.os_errno())));
  }
}

std::string RunDir::log_path(const RankAssignment& rank, int attempt) const {
  return path_ + "/" + rank_log_file_name(rank, attempt);
}

void RunDir::point_latest() const {
  const std::string latest = log_dir_ + "/latest";
  struct stat st{};
  if (::lstat(latest.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) return;
  const std::string tmp = fmt::format("{}/.latest.{}", log_dir_, ::getpid());
  ::unlink(tmp.c_str());
  const std::string target = path_.substr(path_.rfind('/') + 1);
  if (::symlink(target.c_str(), tmp.c_str()) == 0 && ::rename(tmp.c_str(), latest.c_str()) != 0) {
    ::unlink(tmp.c_str());
  }
}

void RunDir::discard(const std::vector<RankAssignment>& ranks) const {
  for (const auto& rank : ranks) ::unlink(log_path(rank).c_str());
  ::unlink(table_path_.c_str());
  ::rmdir(path_.c_str());
}

}  // namespace davincirun::detail
