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

#include "common/helper_thread.hpp"
#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "process/descendants.hpp"
#include "process/fd_limit.hpp"
#include "process/rank_set.hpp"
#include "process/request_inbox.hpp"
#include "process/stop_notice.hpp"
#include "process/supervisor_event.hpp"
#include "process/tracking.hpp"

namespace davincirun {

namespace {

using Clock = std::chrono::steady_clock;

// epoll user data: the rank index and what became ready.
enum class Source : std::uint64_t { exit = 0, output = 1, inbox = 2, children = 3, readable = 4 };
constexpr int source_bits = 3;
std::uint64_t tag(std::size_t index, Source source) {
  return (static_cast<std::uint64_t>(index) << source_bits) | static_cast<std::uint64_t>(source);
}
Source source_of(std::uint64_t data) { return static_cast<Source>(data & ((1U << source_bits) - 1)); }
std::size_t index_of(std::uint64_t data) { return static_cast<std::size_t>(data >> source_bits); }

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
// Not after a round that found a pipe half full or more: its writer fills
// the rest sooner than that (8 writers of 8 KiB blocks fill 1 MiB pipes in
// well under a millisecond) and would then wait on the pipe, idle, while
// the loop sleeps: a fast flood took 1.7x the shell loop that way.
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

Supervisor::Supervisor(std::vector<RankLaunch> launches, SupervisorOptions options, LineSink& console,
                       int first_attempt)
    : options_(std::move(options)),
      console_(&console),
      inbox_(std::make_unique<detail::RequestInbox>()),
      ranks_(std::make_unique<detail::RankSet>()),
      clocks_(std::make_unique<Clocks>()) {
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
  watch(inbox_->fd(), tag(0, Source::inbox));
  if (options_.owns_all_children) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    child_fd_.reset(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!child_fd_) throw SystemError("signalfd", errno);
    watch(child_fd_.get(), tag(0, Source::children));
  }
  // Before the first rank: a job the limit cannot hold never starts.
  detail::make_room_for_ranks(launches.size());
  may_fall_back_ = may_fall_back;
  attempt_ = std::max(1, first_attempt);
  spawn(std::move(launches));
}

// Starts an attempt's processes. A rank that cannot start throws; ranks_
// then kills and reaps those already started (each ChildProcess does its
// own group).
void Supervisor::spawn(std::vector<RankLaunch> launches) {
  auto& ranks = ranks_->ranks;
  ranks.reserve(launches.size());
  const std::size_t pipe_bytes = pipe_bytes_for(launches.size());
  const sigset_t changed_signals = signals_not_default();
  for (auto& launch : launches) {
    launch.process.changed_signals = changed_signals;
    const auto started = std::chrono::system_clock::now();
    launch.process.use_pidfd = tracking_ == ProcessTracking::pidfd;
    // Decided once, by the first rank of the first attempt: when clone()
    // refuses CLONE_PIDFD, no rank runs yet, and every rank is then tracked
    // by SIGCHLD.
    launch.process.pidfd_optional = may_fall_back_ && ranks.empty() && attempts_.empty();
    ChildProcess child = ChildProcess::spawn(launch.process, launch.rank);
    if (child.pidfd_refusal() != 0) {
      tracking_ = ProcessTracking::sigchld;
      tracking_fallback_ = detail::tracking_fallback_reason(child.pidfd_refusal());
    }
    const std::size_t index = ranks.size();
    RankLog log(index, launch.label, child.release_output_fd(), launch.log_path,
                launch.show_on_console ? *console_ : hidden_);
    RankResult result;
    result.role = launch.role;
    result.rank = launch.rank;
    result.pid = child.pid();
    result.log_path = launch.log_path;
    result.started = started;
    ranks.push_back(detail::RankSet::Rank{std::move(child), std::move(log), std::move(result), false, std::nullopt});
    detail::RankSet::Rank& r = ranks[index];
    if (tracking_ == ProcessTracking::pidfd) watch(r.child.pidfd(), tag(index, Source::exit));
    watch(r.log.pipe_fd(), tag(index, Source::output));
    // Best effort: a refusal (the per-user total is spent) keeps the default.
    if (pipe_bytes > default_pipe_bytes) ::fcntl(r.log.pipe_fd(), F_SETPIPE_SZ, static_cast<int>(pipe_bytes));
    ranks_->by_pid.emplace(r.result.pid, index);
    ++ranks_->live;
    ++ranks_->open_logs;
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

void Supervisor::watch_readable(int fd, std::function<bool()> on_readable) {
  readable_.emplace_back(fd, std::move(on_readable));
  watch(fd, tag(readable_.size() - 1, Source::readable));
}

void Supervisor::unwatch(int fd) {
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  ::epoll_ctl(control_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);  // ENOENT for an output pipe
}

std::vector<pid_t> Supervisor::pids() const { return ranks_->pids(); }

void Supervisor::forward_pending_signals() {
  const std::uint32_t pending = inbox_->take_forwards();
  for (int sig = 1; sig < 32; ++sig) {
    if ((pending & (std::uint32_t{1} << sig)) != 0) ranks_->signal_running(sig);
  }
}

JobResult Supervisor::run() {
  run_started_ = Clock::now();
  enter(JobState::running, Event{JobEvent::ranks_started});
  OutputRound round;
  while (state() != JobState::done) {
    wait_and_dispatch(round);
    check_clocks();
    fire_derived_events();
  }
  flush_posted_notices();
  return result();
}

// One wait of the loop and what woke it: output first, so a rank's last
// words precede the verdict on it; then exits and requests.
void Supervisor::wait_and_dispatch(OutputRound& round) {
  const bool pipe_filling = round.largest >= pipe_bytes_for(ranks_->ranks.size()) / 2;
  if (round.bytes >= busy_round_bytes && !pipe_filling && state() == JobState::running) {
    const int next = next_timeout_ms();
    const int wait = next < 0 ? coalesce_ms : std::min(coalesce_ms, next);
    epoll_event control{};
    if (::epoll_wait(control_fd_.get(), &control, 1, wait) < 0 && errno != EINTR) {
      throw SystemError("epoll_wait", errno);
    }
  }
  round = OutputRound{};
  std::array<epoll_event, 64> events{};
  const int n = ::epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
  if (n < 0) {
    if (errno == EINTR) return;
    throw SystemError("epoll_wait", errno);
  }
  ready_.clear();
  for (int i = 0; i < n; ++i) {
    const std::uint64_t data = events[static_cast<std::size_t>(i)].data.u64;
    if (source_of(data) == Source::output) ready_.push_back(index_of(data));
  }
  relay_output(round);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t data = events[static_cast<std::size_t>(i)].data.u64;
    switch (source_of(data)) {
      case Source::exit:
        handle_exit(index_of(data));
        if (child_fd_) reap_children();  // orphans that exited behind this rank
        break;
      case Source::children: reap_children(); break;
      case Source::inbox:
        forward_pending_signals();
        flush_posted_notices();
        take_requests();
        break;
      case Source::readable: {
        auto& [fd, on_readable] = readable_[index_of(data)];
        if (on_readable && !on_readable()) {
          unwatch(fd);
          on_readable = nullptr;
        }
        break;
      }
      case Source::output: break;
    }
  }
}

JobResult Supervisor::result() const {
  JobResult result;
  result.attempts = attempts_;
  // Stopped while restarting: the attempt last recorded is the last one.
  if (!restart_called_off_) result.attempts.push_back(current_attempt());
  result.stop_reason = stop_.reason;
  result.stopped_in = stop_.in;
  result.stop_detail = stop_.why;
  result.peer_stop = stop_.peer;
  if (stop_.reason == StopReason::signaled) {
    result.stop_signal = stop_.signal;
    result.stop_signal_origin = stop_.origin;
  }
  result.first_failure = stop_.first_failure;
  result.leftover_processes_killed = leftovers_killed_;  // every attempt's
  result.tracking = tracking_;
  result.tracking_fallback = tracking_fallback_;
  result.child_subreaper = child_subreaper_;
  for (const auto& r : ranks_->ranks) result.ranks.push_back(r.result);
  return result;
}

// The output of one round. Ranks whose bytes go by splice(2) are moved on
// two threads when there are several: the copy into each log's page cache
// is the relay's heaviest work, and a flood of eight writers keeps one
// thread busy while the other core waits. What follows a move (the watch's
// look at its end, an end of file) stays on this thread.
void Supervisor::relay_output(OutputRound& round) {
  auto& ranks = ranks_->ranks;
  const auto count = [&round](std::uint64_t moved) {
    round.bytes += moved;
    round.largest = std::max(round.largest, moved);
  };
  spliced_.clear();
  for (const std::size_t index : ready_) {
    if (ranks[index].log.splicing()) {
      spliced_.push_back(index);
    } else {
      count(handle_output(index));
    }
  }
  if (spliced_.size() < 2) {
    for (const std::size_t index : spliced_) count(handle_output(index));
    return;
  }
  if (!helper_) helper_ = std::make_unique<detail::HelperThread>();
  moves_.assign(spliced_.size(), RankLog::Spliced{});
  helper_->share(spliced_.size(),
                 [this, &ranks](std::size_t k) { moves_[k] = ranks[spliced_[k]].log.splice_some(read_budget); });
  note_output();
  for (std::size_t k = 0; k < spliced_.size(); ++k) {
    const std::size_t index = spliced_[k];
    RankLog& log = ranks[index].log;
    std::uint64_t moved = moves_[k].bytes;
    log.pass_spliced_end(scratch_, moved);
    if (moves_[k].result == RankLog::ReadResult::eof) {
      close_output(index);
    } else if (!log.splicing()) {
      moved += handle_output(index);  // splice refused: read(2) takes what is left
    }
    count(moved);
  }
}

void Supervisor::note_output() {
  last_output_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(),
                        std::memory_order_relaxed);
}

std::uint64_t Supervisor::handle_output(std::size_t index) {
  detail::RankSet::Rank& r = ranks_->ranks[index];
  if (!r.log.open()) return 0;
  note_output();
  const std::uint64_t before = r.log.bytes();
  if (r.log.read_available(scratch_, read_budget) == RankLog::ReadResult::eof) close_output(index);
  return r.log.bytes() - before;
}

void Supervisor::close_output(std::size_t index) {
  detail::RankSet::Rank& r = ranks_->ranks[index];
  if (!r.log.open()) return;
  unwatch(r.log.pipe_fd());
  r.log.finish();
  --ranks_->open_logs;
  if (r.exited) --ranks_->draining;
  r.result.output_bytes = r.log.bytes();
  r.result.log_error = r.log.file_error();
  if (r.result.log_error) {
    log_notice(fmt::format("{}: log file {} is incomplete: {}", process_name(r.result.role, r.result.rank),
                           r.log.log_path(), *r.result.log_error));
  }
}

void Supervisor::handle_exit(std::size_t index) {
  detail::RankSet::Rank& r = ranks_->ranks[index];
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
  --ranks_->live;
  r.result.status = *status;
  // It may have died of the SIGTERM just before the SIGKILL was sent.
  if (r.result.killed_by_launcher && !(status->kind == ExitStatus::Kind::signaled && status->value == SIGKILL)) {
    r.result.killed_by_launcher = false;
  }
  r.result.ended = std::chrono::system_clock::now();
  if (r.log.open()) {
    r.drain_deadline = Clock::now() + options_.drain_timeout;
    ++ranks_->draining;
  }
  console_->rank_exited(index, *status, r.result.terminated_by_launcher);
  Event event{status->success() || r.result.terminated_by_launcher ? JobEvent::rank_exited : JobEvent::rank_failed};
  event.rank = index;
  if (event.kind == JobEvent::rank_failed) {
    event.why = fmt::format("{} (pid {}) failed with {}", process_name(r.result.role, r.result.rank), r.result.pid,
                            status->describe());
  }
  on(event);
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
    if (const auto found = ranks_->by_pid.find(peek.si_pid); found != ranks_->by_pid.end()) {
      if (!ranks_->ranks[found->second].exited) rank = found->second;
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

}  // namespace davincirun
