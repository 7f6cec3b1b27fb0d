// HelperThread (common/helper_thread.hpp) runs a round's items on the caller
// and a second thread: every item exactly once, both threads taking part,
// no signal ever delivered to the helper, and no helper at all where the
// process may use one CPU only.
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/helper_thread.hpp"

using davincirun::detail::HelperThread;

TEST_CASE("every item of every round runs exactly once", "[helper_thread]") {
  HelperThread helper;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7},
                              std::size_t{64}, std::size_t{1000}}) {
    for (int round = 0; round < 50; ++round) {
      std::vector<std::atomic<int>> runs(n);
      helper.share(n, [&runs](std::size_t i) { runs[i].fetch_add(1, std::memory_order_relaxed); });
      // share() returned: every call has returned, so every count is final here.
      for (std::size_t i = 0; i < n; ++i) {
        INFO("n " << n << " round " << round << " item " << i);
        REQUIRE(runs[i].load() == 1);
      }
    }
  }
}

TEST_CASE("the caller and the helper run items at the same time", "[helper_thread]") {
  HelperThread helper;
  if (!helper.running()) {
    WARN("this process may use one CPU only: no helper to test");
    return;
  }
  // Item 0 waits until another item has started on another thread: the
  // caller takes item 0, so only the helper can take the others.
  std::mutex mutex;
  std::condition_variable started;
  std::set<std::thread::id> threads;
  bool other_started = false;
  const auto caller = std::this_thread::get_id();
  helper.share(4, [&](std::size_t i) {
    std::unique_lock<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    if (i == 0) {
      CHECK(started.wait_for(lock, std::chrono::seconds(10), [&] { return other_started; }));
    } else if (std::this_thread::get_id() != caller) {
      other_started = true;
      started.notify_all();
    }
  });
  CHECK(threads.size() == 2);
}

TEST_CASE("no signal is delivered to the helper", "[helper_thread]") {
  // The caller's mask lets SIGTERM and SIGUSR1 through; the helper's must not.
  sigset_t open_set;
  sigset_t before;
  sigemptyset(&open_set);
  sigaddset(&open_set, SIGTERM);
  sigaddset(&open_set, SIGUSR1);
  ::pthread_sigmask(SIG_UNBLOCK, &open_set, &before);
  {
    HelperThread helper;
    if (helper.running()) {
      std::mutex mutex;
      std::condition_variable started;
      bool helper_checked = false;
      bool blocked = false;
      const auto caller = std::this_thread::get_id();
      helper.share(2, [&](std::size_t i) {
        std::unique_lock<std::mutex> lock(mutex);
        if (std::this_thread::get_id() != caller) {
          sigset_t mask;
          ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
          blocked = sigismember(&mask, SIGTERM) == 1 && sigismember(&mask, SIGUSR1) == 1 &&
                    sigismember(&mask, SIGCHLD) == 1 && sigismember(&mask, SIGINT) == 1;
          helper_checked = true;
          started.notify_all();
        } else if (i == 0) {
          started.wait_for(lock, std::chrono::seconds(10), [&] { return helper_checked; });
        }
      });
      REQUIRE(helper_checked);
      CHECK(blocked);
    }
    // The caller's own mask is as it was.
    sigset_t now;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &now);
    CHECK(sigismember(&now, SIGTERM) == 0);
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

TEST_CASE("with one CPU allowed there is no helper, and the caller runs every item", "[helper_thread]") {
  cpu_set_t before;
  CPU_ZERO(&before);
  REQUIRE(::sched_getaffinity(0, sizeof before, &before) == 0);
  std::size_t first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  {
    HelperThread helper;
    CHECK_FALSE(helper.running());
    std::set<std::thread::id> threads;
    helper.share(16, [&threads](std::size_t) { threads.insert(std::this_thread::get_id()); });
    CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
  }
  REQUIRE(::sched_setaffinity(0, sizeof before, &before) == 0);
}
