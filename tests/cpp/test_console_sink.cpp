// NonBlockingSink: a console that stops reading never blocks the caller.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "davincirun/console_sink.hpp"

using namespace davincirun;

namespace {

// A console that blocks every write until released, like a paused pager.
class GatedSink final : public LineSink {
 public:
  void write(std::string_view lines) override { record(lines); }
  void notice(std::string_view lines) override { record(lines); }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    gate_.notify_all();
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 private:
  void record(std::string_view lines) {
    std::unique_lock<std::mutex> lock(mutex_);
    gate_.wait(lock, [this] { return open_; });
    text_.append(lines);
  }
  std::mutex mutex_;
  std::condition_variable gate_;
  bool open_ = false;
  std::string text_;
};

}  // namespace

TEST_CASE("a console that stops reading makes lines skipped, never the caller blocked", "[console_sink]") {
  GatedSink console;
  {
    NonBlockingSink sink(console, 100);
    // Every call returns at once although the console takes nothing yet.
    for (int i = 0; i < 50; ++i) sink.write("[rank 0] a line of twenty\n");
    sink.notice("[davincirun] a notice is never skipped\n");
    CHECK(sink.skipped_lines() > 40);
    const auto skipped = sink.skipped_lines();
    console.release();
    sink.write("[rank 0] after the stall\n");  // may be queued behind the backlog or skipped, never blocks
    CHECK(sink.skipped_lines() >= skipped);
  }  // the destructor writes out what is queued
  const std::string text = console.text();
  CHECK_THAT(text, Catch::Contains("[davincirun] a notice is never skipped\n"));
  CHECK_THAT(text, Catch::StartsWith("[rank 0] a line of twenty\n"));
}

TEST_CASE("when the console catches up it is told how many lines it missed", "[console_sink]") {
  GatedSink console;
  {
    NonBlockingSink sink(console, 30);
    sink.write("[rank 1] first, fits\n");   // 21 bytes: queued
    sink.write("[rank 1] second, skipped\n");  // would pass 30 bytes
    console.release();
    // Once the queue has drained, the next write brings the count first.
    while (sink.queued_bytes() > 0) std::this_thread::yield();
    sink.write("[rank 1] third\n");
  }
  CHECK(console.text() ==
        "[rank 1] first, fits\n"
        "[davincirun] 1 line(s) not shown here (the console fell behind); the log files have them\n"
        "[rank 1] third\n");
}
