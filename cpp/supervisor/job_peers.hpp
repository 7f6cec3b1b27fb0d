// The job's side of the peer channel (peers/peer_agent.hpp) and the stall
// watchdog: what this server's supervisor tells the other servers' agents,
// and what it does when they, or the watchdog, stop the job.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/console_sink.hpp"
#include "davincirun/supervisor.hpp"
#include "job/job_protocol.hpp"
#include "peers/peer_agent.hpp"

namespace davincirun::detail {

class JobPeers {
 public:
  /// Nothing to do (no channel, no watchdog): the job runs as on one server.
  static bool wanted(const PeerPlan& peers) noexcept { return peers.enabled || peers.stall_timeout.count() > 0; }

  /// The agent; on the server of rank 0 it binds its port here, before any
  /// rank starts (ConfigError when the port is taken).
  JobPeers(const JobSpec& spec, LineSink& console);
  /// Ends the agent's thread.
  ~JobPeers();
  JobPeers(const JobPeers&) = delete;
  JobPeers& operator=(const JobPeers&) = delete;

  /// Hooks the agent to the started ranks and starts its thread.
  /// `run_dir`: where stall dumps go; `labels`: each process's console label.
  void start(Supervisor& supervisor, std::string run_dir, std::vector<std::string> labels);
  /// After Supervisor::run(): tells the other servers how this one ended,
  /// waits until the agent is done (the hub waits for every member), and
  /// adds to `result` a stop the other servers decided after this
  /// server's processes were already done.
  void finish(JobResult& result);

 private:
  void on_stop(const PeerEvent& event);
  void on_notice(const std::string& line);
  void on_local_stop(StopReason reason, const RankResult* failure, const std::string& why);
  void print_pending();

  const JobSpec& spec_;
  LineSink& console_;
  std::unique_ptr<PeerAgent> agent_;
  Supervisor* supervisor_ = nullptr;
  std::string run_dir_;
  std::vector<std::string> labels_;
  std::thread thread_;

  std::mutex mutex_;  // guards what follows
  std::condition_variable changed_;
  bool running_ = false;  // Supervisor::run() is under way: notices go through it
  bool agent_done_ = false;
  std::vector<std::string> pending_;  // notices for the main thread once run() returned
};

}  // namespace davincirun::detail
