// What the launcher and its per-job supervisor process (davincirun-supervisor)
// say to each other over one Unix stream socket, the job's lifeline. The
// frames are in lifeline_frames.hpp, the encoding of values in
// common/wire.hpp; each message is a struct whose field list (fields.hpp)
// is its encoding.
//
// Launcher → supervisor: one spec frame holding the JobSpec, then one-byte
// commands (stop, kill, forward a signal), sent with single send() calls so
// that a signal handler may send them. The launcher's end closing (it
// exited or was killed) means "stop the job".
// Supervisor → launcher: started or error, then the console's events (lines,
// notices, progress, rank exits) and finally the result.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/enum_names.hpp"
#include "davincirun/fields.hpp"
#include "davincirun/job_types.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/supervisor_options.hpp"
#include "job/lifeline_frames.hpp"

namespace davincirun::detail {

/// Where the supervisor process sends the ranks' live lines.
enum class ConsoleRoute {
  none,   ///< log files only
  stdio,  ///< its own stdout (lines) and stderr (notices), inherited from the launcher
  relay,  ///< line and notice frames to the launcher
};
DAVINCIRUN_ENUM_NAMES(ConsoleRoute, "none", "stdio", "relay");

/// Everything the supervisor process needs to run the job; made from a LaunchPlan.
struct JobSpec {
  std::string log_dir;  ///< absolute; the run directory is created inside
  std::string job_id;
  std::string rank_table_json;  ///< the normalized table the ranks read
  std::string rank_table_source;
  std::string server_id;
  int world_size = 0;
  std::vector<std::string> command;
  std::string work_dir;         ///< absolute
  std::string device_lock_dir;  ///< absolute; empty: the devices are not locked
  std::vector<RankAssignment> ranks;
  std::vector<bool> show_on_console;  ///< per rank
  /// Per rank, "NAME=value"; RANK_TABLE_FILE is set by the supervisor.
  std::vector<std::vector<std::string>> environments;
  SupervisorOptions supervisor;
  ConsoleRoute console = ConsoleRoute::relay;
  std::vector<std::string> remove_after_job;  ///< LaunchOptions::remove_after_job
  std::string cache_dir;                      ///< LaunchPlan::cache_dir
  PeerPlan peers;                             ///< LaunchPlan::peers
  std::vector<std::string> notes;             ///< LaunchPlan::notes
  AttemptPorts attempt_ports;                 ///< LaunchPlan::attempt_ports
};

// summary.json shows the job's identity first; the rest is for the supervisor process.
constexpr auto fields_of(const JobSpec*) {
  using J = JobSpec;
  constexpr unsigned summary = on_wire | in_summary;
  return std::make_tuple(
      field("log_dir", &J::log_dir).only(on_wire), field("job_id", &J::job_id).only(summary),
      field("server_id", &J::server_id).only(summary), field("rank_table_source", &J::rank_table_source).only(summary),
      field("rank_table_json", &J::rank_table_json).only(on_wire), field("world_size", &J::world_size).only(summary),
      field("command", &J::command).only(summary), field("work_dir", &J::work_dir).only(on_wire),
      field("device_lock_dir", &J::device_lock_dir).only(on_wire), field("cache_dir", &J::cache_dir).only(on_wire),
      field("ranks", &J::ranks).only(on_wire), field("show_on_console", &J::show_on_console).only(on_wire),
      field("environments", &J::environments).only(on_wire), field("peers", &J::peers).only(on_wire),
      field("supervisor", &J::supervisor).only(on_wire), field("console", &J::console).only(on_wire),
      field("remove_after_job", &J::remove_after_job).only(on_wire), field("notes", &J::notes).only(summary),
      field("attempt_ports", &J::attempt_ports).only(on_wire));
}

/// One-byte commands, launcher → supervisor. `forward` is followed by the
/// signal number byte; `stop_by_signal` by the signal number byte and the
/// sender's pid (4 bytes, little-endian; 0: not known).
inline constexpr char command_stop = 'T';
inline constexpr char command_kill = 'K';
inline constexpr char command_drop = 'D';  ///< kill: the launcher dropped the job before it ended
inline constexpr char command_forward = 'F';
/// request_stop_by_signal(): followed by the signal number byte and the sender's pid.
inline constexpr char command_stop_by_signal = 'S';
/// The bytes that follow a command byte.
inline constexpr std::size_t command_argument_bytes(char command) noexcept {
  return command == command_forward ? 1 : command == command_stop_by_signal ? 5 : 0;
}

std::string encode_spec(const JobSpec& spec);
JobSpec decode_spec(std::string_view data);

/// Frame::started.
struct StartedJob {
  std::string run_dir;
  std::string tag;  ///< the value of DAVINCIRUN_JOB_TAG in every rank's environment
  std::vector<pid_t> pids;
  ProcessTracking tracking = ProcessTracking::pidfd;
};
constexpr auto fields_of(const StartedJob*) {
  return std::make_tuple(field("run_dir", &StartedJob::run_dir), field("tag", &StartedJob::tag),
                         field("pids", &StartedJob::pids), field("tracking", &StartedJob::tracking));
}
std::string encode_started(const StartedJob& started);
StartedJob decode_started(std::string_view data);

/// Frame::lines is LineSink::write(): the rank's index (this head), then its lines.
std::string encode_lines_head(std::size_t index);
struct RankLines {
  std::size_t index = 0;
  std::string_view lines;  ///< points into the payload
};
RankLines decode_lines(std::string_view data);

/// Frame::progress is LineSink::progress().
struct ProgressUpdate {
  std::size_t index = 0;
  std::string text;
};
constexpr auto fields_of(const ProgressUpdate*) {
  return std::make_tuple(field("index", &ProgressUpdate::index), field("text", &ProgressUpdate::text));
}
std::string encode_progress(std::size_t index, std::string_view text);
ProgressUpdate decode_progress(std::string_view data);

/// Frame::rank_exited is LineSink::rank_exited().
struct RankExited {
  std::size_t index = 0;
  ExitStatus status;
  bool stopped_by_launcher = false;
};
constexpr auto fields_of(const RankExited*) {
  return std::make_tuple(field("index", &RankExited::index), field("status", &RankExited::status),
                         field("stopped_by_launcher", &RankExited::stopped_by_launcher));
}
std::string encode_rank_exited(const RankExited& exited);
RankExited decode_rank_exited(std::string_view data);

/// Frame::attempt is LineSink::attempt_started().
struct AttemptStarted {
  int attempt = 1;
  std::vector<pid_t> pids;
};
constexpr auto fields_of(const AttemptStarted*) {
  return std::make_tuple(field("attempt", &AttemptStarted::attempt), field("pids", &AttemptStarted::pids));
}
std::string encode_attempt(const AttemptStarted& started);
AttemptStarted decode_attempt(std::string_view data);

/// Frame::status is LineSink::ranks_status().
struct RanksStatus {
  std::vector<RankStatus> statuses;
};
constexpr auto fields_of(const RanksStatus*) { return std::make_tuple(field("statuses", &RanksStatus::statuses)); }
std::string encode_status(const std::vector<RankStatus>& statuses);
std::vector<RankStatus> decode_status(std::string_view data);

/// Hands a console frame (lines, notice, progress, rank_exited, attempt, status) to `sink`.
/// Returns false for any other frame type. Throws SystemError on a malformed payload.
bool deliver_console_frame(Frame type, std::string_view payload, LineSink& sink);

std::string encode_result(const JobResult& result);
JobResult decode_result(std::string_view data);

/// An exception thrown while starting the job, encoded so that
/// rethrow_error() throws the same type again (DeviceBusyError,
/// ConfigError, SpawnError, SystemError; anything else becomes Error).
/// decode_* and rethrow_error throw SystemError on a malformed payload.
std::string encode_error(const std::exception& error);
[[noreturn]] void rethrow_error(std::string_view data);

}  // namespace davincirun::detail
