// One child process: started with clone/exec (never through a shell), in its
// own process group (or session), observed through a pidfd where the kernel
// has them (Linux >= 5.4) or through waitid() by a process that owns SIGCHLD.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "davincirun/job_types.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

/// What to start.
struct ProcessSpec {
  std::vector<std::string> argv;  ///< argv[0] is looked up in the PATH of `env` when it has no '/'
  std::vector<std::string> env;   ///< complete environment, each "NAME=value"
  std::string work_dir;           ///< the child's working directory; empty = inherit
  /// true (default): stdout and stderr are one pipe, read through
  /// output_fd(). false: the child shares the parent's stdout and stderr.
  bool capture_output = true;
  /// Descriptors of the parent passed to the child as 3, 4, ... in this
  /// order; every other descriptor beyond 2 is closed in the child.
  std::vector<int> pass_fds;
  /// true: the child starts a new session (setsid) instead of only a new
  /// process group, so a terminal's signals and hangup never reach it.
  bool new_session = false;
  /// true (default): the child gets SIGKILL when the thread that spawned it
  /// exits (PR_SET_PDEATHSIG). false for a process that must outlive its
  /// parent to clean up after it.
  bool die_with_parent = true;
  /// true (default): ask clone() for a pidfd (Linux >= 5.3; see
  /// pidfd_supported()). false: no pidfd; the owner learns of the exit by
  /// SIGCHLD and reaps with try_reap().
  bool use_pidfd = true;
  /// With use_pidfd: what happens when clone() refuses CLONE_PIDFD (EINVAL,
  /// ENOSYS or EPERM) although the kernel has pidfds, as a seccomp filter or
  /// qemu-user 7.2 (which does not emulate the flag) do. false (default):
  /// SystemError. true: the child is started without a pidfd instead (no
  /// child exists after the refused call, so none is lost); pidfd() is then
  /// -1 and pidfd_refusal() holds the errno.
  bool pidfd_optional = false;
  /// The signals whose disposition in this process is not SIG_DFL (see
  /// signals_not_default()), when the caller knows them: the child resets
  /// those only. A caller starting many children takes them once (the
  /// Supervisor, once per attempt): one call per signal, ~64, per child
  /// was 0.26 ms of an 8-rank job (bench/README.md, "The launch floor").
  /// Empty (default): looked up here, for each child.
  std::optional<sigset_t> changed_signals;
};

/// The signals whose disposition in this process is a handler or SIG_IGN,
/// one sigaction() query per signal. A child started by
/// ChildProcess::spawn() resets exactly these before it unblocks signals
/// (a handler must not run in a child that shares our memory; an ignored
/// signal would stay ignored across execve).
sigset_t signals_not_default() noexcept;

/// Whether this kernel has everything the pidfd path needs: CLONE_PIDFD
/// (Linux 5.2), pidfd_open (5.3) and waitid(P_PIDFD) (5.4). Checked once.
/// Kernels 4.19 and 5.0, common on Ascend hosts, have none of them.
bool pidfd_supported() noexcept;

/// A started child. Move-only; owns the pid (until reaped), its pidfd and the
/// read end of its output pipe.
///
/// The child's stdin is /dev/null; stdout and stderr are one pipe (like
/// `> file 2>&1`); it leads a new process group (pgid == pid); signal
/// dispositions are reset to default and the signal mask emptied before exec,
/// so a launcher's own handlers and blocked signals never leak into ranks.
/// Unless ProcessSpec::die_with_parent is false, it gets SIGKILL when the
/// thread that spawned it exits (PR_SET_PDEATHSIG), so spawn from a thread
/// that lives as long as the job.
///
/// Destroying a ChildProcess that was not reaped SIGKILLs its process group
/// and reaps it, so a handle never leaks a running child.
class ChildProcess {
 public:
  /// Starts `spec`. Failures of the child's set-up (chdir, execve) are
  /// reported through a close-on-exec pipe, so the real errno reaches the
  /// caller here instead of as a mysterious exit 127 later.
  /// Throws SpawnError (exec or set-up failure, with `rank` as given) or
  /// SystemError (pipe or clone failure, CLONE_PIDFD refused included unless
  /// ProcessSpec::pidfd_optional).
  static ChildProcess spawn(const ProcessSpec& spec, int rank);

  /// Forks this process; the copy runs `entry(3)` and _exit()s with what it
  /// returns (2 when it throws). No program is started, so the copy runs at
  /// once: a new program first pays for its dynamic loading and C++ runtime
  /// start (bench/README.md, "The launch floor").
  /// The copy has `pass_fd` as descriptor 3 and every other descriptor
  /// above 2 closed, stdin /dev/null, the parent's stdout and stderr, a new
  /// session (setsid), every signal handler reset to SIG_DFL (an ignored
  /// signal stays ignored, as across execve), an empty signal mask, and
  /// `name` as its process name (/proc/<pid>/comm, what `ps -o comm` and
  /// `pgrep` match; 15 bytes kept) and as its whole command line (what
  /// `ps -f` and `pgrep -f` show; cut to the length of the parent's). It is
  /// not killed with its parent. No pidfd: reaped by pid. Only from a
  /// process with a single thread: fork copies the calling thread alone,
  /// and a lock another thread held (the allocator's, stdio's) would stay
  /// locked in the copy. Throws
  /// std::logic_error when /proc/self/task shows more than one thread,
  /// SystemError when fork() fails.
  static ChildProcess fork_call(int (*entry)(int), int pass_fd, const char* name);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const noexcept { return pid_; }
  /// Readable (EPOLLIN) once the process has exited. -1 after reaping, and
  /// always without ProcessSpec::use_pidfd.
  int pidfd() const noexcept { return pidfd_.get(); }
  /// Read end of the merged stdout/stderr pipe; -1 once released.
  int output_fd() const noexcept { return output_fd_.get(); }
  /// The errno with which clone() refused CLONE_PIDFD when
  /// ProcessSpec::pidfd_optional started the child without a pidfd; else 0.
  int pidfd_refusal() const noexcept { return pidfd_refusal_; }
  /// Hands the output pipe over; empty without ProcessSpec::capture_output.
  UniqueFd release_output_fd() noexcept { return std::move(output_fd_); }

  /// Sends `signal` to the whole process group while the leader is not yet
  /// reaped (so the group id cannot have been reused), and to the process
  /// itself when it has moved to another group (setpgid): a stop must reach
  /// it wherever it went. Returns false when nothing was signalled (already
  /// reaped, or the group is gone).
  bool signal_group(int signal) noexcept;

  /// Reaps the process if it has exited; never blocks.
  std::optional<ExitStatus> try_reap();
  /// Waits for the process to exit and reaps it.
  ExitStatus reap();
  bool reaped() const noexcept { return pid_ <= 0; }

 private:
  ChildProcess(pid_t pid, UniqueFd pidfd, UniqueFd output_fd) noexcept;
  void kill_and_reap() noexcept;

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  UniqueFd output_fd_;
  int pidfd_refusal_ = 0;
};

/// The parent of process `pid`, read from /proc/<pid>/stat; nullopt when
/// the process does not exist or cannot be read.
std::optional<pid_t> parent_pid(pid_t pid);

/// Finds the executable for `argv0` like execvp: names containing '/' are used
/// as they are (relative to the child's work_dir); others are searched in
/// `path_list` (a PATH value; an empty entry is the current directory) for
/// a regular file this process may execute. Returns nullopt and sets `error`
/// to the errno to report (ENOENT when not found, EACCES when found but not
/// executable).
std::optional<std::string> find_executable(const std::string& argv0, const std::string& path_list, int& error);

/// The PATH a rank's command is looked up in when its environment has none
/// or an empty one.
inline constexpr const char* default_search_path = "/usr/local/bin:/usr/bin:/bin";

}  // namespace davincirun
