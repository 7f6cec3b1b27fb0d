// The launcher ↔ job supervisor process messages (job/job_protocol.hpp):
// payloads round-trip any bytes, errors come back with their type and
// details, and malformed payloads are refused. The framing is tested in
// test_job_protocol_frames.cpp.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <typeinfo>

#include "common/wire.hpp"
#include "davincirun/errors.hpp"
#include "helpers/awkward_bytes.hpp"
#include "helpers/pattern.hpp"
#include "job/job_protocol.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun::detail;
using namespace davincirun_test;
using Catch::Matchers::Contains;

namespace {

using namespace std::string_literals;

JobSpec sample_spec() {
  JobSpec spec;
  spec.log_dir = "/tmp/logs/" + with_nul;
  spec.job_id = bad_utf8;
  spec.rank_table_json = "{\"x\": \"" + newlines + "\"}" + all_bytes;
  spec.rank_table_source = newlines;
  spec.server_id = "";
  spec.world_size = 16;
  spec.command = {"python3", with_nul, "", bad_utf8, newlines};
  spec.work_dir = "/work/" + bad_utf8;
  spec.device_lock_dir = "/tmp/locks " + with_nul + newlines;
  RankAssignment a;
  a.rank = 8;
  a.local_rank = 0;
  a.physical_device_id = 4;
  a.logical_device_id = 0;
  a.device_ip = "192.168.1.8";
  RankAssignment b;
  b.rank = 9;
  b.local_rank = 1;
  b.physical_device_id = 7;
  b.logical_device_id = 1;
  b.device_ip = std::nullopt;
  spec.ranks = {a, b};
  spec.environments = {{"A=" + with_nul, "MULTI=" + newlines, "EMPTY="}, {"BYTES=" + all_bytes}};
  spec.show_on_console = {false, true};
  spec.remove_after_job = {"/tmp/cache-" + with_nul, "/x/" + bad_utf8};
  spec.cache_dir = "/cache/davincirun";
  spec.supervisor.grace_period = std::chrono::milliseconds(1234);
  spec.supervisor.drain_timeout = std::chrono::milliseconds(567);
  spec.supervisor.job_timeout = std::chrono::milliseconds(86'400'000);
  spec.supervisor.tracking = ProcessTracking::sigchld;
  spec.supervisor.stop_request_name = "Ctrl-C " + bad_utf8;
  spec.console = ConsoleRoute::stdio;
  return spec;
}

JobResult sample_result() {
  using std::chrono::system_clock;
  JobResult result;
  RankResult r0;
  r0.rank = 0;
  r0.pid = 4242;
  r0.log_path = "/logs/" + with_nul + bad_utf8;
  r0.status = ExitStatus{ExitStatus::Kind::exited, 3};
  r0.started = system_clock::now();
  r0.ended = r0.started + std::chrono::nanoseconds(123'456'789);
  r0.output_bytes = (std::uint64_t{1} << 40) + 7;
  r0.log_error = "write: " + newlines;
  RankResult r1;
  r1.rank = 1;
  r1.pid = 4343;
  r1.log_path = newlines;
  r1.status = ExitStatus{ExitStatus::Kind::signaled, SIGKILL};
  r1.terminated_by_launcher = true;
  r1.killed_by_launcher = true;
  r1.started = system_clock::time_point{} - std::chrono::hours(1);  // before the epoch
  r1.ended = r1.started;
  RankResult r2;
  r2.rank = 2;
  r2.pid = 1;
  r2.status = ExitStatus{ExitStatus::Kind::unknown, 0};
  r2.terminated_by_launcher = true;
  result.ranks = {r0, r1, r2};
  result.first_failure = 0;
  result.stop_reason = StopReason::rank_failed;
  result.leftover_processes_killed = 5;
  result.tracking = ProcessTracking::sigchld;
  result.tracking_fallback = "clone() refused CLONE_PIDFD";
  result.child_subreaper = false;
  result.summary_error = "No space left on device";
  return result;
}

void check_same(const ExitStatus& a, const ExitStatus& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.value == b.value);
}

void check_same(const JobResult& got, const JobResult& want) {
  REQUIRE(got.ranks.size() == want.ranks.size());
  for (std::size_t i = 0; i < want.ranks.size(); ++i) {
    INFO("rank index " << i);
    const RankResult& g = got.ranks[i];
    const RankResult& w = want.ranks[i];
    CHECK(g.rank == w.rank);
    CHECK(g.pid == w.pid);
    CHECK(g.log_path == w.log_path);
    check_same(g.status, w.status);
    CHECK(g.terminated_by_launcher == w.terminated_by_launcher);
    CHECK(g.killed_by_launcher == w.killed_by_launcher);
    CHECK((g.started == w.started));
    CHECK((g.ended == w.ended));
    CHECK(g.output_bytes == w.output_bytes);
    CHECK(g.log_error == w.log_error);
  }
  CHECK(got.first_failure == want.first_failure);
  CHECK(got.stop_reason == want.stop_reason);
  CHECK(got.summary_error == want.summary_error);
  CHECK(got.stop_signal == want.stop_signal);
  CHECK(got.leftover_processes_killed == want.leftover_processes_killed);
  CHECK(got.tracking == want.tracking);
  CHECK(got.tracking_fallback == want.tracking_fallback);
  CHECK(got.child_subreaper == want.child_subreaper);
}

// Calls rethrow_error(payload) and returns what it threw when that is of
// exactly type E (not a subclass); fails the test otherwise.
template <class E>
std::optional<E> rethrown_as(std::string_view payload) {
  try {
    rethrow_error(payload);
  } catch (const E& e) {
    if (typeid(e) == typeid(E)) return e;
    FAIL_CHECK("rethrown as the subclass " << typeid(e).name() << ": " << e.what());
  } catch (const std::exception& e) {
    FAIL_CHECK("rethrown as " << typeid(e).name() << ": " << e.what());
  }
  return std::nullopt;
}

// Every strict prefix of `payload`, and `payload` with a byte appended, must
// make `decode` throw SystemError(EPROTO). Returns a description of each
// length that did not.
std::vector<std::string> malformed_not_refused(const std::string& payload,
                                               const std::function<void(std::string_view)>& decode) {
  std::vector<std::string> bad;
  auto refused = [&](std::string_view data) {
    try {
      decode(data);
    } catch (const SystemError& e) {
      if (e.os_errno() == EPROTO) return true;
      bad.push_back(std::to_string(data.size()) + " bytes: errno " + std::to_string(e.os_errno()));
      return false;
    } catch (const std::exception& e) {
      bad.push_back(std::to_string(data.size()) + " bytes: " + typeid(e).name() + ": " + e.what());
      return false;
    }
    bad.push_back(std::to_string(data.size()) + " bytes: accepted");
    return false;
  };
  for (std::size_t n = 0; n < payload.size(); ++n) refused(std::string_view(payload).substr(0, n));
  refused(payload + "x");
  refused(payload + std::string(8, '\0'));
  return bad;
}

}  // namespace

TEST_CASE("job spec: every field round-trips, strings with NULs, invalid UTF-8 and newlines included",
          "[job_protocol]") {
  const JobSpec want = sample_spec();
  const JobSpec got = decode_spec(encode_spec(want));
  CHECK(got.log_dir == want.log_dir);
  CHECK(got.job_id == want.job_id);
  CHECK((got.rank_table_json == want.rank_table_json));
  CHECK(got.rank_table_source == want.rank_table_source);
  CHECK(got.server_id == want.server_id);
  CHECK(got.world_size == want.world_size);
  CHECK(got.command == want.command);
  CHECK(got.work_dir == want.work_dir);
  CHECK(got.device_lock_dir == want.device_lock_dir);
  REQUIRE(got.ranks.size() == want.ranks.size());
  for (std::size_t i = 0; i < want.ranks.size(); ++i) {
    INFO("rank index " << i);
    CHECK(got.ranks[i].rank == want.ranks[i].rank);
    CHECK(got.ranks[i].local_rank == want.ranks[i].local_rank);
    CHECK(got.ranks[i].physical_device_id == want.ranks[i].physical_device_id);
    CHECK(got.ranks[i].logical_device_id == want.ranks[i].logical_device_id);
    CHECK(got.ranks[i].device_ip == want.ranks[i].device_ip);
  }
  CHECK((got.environments == want.environments));
  CHECK((got.show_on_console == want.show_on_console));
  CHECK((got.remove_after_job == want.remove_after_job));
  CHECK(got.cache_dir == want.cache_dir);
  CHECK(got.supervisor.grace_period == want.supervisor.grace_period);
  CHECK(got.supervisor.drain_timeout == want.supervisor.drain_timeout);
  CHECK(got.supervisor.job_timeout == want.supervisor.job_timeout);
  CHECK(got.supervisor.tracking == want.supervisor.tracking);
  CHECK(got.supervisor.stop_request_name == want.supervisor.stop_request_name);
  CHECK(got.console == want.console);
}

TEST_CASE("job spec: a rank without an environment gets an empty one", "[job_protocol]") {
  JobSpec spec = sample_spec();
  spec.environments.resize(1);
  const JobSpec got = decode_spec(encode_spec(spec));
  REQUIRE(got.environments.size() == 2);
  CHECK(got.environments[0] == spec.environments[0]);
  CHECK(got.environments[1].empty());
  CHECK((got.show_on_console == std::vector<bool>{false, true}));
}

TEST_CASE("started event round-trips", "[job_protocol]") {
  StartedJob want;
  want.run_dir = "/logs/run-" + with_nul + bad_utf8 + newlines;
  want.pids = {1, 4242, 4194304};
  want.tracking = ProcessTracking::sigchld;
  want.tag = "0123456789abcdef0123456789abcdef";
  const StartedJob got = decode_started(encode_started(want));
  CHECK(got.run_dir == want.run_dir);
  CHECK(got.tag == want.tag);
  CHECK(got.pids == want.pids);
  CHECK(got.tracking == want.tracking);

  const StartedJob empty = decode_started(encode_started(StartedJob{}));
  CHECK(empty.run_dir.empty());
  CHECK(empty.pids.empty());
  CHECK(empty.tracking == ProcessTracking::pidfd);
}

TEST_CASE("lines, progress and rank exits round-trip and reach a sink through deliver_console_frame",
          "[job_protocol]") {
  const std::string lines_payload = encode_lines_head(6) + "[rank 6] " + bad_utf8 + with_nul + "\n";
  const RankLines lines = decode_lines(lines_payload);
  CHECK(lines.index == 6);
  CHECK(lines.lines == "[rank 6] " + bad_utf8 + with_nul + "\n");
  const ProgressUpdate update = decode_progress(encode_progress(7, "45%|" + bad_utf8 + with_nul));
  CHECK(update.index == 7);
  CHECK(update.text == "45%|" + bad_utf8 + with_nul);
  const RankExited exited =
      decode_rank_exited(encode_rank_exited({5, ExitStatus{ExitStatus::Kind::signaled, 9}, true}));
  CHECK(exited.index == 5);
  CHECK(exited.status.kind == ExitStatus::Kind::signaled);
  CHECK(exited.status.value == 9);
  CHECK(exited.stopped_by_launcher);

  RecordingSink sink;
  CHECK(deliver_console_frame(Frame::lines, encode_lines_head(2) + "[rank 2] a\n", sink));
  CHECK(deliver_console_frame(Frame::notice, "[davincirun] n\n", sink));
  CHECK(deliver_console_frame(Frame::progress, encode_progress(0, "10%"), sink));
  CHECK(deliver_console_frame(Frame::rank_exited, encode_rank_exited({0, ExitStatus{}, false}), sink));
  CHECK_FALSE(deliver_console_frame(Frame::result, "", sink));
  CHECK(sink.events() == std::vector<std::string>{"lines [rank 2] a\n", "lines [davincirun] n\n", "progress 0: 10%",
                                                  "exit 0: exit code 0"});
  CHECK(sink.call_indexes() == std::vector<std::size_t>{2, RecordingSink::notice_index});
  CHECK_THROWS_AS(deliver_console_frame(Frame::lines, "\x01", sink), SystemError);
  CHECK_THROWS_AS(deliver_console_frame(Frame::progress, "\x01", sink), SystemError);
  CHECK_THROWS_AS(deliver_console_frame(Frame::rank_exited, encode_progress(1, "b"), sink), SystemError);
}

TEST_CASE("job result: every field round-trips", "[job_protocol]") {
  SECTION("a failed job with every kind of status") {
    const JobResult want = sample_result();
    check_same(decode_result(encode_result(want)), want);
  }
  SECTION("a successful job: no first failure") {
    JobResult want = sample_result();
    want.first_failure = std::nullopt;
    want.stop_reason = StopReason::none;
    want.tracking = ProcessTracking::pidfd;
    want.tracking_fallback = std::nullopt;
    want.child_subreaper = true;
    want.leftover_processes_killed = 0;
    check_same(decode_result(encode_result(want)), want);
  }
  SECTION("every stop reason") {
    for (StopReason reason : {StopReason::none, StopReason::rank_failed, StopReason::requested, StopReason::timed_out,
                              StopReason::signaled, StopReason::launcher_gone}) {
      JobResult want = sample_result();
      want.stop_reason = reason;
      want.stop_signal = reason == StopReason::signaled ? 15 : 0;
      want.first_failure = 2;
      INFO("stop reason " << static_cast<int>(reason));
      check_same(decode_result(encode_result(want)), want);
    }
  }
  SECTION("no ranks at all") { check_same(decode_result(encode_result(JobResult{})), JobResult{}); }
}

TEST_CASE("job result: a first failure beyond the ranks is refused", "[job_protocol]") {
  JobResult result = sample_result();
  result.first_failure = result.ranks.size();
  try {
    decode_result(encode_result(result));
    FAIL("accepted");
  } catch (const SystemError& e) {
    CHECK(e.os_errno() == EPROTO);
  }
}

TEST_CASE("errors come back with their type and details", "[job_protocol]") {
  // what() is a C string, so no message can hold a NUL; other fields can.
  SECTION("ConfigError") {
    const ConfigError original("bad option: " + bad_utf8 + newlines);
    const auto got = rethrown_as<ConfigError>(encode_error(original));
    REQUIRE(got);
    CHECK(std::string(got->what()) == original.what());
  }
  SECTION("OptionError: the option's name preserved") {
    const OptionError original("log_dir", "cannot create log directory '" + bad_utf8 + "': Permission denied");
    const auto got = rethrown_as<OptionError>(encode_error(original));
    REQUIRE(got);
    CHECK(std::string(got->what()) == original.what());
    CHECK(got->option() == "log_dir");
    CHECK(got->name_at() == std::string::npos);
  }
  SECTION("OptionError: where the message names the option preserved") {
    const OptionError first("work_dir", "work_dir 'work_dir' is not a directory");
    const auto got_first = rethrown_as<OptionError>(encode_error(first));
    REQUIRE(got_first);
    CHECK(got_first->message_naming("--work-dir") == "--work-dir 'work_dir' is not a directory");
    const OptionError inside("rank_table", "no rank_table '" + bad_utf8 + "': give ", " (a path)");
    const auto got_inside = rethrown_as<OptionError>(encode_error(inside));
    REQUIRE(got_inside);
    CHECK(std::string(got_inside->what()) == inside.what());
    CHECK(got_inside->name_at() == inside.name_at());
    CHECK(got_inside->message_naming("--rank-table") == "no rank_table '" + bad_utf8 + "': give --rank-table (a path)");
  }
  SECTION("DeviceBusyError: devices, holder pid and description preserved") {
    const DeviceBusyError original({0, 1, 7}, 4194304, "job j, started 2026-11-30T20:01:02Z: " + bad_utf8,
                                   "devices 0, 1, 7 are in use by another job: " + newlines);
    const auto got = rethrown_as<DeviceBusyError>(encode_error(original));
    REQUIRE(got);
    CHECK(std::string(got->what()) == original.what());
    CHECK(got->devices() == original.devices());
    CHECK(got->holder_pid() == 4194304);
    CHECK(got->holder_description() == original.holder_description());
    const auto none = rethrown_as<DeviceBusyError>(encode_error(DeviceBusyError({}, 0, "", "m")));
    REQUIRE(none);
    CHECK(none->devices().empty());
    CHECK(none->holder_pid() == 0);
  }
  SECTION("SpawnError: rank, command, errno and exit code preserved") {
    const SpawnError original(7, "/no/such " + with_nul + bad_utf8, ENOENT, "rank 7: cannot run: " + newlines);
    const auto got = rethrown_as<SpawnError>(encode_error(original));
    REQUIRE(got);
    CHECK(std::string(got->what()) == original.what());
    CHECK(got->rank() == 7);
    CHECK(got->command() == original.command());
    CHECK(got->os_errno() == ENOENT);
    CHECK(got->exit_code() == 127);
    CHECK(got->search_path().empty());
    const auto searched = rethrown_as<SpawnError>(
        encode_error(SpawnError(0, "pyhton", ENOENT, "not found", "/usr/bin::/" + bad_utf8 + newlines)));
    REQUIRE(searched);
    CHECK(searched->search_path() == "/usr/bin::/" + bad_utf8 + newlines);
    const auto eacces = rethrown_as<SpawnError>(encode_error(SpawnError(0, "x", EACCES, "denied")));
    REQUIRE(eacces);
    CHECK(eacces->exit_code() == 126);
  }
  SECTION("SystemError: errno preserved, message not repeated") {
    const SystemError original("connect /run/" + bad_utf8 + newlines, ECONNREFUSED);
    REQUIRE_THAT(original.what(), Contains(std::strerror(ECONNREFUSED)));
    const auto got = rethrown_as<SystemError>(encode_error(original));
    REQUIRE(got);
    CHECK(got->os_errno() == ECONNREFUSED);
    CHECK(std::string(got->what()) == original.what());
    CHECK(RecordingSink::occurrences(got->what(), std::strerror(ECONNREFUSED)) == 1);
  }
  SECTION("any other exception becomes davincirun::Error with its message") {
    const std::runtime_error original("plain failure\n" + bad_utf8);
    const auto got = rethrown_as<Error>(encode_error(original));
    REQUIRE(got);
    CHECK(std::string(got->what()) == original.what());
  }
  SECTION("an unlisted davincirun error becomes davincirun::Error too") {
    const RankTableError original(RankTableError::Kind::missing, "hccl.json", "/server_list", "missing");
    const auto got = rethrown_as<Error>(encode_error(original));
    REQUIRE(got);
    CHECK(std::string(got->what()) == original.what());
  }
}

TEST_CASE("truncated payloads and trailing garbage are refused with SystemError", "[job_protocol]") {
  const auto decode_spec_fn = [](std::string_view d) { decode_spec(d); };
  const auto decode_started_fn = [](std::string_view d) { decode_started(d); };
  const auto decode_result_fn = [](std::string_view d) { decode_result(d); };
  const auto rethrow_fn = [](std::string_view d) { rethrow_error(d); };
  StartedJob started;
  started.run_dir = newlines;
  started.pids = {10, 11};
  CHECK(malformed_not_refused(encode_spec(sample_spec()), decode_spec_fn).empty());
  CHECK(malformed_not_refused(encode_started(started), decode_started_fn).empty());
  CHECK(malformed_not_refused(encode_result(sample_result()), decode_result_fn).empty());
  CHECK(malformed_not_refused(encode_error(ConfigError("c")), rethrow_fn).empty());
  CHECK(malformed_not_refused(encode_error(DeviceBusyError({2, 3}, 42, "d", "m")), rethrow_fn).empty());
  CHECK(malformed_not_refused(encode_error(SpawnError(1, "cmd", ENOENT, "m")), rethrow_fn).empty());
  // errno EACCES, not EPROTO: a truncated payload cannot pass for the real error.
  CHECK(malformed_not_refused(encode_error(SystemError("op", EACCES)), rethrow_fn).empty());
  CHECK(malformed_not_refused(encode_error(std::runtime_error("r")), rethrow_fn).empty());
}

TEST_CASE("corrupt counts and out-of-range enums are refused", "[job_protocol]") {
  const auto refused = [](const std::function<void()>& decode) {
    try {
      decode();
    } catch (const SystemError& e) {
      return e.os_errno() == EPROTO;
    }
    return false;
  };
  JobSpec spec = sample_spec();
  spec.remove_after_job.clear();  // the payload then ends: console (an enum), two empty lists (strs)
  spec.notes.clear();
  const std::string payload = encode_spec(spec);
  // Every value is a type byte and its bytes; a str is its 8-byte length and its bytes.
  const auto str_bytes = [](const std::string& s) { return 1 + 8 + s.size(); };
  SECTION("a huge element count does not allocate, it is refused") {
    // The command's count follows five strings and world_size (JobSpec's field list).
    std::size_t offset = 0;
    for (const std::string* s :
         {&spec.log_dir, &spec.job_id, &spec.server_id, &spec.rank_table_source, &spec.rank_table_json}) {
      offset += str_bytes(*s);
    }
    offset += 1 + 8;  // world_size
    REQUIRE(payload[offset] == static_cast<char>(WireType::strs));
    ++offset;
    REQUIRE(static_cast<unsigned char>(payload[offset]) == spec.command.size());
    std::string corrupt = payload;
    for (std::size_t i = 0; i < 8; ++i) corrupt[offset + i] = '\xff';
    CHECK(refused([&] { decode_spec(corrupt); }));
    corrupt[offset + 7] = '\x01';  // 2^56 + ...: still far beyond the payload
    CHECK(refused([&] { decode_spec(corrupt); }));
  }
  // Where an enum's byte is: the one byte two specs that differ only there differ in.
  const auto enum_byte = [&](const std::function<void(JobSpec&)>& change) {
    JobSpec other = spec;
    change(other);
    const std::string changed = encode_spec(other);
    REQUIRE(changed.size() == payload.size());
    std::size_t at = 0, differing = 0;
    for (std::size_t i = 0; i < payload.size(); ++i) {
      if (payload[i] != changed[i]) {
        at = i;
        ++differing;
      }
    }
    REQUIRE(differing == 1);
    REQUIRE(payload[at - 1] == static_cast<char>(WireType::enumeration));  // its type byte, then 8 bytes, lowest first
    return at;
  };
  SECTION("a tracking value beyond the enum") {
    const std::size_t at = enum_byte([](JobSpec& s) {
      s.supervisor.tracking =
          s.supervisor.tracking == ProcessTracking::sigchld ? ProcessTracking::pidfd : ProcessTracking::sigchld;
    });
    std::string corrupt = payload;
    corrupt[at] = 3;
    CHECK(refused([&] { decode_spec(corrupt); }));
  }
  SECTION("a console route beyond the enum") {
    const std::size_t at = enum_byte(
        [](JobSpec& s) { s.console = s.console == ConsoleRoute::none ? ConsoleRoute::relay : ConsoleRoute::none; });
    std::string corrupt = payload;
    corrupt[at] = 3;
    CHECK(refused([&] { decode_spec(corrupt); }));
  }
  SECTION("a started event's tracking beyond the enum") {
    std::string corrupt = encode_started(StartedJob{});
    REQUIRE(corrupt[corrupt.size() - 9] == static_cast<char>(WireType::enumeration));
    corrupt[corrupt.size() - 8] = 7;
    CHECK(refused([&] { decode_started(corrupt); }));
  }
}
