// What the launcher and its per-job supervisor process (davincirun-supervisor)
// say to each other over one Unix stream socket, the job's lifeline.
//
// Launcher → supervisor: one frame holding the JobSpec, then one-byte
// commands (stop, kill, forward a signal), sent with single send() calls so
// that a signal handler may send them. The launcher's end closing (it
// exited or was killed) means "stop the job".
// Supervisor → launcher: frames of events: started or error, console lines
// and notices, and finally the result.
// A frame is one type byte, a 32-bit little-endian length, then the payload.
// Payloads are a plain binary encoding (length-prefixed byte strings), not
// JSON: environment values, arguments and paths may be any bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "davincirun/launcher.hpp"

namespace davincirun::detail {

/// Where the supervisor process sends the ranks' live lines.
enum class ConsoleRoute {
  none,   ///< log files only
  stdio,  ///< its own stdout (lines) and stderr (notices), inherited from the launcher
  relay,  ///< line and notice frames to the launcher
};

/// Everything the supervisor process needs to run the job; made from a LaunchPlan.
struct JobSpec {
  std::string log_dir;          ///< absolute; the run directory is created inside
  std::string job_id;
  std::string rank_table_json;  ///< the normalized table the ranks read
  std::string rank_table_source;
  std::string server_id;
  int world_size = 0;
  std::vector<std::string> command;
  std::string work_dir;  ///< absolute
  std::string device_lock_dir;  ///< absolute; empty: the devices are not locked
  std::vector<RankAssignment> ranks;
  std::vector<bool> show_on_console;  ///< per rank
  std::vector<std::vector<std::string>> environments;  ///< per rank, "NAME=value"; RANK_TABLE_FILE is set by the supervisor
  SupervisorOptions supervisor;
  ConsoleRoute console = ConsoleRoute::relay;
  std::vector<std::string> remove_after_job;  ///< LaunchOptions::remove_after_job
};

JobSpec make_job_spec(const LaunchPlan& plan, ConsoleRoute console);

enum class Frame : char {
  spec = 'J',     ///< launcher → supervisor: the JobSpec
  started = 'S',  ///< StartedJob
  error = 'E',    ///< the job could not start; see encode_error()
  lines = 'L',    ///< console lines of the ranks
  notice = 'N',   ///< the launcher's own messages
  progress = 'P', ///< ProgressUpdate: a rank's line being redrawn with '\r'
  rank_exited = 'X',  ///< RankExited
  result = 'R',   ///< the JobResult; the last frame
};

/// One-byte commands, launcher → supervisor. `forward` is followed by the signal number byte.
inline constexpr char command_stop = 'T';
inline constexpr char command_kill = 'K';
inline constexpr char command_drop = 'D';  ///< kill: the launcher dropped the job before it ended
inline constexpr char command_forward = 'F';

/// Payloads above this are refused when read (a corrupt length, not a real frame): 1 GiB.
inline constexpr std::uint32_t max_frame_bytes = 1U << 30;

std::string encode_spec(const JobSpec& spec);
JobSpec decode_spec(std::string_view data);

struct StartedJob {
  std::string run_dir;
  std::string tag;  ///< the value of DAVINCIRUN_JOB_TAG in every rank's environment
  std::vector<pid_t> pids;
  ProcessTracking tracking = ProcessTracking::pidfd;
};
std::string encode_started(const StartedJob& started);
StartedJob decode_started(std::string_view data);

/// LineSink::progress() carried over the lifeline.
struct ProgressUpdate {
  std::string label;
  std::string text;
};
std::string encode_progress(std::string_view label, std::string_view text);
ProgressUpdate decode_progress(std::string_view data);

/// LineSink::rank_exited() carried over the lifeline.
struct RankExited {
  std::size_t index = 0;
  ExitStatus status;
  bool stopped_by_launcher = false;
};
std::string encode_rank_exited(const RankExited& exited);
RankExited decode_rank_exited(std::string_view data);

/// Hands an event frame (lines, notice, progress, rank_exited) to `sink`.
/// Returns false for any other frame type. Throws SystemError on a malformed payload.
bool deliver_console_frame(Frame type, std::string_view payload, LineSink& sink);

std::string encode_result(const JobResult& result);
JobResult decode_result(std::string_view data);

/// An exception thrown while starting the job, encoded so that
/// rethrow_error() throws the same type again (DeviceBusyError,
/// ConfigError, SpawnError, SystemError; anything else becomes Error). decode_* and rethrow_error
/// throw SystemError on a malformed payload.
std::string encode_error(const std::exception& error);
[[noreturn]] void rethrow_error(std::string_view data);

/// Writes one frame in full (blocking; EINTR retried; never raises SIGPIPE).
/// Returns false when the other end is gone (EPIPE, ECONNRESET).
/// Throws SystemError on other failures.
bool write_frame(int fd, Frame type, std::string_view payload);

/// Reads frames from a stream socket, buffered.
class FrameReader {
 public:
  explicit FrameReader(int fd) : fd_(fd) {}
  /// Blocks for the next frame. Returns false at a clean end of stream;
  /// throws SystemError on a read error or a stream cut inside a frame.
  bool next(Frame& type, std::string& payload);
  /// Bytes read past the last frame (e.g. commands that followed the spec).
  std::string take_buffered();

 private:
  bool fill(std::size_t wanted);
  int fd_;
  std::string buffer_;
  std::size_t start_ = 0;
};

}  // namespace davincirun::detail
