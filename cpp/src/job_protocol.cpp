#include "detail/job_protocol.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

// Little-endian, fixed-width, length-prefixed: the two ends are always the
// same build, so no versioning; every read is bounds-checked all the same.
class Writer {
 public:
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void flag(bool v) { out_ += v ? '\1' : '\0'; }
  void str(std::string_view v) {
    u64(v.size());
    out_.append(v);
  }
  void strs(const std::vector<std::string>& v) {
    u64(v.size());
    for (const auto& s : v) str(s);
  }
  void opt_str(const std::optional<std::string>& v) {
    flag(v.has_value());
    if (v) str(*v);
  }
  void millis(std::chrono::milliseconds v) { i64(v.count()); }
  void time(std::chrono::system_clock::time_point t) {
    i64(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::uint64_t u64() {
    need(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  int i32() { return static_cast<int>(i64()); }
  bool flag() {
    need(1);
    return data_[pos_++] != '\0';
  }
  std::string str() {
    const std::uint64_t n = u64();
    need(n);
    std::string v(data_.substr(pos_, n));
    pos_ += n;
    return v;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count());
    for (auto& s : v) s = str();
    return v;
  }
  std::optional<std::string> opt_str() {
    if (!flag()) return std::nullopt;
    return str();
  }
  std::chrono::milliseconds millis() { return std::chrono::milliseconds(i64()); }
  std::chrono::system_clock::time_point time() {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(i64())));
  }
  // An element count, checked against what is left so that a corrupt count
  // cannot make us allocate gigabytes.
  std::size_t count() {
    const std::uint64_t n = u64();
    if (n > data_.size() - pos_) malformed();
    return static_cast<std::size_t>(n);
  }
  void finish() const {
    if (pos_ != data_.size()) malformed();
  }
  void check(bool ok) const {
    if (!ok) malformed();
  }

 private:
  void need(std::uint64_t n) const {
    if (n > data_.size() - pos_) malformed();
  }
  [[noreturn]] static void malformed() {
    throw SystemError("malformed message between the launcher and its job supervisor process", EPROTO);
  }
  std::string_view data_;
  std::size_t pos_ = 0;
};

void put_status(Writer& w, const ExitStatus& s) {
  w.i64(static_cast<int>(s.kind));
  w.i64(s.value);
}

ExitStatus get_status(Reader& r) {
  ExitStatus s;
  const int kind = r.i32();
  s.kind = kind == 0 ? ExitStatus::Kind::exited : kind == 1 ? ExitStatus::Kind::signaled : ExitStatus::Kind::unknown;
  s.value = r.i32();
  return s;
}

enum class ErrorType : int { generic = 0, config = 1, spawn = 2, system = 3, device_busy = 4 };

}  // namespace

JobSpec make_job_spec(const LaunchPlan& plan, ConsoleRoute console) {
  JobSpec spec;
  spec.log_dir = plan.log_dir;
  spec.job_id = plan.job.job_id;
  spec.rank_table_json = plan.table.normalized_json;
  spec.rank_table_source = plan.job.rank_table_file;
  spec.server_id = plan.table.servers[plan.server_index].server_id;
  spec.world_size = plan.job.world_size;
  spec.command = plan.options.command;
  spec.work_dir = plan.work_dir;
  spec.device_lock_dir = plan.device_lock_dir;
  spec.ranks = plan.ranks;
  for (const auto& a : plan.ranks) {
    const auto& shown = plan.options.ranks_to_show;
    spec.show_on_console.push_back(!shown || std::find(shown->begin(), shown->end(), a.rank) != shown->end());
  }
  for (const auto& env : plan.environments) spec.environments.push_back(env.entries());
  spec.supervisor = plan.options.supervisor;
  spec.console = console;
  spec.remove_after_job = plan.options.remove_after_job;
  return spec;
}

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
  w.u64(spec.ranks.size());
  for (std::size_t i = 0; i < spec.ranks.size(); ++i) {
    const RankAssignment& a = spec.ranks[i];
    w.i64(a.rank);
    w.i64(a.local_rank);
    w.i64(a.physical_device_id);
    w.i64(a.logical_device_id);
    w.opt_str(a.device_ip);
    w.strs(i < spec.environments.size() ? spec.environments[i] : std::vector<std::string>{});
    w.flag(i < spec.show_on_console.size() ? spec.show_on_console[i] : true);
  }
  w.millis(spec.supervisor.grace_period);
  w.millis(spec.supervisor.drain_timeout);
  w.millis(spec.supervisor.job_timeout);
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
  const std::size_t n = r.count();
  for (std::size_t i = 0; i < n; ++i) {
    RankAssignment a;
    a.rank = r.i32();
    a.local_rank = r.i32();
    a.physical_device_id = r.i32();
    a.logical_device_id = r.i32();
    a.device_ip = r.opt_str();
    spec.ranks.push_back(a);
    spec.environments.push_back(r.strs());
    spec.show_on_console.push_back(r.flag());
  }
  spec.supervisor.grace_period = r.millis();
  spec.supervisor.drain_timeout = r.millis();
  spec.supervisor.job_timeout = r.millis();
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

std::string encode_progress(std::string_view label, std::string_view text) {
  Writer w;
  w.str(label);
  w.str(text);
  return w.take();
}

ProgressUpdate decode_progress(std::string_view data) {
  Reader r(data);
  ProgressUpdate update;
  update.label = r.str();
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
    case Frame::lines: sink.write(payload); return true;
    case Frame::notice: sink.notice(payload); return true;
    case Frame::progress: {
      ProgressUpdate update = decode_progress(payload);
      sink.progress(update.label, update.text);
      return true;
    }
    case Frame::rank_exited: {
      RankExited exited = decode_rank_exited(payload);
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
  w.u64(result.leftover_processes_killed);
  w.i64(static_cast<int>(result.tracking));
  w.opt_str(result.summary_error);
  return w.take();
}

JobResult decode_result(std::string_view data) {
  Reader r(data);
  JobResult result;
  const std::size_t n = r.count();
  for (std::size_t i = 0; i < n; ++i) {
    RankResult rr;
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
  result.stop_reason = reason == 1   ? StopReason::rank_failed
                       : reason == 2 ? StopReason::requested
                       : reason == 3 ? StopReason::timed_out
                       : reason == 4 ? StopReason::signaled
                                     : StopReason::none;
  result.stop_signal = r.i32();
  result.leftover_processes_killed = r.u64();
  const int tracking = r.i32();
  r.check(tracking >= 0 && tracking <= 2);
  result.tracking = static_cast<ProcessTracking>(tracking);
  result.summary_error = r.opt_str();
  r.finish();
  return result;
}

std::string encode_error(const std::exception& error) {
  Writer w;
  if (const auto* e = dynamic_cast<const SpawnError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::spawn));
    w.str(e->what());
    w.i64(e->rank());
    w.str(e->command());
    w.i64(e->os_errno());
  } else if (const auto* e = dynamic_cast<const SystemError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::system));
    w.str(e->what());
    w.i64(e->os_errno());
  } else if (const auto* e = dynamic_cast<const DeviceBusyError*>(&error)) {
    w.i64(static_cast<int>(ErrorType::device_busy));
    w.str(e->what());
    w.u64(e->devices().size());
    for (int device : e->devices()) w.i64(device);
    w.i64(e->holder_pid());
    w.str(e->holder_description());
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
      r.finish();
      throw SpawnError(rank, std::move(command), err, std::move(message));
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
      throw DeviceBusyError(std::move(devices), holder_pid, std::move(description), std::move(message));
    }
    case ErrorType::config:
      r.finish();
      throw ConfigError(message);
    default:
      r.finish();
      throw Error(message);
  }
}

bool write_frame(int fd, Frame type, std::string_view payload) {
  char header[5];
  header[0] = static_cast<char>(type);
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) header[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  auto send_all = [fd](const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EPIPE || errno == ECONNRESET) return false;
        throw SystemError("send to the job's lifeline socket", errno);
      }
      data += sent;
      size -= static_cast<std::size_t>(sent);
    }
    return true;
  };
  // Small frames in one call; large ones without copying the payload.
  if (payload.size() <= 4096) {
    std::string frame(header, sizeof header);
    frame.append(payload);
    return send_all(frame.data(), frame.size());
  }
  return send_all(header, sizeof header) && send_all(payload.data(), payload.size());
}

bool FrameReader::fill(std::size_t wanted) {
  while (buffer_.size() - start_ < wanted) {
    if (start_ > 0 && start_ == buffer_.size()) {
      buffer_.clear();
      start_ = 0;
    }
    char chunk[64 * 1024];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return false;
      throw SystemError("read from the job's lifeline socket", errno);
    }
    if (n == 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
  return true;
}

std::string FrameReader::take_buffered() {
  std::string rest = buffer_.substr(start_);
  buffer_.clear();
  start_ = 0;
  return rest;
}

bool FrameReader::next(Frame& type, std::string& payload) {
  if (!fill(5)) {
    if (buffer_.size() == start_) return false;
    throw SystemError("the job supervisor process ended in the middle of a message", EPIPE);
  }
  type = static_cast<Frame>(buffer_[start_]);
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) {
    n |= static_cast<std::uint32_t>(static_cast<unsigned char>(buffer_[start_ + 1 + i])) << (8 * i);
  }
  if (n > max_frame_bytes) throw SystemError("a message from the job supervisor process is too large", EPROTO);
  if (!fill(5 + static_cast<std::size_t>(n))) {
    throw SystemError("the job supervisor process ended in the middle of a message", EPIPE);
  }
  payload.assign(buffer_, start_ + 5, n);
  start_ += 5 + n;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  } else if (start_ > (1U << 20)) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  return true;
}

}  // namespace davincirun::detail
