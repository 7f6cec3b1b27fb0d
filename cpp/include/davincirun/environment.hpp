// Environment builder: the variables each rank process starts with.
//
// The whole contract, with the framework that reads each variable and the
// source of that fact, is in docs/environment.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/device_allocation.hpp"

namespace davincirun {

/// An environment block: ordered "NAME=value" entries with unique names.
class Environment {
 public:
  Environment() = default;
  /// From "NAME=value" strings; entries without '=' are dropped, and a later
  /// duplicate name wins, as getenv() would see it.
  explicit Environment(const std::vector<std::string>& entries);
  /// A copy of this process's `environ`.
  static Environment current();

  std::optional<std::string> get(std::string_view name) const;
  /// Sets or overwrites.
  void set(std::string_view name, std::string_view value);
  /// Sets only when absent ("kept if already set").
  void set_default(std::string_view name, std::string_view value);
  void unset(std::string_view name);
  const std::vector<std::string>& entries() const noexcept { return entries_; }

 private:
  std::vector<std::string>::iterator find(std::string_view name);
  std::vector<std::string>::const_iterator find(std::string_view name) const;
  std::vector<std::string> entries_;
};

/// Values shared by every rank of a job.
struct JobEnvironment {
  std::string rank_table_file;  ///< absolute path of the table the ranks read
  int world_size = 0;           ///< RANK_SIZE, WORLD_SIZE
  int rank_start = 0;           ///< first rank on this server (RANK_START)
  int local_world_size = 0;     ///< ranks on this server (LOCAL_WORLD_SIZE)
  std::string job_id;           ///< JOB_ID
  std::string master_addr;      ///< MASTER_ADDR
  int master_port = 0;          ///< MASTER_PORT
  std::string host_ip;          ///< default MA_CURRENT_HOST_IP: this server's host_ip, else its server_id
};

/// Variables of MindSpore's dynamic-cluster mode, removed from the inherited
/// environment in rank-table mode: a platform launcher may leave them set,
/// and then MindSpore tries to bind a scheduler port ("Address already in
/// use") instead of reading the rank table.
const std::vector<std::string_view>& scrubbed_variable_names();

/// Default HCCL_CONNECT_TIMEOUT in seconds when the user set none: 1800, as
/// davincirunsdk 0.1.x did (HCCL's own default is 120).
inline constexpr int default_hccl_connect_timeout_s = 1800;

/// The environment of one rank, built in layers:
///  1. `inherited` (the launcher's own environment) without the
///     scrubbed_variable_names();
///  2. defaults, kept when already set: HCCL_CONNECT_TIMEOUT=1800,
///     PYTHONUNBUFFERED=1, MA_CURRENT_HOST_IP=job.host_ip (when not empty);
///  3. `extra` (the caller's explicit variables) overwrite;
///  4. identity, always overwritten: RANK_TABLE_FILE, RANK_ID, RANK_SIZE,
///     RANK_START, DEVICE_ID, ASCEND_DEVICE_ID, JOB_ID, RANK, LOCAL_RANK,
///     WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
Environment rank_environment(const Environment& inherited, const JobEnvironment& job, const RankAssignment& rank,
                             const std::vector<std::pair<std::string, std::string>>& extra = {});

/// The rank identity names rank_environment() always sets itself; values
/// given for them in `extra` have no effect. (JOB_ID and MASTER_PORT are set
/// too, but from JobEnvironment, whose planner honours `extra`.)
const std::vector<std::string_view>& identity_variable_names();

/// JOB_ID for a new job: $JOB_ID when set; else $BATCH_JOB_ID; else
/// $MA_VJ_NAME with its "ma-job" prefix replaced by "modelarts-job" (as
/// davincirunsdk 0.1.x did on ModelArts); else "job-<8 random hex digits>".
/// Characters other than letters, digits, '-' and '_' are replaced by '-'.
std::string resolve_job_id(const Environment& inherited);

/// A TCP port on `host` that was free a moment ago (bind to port 0, read it,
/// close). Throws SystemError when no socket can be bound.
int find_free_port(const std::string& host = "127.0.0.1");

}  // namespace davincirun
