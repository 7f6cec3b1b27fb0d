#include "job/job_protocol.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

enum class ErrorType : int { generic = 0, config = 1, spawn = 2, system = 3, device_busy = 4, option = 5 };

}  // namespace

std::string encode_spec(const JobSpec& spec) {
  Writer w;
  w.str(spec.log_dir);
  w.str(spec.job_id);
  w.str(spec.rank_table_json);
  w.str(spec.rank_table_source);
  w.str(spec.server_id);
  w.i64(spec.world_size);
  w.strs(spec.command);
  w.str(spec.work_dir);
  w.str(spec.device_lock_dir);
  w.str(spec.cache_dir);
  w.u64(spec.ranks.size());
  for (std::size_t i = 0; i < spec.ranks.size(); ++i) {
    const RankAssignment& a = spec.ranks[i];
    w.flag(a.role == ProcessRole::scheduler);
    w.i64(a.rank);
    w.i64(a.local_rank);
    w.i64(a.physical_device_id);
    w.i64(a.logical_device_id);
    w.opt_str(a.device_ip);
    w.strs(i < spec.environments.size() ? spec.environments[i] : std::vector<std::string>{});
    w.flag(i < spec.show_on_console.size() ? spec.show_on_console[i] : true);
  }
  // The peer plan sits between the ranks and the supervisor's options.
  const PeerPlan& p = spec.peers;
  w.flag(p.enabled);
  w.u64(p.server_count);
  w.flag(p.hub);
  w.str(p.hub_address);
  w.i64(p.port);
  w.u64(p.server_index);
  w.u64(p.hub_index);
  w.strs(p.server_ids);
  w.str(p.job_key);
  w.flag(p.key_from_environment);
  w.millis(p.peer_timeout);
  w.millis(p.connect_timeout);
  w.millis(p.stall_timeout);
  w.millis(spec.supervisor.grace_period);
  w.millis(spec.supervisor.drain_timeout);
  w.millis(spec.supervisor.job_timeout);
  w.str(spec.supervisor.stop_request_name);
  w.str(spec.supervisor.launcher_name);
  w.flag(spec.supervisor.quiet);
  w.i64(static_cast<int>(spec.supervisor.tracking));
  w.i64(static_cast<int>(spec.console));
  w.strs(spec.remove_after_job);
  return w.take();
}

JobSpec decode_spec(std::string_view data) {
  Reader r(data);
  JobSpec spec;
  spec.log_dir = r.str();
  spec.job_id = r.str();
  spec.rank_table_json = r.str();
  spec.rank_table_source = r.str();
  spec.server_id = r.str();
  spec.world_size = r.i32();
  spec.command = r.strs();
  spec.work_dir = r.str();
  spec.device_lock_dir = r.str();
  spec.cache_dir = r.str();
  const std::size_t n = r.count();
  for (std::size_t i = 0; i < n; ++i) {
    RankAssignment a;
    a.role = r.flag() ? ProcessRole::scheduler : ProcessRole::rank;
    a.rank = r.i32();
    a.local_rank = r.i32();
    a.physical_device_id = r.i32();
    a.logical_device_id = r.i32();
    a.device_ip = r.opt_str();
    spec.ranks.push_back(a);
    spec.environments.push_back(r.strs());
    spec.show_on_console.push_back(r.flag());
  }
  PeerPlan& p = spec.peers;
  p.enabled = r.flag();
  p.server_count = static_cast<std::size_t>(r.u64());
  p.hub = r.flag();
  p.hub_address = r.str();
  p.port = r.i32();
  p.server_index = static_cast<std::size_t>(r.u64());
  p.hub_index = static_cast<std::size_t>(r.u64());
  p.server_ids = r.strs();
  p.job_key = r.str();
  p.key_from_environment = r.flag();
  p.peer_timeout = r.millis();
  p.connect_timeout = r.millis();
  p.stall_timeout = r.millis();
  r.check(!p.enabled || (p.server_index < p.server_ids.size() && p.hub_index < p.server_ids.size()));
  spec.supervisor.grace_period = r.millis();
  spec.supervisor.drain_timeout = r.millis();
  spec.supervisor.job_timeout = r.millis();
  spec.supervisor.stop_request_name = r.str();
  spec.supervisor.launcher_name = r.str();
  spec.supervisor.quiet = r.flag();
  const int tracking = r.i32();
  r.check(tracking >= 0 && tracking <= 2);
  spec.supervisor.tracking = static_cast<ProcessTracking>(tracking);
  const int console = r.i32();
  r.check(console >= 0 && console <= 2);
  spec.console = static_cast<ConsoleRoute>(console);
  spec.remove_after_job = r.strs();
  r.finish();
  return spec;
}

std::string encode_started(const StartedJob& started) {
  Writer w;
  w.str(started.run_dir);
  w.str(started.tag);
  w.u64(started.pids.size());
  for (pid_t pid : started.pids) w.i64(pid);
  w.i64(static_cast<int>(started.tracking));
  return w.take();
}

StartedJob decode_started(std::string_view data) {
  Reader r(data);
  StartedJob started;
  started.run_dir = r.str();
  started.tag = r.str();
  const std::size_t n = r.count();
  for (std::size_t i = 0; i < n; ++i) started.pids.push_back(static_cast<pid_t>(r.i64()));
  const int tracking = r.i32();
  r.check(tracking >= 0 && tracking <= 2);
  started.tracking = static_cast<ProcessTracking>(tracking);
  r.finish();
  return started;
}

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
  Writer w;
  w.u64(index);
  w.str(text);
  return w.take();
}

ProgressUpdate decode_progress(std::string_view data) {
  Reader r(data);
  ProgressUpdate update;
  update.index = static_cast<std::size_t>(r.u64());
  update.text = r.str();
  r.finish();
  return update;
}

std::string encode_rank_exited(const RankExited& exited) {
  Writer w;
  w.u64(exited.index);
  put_status(w, exited.status);
  w.flag(exited.stopped_by_launcher);
  return w.take();
}

RankExited decode_rank_exited(std::string_view data) {
  Reader r(data);
  RankExited exited;
  exited.index = static_cast<std::size_t>(r.u64());
  exited.status = get_status(r);
  exited.stopped_by_launcher = r.flag();
  r.finish();
  return exited;
}

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
    default: return false;
  }
}

std::string encode_result(const JobResult& result) {
  Writer w;
  w.u64(result.ranks.size());
  for (const RankResult& rr : result.ranks) {
    w.flag(rr.role == ProcessRole::scheduler);
    w.i64(rr.rank);
    w.i64(rr.pid);
    w.str(rr.log_path);
    put_status(w, rr.status);
    w.flag(rr.terminated_by_launcher);
    w.flag(rr.killed_by_launcher);
    w.time(rr.started);
    w.time(rr.ended);
    w.u64(rr.output_bytes);
    w.opt_str(rr.log_error);
  }
  w.flag(result.first_failure.has_value());
  w.u64(result.first_failure.value_or(0));
  w.i64(static_cast<int>(result.stop_reason));
  w.i64(result.stop_signal);
  w.i64(static_cast<int>(result.stop_signal_origin.receiver));
  w.i64(result.stop_signal_origin.sender_pid);
  w.str(result.stop_signal_origin.sender_name);
  w.i64(static_cast<int>(result.stopped_in));
  w.str(result.stop_detail);
  w.u64(result.leftover_processes_killed);
  w.i64(static_cast<int>(result.tracking));
  w.opt_str(result.tracking_fallback);
  w.flag(result.child_subreaper);
  w.opt_str(result.summary_error);
  w.flag(result.peer_stop.has_value());
  if (result.peer_stop) {
    const PeerStop& p = *result.peer_stop;
    w.str(p.server_id);
    w.flag(p.status.has_value());
    put_status(w, p.status.value_or(ExitStatus{}));
    w.flag(p.role == ProcessRole::scheduler);
    w.i64(p.rank);
    w.str(p.detail);
  }
  return w.take();
}

JobResult decode_result(std::string_view data) {
  Reader r(data);
  JobResult result;
  const std::size_t n = r.count();
  for (std::size_t i = 0; i < n; ++i) {
    RankResult rr;
    rr.role = r.flag() ? ProcessRole::scheduler : ProcessRole::rank;
    rr.rank = r.i32();
    rr.pid = static_cast<pid_t>(r.i64());
    rr.log_path = r.str();
    rr.status = get_status(r);
    rr.terminated_by_launcher = r.flag();
    rr.killed_by_launcher = r.flag();
    rr.started = r.time();
    rr.ended = r.time();
    rr.output_bytes = r.u64();
    rr.log_error = r.opt_str();
    result.ranks.push_back(std::move(rr));
  }
  const bool has_failure = r.flag();
  const std::uint64_t failure = r.u64();
  if (has_failure) {
    r.check(failure < result.ranks.size());
    result.first_failure = static_cast<std::size_t>(failure);
  }
  const int reason = r.i32();
  r.check(reason >= 0 && reason <= static_cast<int>(StopReason::stalled));
  result.stop_reason = static_cast<StopReason>(reason);
  result.stop_signal = r.i32();
  const int receiver = r.i32();
  r.check(receiver >= 0 && receiver <= static_cast<int>(SignalReceiver::supervisor));
  result.stop_signal_origin.receiver = static_cast<SignalReceiver>(receiver);
  result.stop_signal_origin.sender_pid = static_cast<pid_t>(r.i64());
  result.stop_signal_origin.sender_name = r.str();
  const int stopped_in = r.i32();
  r.check(stopped_in >= 0 && static_cast<std::size_t>(stopped_in) < job_state_count);
  result.stopped_in = static_cast<JobState>(stopped_in);
  result.stop_detail = r.str();
  result.leftover_processes_killed = r.u64();
  const int tracking = r.i32();
  r.check(tracking >= 0 && tracking <= 2);
  result.tracking = static_cast<ProcessTracking>(tracking);
  result.tracking_fallback = r.opt_str();
  result.child_subreaper = r.flag();
  result.summary_error = r.opt_str();
  if (r.flag()) {
    PeerStop p;
    p.server_id = r.str();
    const bool has_status = r.flag();
    const ExitStatus status = get_status(r);
    if (has_status) p.status = status;
    p.role = r.flag() ? ProcessRole::scheduler : ProcessRole::rank;
    p.rank = r.i32();
    p.detail = r.str();
    result.peer_stop = std::move(p);
  }
  r.finish();
  return result;
}

std::string encode_error(const std::exception& error) {
  Writer w;
  if (const auto* spawn = dynamic_cast<const SpawnError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::spawn));
    w.str(spawn->what());
    w.i64(spawn->rank());
    w.str(spawn->command());
    w.i64(spawn->os_errno());
    w.str(spawn->search_path());
  } else if (const auto* system = dynamic_cast<const SystemError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::system));
    w.str(system->what());
    w.i64(system->os_errno());
  } else if (const auto* busy = dynamic_cast<const DeviceBusyError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::device_busy));
    w.str(busy->what());
    w.u64(busy->devices().size());
    for (const int device : busy->devices()) w.i64(device);
    w.i64(busy->holder_pid());
    w.str(busy->holder_description());
  } else if (const auto* option = dynamic_cast<const OptionError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::option));
    w.str(option->what());
    w.str(option->option());
    w.i64(option->name_at() == std::string::npos ? -1 : static_cast<std::int64_t>(option->name_at()));
  } else if (dynamic_cast<const ConfigError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::config));
    w.str(error.what());
  } else {
    w.i64(static_cast<int>(ErrorType::generic));
    w.str(error.what());
  }
  return w.take();
}

void rethrow_error(std::string_view data) {
  Reader r(data);
  const auto type = static_cast<ErrorType>(r.i32());
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
      std::vector<int> devices(r.count());
      for (int& device : devices) device = r.i32();
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
