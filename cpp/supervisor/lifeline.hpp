// The supervisor process's side of the lifeline (job_protocol.hpp): frames
// out to the launcher, commands in from it.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "davincirun/console_sink.hpp"
#include "davincirun/supervisor.hpp"
#include "davincirun/unique_fd.hpp"
#include "job/lifeline_frames.hpp"

namespace davincirun::detail {

/// The one writer of the lifeline socket: frames from the main thread and
/// from the console's writer thread never interleave. Once the launcher is
/// gone, everything is dropped quietly.
class Lifeline {
 public:
  explicit Lifeline(int fd) : fd_(fd) {}
  /// Sends one frame whose payload is `head` then `body`.
  void send(Frame type, std::string_view head, std::string_view body = {});

 private:
  int fd_;
  std::mutex mutex_;
  bool broken_ = false;
};

/// The console of ConsoleRoute::relay: every LineSink call as a frame.
class RelaySink final : public LineSink {
 public:
  explicit RelaySink(Lifeline& lifeline) : lifeline_(lifeline) {}
  void write(std::size_t index, std::string_view lines) override;
  void notice(std::string_view lines) override;
  void progress(std::size_t index, std::string_view text) override;
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override;
  void attempt_started(int attempt, const std::vector<pid_t>& pids) override;
  void ranks_status(const std::vector<RankStatus>& statuses) override;
  bool wants_progress() const noexcept override { return true; }

 private:
  Lifeline& lifeline_;
};

/// Waits up to `wait_ms` for a reason to stop waiting before the job's
/// event loop runs: true when the launcher sent something or closed the
/// lifeline, or a stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) is pending.
/// Consumes nothing: the event loop takes it once it runs.
bool stop_arrived(int lifeline_fd, int wait_ms);

/// Reads the launcher's commands, and this process's own stop signals
/// (SIGINT, SIGTERM, SIGHUP, blocked in every thread), on the job's event
/// loop (Supervisor::watch_readable: no thread of its own to start and
/// join), and passes them to `supervisor` as requests. The launcher's end
/// closing stops the job gracefully. The notices about them come from the
/// supervisor. Must outlive the supervisor's run().
class CommandListener {
 public:
  /// `already_read`: command bytes that came with the job's spec frame.
  CommandListener(int lifeline_fd, const std::string& already_read, Supervisor& supervisor);
  CommandListener(const CommandListener&) = delete;
  CommandListener& operator=(const CommandListener&) = delete;

 private:
  void handle(char c);
  void run_command(const std::string& command);
  bool read_signals();
  bool read_lifeline();

  int fd_;
  Supervisor& supervisor_;
  UniqueFd signals_;
  std::string partial_;  // a command whose argument bytes have not all come yet
};

}  // namespace davincirun::detail
