// A second thread for work that comes in separate items: share(n, work)
// runs work(0) .. work(n - 1) on the calling thread and the helper at once,
// each item on one of them, and returns when all are done.
//
// The supervisor's loop uses it to move several ranks' output in one round:
// splice(2) copies every byte into a log's page cache, the relay's heaviest
// work, which one thread would do for all ranks on one core while a shell's
// `| cat` per rank spreads it over all of them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace davincirun::detail {

class HelperThread {
 public:
  /// Starts the helper, with every signal blocked in it (signals stay with
  /// the threads that wait for them, e.g. a signalfd). No helper when this
  /// process may run on one CPU only (sched_getaffinity), or when no thread
  /// can be started: share() then does all the work on the calling thread.
  HelperThread() noexcept;
  /// Stops the helper and waits for it.
  ~HelperThread();
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  /// Whether a helper runs beside the caller.
  bool running() const noexcept { return thread_.joinable(); }

  /// Runs work(i) for every i in [0, n), each exactly once, on this thread
  /// or the helper, and returns when every call has returned. Items are
  /// taken one at a time, in order, by whichever thread is free: the caller
  /// never waits for a helper that has not woken yet, only for an item the
  /// helper took. `work` must not throw (std::terminate) and must be safe to
  /// run on two threads at once for different items. One caller at a time.
  void share(std::size_t n, const std::function<void(std::size_t)>& work);

 private:
  void run() noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;                            // a round began, or the helper must quit
  std::condition_variable done_;                            // the helper finished an item
  const std::function<void(std::size_t)>* work_ = nullptr;  // null between rounds
  std::size_t count_ = 0;
  std::size_t next_ = 0;
  std::size_t helper_busy_ = 0;  // items the helper took and has not finished
  std::uint64_t round_ = 0;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace davincirun::detail
