#include "detail/job_host.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "davincirun/console_sink.hpp"
#include "davincirun/device_lock.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/supervisor.hpp"
#include "detail/descendants.hpp"
#include "detail/job_protocol.hpp"
#include "detail/job_summary.hpp"
#include "detail/private_file.hpp"
#include "detail/unique_fd.hpp"

namespace davincirun::detail {

namespace {

void make_dirs(const std::string& path) {
  // mkdir -p: each missing component with mode 0755 (umask applies).
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string part = path.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      throw ConfigError(fmt::format("cannot create log directory '{}': {}", part, std::strerror(errno)));
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw ConfigError(fmt::format("log directory '{}' is not a directory", path));
  }
}

std::string make_run_dir(const std::string& log_dir, const std::string& job_id) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  const std::string base = fmt::format("{}/{}-{}", log_dir, stamp, job_id);
  // A new run never reuses a directory: mkdir fails on an existing one.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::string dir = attempt == 0 ? base : fmt::format("{}.{}", base, attempt);
    if (::mkdir(dir.c_str(), 0700) == 0) return dir;
    if (errno != EEXIST) {
      throw ConfigError(fmt::format("cannot create run directory '{}': {}", dir, std::strerror(errno)));
    }
  }
  throw ConfigError(fmt::format("cannot create a new run directory next to '{}'", base));
}

// <log_dir>/latest → the newest run, for `tail -f log/latest/rank_0...`.
// Best effort: replaced atomically, never when `latest` is not a symlink.
void point_latest(const std::string& log_dir, const std::string& run_dir) {
  const std::string latest = log_dir + "/latest";
  struct stat st {};
  if (::lstat(latest.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) return;
  const std::string tmp = fmt::format("{}/.latest.{}", log_dir, ::getpid());
  ::unlink(tmp.c_str());
  const std::string target = run_dir.substr(run_dir.rfind('/') + 1);
  if (::symlink(target.c_str(), tmp.c_str()) == 0 && ::rename(tmp.c_str(), latest.c_str()) != 0) {
    ::unlink(tmp.c_str());
  }
}

// The one writer of the lifeline socket: frames from the main thread and
// from the console's writer thread never interleave. Once the launcher is
// gone, everything is dropped quietly.
class Lifeline {
 public:
  explicit Lifeline(int fd) : fd_(fd) {}
  void send(Frame type, std::string_view payload) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) return;
    try {
      broken_ = !write_frame(fd_, type, payload);
    } catch (const SystemError&) {
      broken_ = true;
    }
  }

 private:
  int fd_;
  std::mutex mutex_;
  bool broken_ = false;
};

class RelaySink final : public LineSink {
 public:
  explicit RelaySink(Lifeline& lifeline) : lifeline_(lifeline) {}
  void write(std::string_view lines) override { lifeline_.send(Frame::lines, lines); }
  void notice(std::string_view lines) override { lifeline_.send(Frame::notice, lines); }
  void progress(std::string_view label, std::string_view text) override {
    lifeline_.send(Frame::progress, detail::encode_progress(label, text));
  }
  void rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) override {
    lifeline_.send(Frame::rank_exited, detail::encode_rank_exited({index, status, stopped_by_launcher}));
  }
  bool wants_progress() const noexcept override { return true; }

 private:
  Lifeline& lifeline_;
};

// Reads the launcher's commands, and this process's own stop signals, on a
// thread of its own while the main thread runs the job.
class CommandListener {
 public:
  CommandListener(int lifeline_fd, std::string already_read, Supervisor& supervisor, LineSink& console)
      : fd_(lifeline_fd), supervisor_(supervisor), console_(console) {
    sigset_t stops;
    sigemptyset(&stops);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
    signals_.reset(::signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK));
    done_.reset(::eventfd(0, EFD_CLOEXEC));
    if (!signals_ || !done_) throw SystemError("signalfd/eventfd", errno);
    for (char c : already_read) handle(c);
    thread_ = std::thread([this] { run(); });
  }
  ~CommandListener() {
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(done_.get(), &one, sizeof one);
    (void)ignored;
    thread_.join();
  }
  CommandListener(const CommandListener&) = delete;
  CommandListener& operator=(const CommandListener&) = delete;

 private:
  void handle(char c) {
    if (expect_signal_) {
      expect_signal_ = false;
      supervisor_.forward_signal(static_cast<unsigned char>(c));
    } else if (c == command_stop) {
      supervisor_.request_stop();
    } else if (c == command_kill) {
      supervisor_.request_kill();
    } else if (c == command_drop) {
      supervisor_.request_kill_dropped();
    } else if (c == command_forward) {
      expect_signal_ = true;
    }
  }

  void run() {
    bool lifeline_open = true;
    for (;;) {
      pollfd fds[3] = {{done_.get(), POLLIN, 0}, {signals_.get(), POLLIN, 0}, {lifeline_open ? fd_ : -1, POLLIN, 0}};
      if (::poll(fds, 3, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents) {
        signalfd_siginfo info{};
        while (::read(signals_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
          const int signo = static_cast<int>(info.ssi_signo);
          console_.notice(fmt::format("[davincirun] the job supervisor got signal {} (SIG{}): stopping every rank\n",
                                      signo, ::sigabbrev_np(signo) ? ::sigabbrev_np(signo) : "?"));
          supervisor_.request_stop_by_signal(signo);
        }
      }
      if (lifeline_open && fds[2].revents) {
        char buf[256];
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) {
          for (ssize_t i = 0; i < n; ++i) handle(buf[i]);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          // The launcher exited or was killed: nobody is left to stop the
          // job, so stop it now, gracefully (SIGTERM, then SIGKILL after
          // the grace period).
          lifeline_open = false;
          console_.notice("[davincirun] the launcher is gone: stopping the job\n");
          supervisor_.request_stop();
        }
      }
    }
  }

  int fd_;
  Supervisor& supervisor_;
  LineSink& console_;
  UniqueFd signals_;
  UniqueFd done_;
  bool expect_signal_ = false;
  std::thread thread_;
};

// 128 random bits, hex: marks every process of this job (DAVINCIRUN_JOB_TAG),
// so the launcher can still find them should this process be killed.
std::string random_tag() {
  unsigned char bytes[16] = {};
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("getrandom", errno);
    got += static_cast<std::size_t>(n);
  }
  std::string out;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

enum class StdoutKind { file, null, other };

StdoutKind classify_stdout() {
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0) return StdoutKind::other;
  if (S_ISREG(st.st_mode)) return StdoutKind::file;
  struct stat null_st {};
  if (S_ISCHR(st.st_mode) && ::stat("/dev/null", &null_st) == 0 && st.st_rdev == null_st.st_rdev) {
    return StdoutKind::null;
  }
  return StdoutKind::other;
}

void block_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, sig);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  // A console that went away (EPIPE) or a log file over RLIMIT_FSIZE
  // (EFBIG) is an error to report, never a reason to die.
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
}

}  // namespace

int run_job_host(int lifeline_fd) {
  block_signals();
  // Orphans anywhere below this process come back to it instead of init:
  // that is what lets the final sweep find a double-forked daemon.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  FrameReader reader(lifeline_fd);
  Frame type{};
  std::string payload;
  JobSpec spec;
  try {
    if (!reader.next(type, payload) || type != Frame::spec) return 2;
    spec = decode_spec(payload);
  } catch (const std::exception&) {
    return 2;
  }
  spec.supervisor.owns_all_children = true;
  // Runs last, at every return: after the ranks and their descendants are gone.
  struct RemoveAfterJob {
    const std::vector<std::string>& paths;
    ~RemoveAfterJob() {
      for (const auto& path : paths) {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);  // removes symlinks, never follows them
      }
    }
  } remove_after_job{spec.remove_after_job};
  const std::string tag = random_tag();

  Lifeline lifeline(lifeline_fd);
  const StdoutKind stdout_kind = classify_stdout();
  // Lines to stdout unless it is /dev/null; notices to stderr. Prefixes in
  // colour on a terminal, unless NO_COLOR is set (https://no-color.org).
  const char* no_colour = std::getenv("NO_COLOR");
  const bool colour = no_colour == nullptr || *no_colour == '\0';
  // A terminal also gets the ranks' progress bars in a status line.
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  FdLineSink stdio(stdout_kind == StdoutKind::null ? -1 : STDOUT_FILENO, STDERR_FILENO, colour && terminal,
                   colour && ::isatty(STDERR_FILENO) == 1, terminal);
  RelaySink relay(lifeline);
  NullLineSink null_sink;
  // A console that falls behind (a terminal or pipe nobody reads) must never
  // slow the ranks, so it is fed through a bounded queue that skips lines.
  // A regular file is written directly, like the log files: it never "stops
  // reading", and `davincirun ... > out.txt` must get every line.
  std::optional<NonBlockingSink> queued;
  if (spec.console == ConsoleRoute::stdio && stdout_kind == StdoutKind::other) queued.emplace(stdio);
  if (spec.console == ConsoleRoute::relay) queued.emplace(relay);
  LineSink& console = queued                                 ? static_cast<LineSink&>(*queued)
                      : spec.console == ConsoleRoute::stdio ? static_cast<LineSink&>(stdio)
                                                             : null_sink;

  // Held until this process exits, after every rank and everything they
  // started is gone; the kernel releases them if it dies.
  std::optional<DeviceLocks> locks;
  std::string run_dir;
  std::string table_copy;
  std::vector<std::string> log_paths;
  std::unique_ptr<Supervisor> supervisor;
  try {
    // First: a job refused because another one holds a device leaves
    // nothing behind, not even a log directory.
    if (!spec.device_lock_dir.empty()) {
      std::vector<int> devices;
      for (const RankAssignment& a : spec.ranks) devices.push_back(a.physical_device_id);
      locks.emplace(spec.device_lock_dir, devices, DeviceLockHolder{spec.job_id, spec.command});
    }
    make_dirs(spec.log_dir);
    run_dir = make_run_dir(spec.log_dir, spec.job_id);
    // The ranks read a copy the job owns: strictly formatted for HCCL, and
    // immune to a platform rewriting its own file in place mid-job.
    table_copy = run_dir + "/rank_table.json";
    try {
      write_private_file(table_copy, spec.rank_table_json + "\n", "create rank table " + table_copy);
    } catch (const SystemError& e) {
      // Typically a full disk: the log directory cannot hold this run.
      throw ConfigError(fmt::format("cannot write the ranks' rank table '{}' in the log directory: {}", table_copy,
                                    std::strerror(e.os_errno())));
    }

    std::vector<RankLaunch> launches;
    for (std::size_t i = 0; i < spec.ranks.size(); ++i) {
      const RankAssignment& a = spec.ranks[i];
      RankLaunch launch;
      launch.rank = a.rank;
      launch.label = fmt::format("rank {}", a.rank);
      launch.log_path = fmt::format("{}/rank_{}.device_{}.log", run_dir, a.rank, a.physical_device_id);
      log_paths.push_back(launch.log_path);
      launch.show_on_console = i >= spec.show_on_console.size() || spec.show_on_console[i];
      launch.process.argv = spec.command;
      Environment env(spec.environments[i]);
      env.set("RANK_TABLE_FILE", table_copy);
      env.set("DAVINCIRUN_JOB_TAG", tag);
      launch.process.env = env.entries();
      launch.process.work_dir = spec.work_dir;
      launches.push_back(std::move(launch));
    }
    supervisor = std::make_unique<Supervisor>(std::move(launches), spec.supervisor, console);
  } catch (const std::exception& e) {
    // Ranks started before the failure were killed; anything they started
    // goes too. A job that never ran leaves no run directory behind: only
    // what this process created in it is removed, the directory only if empty.
    kill_all_descendants(std::chrono::seconds(5));
    if (!run_dir.empty()) {
      for (const auto& path : log_paths) ::unlink(path.c_str());
      if (!table_copy.empty()) ::unlink(table_copy.c_str());
      ::rmdir(run_dir.c_str());
    }
    queued.reset();
    lifeline.send(Frame::error, encode_error(e));
    return 1;
  }
  point_latest(spec.log_dir, run_dir);
  lifeline.send(Frame::started, encode_started({run_dir, tag, supervisor->pids(), supervisor->tracking()}));

  JobResult result;
  try {
    CommandListener listener(lifeline_fd, reader.take_buffered(), *supervisor, console);
    result = supervisor->run();
  } catch (const std::exception& e) {
    // The event loop itself failed (epoll, signalfd): nothing to recover;
    // end everything the job started and say why.
    supervisor.reset();  // kills and reaps the ranks
    kill_all_descendants(std::chrono::seconds(5));
    queued.reset();
    lifeline.send(Frame::error, encode_error(e));
    return 1;
  }
  const std::string summary = run_dir + "/summary.json";
  try {
    write_job_summary(summary, spec, table_copy, result);
  } catch (const SystemError& e) {
    result.summary_error = std::strerror(e.os_errno());
  } catch (const std::exception& e) {
    result.summary_error = e.what();
  }
  if (result.summary_error) {
    // The job's own outcome stands: the missing summary is reported beside it.
    console.notice(fmt::format("[davincirun] cannot write the job summary {}: {}\n", summary, *result.summary_error));
  }
  queued.reset();  // every line reaches the launcher before the result
  lifeline.send(Frame::result, encode_result(result));
  return 0;
}

}  // namespace davincirun::detail
