// NonBlockingSink: a console that stops reading never blocks the caller.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "davincirun/non_blocking_sink.hpp"
#include "test_support.hpp"

using namespace davincirun;

namespace {

// A console that blocks every write until released, like a paused pager.
class GatedSink final : public LineSink {
 public:
  void write(std::size_t, std::string_view lines) override { record(lines); }
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

TEST_CASE("a console that stops reading makes lines dropped, never the caller blocked", "[console_sink]") {
  GatedSink console;
  std::uint64_t skipped = 0;
  {
    NonBlockingSink sink(console, 100);
    // Every call returns at once although the console takes nothing yet.
    for (int i = 0; i < 50; ++i) sink.write(0, "[rank 0] line " + std::to_string(100 + i) + " of fifty\n");
    sink.notice("[davincirun] a notice is never dropped\n");
    CHECK(sink.skipped_lines() > 40);
    console.release();
    sink.write(0, "[rank 0] after the stall\n");
    skipped = sink.skipped_lines();
  }  // the destructor writes out what is queued
  const std::string text = console.text();
  CHECK_THAT(text, Catch::Contains("[davincirun] a notice is never dropped\n"));
  // The newest lines won; every line is shown or counted.
  CHECK_THAT(text, Catch::Contains("[rank 0] line 149 of fifty\n"));
  CHECK_THAT(text, Catch::Contains("[rank 0] after the stall\n"));
  const auto shown = static_cast<std::uint64_t>(davincirun_test::RecordingSink::occurrences(text, "[rank 0] "));
  CHECK(shown + skipped == 51);
  std::uint64_t counted = 0;
  for (std::size_t at = text.find("line(s) not shown"); at != std::string::npos;
       at = text.find("line(s) not shown", at + 1)) {
    const std::size_t start = text.rfind("[davincirun] ", at) + 13;
    counted += std::strtoull(text.c_str() + start, nullptr, 10);
  }
  CHECK(counted == skipped);  // the notices count exactly what was dropped
}

TEST_CASE("a quiet rank's last words survive another rank's flood", "[console_sink]") {
  GatedSink console;
  {
    NonBlockingSink sink(console, 200);
    sink.write(0, "[rank 0] x\n");  // may be taken by the writer at once: something to block on
    sink.write(0, "[rank 0] last words of rank 0\n");
    for (int i = 0; i < 100; ++i) sink.write(1, "[rank 1] flood line " + std::to_string(1000 + i) + "\n");
    console.release();
  }
  const std::string text = console.text();
  CHECK_THAT(text, Catch::Contains("[rank 0] last words of rank 0\n"));
  CHECK_THAT(text, Catch::Contains("[rank 1] flood line 1099\n"));
  CHECK_THAT(text, !Catch::Contains("[rank 1] flood line 1000\n"));
  CHECK_THAT(text, Catch::Contains("line(s) not shown here (the console fell behind); the log files have them\n"));
}
