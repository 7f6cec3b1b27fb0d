#include "job_peers.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/root_cause.hpp"
#include "lifeline.hpp"
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
  c.hub = p.hub;
  c.hub_address = p.hub_address;
  c.port = p.port;
  c.server_index = static_cast<std::uint32_t>(p.server_index);
  c.hub_index = static_cast<std::uint32_t>(p.hub_index);
  c.server_ids = p.server_ids;
  c.job_key = p.job_key;
  c.max_restarts = spec.supervisor.max_restarts;
  c.awaits_start = !p.hub && spec.supervisor.max_restarts > 0;
  c.sends_part = true;
  // A member's part comes once its ranks are gone: within their grace period after a stop.
  c.gather_timeout = spec.supervisor.grace_period + std::chrono::seconds(3);
  return c;
}

JobEvent event_of(PeerEventKind kind) {
  switch (kind) {
    case PeerEventKind::rank_failed: return JobEvent::peer_failed;
    case PeerEventKind::stopped: return JobEvent::peer_stopped;
    case PeerEventKind::lost: return JobEvent::peer_lost;
    case PeerEventKind::stalled: return JobEvent::stall;
    case PeerEventKind::never_joined: return JobEvent::peer_never_joined;
    case PeerEventKind::unreachable: return JobEvent::hub_unreachable;
  }
  return JobEvent::peer_lost;
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

void dump_stacks_before_stall(Supervisor& supervisor, const std::vector<std::string>& labels,
                              const std::string& run_dir, const std::string& why) {
  supervisor.post_notice(
      fmt::format("{}: {}", why, dump_python_stacks(supervisor.pids(), labels, run_dir + "/stacks")));
}

JobPeers::JobPeers(const JobSpec& spec, LineSink& console) : spec_(spec), console_(console) {
  const PeerConfig config = config_of(spec);
  awaits_start_ = config.awaits_start;
  agent_ = std::make_unique<PeerAgent>(
      config, [this](const PeerEvent& e) { on_stop(e); },
      [this](const std::string& s, bool info) { on_notice(s, info); },
      [this] {
        Supervisor* s = supervisor_.load();
        return s != nullptr ? s->silent_ms() : 0;
      });
  agent_->on_decision([this](const PeerDecision& d, const std::optional<PeerEvent>& unheard) {
    ServersDecision decision;
    decision.restart = d.restart;
    decision.decision = d.decision;
    decision.root_cause = d.root_cause;
    if (unheard) decision.stop.emplace(event_of(unheard->kind), stop_of(*unheard));
    with_supervisor([decision](Supervisor& s) { s.servers_decided(decision); });
  });
  agent_->on_pace(
      [this] {
        const JobProgress* p = progress_.load();
        return p != nullptr ? p->server_pace() : ServerPace();
      },
      [this](std::optional<double> job_pace) {
        if (JobProgress* p = progress_.load()) p->set_job_pace(job_pace);
      });
}

void JobPeers::with_supervisor(std::function<void(Supervisor&)> action) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (Supervisor* s = supervisor_.load()) {
    action(*s);
  } else {
    queued_.push_back(std::move(action));
  }
}

void JobPeers::start_thread() {
  thread_ = std::thread([this] {
    try {
      agent_->run();
    } catch (const std::exception& e) {
      // Without its channel the job cannot stop together: it stops now.
      PeerStop stop;
      stop.server_id = spec_.server_id;
      stop.detail = fmt::format("lost its peer channel: {}", e.what());
      agent_returned_ = true;
      with_supervisor([stop](Supervisor& s) { s.request_stop_by_peer(JobEvent::peer_lost, stop); });
      return;
    }
    agent_returned_ = true;
    with_supervisor([](Supervisor& s) { s.servers_done(); });
  });
}

void JobPeers::flush_pending() {
  std::vector<std::string> lines;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    lines.swap(pending_);
  }
  for (const auto& text : lines) console_.notice(notice_line(text));
}

int JobPeers::await_start(int lifeline_fd) {
  start_thread();
  for (;;) {
    flush_pending();  // this thread's console: nothing else writes to it yet
    if (const auto attempt = agent_->attempt_to_start()) return static_cast<int>(*attempt);
    std::string why = agent_->why_not_started();
    if (why.empty() && agent_returned_) {
      const auto event = agent_->stop_event();
      why = event ? fmt::format("server {} {}", event->server_id, event->detail) : "its peer agent ended";
    }
    if (!why.empty()) throw Error(fmt::format("server {} does not take part in the job: {}", spec_.server_id, why));
    if (stop_arrived(lifeline_fd, 20)) return 1;
  }
}

JobPeers::~JobPeers() { stop(); }

void JobPeers::start(Supervisor& supervisor, std::string run_dir, std::vector<std::string> labels) {
  supervisor_ = &supervisor;
  run_dir_ = std::move(run_dir);
  labels_ = std::move(labels);
  ServerLink link;
  link.local_stop = [this](StopReason reason, const RankResult* failure, const std::string& why) {
    on_local_stop(reason, failure, why);
  };
  link.local_done = [this](bool success, const AttemptVerdict* verdict, const JobResult& so_far) {
    PeerAttemptOver over;
    over.success = success;
    if (verdict != nullptr) {
      over.refuses_restart = !verdict->restart && !verdict->decision.empty();
      over.decision = verdict->decision;
      over.root_cause = verdict->root_cause;
    }
    agent_->finish(std::move(over), !spec_.peers.hub && part_maker_ ? part_maker_(so_far) : std::string());
  };
  link.waiting_for = [this] { return agent_->waiting_for(); };
  supervisor.set_server_link(std::move(link));
  flush_pending();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    running_ = true;
    supervisor_.store(&supervisor);
    for (auto& action : queued_) action(supervisor);
    queued_.clear();
  }
  if (!thread_.joinable()) start_thread();
}

void JobPeers::stop() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
  agent_->abort();
  thread_.join();
  flush_pending();
}

void JobPeers::on_notice(const std::string& line, bool info) {
  std::string text = "peers: " + line;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (running_) {
    supervisor_.load()->post_notice(std::move(text), info);
  } else if (!info || !spec_.supervisor.quiet) {
    pending_.push_back(std::move(text));
  }
}

void JobPeers::on_stop(const PeerEvent& event) {
  with_supervisor([this, event](Supervisor& s) {
    if (event.kind == PeerEventKind::stalled) {
      dump_stacks_before_stall(s, labels_, run_dir_, fmt::format("the job stalled ({})", event.detail));
    }
    s.request_stop_by_peer(event_of(event.kind), stop_of(event));
  });
}

void JobPeers::on_local_stop(StopReason reason, const RankResult* failure, const std::string& why) {
  PeerEvent event;
  event.server_id = spec_.server_id;
  if (reason == StopReason::rank_failed && failure != nullptr) {
    event.kind = PeerEventKind::rank_failed;
    event.role = failure->role;
    event.rank = failure->rank;
    event.status = failure->status;
    const RootCause cause = rank_root_cause(failure->log_path);
    event.detail = cause.found ? cause.text : std::string();
    if (!cause.hint.empty()) event.detail += "hint: " + cause.hint + "\n";
    event.detail.resize(utf8_prefix_length(event.detail, max_detail_bytes));  // whole characters only
  } else if (reason == StopReason::launcher_gone && awaits_start_) {
    // A member of a job that restarts whose launcher is gone leaves the job;
    // started again (an engine's restart), it rejoins the next attempt.
    event.kind = PeerEventKind::lost;
    event.detail = "left the job: " + why;
  } else {
    event.kind = PeerEventKind::stopped;
    event.detail = why;
  }
  agent_->report(event);
}

}  // namespace davincirun::detail
