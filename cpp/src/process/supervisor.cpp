#include "davincirun/supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "process/descendants.hpp"
#include "process/fd_limit.hpp"
#include "process/stop_notice.hpp"
#include "process/tracking.hpp"

namespace davincirun {

namespace {

using Clock = std::chrono::steady_clock;

// epoll user data: the rank index and what became ready.
enum class Source : std::uint64_t { exit = 0, output = 1, stop = 2, forward = 3, children = 4 };
constexpr int source_bits = 3;
std::uint64_t tag(std::size_t index, Source source) {
  return (static_cast<std::uint64_t>(index) << source_bits) | static_cast<std::uint64_t>(source);
}
Source source_of(std::uint64_t data) { return static_cast<Source>(data & ((1U << source_bits) - 1)); }
std::size_t index_of(std::uint64_t data) { return static_cast<std::size_t>(data >> source_bits); }

// Descendants the ranks left behind are SIGKILLed within this time.
constexpr std::chrono::milliseconds sweep_budget{5'000};

// Bytes read from one pipe before the loop serves the others: fairness
// between ranks when one floods its output.
constexpr std::size_t read_budget = 1 << 20;
// After a rank exits, read at most this much more at once before its verdict:
// what it wrote itself is already in the pipe (at most the pipe capacity).
constexpr std::size_t exit_drain_budget = 16 << 20;

// Output coalescing. Woken for every write, the loop would move a flood
// 8 KiB at a time (Python's buffer), a wake-up and a system call each. After
// a round that moved at least `busy_round_bytes`, it waits `coalesce_ms` for
// the pipes to fill, watching only exits, stop requests and signals, which
// still wake it at once. Lines stay live: 2 ms is far below what anyone sees.
constexpr std::uint64_t busy_round_bytes = 64 << 10;
constexpr int coalesce_ms = 2;
// Pipe capacity asked for each rank's output (F_SETPIPE_SZ), so that writers
// go on while the loop waits: 1 MiB (the unprivileged maximum,
// /proc/sys/fs/pipe-max-size), shared from a budget of 16 MiB for the whole
// job; never below the 64 KiB default. The kernel counts capacity against a
// per-user total (/proc/sys/fs/pipe-user-pages-soft, 64 MiB by default).
constexpr std::size_t pipe_budget_bytes = 16 << 20;
constexpr std::size_t max_pipe_bytes = 1 << 20;
constexpr std::size_t default_pipe_bytes = 64 << 10;

std::size_t pipe_bytes_for(std::size_t ranks) {
  std::size_t bytes = max_pipe_bytes;
  while (bytes > default_pipe_bytes && bytes * ranks > pipe_budget_bytes) bytes /= 2;
  return bytes;
}

}  // namespace

struct Supervisor::Rank {
  ChildProcess child;
  RankLog log;
  RankResult result;
  bool exited = false;
  std::optional<Clock::time_point> drain_deadline;
};

namespace {

template <typename Ranks>
std::vector<detail::RunningRank> running_ranks(const Ranks& ranks) {
  std::vector<detail::RunningRank> running;
  for (const auto& r : ranks) {
    if (!r.exited) running.push_back({r.result.role, r.result.rank, r.result.pid});
  }
  return running;
}

}  // namespace

Supervisor::Supervisor(std::vector<RankLaunch> launches, SupervisorOptions options, LineSink& console)
    : options_(std::move(options)), console_(&console), scratch_() {
  tracking_ = detail::resolve_tracking(options_);
  const bool may_fall_back = detail::may_fall_back_to_sigchld(options_, tracking_);
  if (options_.owns_all_children) {
    child_subreaper_ = detail::is_child_subreaper();
    sigset_t mask;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    if (!sigismember(&mask, SIGCHLD)) {
      throw ConfigError("owns_all_children needs SIGCHLD blocked in every thread of the process");
    }
  }
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  control_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_ || !control_fd_) throw SystemError("epoll_create1", errno);
  stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  signal_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_ || !signal_fd_) throw SystemError("eventfd", errno);
  watch(stop_fd_.get(), tag(0, Source::stop));
  watch(signal_fd_.get(), tag(0, Source::forward));
  if (options_.owns_all_children) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    child_fd_.reset(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!child_fd_) throw SystemError("signalfd", errno);
    watch(child_fd_.get(), tag(0, Source::children));
  }
  // A rank that cannot start throws; ranks_ then kills and reaps those
  // already started (each ChildProcess does its own group).
  // Before the first rank: a job the limit cannot hold never starts.
  detail::make_room_for_ranks(launches.size());
  ranks_.reserve(launches.size());
  const std::size_t pipe_bytes = pipe_bytes_for(launches.size());
  for (auto& launch : launches) {
    const auto started = std::chrono::system_clock::now();
    launch.process.use_pidfd = tracking_ == ProcessTracking::pidfd;
    // Decided once, by the first rank: when clone() refuses CLONE_PIDFD, no
    // rank runs yet, and every rank is then tracked by SIGCHLD.
    launch.process.pidfd_optional = may_fall_back && ranks_.empty();
    ChildProcess child = ChildProcess::spawn(launch.process, launch.rank);
    if (child.pidfd_refusal() != 0) {
      tracking_ = ProcessTracking::sigchld;
      tracking_fallback_ = detail::tracking_fallback_reason(child.pidfd_refusal());
    }
    const std::size_t index = ranks_.size();
    RankLog log(index, launch.label, child.release_output_fd(), launch.log_path,
                launch.show_on_console ? *console_ : hidden_);
    RankResult result;
    result.role = launch.role;
    result.rank = launch.rank;
    result.pid = child.pid();
    result.log_path = launch.log_path;
    result.started = started;
    ranks_.push_back(Rank{std::move(child), std::move(log), std::move(result), false, std::nullopt});
    if (tracking_ == ProcessTracking::pidfd) watch(ranks_[index].child.pidfd(), tag(index, Source::exit));
    watch(ranks_[index].log.pipe_fd(), tag(index, Source::output));
    // Best effort: a refusal (the per-user total is spent) keeps the default.
    if (pipe_bytes > default_pipe_bytes)
      ::fcntl(ranks_[index].log.pipe_fd(), F_SETPIPE_SZ, static_cast<int>(pipe_bytes));
    rank_by_pid_.emplace(ranks_[index].result.pid, index);
    ++live_ranks_;
    ++open_logs_;
  }
}

Supervisor::~Supervisor() = default;

void Supervisor::watch(int fd, std::uint64_t data) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = data;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw SystemError("epoll_ctl", errno);
  if (source_of(data) != Source::output && ::epoll_ctl(control_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    throw SystemError("epoll_ctl", errno);
  }
}

void Supervisor::unwatch(int fd) {
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  ::epoll_ctl(control_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);  // ENOENT for an output pipe
}

std::vector<pid_t> Supervisor::pids() const {
  std::vector<pid_t> out;
  for (const auto& r : ranks_) out.push_back(r.result.pid);
  return out;
}

void Supervisor::forward_signal(int signal) noexcept {
  if (signal <= 0 || signal >= 32) return;
  signals_to_forward_.fetch_or(std::uint32_t{1} << signal);
  const std::uint64_t one = 1;
  ssize_t ignored = ::write(signal_fd_.get(), &one, sizeof one);
  (void)ignored;
}

void Supervisor::forward_pending_signals() {
  std::uint64_t count = 0;
  ssize_t ignored = ::read(signal_fd_.get(), &count, sizeof count);
  (void)ignored;
  const std::uint32_t pending = signals_to_forward_.exchange(0);
  for (int sig = 1; sig < 32; ++sig) {
    if ((pending & (std::uint32_t{1} << sig)) == 0) continue;
    for (Rank& r : ranks_) {
      if (!r.exited) r.child.signal_group(sig);
    }
  }
}

JobResult Supervisor::run() {
  run_started_ = Clock::now();
  if (options_.job_timeout.count() > 0) job_deadline_ = Clock::now() + options_.job_timeout;
  std::array<epoll_event, 64> events{};
  std::uint64_t round_bytes = 0;
  while (live_ranks_ > 0 || open_logs_ > 0) {
    if (round_bytes >= busy_round_bytes && stop_reason_ == StopReason::none) {
      const int next = next_timeout_ms();
      const int wait = next < 0 ? coalesce_ms : std::min(coalesce_ms, next);
      epoll_event control{};
      if (::epoll_wait(control_fd_.get(), &control, 1, wait) < 0 && errno != EINTR) {
        throw SystemError("epoll_wait", errno);
      }
    }
    round_bytes = 0;
    int n = ::epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SystemError("epoll_wait", errno);
    }
    // Output before exits, so a rank's last words precede the verdict on it.
    for (int i = 0; i < n; ++i) {
      const std::uint64_t data = events[static_cast<std::size_t>(i)].data.u64;
      if (source_of(data) == Source::output) round_bytes += handle_output(index_of(data));
    }
    for (int i = 0; i < n; ++i) {
      const std::uint64_t data = events[static_cast<std::size_t>(i)].data.u64;
      switch (source_of(data)) {
        case Source::exit:
          handle_exit(index_of(data));
          if (child_fd_) reap_children();  // orphans that exited behind this rank
          break;
        case Source::children: reap_children(); break;
        case Source::stop: handle_stop_requests(); break;
        case Source::forward:
          forward_pending_signals();
          flush_posted_notices();
          break;
        case Source::output: break;
      }
    }
    check_deadlines();
    if (options_.owns_all_children && !swept_ && live_ranks_ == 0) sweep_descendants();
  }

  JobResult result;
  result.stop_reason = stop_reason_;
  if (stop_reason_ == StopReason::peer_failed || stop_reason_ == StopReason::peer_lost ||
      stop_reason_ == StopReason::stalled) {
    const std::lock_guard<std::mutex> lock(peer_mutex_);
    result.peer_stop = peer_stop_;
  }
  if (stop_reason_ == StopReason::signaled) result.stop_signal = stop_signal_.load();
  result.first_failure = first_failure_;
  result.leftover_processes_killed = leftovers_killed_;
  result.tracking = tracking_;
  result.tracking_fallback = tracking_fallback_;
  result.child_subreaper = child_subreaper_;
  for (const auto& r : ranks_) result.ranks.push_back(r.result);
  return result;
}

std::uint64_t Supervisor::handle_output(std::size_t index) {
  Rank& r = ranks_[index];
  if (!r.log.open()) return 0;
  last_output_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(),
                        std::memory_order_relaxed);
  const std::uint64_t before = r.log.bytes();
  if (r.log.read_available(scratch_, read_budget) == RankLog::ReadResult::eof) close_output(index);
  return r.log.bytes() - before;
}

void Supervisor::close_output(std::size_t index) {
  Rank& r = ranks_[index];
  if (!r.log.open()) return;
  unwatch(r.log.pipe_fd());
  r.log.finish();
  --open_logs_;
  if (r.exited) --draining_;
  r.result.output_bytes = r.log.bytes();
  r.result.log_error = r.log.file_error();
  if (r.result.log_error) {
    log_notice(fmt::format("{}: log file {} is incomplete: {}", process_name(r.result.role, r.result.rank),
                           r.log.log_path(), *r.result.log_error));
  }
}

void Supervisor::handle_exit(std::size_t index) {
  Rank& r = ranks_[index];
  if (r.exited) return;
  // Everything the rank wrote before exiting is in the pipe now: take it.
  if (r.log.open() &&
      r.log.read_available(scratch_, exit_drain_budget, RankLog::Drain::to_the_end) == RankLog::ReadResult::eof) {
    close_output(index);
  }
  // Leftovers in the rank's process group would hold the NPU: end them while
  // the group id is still reserved by the unreaped leader.
  r.child.signal_group(SIGKILL);
  if (r.child.pidfd() >= 0) unwatch(r.child.pidfd());
  std::optional<ExitStatus> status = r.child.try_reap();
  if (!status) {
    // The pidfd said it exited; waitid disagrees. Cannot happen on Linux,
    // but never spin: treat the status as unknown.
    status = ExitStatus{ExitStatus::Kind::unknown, 0};
  }
  r.exited = true;
  --live_ranks_;
  r.result.status = *status;
  // It may have died of the SIGTERM just before the SIGKILL was sent.
  if (r.result.killed_by_launcher && !(status->kind == ExitStatus::Kind::signaled && status->value == SIGKILL)) {
    r.result.killed_by_launcher = false;
  }
  r.result.ended = std::chrono::system_clock::now();
  if (r.log.open()) {
    r.drain_deadline = Clock::now() + options_.drain_timeout;
    ++draining_;
  }
  console_->rank_exited(index, *status, r.result.terminated_by_launcher);

  if (!status->success() && !r.result.terminated_by_launcher && stop_reason_ == StopReason::none) {
    first_failure_ = index;
    begin_stop(StopReason::rank_failed, index,
               fmt::format("{} (pid {}) failed with {}", process_name(r.result.role, r.result.rank), r.result.pid,
                           status->describe()));
  }
}

void Supervisor::reap_children() {
  signalfd_siginfo info[16];
  while (::read(child_fd_.get(), info, sizeof info) > 0) {}
  // Peek at each exited child without reaping it (WNOWAIT): a rank goes
  // through handle_exit(), which drains its output and reaps it; anything
  // else is a descendant re-parented to this process, reaped here.
  for (;;) {
    siginfo_t peek{};
    if (::waitid(P_ALL, 0, &peek, WEXITED | WNOHANG | WNOWAIT) < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: no children at all
    }
    if (peek.si_pid == 0) return;  // none has exited
    std::optional<std::size_t> rank;
    if (const auto found = rank_by_pid_.find(peek.si_pid); found != rank_by_pid_.end()) {
      if (!ranks_[found->second].exited) rank = found->second;
    }
    if (rank) {
      // With pidfds a rank's exit comes from its pidfd, in the order the
      // ranks exited. waitid(P_ALL) lists exited children in the order they
      // were started, so taking the rank here could name a later failure
      // first; the orphans behind it are reaped once its pidfd is handled.
      if (tracking_ == ProcessTracking::pidfd) return;
      handle_exit(*rank);
    } else {
      int status = 0;
      while (::waitpid(peek.si_pid, &status, WNOHANG) < 0 && errno == EINTR) {}
    }
  }
}

void Supervisor::sweep_descendants() {
  swept_ = true;
  // Members of the ranks' own process groups were SIGKILLed with their
  // leader and may still be dying; only processes outside them count.
  std::vector<pid_t> rank_groups;
  for (const auto& r : ranks_) rank_groups.push_back(r.result.pid);
  std::size_t killed = detail::kill_all_descendants(sweep_budget, rank_groups);
  // Not a subreaper: what a rank detached went to init, beyond the walk by
  // ancestry; the job's tag in its environment still finds it.
  if (!child_subreaper_ && !options_.job_tag.empty()) {
    killed += detail::kill_tagged_processes(options_.job_tag, sweep_budget, rank_groups);
  }
  leftovers_killed_ = killed;
  if (killed > 0) {
    log_notice(fmt::format("killed {} process(es) the ranks left running (outside their process groups)", killed));
  }
}

void Supervisor::begin_stop(StopReason reason, std::optional<std::size_t> except, const std::string& why) {
  stop_ranks(reason, except, why);
  // Told once this server's SIGTERMs are out: the peer channel then reads
  // the failed rank's log for its root cause.
  const bool from_peer =
      reason == StopReason::peer_failed || reason == StopReason::peer_lost || reason == StopReason::stalled;
  if (stop_listener_ && !from_peer) stop_listener_(reason, except ? &ranks_[*except].result : nullptr, why);
}

// One notice: why, how many ranks get SIGTERM, when SIGKILL follows.
void Supervisor::stop_ranks(StopReason reason, std::optional<std::size_t> except, const std::string& why) {
  stop_reason_ = reason;
  std::size_t stopped = 0;
  bool scheduler = false;  // MindSpore's, counted apart from the ranks
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (r.exited || (except && *except == i)) continue;
    r.child.signal_group(SIGTERM);
    r.result.terminated_by_launcher = true;
    if (r.result.role == ProcessRole::scheduler) {
      scheduler = true;
    } else {
      ++stopped;
    }
  }
  if (stopped == 0 && !scheduler) {
    log_notice(why + (reason == StopReason::rank_failed ? "; no other rank is running" : ": no rank is running"));
    return;
  }
  kill_deadline_ = Clock::now() + options_.grace_period;
  if (options_.grace_period > detail::stop_report_delay) report_deadline_ = Clock::now() + detail::stop_report_delay;
  const std::string request = orphaned_.load() ? std::string() : options_.stop_request_name;
  const std::string whom = stopped == 0 ? std::string("the scheduler")
                                        : fmt::format("{} rank(s){}", stopped, scheduler ? " and the scheduler" : "");
  log_notice(fmt::format("{}{}{} (SIGTERM); {}", why,
                         reason == StopReason::rank_failed && stopped > 0 ? "; stopping the other " : ": stopping ",
                         whom, detail::kill_hint(options_.grace_period, request, reason == StopReason::requested)));
}

// The ranks that outlive SIGTERM, named once.
void Supervisor::report_still_running() {
  report_deadline_.reset();
  if (killed_all_ || !kill_deadline_) return;
  const std::vector<detail::RunningRank> running = running_ranks(ranks_);
  if (running.empty()) return;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_deadline_ - Clock::now());
  const std::string request = orphaned_.load() ? std::string() : options_.stop_request_name;
  log_notice(fmt::format(
      "still running {:g} s after SIGTERM: {}; {}", std::chrono::duration<double>(detail::stop_report_delay).count(),
      detail::describe_running(running), detail::kill_hint(left, request, stop_reason_ == StopReason::requested)));
}

void Supervisor::kill_remaining() {
  killed_all_ = true;
  for (Rank& r : ranks_) {
    if (r.exited) continue;
    r.child.signal_group(SIGKILL);
    r.result.terminated_by_launcher = true;
    r.result.killed_by_launcher = true;
  }
}

int Supervisor::next_timeout_ms() const {
  std::optional<Clock::time_point> next;
  if (job_deadline_ && stop_reason_ == StopReason::none) next = job_deadline_;
  if (kill_deadline_ && !killed_all_ && (!next || *kill_deadline_ < *next)) next = kill_deadline_;
  if (report_deadline_ && (!next || *report_deadline_ < *next)) next = report_deadline_;
  for (std::size_t i = 0; draining_ > 0 && i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    if (r.drain_deadline && r.log.open() && (!next || *r.drain_deadline < *next)) next = r.drain_deadline;
  }
  if (!next) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

void Supervisor::check_deadlines() {
  const auto now = Clock::now();
  if (job_deadline_ && stop_reason_ == StopReason::none && now >= *job_deadline_) {
    begin_stop(StopReason::timed_out, std::nullopt,
               fmt::format("the job timeout of {:.1f} s is reached",
                           std::chrono::duration<double>(options_.job_timeout).count()));
  }
  if (report_deadline_ && now >= *report_deadline_) report_still_running();
  if (kill_deadline_ && !killed_all_ && now >= *kill_deadline_) {
    if (const auto running = running_ranks(ranks_); !running.empty()) {
      log_notice(fmt::format("grace period of {:.1f} s is over: killing the ranks still running: {}",
                             std::chrono::duration<double>(options_.grace_period).count(),
                             detail::describe_running(running)));
    }
    kill_remaining();
  }
  for (std::size_t i = 0; draining_ > 0 && i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (r.drain_deadline && r.log.open() && now >= *r.drain_deadline) {
      log_notice(
          fmt::format("{}: a process that left its process group still holds its "
                      "output open; no longer reading it",
                      process_name(r.result.role, r.result.rank)));
      close_output(i);
    }
  }
}

void Supervisor::log_notice(const std::string& text) { console_->notice(notice_line(text)); }

}  // namespace davincirun
