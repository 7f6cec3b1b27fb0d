#include "job/job_protocol.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/wire.hpp"
#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

enum class ErrorType { generic, config, spawn, system, device_busy, option };
DAVINCIRUN_ENUM_NAMES(ErrorType, "generic", "config", "spawn", "system", "device_busy", "option");

}  // namespace

std::string encode_spec(const JobSpec& spec) { return encode(spec); }

JobSpec decode_spec(std::string_view data) {
  JobSpec spec = decode<JobSpec>(data);
  const PeerPlan& p = spec.peers;
  Reader::check(!p.enabled || (p.server_index < p.server_ids.size() && p.hub_index < p.server_ids.size()));
  // Per rank: a rank given no environment gets an empty one, and is shown.
  spec.environments.resize(spec.ranks.size());
  spec.show_on_console.resize(spec.ranks.size(), true);
  return spec;
}

std::string encode_started(const StartedJob& started) { return encode(started); }

StartedJob decode_started(std::string_view data) { return decode<StartedJob>(data); }

std::string encode_lines_head(std::size_t index) {
  Writer w;
  w.u64(index);
  return w.take();
}

RankLines decode_lines(std::string_view data) {
  Reader r(data);
  RankLines lines;
  lines.index = static_cast<std::size_t>(r.u64());
  lines.lines = r.rest();
  return lines;
}

std::string encode_progress(std::size_t index, std::string_view text) {
  return encode(ProgressUpdate{index, std::string(text)});
}

ProgressUpdate decode_progress(std::string_view data) { return decode<ProgressUpdate>(data); }

std::string encode_rank_exited(const RankExited& exited) { return encode(exited); }

RankExited decode_rank_exited(std::string_view data) { return decode<RankExited>(data); }

std::string encode_attempt(const AttemptStarted& started) { return encode(started); }

AttemptStarted decode_attempt(std::string_view data) { return decode<AttemptStarted>(data); }

std::string encode_status(const std::vector<RankStatus>& statuses) { return encode(RanksStatus{statuses}); }

std::vector<RankStatus> decode_status(std::string_view data) { return decode<RanksStatus>(data).statuses; }

bool deliver_console_frame(Frame type, std::string_view payload, LineSink& sink) {
  switch (type) {
    case Frame::lines: {
      const RankLines lines = decode_lines(payload);
      sink.write(lines.index, lines.lines);
      return true;
    }
    case Frame::notice: sink.notice(payload); return true;
    case Frame::progress: {
      const ProgressUpdate update = decode_progress(payload);
      sink.progress(update.index, update.text);
      return true;
    }
    case Frame::rank_exited: {
      const RankExited exited = decode_rank_exited(payload);
      sink.rank_exited(exited.index, exited.status, exited.stopped_by_launcher);
      return true;
    }
    case Frame::attempt: {
      const AttemptStarted started = decode_attempt(payload);
      sink.attempt_started(started.attempt, started.pids);
      return true;
    }
    case Frame::status: sink.ranks_status(decode_status(payload)); return true;
    default: return false;
  }
}

std::string encode_result(const JobResult& result) { return encode(result); }

JobResult decode_result(std::string_view data) {
  JobResult result = decode<JobResult>(data);
  Reader::check(!result.first_failure || *result.first_failure < result.ranks.size());
  return result;
}

std::string encode_error(const std::exception& error) {
  Writer w;
  if (const auto* spawn = dynamic_cast<const SpawnError*>(&error)) {
    w.enumeration(static_cast<std::uint64_t>(ErrorType::spawn));
    w.str(spawn->what());
    w.i64(spawn->rank());
    w.str(spawn->command());
    w.i64(spawn->os_errno());
    w.str(spawn->search_path());
  } else if (const auto* system = dynamic_cast<const SystemError*>(&error)) {
    w.enumeration(static_cast<std::uint64_t>(ErrorType::system));
    w.str(system->what());
    w.i64(system->os_errno());
  } else if (const auto* busy = dynamic_cast<const DeviceBusyError*>(&error)) {
    w.enumeration(static_cast<std::uint64_t>(ErrorType::device_busy));
    w.str(busy->what());
    put(w, busy->devices());
    w.i64(busy->holder_pid());
    w.str(busy->holder_description());
  } else if (const auto* option = dynamic_cast<const OptionError*>(&error)) {
    w.enumeration(static_cast<std::uint64_t>(ErrorType::option));
    w.str(option->what());
    w.str(option->option());
    w.i64(option->name_at() == std::string::npos ? -1 : static_cast<std::int64_t>(option->name_at()));
  } else if (dynamic_cast<const ConfigError*>(&error)) {
    w.enumeration(static_cast<std::uint64_t>(ErrorType::config));
    w.str(error.what());
  } else {
    w.enumeration(static_cast<std::uint64_t>(ErrorType::generic));
    w.str(error.what());
  }
  return w.take();
}

void rethrow_error(std::string_view data) {
  Reader r(data);
  ErrorType type = ErrorType::generic;
  get(r, type);
  std::string message = r.str();
  switch (type) {
    case ErrorType::spawn: {
      const int rank = r.i32();
      std::string command = r.str();
      const int err = r.i32();
      std::string search_path = r.str();
      r.finish();
      throw SpawnError(rank, std::move(command), err, message, std::move(search_path));
    }
    case ErrorType::system: {
      const int err = r.i32();
      r.finish();
      // The message already ends in ": <strerror>"; rebuild it around the
      // operation part so it is not repeated.
      const std::string suffix = std::string(": ") + std::strerror(err);
      if (message.size() >= suffix.size() &&
          message.compare(message.size() - suffix.size(), suffix.size(), suffix) == 0) {
        message.resize(message.size() - suffix.size());
      }
      throw SystemError(message, err);
    }
    case ErrorType::device_busy: {
      std::vector<int> devices;
      get(r, devices);
      const auto holder_pid = static_cast<pid_t>(r.i64());
      std::string description = r.str();
      r.finish();
      throw DeviceBusyError(std::move(devices), holder_pid, std::move(description), message);
    }
    case ErrorType::option: {
      std::string option = r.str();
      const std::int64_t at = r.i64();
      r.finish();
      if (at < 0) throw OptionError(std::move(option), message);  // not named, or named first: the same rule
      const auto name_at = static_cast<std::size_t>(at);
      r.check(name_at <= message.size() && message.compare(name_at, option.size(), option) == 0);
      throw OptionError(option, message.substr(0, name_at), message.substr(name_at + option.size()));
    }
    case ErrorType::config: r.finish(); throw ConfigError(message);
    default: r.finish(); throw Error(message);
  }
}

}  // namespace davincirun::detail
