// The job's side of the peer channel (peers/peer_agent.hpp): what this
// server's supervisor tells the other servers' agents, and what it does when
// they stop the job or are done (a ServerLink of the Supervisor).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/supervisor.hpp"
#include "job/job_protocol.hpp"
#include "output/job_progress.hpp"
#include "peers/peer_agent.hpp"

namespace davincirun::detail {

class JobPeers {
 public:
  /// A job of several servers with the channel on (LaunchOptions::peers).
  static bool wanted(const PeerPlan& peers) noexcept { return peers.enabled; }

  /// The agent; on the server of rank 0 it binds its port here, before any
  /// rank starts (ConfigError when the port is taken).
  JobPeers(const JobSpec& spec, LineSink& console);
  /// stop(), if not done yet.
  ~JobPeers();
  JobPeers(const JobPeers&) = delete;
  JobPeers& operator=(const JobPeers&) = delete;

  /// A member of a job that restarts: its ranks start once the hub names
  /// the attempt, so that it can rejoin a job under way (peer_agent.hpp).
  bool awaits_start() const noexcept { return awaits_start_; }
  /// awaits_start(): starts the agent and waits until the hub names the
  /// attempt to start as, and returns it; 1 when a stop came first (a
  /// signal pending, or `lifeline_fd` readable: the ranks then start and
  /// the stop is taken at once, as in `starting`). Throws Error when the
  /// job will not have this server (it ended first, the hub could not be
  /// reached or refused it). The agent's lines go to the console meanwhile.
  int await_start(int lifeline_fd);
  /// Links the agent to the started ranks' supervisor and starts its
  /// thread (unless await_start() did). `run_dir`: where the stall
  /// watchdog's stacks go; `labels`: each process's console label.
  void start(Supervisor& supervisor, std::string run_dir, std::vector<std::string> labels);
  /// After Supervisor::run(): ends the agent (what it still has to say
  /// gets up to a second) and writes the notices it left to the console.
  void stop();

  /// A member: makes this server's part of the job record (JSON text, at
  /// most max_record_part_bytes) from the result so far, when its attempt
  /// is over; the agent sends it to the hub before its `over`. Set before start().
  using PartMaker = std::function<std::string(const JobResult& so_far)>;
  void set_part_maker(PartMaker maker) { part_maker_ = std::move(maker); }
  /// The ranks' progress whose pace goes to the other servers and which
  /// compares its ranks with the job's (peers/peer_pace.cpp); it must
  /// outlive this. Before it is set, this server has no pace.
  void watch_pace(JobProgress& progress) { progress_.store(&progress); }
  /// The hub, after stop(): every other server's part and clock.
  std::vector<GatheredServer> gathered() const { return agent_->gathered(); }
  /// The hub, after stop(): sends the whole job's record (JSON text) to
  /// the members, for at most 5 s (PeerAgent::share_record).
  void share_record(const std::string& record) { agent_->share_record(record, std::chrono::seconds(5)); }
  /// A member, after stop(): the hub's record, or "" and why not
  /// (PeerAgent::await_record: up to the gather timeout plus 2 s after a stop).
  std::string await_record(std::string& why) { return agent_->await_record(why); }

 private:
  void on_stop(const PeerEvent& event);
  void on_notice(const std::string& line, bool info);
  void on_local_stop(StopReason reason, const RankResult* failure, const std::string& why);
  void start_thread();
  /// Does `action` with the supervisor, or once there is one.
  void with_supervisor(std::function<void(Supervisor&)> action);
  void flush_pending();

  const JobSpec& spec_;
  LineSink& console_;
  std::unique_ptr<PeerAgent> agent_;
  bool awaits_start_ = false;
  std::atomic<Supervisor*> supervisor_{nullptr};
  std::string run_dir_;
  std::vector<std::string> labels_;
  PartMaker part_maker_;
  std::atomic<JobProgress*> progress_{nullptr};
  std::thread thread_;
  std::atomic<bool> agent_returned_{false};

  std::mutex mutex_;                                      // guards what follows
  bool running_ = false;                                  // Supervisor::run() is under way: notices go through it
  std::vector<std::string> pending_;                      // notices for the console once it has returned
  std::vector<std::function<void(Supervisor&)>> queued_;  // before the supervisor exists
};

/// Writes the ranks' Python stacks (py-spy) into <run_dir>/stacks and says
/// where, as a notice through `supervisor` ("the job stalled (<why>): ..."):
/// what the stall watchdog does before it stops a job.
void dump_stacks_before_stall(Supervisor& supervisor, const std::vector<std::string>& labels,
                              const std::string& run_dir, const std::string& why);

}  // namespace davincirun::detail
