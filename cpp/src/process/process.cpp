#include "davincirun/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/linux_compat.hpp"
#include "common/proc.hpp"
#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "process/command_lookup.hpp"
#include "process/fd_limit.hpp"

namespace davincirun {

std::optional<pid_t> parent_pid(pid_t pid) {
  if (const auto stat = detail::read_proc_stat(pid)) return stat->ppid;
  return std::nullopt;
}

namespace {

// What the child reports through the close-on-exec pipe when a step fails.
struct ChildFailure {
  int step;  // 0 = chdir, 1 = execve, 2 = stdio set-up
  int error;
};

// Everything the child needs, prepared before the clone: after it, the child
// shares the parent's memory and may only make async-signal-safe calls.
struct ChildSetup {
  sigset_t changed_signals;  // reset to SIG_DFL in the child
  const char* executable;
  char* const* argv;
  char* const* envp;
  const char* work_dir;  // nullptr = inherit
  int stdin_fd;
  int output_fd;        // -1 = keep the parent's stdout and stderr
  const int* pass_fds;  // dup'd to 3, 4, ...; each is above 2 + pass_count
  int pass_count;
  bool new_session;
  bool die_with_parent;
  int report_fd;          // above 2 + pass_count too
  int fd_limit;           // descriptors are below this (RLIMIT_NOFILE, capped)
  bool restore_fd_limit;  // the supervisor raised its own: the rank gets `rank_fd_limit`
  rlimit rank_fd_limit;
  pid_t parent;  // the launcher, to detect that it died before prctl took effect
};

void report_and_exit(const ChildSetup& s, int step) {
  ChildFailure failure{step, errno};
  ssize_t ignored = ::write(s.report_fd, &failure, sizeof failure);
  (void)ignored;
  ::_exit(127);
}

int child_main(void* arg) {
  const auto& s = *static_cast<const ChildSetup*>(arg);
  // Default dispositions for every signal the parent changed (Python
  // ignores SIGPIPE, Catch2 and CLIs install handlers), then an empty mask:
  // ranks start clean.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&s.changed_signals, sig) == 1) ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  if (s.new_session) {
    ::setsid();
  } else {
    ::setpgid(0, 0);
  }
  if (s.die_with_parent) {
    // A launcher killed outright (SIGKILL, OOM) must not leave its ranks
    // running: the kernel sends SIGKILL when the spawning thread exits. If
    // the launcher is already gone, getppid() has changed: stop here.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != s.parent) ::_exit(127);
  }
  if (::dup2(s.stdin_fd, STDIN_FILENO) < 0) report_and_exit(s, 2);
  if (s.output_fd >= 0 && (::dup2(s.output_fd, STDOUT_FILENO) < 0 || ::dup2(s.output_fd, STDERR_FILENO) < 0)) {
    report_and_exit(s, 2);
  }
  // dup2 clears close-on-exec on the copy: these survive the exec.
  for (int i = 0; i < s.pass_count; ++i) {
    if (::dup2(s.pass_fds[i], 3 + i) < 0) report_and_exit(s, 2);
  }
  if (s.work_dir && ::chdir(s.work_dir) != 0) report_and_exit(s, 0);
  // Descriptors the host process leaked without O_CLOEXEC must not reach the
  // ranks (they would hold pipes and sockets open): close_range (Linux 5.11),
  // else one fcntl per possible descriptor, up to the limit found before
  // the clone.
  const int first = 3 + s.pass_count;
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = first; fd < s.fd_limit; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (s.restore_fd_limit) ::setrlimit(RLIMIT_NOFILE, &s.rank_fd_limit);
  ::execve(s.executable, s.argv, s.envp);
  report_and_exit(s, 1);
  return 127;
}

std::string env_value(const std::vector<std::string>& env, const char* name) {
  const std::size_t n = ::strlen(name);
  for (const auto& entry : env) {
    if (entry.size() > n && entry.compare(0, n, name) == 0 && entry[n] == '=') return entry.substr(n + 1);
  }
  return {};
}

// Blocks every signal in the calling thread for its lifetime: between the
// clone and the child's reset, a host signal handler must not run in the
// child, which shares the parent's memory.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &saved_);
  }
  ~AllSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

// Larger pipes mean fewer wake-ups when a rank floods its output. The
// default cap for unprivileged users (/proc/sys/fs/pipe-max-size) is 1 MiB.
constexpr int pipe_capacity_bytes = 1 << 20;
constexpr std::size_t child_stack_bytes = std::size_t{64} * 1024;

// A close-on-exec copy of `fd` numbered at least `min_fd`, so that the
// child's dup2 onto 3, 4, ... never overwrites a descriptor it still needs.
UniqueFd high_copy(int fd, int min_fd) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, min_fd));
  if (!copy) throw SystemError("fcntl F_DUPFD_CLOEXEC", errno);
  return copy;
}

// The bound for the close-on-exec fallback loop: the soft RLIMIT_NOFILE,
// capped at 1 Mi descriptors so that an "unlimited" limit stays a loop.
int descriptor_limit() {
  struct rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20));
}

}  // namespace

sigset_t signals_not_default() noexcept {
  sigset_t changed;
  sigemptyset(&changed);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_DFL) sigaddset(&changed, sig);
  }
  return changed;
}

bool pidfd_supported() noexcept {
  static const bool supported = [] {
    // pidfd_open (5.3) on ourselves, then waitid(P_PIDFD) (5.4): a kernel
    // that knows P_PIDFD says ECHILD (we are not our own child), an older
    // one EINVAL.
    const UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    if (!fd) return false;
    siginfo_t info{};
    const int rc =
        ::waitid(static_cast<idtype_t>(detail::p_pidfd), static_cast<id_t>(fd.get()), &info, WEXITED | WNOHANG);
    return rc < 0 && errno == ECHILD;
  }();
  return supported;
}

ChildProcess ChildProcess::spawn(const ProcessSpec& spec, int rank) {
  const std::string command = detail::shell_quote(spec.argv);
  if (spec.argv.empty())
    throw SpawnError(rank, command, EINVAL, fmt::format("{}: empty command", process_name(ProcessRole::rank, rank)));

  std::string path_list = env_value(spec.env, "PATH");
  if (path_list.empty()) path_list = default_search_path;
  int lookup_error = 0;
  auto executable = find_executable(spec.argv[0], path_list, lookup_error);
  if (!executable) {
    throw SpawnError(rank, command, lookup_error,
                     detail::command_lookup_message(rank, spec.argv[0], path_list, lookup_error), path_list);
  }

  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  UniqueFd out_read, out_write;
  if (spec.capture_output) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
    out_read.reset(out[0]);
    out_write.reset(out[1]);
    ::fcntl(out_read.get(), F_SETPIPE_SZ, pipe_capacity_bytes);  // best effort
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw SystemError("pipe", errno);
  UniqueFd report_read(report[0]), report_write(report[1]);
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null) throw SystemError("open /dev/null", errno);
  // Everything the child dup2()s from sits above the slots it dup2()s onto.
  const int first_free = 3 + static_cast<int>(spec.pass_fds.size());
  std::vector<UniqueFd> pass_copies;
  std::vector<int> pass_fds;
  for (int fd : spec.pass_fds) {
    pass_copies.push_back(high_copy(fd, first_free));
    pass_fds.push_back(pass_copies.back().get());
  }
  if (report_write.get() < first_free) report_write = high_copy(report_write.get(), first_free);
  if (out_write && out_write.get() < first_free) out_write = high_copy(out_write.get(), first_free);
  if (dev_null.get() < first_free) dev_null = high_copy(dev_null.get(), first_free);

  const std::optional<rlimit> rank_fd_limit = detail::limit_for_ranks();
  ChildSetup setup{spec.changed_signals ? *spec.changed_signals : signals_not_default(),
                   executable->c_str(),
                   argv.data(),
                   envp.data(),
                   spec.work_dir.empty() ? nullptr : spec.work_dir.c_str(),
                   dev_null.get(),
                   out_write ? out_write.get() : -1,
                   pass_fds.data(),
                   static_cast<int>(pass_fds.size()),
                   spec.new_session,
                   spec.die_with_parent,
                   report_write.get(),
                   descriptor_limit(),
                   rank_fd_limit.has_value(),
                   rank_fd_limit.value_or(rlimit{}),
                   ::getpid()};

  // clone(CLONE_VM | CLONE_VFORK) like posix_spawn: no copy of a large host
  // process (a notebook kernel holding tensors), and no pthread_atfork
  // handlers run, which fork() from a threaded host would risk.
  std::unique_ptr<char[]> stack(new char[child_stack_bytes]);
  // CLONE_PIDFD hands back the pidfd atomically: opening it afterwards would
  // race with a host that ignores SIGCHLD (the kernel reaps at once, and the
  // pid could even be reused).
  int pidfd = -1;
  pid_t pid;
  bool with_pidfd = spec.use_pidfd;
  int refusal = 0;
  for (;;) {
    const int flags = CLONE_VM | CLONE_VFORK | SIGCHLD | (with_pidfd ? CLONE_PIDFD : 0);
    int error = 0;
    {
      AllSignalsBlocked blocked;
      pid = ::clone(child_main, stack.get() + child_stack_bytes, flags, &setup, &pidfd);
      error = errno;
    }
    if (pid >= 0) break;
    // A seccomp filter or an emulator refusing the flag: no child exists, so
    // starting it again without the flag loses nothing.
    if (with_pidfd && spec.pidfd_optional && (error == EINVAL || error == ENOSYS || error == EPERM)) {
      with_pidfd = false;
      refusal = error;
      continue;
    }
    throw SystemError(with_pidfd ? "clone with CLONE_PIDFD (Linux >= 5.3; a seccomp filter or qemu-user may refuse "
                                   "it: process tracking 'sigchld' does without)"
                                 : "clone",
                      error);
  }
  UniqueFd pidfd_owner(with_pidfd ? pidfd : -1);
  if (!spec.new_session) ::setpgid(pid, pid);  // may fail harmlessly: the child already did it and exec'd

  out_write.reset();
  report_write.reset();
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(report_read.get(), &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    const char* step = failure.step == 0   ? "cannot enter work directory"
                       : failure.step == 1 ? "cannot execute"
                                           : "cannot set up stdio for";
    std::string reason = ::strerror(failure.error);
    if (failure.step == 1 && failure.error == EACCES) {
      // execve says EACCES for a directory too: say what it really is.
      const std::string path =
          (*executable)[0] == '/' || spec.work_dir.empty() ? *executable : spec.work_dir + "/" + *executable;
      struct stat st{};
      if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) reason = "it is a directory";
    }
    std::string target = failure.step == 0 ? spec.work_dir : *executable;
    throw SpawnError(rank, command, failure.error,
                     fmt::format("{}: {} '{}': {}", process_name(ProcessRole::rank, rank), step, target, reason));
  }

  ChildProcess child(pid, std::move(pidfd_owner), std::move(out_read));
  child.pidfd_refusal_ = refusal;
  return child;
}

namespace {

// The entries of /proc/self/task, one per thread; 0 without /proc.
int thread_count() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  int threads = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++threads;
  }
  ::closedir(dir);
  return threads;
}

// The copy's side of fork_call(): what execve would have given a new program.
[[noreturn]] void run_forked(int (*entry)(int), int pass_fd, int dev_null, int fd_limit, const char* name) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN) continue;
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  ::setsid();
  if (::dup2(dev_null, STDIN_FILENO) < 0 || ::dup2(pass_fd, 3) < 0) ::_exit(2);
  // The parent's other descriptors (its end of the socket pair above all)
  // must not stay open here: fork keeps close-on-exec ones too.
  if (::syscall(SYS_close_range, 4U, ~0U, 0U) != 0) {
    for (int fd = 4; fd < fd_limit; ++fd) ::close(fd);
  }
  ::prctl(PR_SET_NAME, name);
  detail::rename_command_line(name);
  int status = 2;  // also when `entry` throws: a program's uncaught exception would abort
  try {
    status = entry(3);
  } catch (...) {
    status = 2;
  }
  std::fflush(nullptr);
  ::_exit(status);
}

}  // namespace

ChildProcess ChildProcess::fork_call(int (*entry)(int), int pass_fd, const char* name) {
  if (thread_count() > 1) throw std::logic_error("ChildProcess::fork_call from a process with more than one thread");
  // Above 3, so that the copy's dup2 onto 0 and 3 overwrites neither.
  const UniqueFd pass = high_copy(pass_fd, 4);
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null) throw SystemError("open /dev/null", errno);
  dev_null = high_copy(dev_null.get(), 4);
  const int fd_limit = descriptor_limit();
  std::fflush(nullptr);  // else what stdio holds would be written twice
  pid_t pid;
  {
    AllSignalsBlocked blocked;  // no handler of ours runs in the copy before its reset
    pid = ::fork();
    if (pid == 0) run_forked(entry, pass.get(), dev_null.get(), fd_limit, name);
  }
  if (pid < 0) throw SystemError("fork", errno);
  return ChildProcess(pid, UniqueFd(), UniqueFd());
}

ChildProcess::ChildProcess(pid_t pid, UniqueFd pidfd, UniqueFd output_fd) noexcept
    : pid_(pid), pidfd_(std::move(pidfd)), output_fd_(std::move(output_fd)) {}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::move(other.pidfd_)),
      output_fd_(std::move(other.output_fd_)),
      pidfd_refusal_(other.pidfd_refusal_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::move(other.pidfd_);
    output_fd_ = std::move(other.output_fd_);
    pidfd_refusal_ = other.pidfd_refusal_;
  }
  return *this;
}

ChildProcess::~ChildProcess() { kill_and_reap(); }

void ChildProcess::kill_and_reap() noexcept {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);  // in case it left its group
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED) < 0 && errno == EINTR) {}
    pid_ = -1;
  }
  pidfd_.reset();
  output_fd_.reset();
}

bool ChildProcess::signal_group(int signal) noexcept {
  if (pid_ <= 0) return false;
  const bool group = ::kill(-pid_, signal) == 0;
  // Not reaped, so the pid is still this process (a zombie included). Only
  // when it left its group: a process still in it already got the signal once.
  if (::getpgid(pid_) != pid_) return ::kill(pid_, signal) == 0 || group;
  return group;
}

std::optional<ExitStatus> ChildProcess::try_reap() {
  if (pid_ <= 0) return std::nullopt;
  siginfo_t info{};
  int rc;
  do {
    rc = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0) {
    // ECHILD: the host set SIGCHLD to SIG_IGN (auto-reaping), so the status is
    // lost. Report it as unknown rather than inventing a success.
    if (errno != ECHILD) throw SystemError(fmt::format("waitid {}", pid_), errno);
    pid_ = -1;
    pidfd_.reset();
    return ExitStatus{ExitStatus::Kind::unknown, 0};
  }
  if (info.si_pid == 0) return std::nullopt;  // still running
  pid_ = -1;
  pidfd_.reset();
  if (info.si_code == CLD_EXITED) return ExitStatus{ExitStatus::Kind::exited, info.si_status};
  return ExitStatus{ExitStatus::Kind::signaled, info.si_status};
}

ExitStatus ChildProcess::reap() {
  if (pid_ <= 0) throw std::logic_error("ChildProcess::reap: already reaped");
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0) {
    if (errno == EINTR) continue;
    if (errno == ECHILD) break;  // auto-reaped: try_reap() reports it as unknown
    throw SystemError(fmt::format("waitid {}", pid_), errno);
  }
  auto status = try_reap();
  return status ? *status : ExitStatus{ExitStatus::Kind::unknown, 0};
}

}  // namespace davincirun
