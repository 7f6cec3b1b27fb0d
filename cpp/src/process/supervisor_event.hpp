// A Supervisor's private parts that its two halves share: an event of the
// life cycle as the loop saw it (supervisor.cpp) and the clocks the states
// keep (supervisor_states.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "davincirun/lifecycle.hpp"
#include "davincirun/supervisor.hpp"

namespace davincirun {

struct Supervisor::Event {
  explicit Event(JobEvent k) : kind(k) {}
  JobEvent kind;
  std::optional<std::size_t> rank;  ///< rank_exited, rank_failed: its index
  /// What the stop notice says happened, for the events that can name a
  /// stop ("rank 1 (pid 7) failed with exit code 1"); empty: the event's
  /// own words (supervisor_states.cpp).
  std::string why;
  int signal = 0;                ///< engine_signal
  SignalOrigin origin;           ///< engine_signal
  std::optional<PeerStop> peer;  ///< the peer channel's events
  bool dropped = false;          ///< kill_request: the launcher dropped the job
};

struct Supervisor::Clocks {
  using Time = std::chrono::steady_clock::time_point;
  std::optional<Time> job_deadline;     // LaunchOptions::timeout, from the start of the ranks
  std::optional<Time> kill_deadline;    // stopping: the end of the grace period
  std::optional<Time> report_deadline;  // stopping: name the ranks still running
  std::optional<Time> hold_until;       // SupervisorOptions::hold
  std::optional<Time> next_wait_line;   // waiting_for_servers: the next progress line
  std::optional<Time> restart_at;       // restarting: the end of the restart delay
  std::optional<Time> next_tick;        // set_ticker(): the next call
  bool job_deadline_armed = false;      // the job timeout counts from the first attempt's start
  bool restart_ordered = false;         // waiting_for_servers goes on to restarting
  Time entered{};                       // when the current state began
  bool servers_done = false;            // waiting_for_servers may end
  bool stall_fired = false;             // the stall watchdog fires once
};

}  // namespace davincirun
