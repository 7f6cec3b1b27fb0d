#include "job_peers.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "davincirun/root_cause.hpp"
#include "stack_dump.hpp"

namespace davincirun::detail {

namespace {

// What crosses the network of a root cause: enough to name it.
constexpr std::size_t max_detail_bytes = 4096;

PeerConfig config_of(const JobSpec& spec) {
  const PeerPlan& p = spec.peers;
  PeerConfig c;
  c.stall_timeout = p.stall_timeout;
  c.peer_timeout = p.peer_timeout;
  c.heartbeat_interval = heartbeat_interval_for(p.peer_timeout);
  // The stall watchdog reads the members' silence from their heartbeats:
  // often enough that it fires within a quarter of its timeout.
  if (p.stall_timeout.count() > 0) {
    c.heartbeat_interval = std::min(c.heartbeat_interval, std::max(std::chrono::milliseconds(50), p.stall_timeout / 4));
  }
  c.connect_timeout = p.connect_timeout;
  if (!p.enabled) {  // the watchdog alone: a hub with no members
    c.hub = true;
    c.server_ids = {spec.server_id};
    return c;
  }
  c.hub = p.hub;
  c.hub_address = p.hub_address;
  c.port = p.port;
  c.server_index = static_cast<std::uint32_t>(p.server_index);
  c.hub_index = static_cast<std::uint32_t>(p.hub_index);
  c.server_ids = p.server_ids;
  c.job_key = p.job_key;
  return c;
}

StopReason reason_of(PeerEventKind kind) {
  switch (kind) {
    case PeerEventKind::lost: return StopReason::peer_lost;
    case PeerEventKind::stalled: return StopReason::stalled;
    default: return StopReason::peer_failed;
  }
}

PeerStop stop_of(const PeerEvent& e) {
  PeerStop s;
  s.server_id = e.server_id;
  if (e.kind == PeerEventKind::rank_failed) {
    s.status = e.status;
    s.role = e.role;
    s.rank = e.rank;
  }
  s.detail = e.detail;
  return s;
}

}  // namespace

JobPeers::JobPeers(const JobSpec& spec, LineSink& console) : spec_(spec), console_(console) {
  agent_ = std::make_unique<PeerAgent>(
      config_of(spec), [this](const PeerEvent& e) { on_stop(e); }, [this](const std::string& s) { on_notice(s); },
      [this] { return supervisor_ ? supervisor_->silent_ms() : 0; });
}

JobPeers::~JobPeers() {
  if (thread_.joinable()) {
    agent_->abort();
    thread_.join();
  }
}

void JobPeers::start(Supervisor& supervisor, std::string run_dir, std::vector<std::string> labels) {
  supervisor_ = &supervisor;
  run_dir_ = std::move(run_dir);
  labels_ = std::move(labels);
  supervisor.set_stop_listener([this](StopReason reason, const RankResult* failure, const std::string& why) {
    on_local_stop(reason, failure, why);
  });
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    running_ = true;
  }
  thread_ = std::thread([this] {
    try {
      agent_->run();
    } catch (const std::exception& e) {
      on_notice(fmt::format("the peer channel failed: {}", e.what()));
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    agent_done_ = true;
    changed_.notify_all();
  });
}

void JobPeers::on_notice(const std::string& line) {
  std::string text = spec_.peers.enabled ? "peers: " + line : line;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (running_ && supervisor_) {
    supervisor_->post_notice(std::move(text));
    return;
  }
  pending_.push_back(std::move(text));
  changed_.notify_all();
}

void JobPeers::on_stop(const PeerEvent& event) {
  if (event.kind == PeerEventKind::stalled) {
    std::vector<pid_t> pids = supervisor_ ? supervisor_->pids() : std::vector<pid_t>{};
    on_notice(
        fmt::format("the job stalled ({}): {}", event.detail, dump_python_stacks(pids, labels_, run_dir_ + "/stacks")));
  }
  if (supervisor_) supervisor_->request_stop_by_peer(reason_of(event.kind), stop_of(event));
}

void JobPeers::on_local_stop(StopReason reason, const RankResult* failure, const std::string& why) {
  if (!spec_.peers.enabled) return;
  PeerEvent event;
  event.server_id = spec_.server_id;
  if (reason == StopReason::rank_failed && failure != nullptr) {
    event.kind = PeerEventKind::rank_failed;
    event.role = failure->role;
    event.rank = failure->rank;
    event.status = failure->status;
    const RootCause cause = read_root_cause(failure->log_path);
    event.detail = cause.found ? cause.text : std::string();
    if (event.detail.size() > max_detail_bytes) event.detail.erase(max_detail_bytes);
  } else {
    event.kind = PeerEventKind::stopped;
    event.detail = why;
  }
  agent_->report(event);
}

void JobPeers::print_pending() {
  std::vector<std::string> lines;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    lines.swap(pending_);
  }
  for (const auto& text : lines) console_.notice(notice_line(text));
}

void JobPeers::finish(JobResult& result) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
  if (supervisor_) supervisor_->flush_posted_notices();
  agent_->finish(result.success());
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return agent_done_ || !pending_.empty(); });
    const bool done = agent_done_;
    lock.unlock();
    print_pending();
    if (done) break;
  }
  thread_.join();
  // The other servers stopped the job after this one's processes ended.
  if (const auto event = agent_->stop_event(); event && result.stop_reason == StopReason::none) {
    result.stop_reason = reason_of(event->kind);
    result.peer_stop = stop_of(*event);
    console_.notice(notice_line(describe(result.stop_reason, *result.peer_stop)));
  }
}

}  // namespace davincirun::detail
