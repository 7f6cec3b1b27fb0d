#include "common/helper_thread.hpp"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <system_error>

namespace davincirun::detail {

namespace {

bool may_use_two_cpus() noexcept {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(0, sizeof cpus, &cpus) != 0) return true;  // unknown: a helper costs little
  return CPU_COUNT(&cpus) >= 2;
}

}  // namespace

HelperThread::HelperThread() noexcept {
  if (!may_use_two_cpus()) return;
  // A new thread inherits its creator's signal mask: block everything for
  // the creation, so that no signal is ever delivered to the helper.
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error&) {
    // No thread to be had (RLIMIT_NPROC, memory): the caller does all the work.
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    return;
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

HelperThread::~HelperThread() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void HelperThread::share(std::size_t n, const std::function<void(std::size_t)>& work) {
  if (!running() || n < 2) {
    for (std::size_t i = 0; i < n; ++i) work(i);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_ = &work;
  count_ = n;
  next_ = 0;
  ++round_;
  lock.unlock();
  wake_.notify_one();
  lock.lock();
  while (next_ < count_) {
    const std::size_t item = next_++;
    lock.unlock();
    work(item);
    lock.lock();
  }
  // Every item is taken: wait only for those the helper is still running.
  // (Spinning for them first measured no faster on a flood of 8 ranks.)
  done_.wait(lock, [this] { return helper_busy_ == 0; });
  work_ = nullptr;  // a helper waking late finds the round over
}

void HelperThread::run() noexcept {
  // Round 0 is none: a round shared before this thread got here is still
  // seen (its items may all be taken by then, which is fine).
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return quit_ || round_ != seen; });
    if (quit_) return;
    seen = round_;
    while (work_ != nullptr && next_ < count_) {
      const std::size_t item = next_++;
      ++helper_busy_;
      const auto* work = work_;
      lock.unlock();
      (*work)(item);
      lock.lock();
      --helper_busy_;
    }
    if (helper_busy_ == 0) done_.notify_one();
  }
}

}  // namespace davincirun::detail
