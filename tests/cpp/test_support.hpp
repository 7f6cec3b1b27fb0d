// Test-only helpers shared by the process and log tests: helper paths, a
// temporary directory, a recording console sink, a watchdog, and /proc
// checks that prove no process is left running.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/log_streamer.hpp"

namespace davincirun_test {

using namespace std::chrono_literals;

/// Absolute path of a helper child program (tests/cpp/helpers).
inline std::string helper(const std::string& name) { return std::string(DAVINCIRUN_HELPER_DIR) + "/" + name; }

/// A fresh directory (mkdtemp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "davincirun-test-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const noexcept { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_file(const std::string& path, std::string_view data) {
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// A console sink that keeps everything it receives, one string per write()
/// or notice() call. Thread-safe, so another thread can wait for a line to appear.
class RecordingSink final : public davincirun::LineSink {
 public:
  void write(std::size_t index, std::string_view lines) override { record(index, lines); }
  void notice(std::string_view lines) override { record(notice_index, lines); }
  /// The index recorded for a notice() call.
  static constexpr std::size_t notice_index = static_cast<std::size_t>(-1);
  std::string text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }
  void progress(std::size_t index, std::string_view text) override {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_.emplace_back(index, std::string(text));
    events_.push_back("progress " + std::to_string(index) + ": " + std::string(text));
  }
  bool wants_progress() const noexcept override { return true; }
  void rank_exited(std::size_t index, davincirun::ExitStatus status, bool stopped) override {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back("exit " + std::to_string(index) + ": " + status.describe() + (stopped ? " (stopped)" : ""));
  }
  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  /// The rank index of each call of calls() (notice_index for a notice).
  std::vector<std::size_t> call_indexes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return indexes_;
  }
  /// Every progress() call: (rank index, text).
  std::vector<std::pair<std::size_t, std::string>> progress_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return progress_;
  }
  /// progress() and rank_exited() calls in order, and "lines <text>" for each write().
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  /// Waits until `needle` has appeared `count` times; false on timeout.
  bool wait_for(const std::string& needle, std::size_t count, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return occurrences(text_, needle) >= count; });
  }
  static std::size_t occurrences(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
    return n;
  }

 private:
  void record(std::size_t index, std::string_view lines) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.emplace_back(lines);
    indexes_.push_back(index);
    events_.push_back("lines " + std::string(lines));
    text_.append(lines);
    changed_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
  std::vector<std::size_t> indexes_;
  std::vector<std::pair<std::size_t, std::string>> progress_;
  std::vector<std::string> events_;
  std::string text_;
};

/// Calls `on_expiry` from its own thread if still alive after `limit`: the
/// deadline of a process test, so that a hang fails instead of blocking.
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, std::function<void()> on_expiry)
      : thread_([this, limit, on_expiry = std::move(on_expiry)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, limit, [this] { return cancelled_; })) {
            fired_ = true;
            lock.unlock();
            on_expiry();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  bool fired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

/// Runs `body` on a thread joined on destruction (even when a check fails).
class Joined {
 public:
  explicit Joined(std::function<void()> body) : thread_(std::move(body)) {}
  ~Joined() { thread_.join(); }
  Joined(const Joined&) = delete;
  Joined& operator=(const Joined&) = delete;

 private:
  std::thread thread_;
};

/// SIGKILLs a process this test started but does not own (a grandchild) when
/// the test ends, whatever happened.
class KillOnExit {
 public:
  void set(pid_t pid) noexcept { pid_ = pid; }
  ~KillOnExit() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }

 private:
  pid_t pid_ = -1;
};

/// One-letter state from /proc/<pid>/stat ('R', 'S', 'Z'...), or 0 when the
/// process does not exist.
inline char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

/// The process no longer runs: it does not exist or is a zombie (a zombie
/// whose parent is not us may linger with an init that does not reap).
inline bool process_gone(pid_t pid) {
  const char state = process_state(pid);
  return state == 0 || state == 'Z' || state == 'X';
}

/// Polls process_gone() until `timeout`.
inline bool wait_gone(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

/// A pid that was ours and has been reaped: kill(pid, 0) fails with ESRCH.
inline bool reaped(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

/// Pids of the processes (zombies included) whose parent is this process.
inline std::vector<pid_t> children_of_this_process() {
  std::vector<pid_t> out;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("PPid:", 0) == 0) {
        if (line.substr(line.find_first_not_of(" \t", 5)) == self) out.push_back(std::stoi(name));
        break;
      }
    }
  }
  return out;
}

/// Nothing this process started is left, running or unreaped.
inline bool no_children_left() {
  if (!children_of_this_process().empty()) return false;
  int status;
  return ::waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

/// Pids of live (non-zombie) processes with `arg` among their arguments.
inline std::vector<pid_t> processes_with_arg(const std::string& arg) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file((entry.path() / "cmdline").string());
    std::istringstream args(cmdline);
    for (std::string a; std::getline(args, a, '\0');) {
      if (a == arg && !process_gone(std::stoi(name))) out.push_back(std::stoi(name));
    }
  }
  return out;
}

/// The number after `key` on the first line of `text` that starts with it
/// (in `base`, leading blanks skipped); -1 when there is none.
inline long long value_after(const std::string& text, const std::string& key, int base = 10) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) == 0) return static_cast<long long>(std::stoull(line.substr(key.size()), nullptr, base));
  }
  return -1;
}

/// Sets a signal's disposition (e.g. SIG_IGN) for its lifetime, then restores it.
class SignalDisposition {
 public:
  SignalDisposition(int signal, void (*handler)(int)) : signal_(signal) {
    struct sigaction action{};
    action.sa_handler = handler;
    ::sigaction(signal_, &action, &old_);
  }
  ~SignalDisposition() { ::sigaction(signal_, &old_, nullptr); }
  SignalDisposition(const SignalDisposition&) = delete;
  SignalDisposition& operator=(const SignalDisposition&) = delete;

 private:
  int signal_;
  struct sigaction old_;
};

/// A tag unique to this test process, for finding its helpers in /proc.
inline std::string unique_tag(const std::string& what) { return "tag=" + what + "-" + std::to_string(::getpid()); }

}  // namespace davincirun_test
