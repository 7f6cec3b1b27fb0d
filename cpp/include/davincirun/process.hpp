// One child process: started with fork/exec (never through a shell), in its
// own process group, observed through a pidfd.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace davincirun {

/// How a process ended.
struct ExitStatus {
  /// `unknown`: the status was lost because the host process set SIGCHLD to
  /// SIG_IGN (the kernel then reaps children itself); counted as a failure.
  enum class Kind { exited, signaled, unknown };
  Kind kind = Kind::exited;
  int value = 0;  ///< exit code (0..255) for exited, signal number for signaled

  bool success() const noexcept { return kind == Kind::exited && value == 0; }
  /// The shell's convention: the exit code, or 128 + N for signal N; 255 for unknown.
  int shell_code() const noexcept {
    return kind == Kind::exited ? value : kind == Kind::signaled ? 128 + value : 255;
  }
  /// "exit code 3", "signal 11 (SIGSEGV)" or "unknown exit status".
  std::string describe() const;
};

/// What to start.
struct ProcessSpec {
  std::vector<std::string> argv;  ///< argv[0] is looked up in the PATH of `env` when it has no '/'
  std::vector<std::string> env;   ///< complete environment, each "NAME=value"
  std::string work_dir;           ///< the child's working directory; empty = inherit
};

/// A started child. Move-only; owns the pid (until reaped), its pidfd and the
/// read end of its output pipe.
///
/// The child's stdin is /dev/null; stdout and stderr are one pipe (like
/// `> file 2>&1`); it leads a new process group (pgid == pid); signal
/// dispositions are reset to default and the signal mask emptied before exec,
/// so a launcher's own handlers and blocked signals never leak into ranks.
/// It gets SIGKILL when the thread that spawned it exits (PR_SET_PDEATHSIG),
/// so spawn from a thread that lives as long as the job.
///
/// Destroying a ChildProcess that was not reaped SIGKILLs its process group
/// and reaps it, so a handle never leaks a running child.
class ChildProcess {
 public:
  /// Starts `spec`. Failures of the child's set-up (chdir, execve) are
  /// reported through a close-on-exec pipe, so the real errno reaches the
  /// caller here instead of as a mysterious exit 127 later.
  /// Throws SpawnError (exec or set-up failure, with `rank` as given) or
  /// SystemError (pipe/fork/pidfd_open failure).
  static ChildProcess spawn(const ProcessSpec& spec, int rank);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const noexcept { return pid_; }
  /// Readable (EPOLLIN) once the process has exited. -1 after reaping.
  int pidfd() const noexcept { return pidfd_; }
  /// Read end of the merged stdout/stderr pipe; -1 once released.
  int output_fd() const noexcept { return output_fd_; }
  /// Hands the output pipe to the caller (who then closes it).
  int release_output_fd() noexcept;

  /// Sends `signal` to the whole process group while the leader is not yet
  /// reaped (so the group id cannot have been reused). Returns false when
  /// nothing was signalled (already reaped, or the group is gone).
  bool signal_group(int signal) noexcept;

  /// Reaps the process if it has exited; never blocks.
  std::optional<ExitStatus> try_reap();
  bool reaped() const noexcept { return pid_ <= 0; }

 private:
  ChildProcess(pid_t pid, int pidfd, int output_fd) noexcept;
  void kill_and_reap() noexcept;

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int output_fd_ = -1;
};

/// Finds the executable for `argv0` like execvp: names containing '/' are used
/// as they are (relative to the child's work_dir); others are searched in
/// `path_list` (a PATH value). Returns nullopt and sets `error` to the errno
/// to report (ENOENT when not found, EACCES when found but not executable).
std::optional<std::string> find_executable(const std::string& argv0, const std::string& path_list,
                                           int& error);

}  // namespace davincirun
