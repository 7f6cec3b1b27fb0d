// The peer channel's agent: one per server of a job that spans servers,
// all connected to the agent of rank 0's server (the hub), so that what
// happens on one server stops every server within milliseconds instead of
// the framework's collective timeout (docs/multi-server.md).
//
// Every agent sends a heartbeat each `heartbeat_interval` and hears one
// from the other side; silence for `peer_timeout`, or a connection closed
// before its server said it was done, means an agent, host or link is lost.
// A member reports its server's first failure (or a stop) to the hub; the
// hub decides the job's first event and sends it to every member. Members
// that cannot reach the hub retry until `connect_timeout`. The stall
// watchdog (PeerConfig::stall_timeout) is decided by the hub from every
// server's time since its last output, carried in the heartbeats.
//
// In a job that restarts (PeerConfig::max_restarts > 0) the agents outlive
// an attempt: every server says when its attempt is over (PeerAttemptOver,
// with its own judge's word); the hub, once it heard every server, decides
// for the job (PeerDecision: restart every server, or end) and tells every
// member; each agent then starts the next attempt afresh. A server whose
// own processes were done before a stop came from elsewhere does not stop
// again: the decision carries that stop. A server lost (its agent killed,
// its launcher gone) restarts the job, which waits for it to rejoin within
// the wait timeout: a member of such a job starts its ranks only once the
// hub's welcome (or decision) names the attempt (attempt_to_start()).
//
// The agent runs on one thread of its own (run()); the other methods may
// be called from any thread. It never touches processes: its owner (the
// job's supervisor process, whose life cycle is lifecycle.hpp) stops the
// ranks when on_stop is called, and knows the other servers are done when
// run() returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/unique_fd.hpp"
#include "output/slow_ranks.hpp"
#include "peers/peer_clock.hpp"
#include "peers/peer_message.hpp"

namespace davincirun::detail {

struct PeerConfig {
  bool hub = false;         ///< this server holds rank 0 and listens
  std::string hub_address;  ///< an IP literal or host name (members connect here)
  int port = 0;             ///< the hub listens on it, members connect to it
  std::uint32_t server_index = 0;
  std::uint32_t hub_index = 0;          ///< the server of rank 0, in server_ids
  std::vector<std::string> server_ids;  ///< every server's id, in table order (their number: the servers)
  std::string job_key;                  ///< any bytes; see peer_message.hpp
  std::chrono::milliseconds peer_timeout{30'000};
  std::chrono::milliseconds connect_timeout{300'000};
  std::chrono::milliseconds heartbeat_interval{5'000};
  std::chrono::milliseconds stall_timeout{0};  ///< 0: no stall watchdog
  int max_restarts = 0;                        ///< > 0: the job restarts; the hub decides every attempt
  /// A member of a job that restarts: its ranks start once the hub names
  /// the attempt (attempt_to_start()), so that it can rejoin a job under way.
  bool awaits_start = false;
  /// This server sends its part of the job record with its `over`
  /// (finish()), and takes the joined record back (await_record()); after
  /// a stop the hub waits for such members' parts for at most
  /// `gather_timeout` (their ranks have the grace period to end).
  bool sends_part = false;
  std::chrono::milliseconds gather_timeout{13'000};
};

/// What the hub heard of one other server by the end of the job.
struct GatheredServer {
  std::uint32_t server_index = 0;
  std::string part;                  ///< its part of the job record (JSON text); "" when none arrived
  std::string why;                   ///< part == "": why not ("never joined", "was lost: ...", "sent none")
  std::optional<ClockSample> clock;  ///< its clock against the hub's; none without an echoed heartbeat
};

/// The most a member sends of its record part; a larger one is refused.
inline constexpr std::size_t max_record_part_bytes = 4u << 20;
/// The most the hub sends of the joined record to all members together
/// (its size times their number): past it they keep their own part.
inline constexpr std::size_t max_shared_record_bytes = std::size_t{128} << 20;

/// A heartbeat interval that detects a loss well within `peer_timeout`: a
/// sixth of it, between 50 ms and 5 s.
std::chrono::milliseconds heartbeat_interval_for(std::chrono::milliseconds peer_timeout) noexcept;

class PeerAgent {
 public:
  /// Called on the agent's thread when the job must stop because of
  /// another server (or the stall watchdog). At most once.
  using StopHandler = std::function<void(const PeerEvent&)>;
  /// Called on the agent's thread with a line for the console; `info`: one
  /// a quiet console leaves out (an agent joined, still waiting to join).
  using NoticeHandler = std::function<void(const std::string& line, bool info)>;
  /// Milliseconds since this server's processes last wrote output
  /// (PeerHeartbeat::silent_ms); called on the agent's thread.
  using SilenceProbe = std::function<std::uint64_t()>;
  /// Called on the agent's thread, in a job that restarts, once this
  /// server's attempt is over and the job's decision on it is known (the
  /// hub's, or "not restarted" when the hub was lost). `unheard`: the stop
  /// that came from elsewhere after this server's processes were done (not
  /// given to the StopHandler). With `decision.restart`, the agent is ready
  /// for the next attempt when it is called.
  using DecisionHandler = std::function<void(const PeerDecision& decision, const std::optional<PeerEvent>& unheard)>;
  /// This server's pace (its ranks' position and slow ranks).
  using PaceProbe = std::function<ServerPace()>;
  using PaceHandler = std::function<void(std::optional<double> job_pace)>;

  /// The hub binds and listens here, before any rank starts: ConfigError
  /// when the port is taken, naming it. Members connect later, in run().
  PeerAgent(PeerConfig config, StopHandler on_stop, NoticeHandler on_notice, SilenceProbe silence);
  ~PeerAgent();
  PeerAgent(const PeerAgent&) = delete;
  PeerAgent& operator=(const PeerAgent&) = delete;

  /// Runs until finish() was called and the agent is done: a member once
  /// it told the hub; the hub once every member is done or the job stopped
  /// (waiting a while for members that have not joined, so that they learn
  /// of the stop at once); or until abort(). Then it sends what is queued
  /// (a report given just before abort() included), for at most a second.
  void run();

  /// This server's first failure or stop; the hub sends it to everyone.
  /// Ignored once the job is stopping for another server's event.
  void report(const PeerEvent& event);
  /// This server's attempt is over (`over.success`: every process exited
  /// 0; its `attempt` is the agent's own). run() returns once the other
  /// agents know, or the hub once every member is done; in a job that
  /// restarts, once the job ends (else the agent goes on with the next attempt).
  /// `part` (PeerConfig::sends_part): this server's part of the job
  /// record, sent to the hub before the `over` (at most max_record_part_bytes).
  void finish(PeerAttemptOver over, std::string part = {});
  void finish(bool success) {
    PeerAttemptOver over;
    over.success = success;
    finish(std::move(over));
  }
  /// Sets the DecisionHandler (a job that restarts); call before run().
  void on_decision(DecisionHandler handler) { on_decision_ = std::move(handler); }
  /// The job's pace (peer_pace.cpp): `probe` gives this server's (its
  /// ranks' upper median position in steps, and its slow ranks' labels),
  /// `handler` takes the job's, the upper median of every server's (none
  /// while fewer than two servers know theirs), about every heartbeat.
  /// Both are called on the agent's thread; the hub names members' slow
  /// ranks in its notices. Call before run().
  void on_pace(PaceProbe probe, PaceHandler handler) {
    pace_probe_ = std::move(probe);
    on_pace_ = std::move(handler);
  }
  /// Ends run() at once (the owner is going away, or stops waiting).
  void abort();

  /// What this agent waits for, in words, for the progress lines of a
  /// waiting job: "the agent of rank 0's server at 10.0.0.1:29731 (not
  /// reached: Connection refused; giving up 300.0 s after the start)",
  /// "servers 10.0.0.2 (running), 10.0.0.3 (not joined)". Thread-safe.
  std::string waiting_for() const;

  /// PeerConfig::awaits_start: the attempt this server's ranks are to
  /// start as, once the hub named it; nullopt before (and for good when
  /// why_not_started() says why). Thread-safe.
  std::optional<std::uint32_t> attempt_to_start() const;
  /// Why an awaiting member will not start (the job ended first, the hub
  /// could not be reached or refused it), or "". Thread-safe.
  std::string why_not_started() const;

  /// The event the job stopped for, when it came from another server (or
  /// the stall watchdog); read after run() returned.
  std::optional<PeerEvent> stop_event() const;

  /// The hub: every other server's record part and clock, in server
  /// order; read after run() returned (empty on a member).
  std::vector<GatheredServer> gathered() const;

  /// The hub, after run() returned, on the owner's thread: sends `record`
  /// (the whole job's record, JSON text) to every member that sent its part
  /// and is still connected, for at most `timeout` in all. When the record
  /// times those members would exceed max_shared_record_bytes, each gets a
  /// word that none comes instead. Returns the members that got it whole.
  std::size_t share_record(const std::string& record, std::chrono::milliseconds timeout);
  /// A member, after run() returned, on the owner's thread: the hub's
  /// record, waited for at most record_wait(); "" with `why` set when none
  /// came (the hub sent none, its connection ended, or the wait ran out), and
  /// at once when this server left the job (its launcher gone, restarts on).
  std::string await_record(std::string& why);
  /// How long a member waits for the record: after a stop the hub first
  /// waits up to the gather timeout for the other members' parts; after a
  /// success every server ends within moments of the others.
  std::chrono::milliseconds record_wait() const;

 private:
  struct Connection;
  void wake();
  void take_commands();
  void hub_accept();
  void hub_frame(Connection& c, const RawPeerFrame& f);
  void member_connect();
  void member_frame(Connection& c, const RawPeerFrame& f);
  void read_from(Connection& c);
  void send(Connection& c, PeerFrame type, const std::string& payload);
  void drop(Connection& c, const std::string& why);
  void lost(Connection& c, const std::string& why);
  PeerEvent lost_event(const Connection& c, const std::string& why) const;
  void tick();
  void retry_join(std::chrono::steady_clock::time_point now);
  void send_heartbeats(std::chrono::steady_clock::time_point now);
  // The record's part and clocks (peer_record.cpp).
  void send_heartbeat(Connection& c, bool want_echo);
  void heard_heartbeat(Connection& c, const PeerHeartbeat& beat);
  void send_part(Connection& c);
  // The job's pace (peer_pace.cpp).
  void put_pace(PeerHeartbeat& beat);
  void heard_pace(Connection& c, const PeerHeartbeat& beat);
  void hub_update_pace();
  void hub_part_chunk(Connection& c, const PeerPartChunk& chunk);
  bool awaiting_parts(std::chrono::steady_clock::time_point now) const;
  void check_connections(std::chrono::steady_clock::time_point now);
  void check_never_joined(std::chrono::steady_clock::time_point now);
  void check_stall();
  void say_not_joined(std::chrono::steady_clock::time_point now);
  void update_waiting_for();
  /// Waits up to `timeout` for what is ready and handles it.
  void poll_once(std::chrono::milliseconds timeout);
  void stop_job(const PeerEvent& event, bool local, Connection* origin);
  void member_say_over();
  void late_stop(const PeerEvent& event);
  void hub_decide(bool now);
  std::optional<std::string> refusal(std::uint32_t server) const;
  const PeerAttemptOver* over_of(std::uint32_t server) const;
  void hub_gone(const std::string& why);
  static std::string stopped_decision(const PeerEvent& event);
  void deliver_decision();
  void member_welcomed(const PeerWelcome& welcome);
  void decided_before_start(const PeerDecision& decision);
  void not_starting(const std::string& why);
  void next_attempt();
  bool restarts() const noexcept { return config_.max_restarts > 0; }
  void flush_before_exit();
  /// Has poll_fd_ watch `c` for what it waits for now: input always,
  /// room to write while it connects or has bytes unsent.
  void watch(Connection& c);
  bool done() const;
  /// Since the job began to stop, long enough waiting for agents that have
  /// not joined (the peer timeout, at most the connect timeout).
  bool lingered(std::chrono::steady_clock::time_point now) const;
  std::string server_name(std::uint32_t index) const;

  PeerConfig config_;
  StopHandler on_stop_;
  NoticeHandler on_notice_;
  SilenceProbe silence_;
  DecisionHandler on_decision_;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;
  // epoll: a wake costs what is ready, not every connection (a hub of
  // thousands of members hears a heartbeat every few milliseconds).
  UniqueFd poll_fd_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point next_heartbeat_;
  std::chrono::steady_clock::time_point next_connect_;
  std::chrono::milliseconds reconnect_delay_{200};  // member: after the hub answered and let go
  std::chrono::steady_clock::time_point last_refusal_line_{};
  std::size_t refusals_unsaid_ = 0;
  std::string last_connect_error_;

  mutable std::mutex mutex_;  // guards the commands, stop_event_ and waiting_for_
  std::string waiting_for_;
  std::optional<PeerEvent> pending_report_;
  std::optional<PeerAttemptOver> finished_;
  std::string finished_part_;
  bool aborted_ = false;
  std::optional<PeerEvent> stop_event_;
  std::optional<std::uint32_t> start_at_;  // awaits_start: the attempt to start as
  std::string not_started_;                // awaits_start: why it never will

  // The agent thread's own state.
  bool stopping_ = false;  // the job is stopping (any cause)
  bool reported_ = false;  // this server's event went to the hub
  bool local_finished_ = false;
  PeerAttemptOver local_over_;
  std::string local_part_;                  // member: its record part, sent before its over
  bool told_done_ = false;                  // member: the hub was told this server is done
  bool joined_ = false;                     // member: welcomed by the hub once
  std::optional<PeerEvent> unsent_report_;  // member: this server's event, for a hub joined later
  bool report_delivered_ = false;           // member: that event was sent to the hub
  std::optional<PeerEvent> first_event_;    // the job's first event, whatever its origin
  std::chrono::steady_clock::time_point stopped_at_;
  std::chrono::steady_clock::time_point next_join_line_;  // member: "not yet joined" progress lines
  std::vector<bool> member_joined_;                       // hub: by server index
  // The attempts (a job that restarts).
  std::uint32_t attempt_ = 1;
  bool unheard_ = false;                  // first_event_ came after this server's attempt was over
  bool ended_ = false;                    // the job's end is decided (hub) or delivered (member)
  bool leaving_ = false;                  // member: its launcher is gone; it leaves the job after this attempt
  bool deciding_ = false;                 // member awaiting its start: welcomed while the job decides
  std::optional<PeerDecision> decision_;  // member: heard, not yet delivered
  std::vector<std::optional<PeerAttemptOver>> member_over_;  // hub: this attempt's, by server index
  std::vector<std::string> member_gone_;                     // hub: why a member was lost ("" if not)
  // hub: a member lost may rejoin until this plus the wait timeout
  std::vector<std::optional<std::chrono::steady_clock::time_point>> member_lost_at_;
  std::vector<std::string> member_refusal_;  // hub: a member stopped after its attempt was over
  // hub: the job record's parts and clocks (peer_record.cpp), by server index
  std::vector<std::string> member_part_;
  std::vector<std::optional<ClockSample>> member_clock_;
  std::vector<bool> member_sends_part_;   // its hello said it sends one
  std::vector<std::string> member_left_;  // why its connection ended before its part came ("" if not)
  // The job's pace (peer_pace.cpp).
  PaceProbe pace_probe_;
  PaceHandler on_pace_;
  std::optional<double> job_pace_;                     // hub: as last worked out; member: as the hub said
  std::vector<std::optional<double>> member_pace_;     // hub: by server index
  std::vector<std::vector<std::string>> member_slow_;  // hub: by server index, as its last heartbeat said
};

}  // namespace davincirun::detail
