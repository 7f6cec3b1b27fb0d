#include "lifeline.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "davincirun/errors.hpp"
#include "job/job_protocol.hpp"

namespace davincirun::detail {

void Lifeline::send(Frame type, std::string_view head, std::string_view body) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_) return;
  try {
    broken_ = !write_frame(fd_, type, head, body);
  } catch (const SystemError&) {
    broken_ = true;
  }
}

void RelaySink::write(std::size_t index, std::string_view lines) {
  lifeline_.send(Frame::lines, encode_lines_head(index), lines);
}

void RelaySink::notice(std::string_view lines) { lifeline_.send(Frame::notice, lines); }

void RelaySink::progress(std::size_t index, std::string_view text) {
  lifeline_.send(Frame::progress, encode_progress(index, text));
}

void RelaySink::rank_exited(std::size_t index, ExitStatus status, bool stopped_by_launcher) {
  lifeline_.send(Frame::rank_exited, encode_rank_exited({index, status, stopped_by_launcher}));
}

void RelaySink::ranks_status(const std::vector<RankStatus>& statuses) {
  lifeline_.send(Frame::status, encode_status(statuses));
}

void RelaySink::attempt_started(int attempt, const std::vector<pid_t>& pids) {
  lifeline_.send(Frame::attempt, encode_attempt({attempt, pids}));
}

CommandListener::CommandListener(int lifeline_fd, const std::string& already_read, Supervisor& supervisor)
    : fd_(lifeline_fd), supervisor_(supervisor) {
  sigset_t stops;
  sigemptyset(&stops);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
  signals_.reset(::signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals_) throw SystemError("signalfd", errno);
  for (const char c : already_read) handle(c);
  supervisor_.watch_readable(signals_.get(), [this] { return read_signals(); });
  supervisor_.watch_readable(fd_, [this] { return read_lifeline(); });
}

void CommandListener::handle(char c) {
  partial_ += c;
  if (partial_.size() < 1 + command_argument_bytes(partial_[0])) return;
  const std::string command = std::move(partial_);
  partial_.clear();
  run_command(command);
}

void CommandListener::run_command(const std::string& command) {
  switch (command[0]) {
    case command_stop: supervisor_.request_stop(); break;
    case command_kill: supervisor_.request_kill(); break;
    case command_drop: supervisor_.request_kill_dropped(); break;
    case command_forward: supervisor_.forward_signal(static_cast<unsigned char>(command[1])); break;
    case command_stop_by_signal: {
      std::uint32_t pid = 0;
      for (std::size_t i = 0; i < 4; ++i) pid |= std::uint32_t{static_cast<unsigned char>(command[2 + i])} << (8 * i);
      SignalOrigin origin;
      origin.receiver = SignalReceiver::launcher;
      origin.sender_pid = static_cast<pid_t>(pid);
      supervisor_.request_stop_by_signal(static_cast<unsigned char>(command[1]), origin);
      break;
    }
    default: break;  // both ends are one build: cannot happen
  }
}

bool CommandListener::read_signals() {
  signalfd_siginfo info{};
  while (::read(signals_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    SignalOrigin origin;
    origin.receiver = SignalReceiver::supervisor;
    origin.sender_pid = static_cast<pid_t>(info.ssi_pid);
    supervisor_.request_stop_by_signal(static_cast<int>(info.ssi_signo), origin);
  }
  return true;
}

bool CommandListener::read_lifeline() {
  char buf[256];
  // MSG_DONTWAIT: the socket itself blocks (the frames out are written whole).
  const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) handle(buf[i]);
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  // The launcher exited or was killed: nobody is left to stop the job, so
  // stop it now, gracefully (SIGTERM, then SIGKILL after the grace period).
  supervisor_.request_stop_orphaned();
  return false;
}

bool stop_arrived(int lifeline_fd, int wait_ms) {
  pollfd p{lifeline_fd, POLLIN, 0};
  if (::poll(&p, 1, wait_ms) > 0) return true;
  sigset_t pending;
  ::sigpending(&pending);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    if (sigismember(&pending, sig) == 1) return true;
  }
  return false;
}

}  // namespace davincirun::detail
