// How a job's supervisor runs it: the timing of stops, how exits are
// tracked and what its messages call things. Set by the launcher
// (LaunchOptions::supervisor), sent over the lifeline, used by the
// Supervisor (supervisor.hpp); the field list says which of them go where.
#pragma once

#include <chrono>
#include <string>
#include <tuple>

#include "davincirun/fields.hpp"
#include "davincirun/job_types.hpp"
#include "davincirun/lifecycle.hpp"

namespace davincirun {

/// Default time between SIGTERM and SIGKILL when stopping ranks: 10 s. Long
/// enough for a framework to write a checkpoint marker and release the NPU,
/// short enough that a notebook user is not left waiting.
inline constexpr std::chrono::milliseconds default_grace_period{10'000};

/// Longest accepted grace period: 24 h.
inline constexpr std::chrono::milliseconds max_grace_period{86'400'000};

/// Default time a rank's output pipe may stay open after the rank exited
/// (held by a descendant that left its process group): 2 s.
inline constexpr std::chrono::milliseconds default_drain_timeout{2'000};

/// Longest accepted drain timeout: 24 h, like the grace period.
inline constexpr std::chrono::milliseconds max_drain_timeout{86'400'000};

/// Longest accepted job timeout: one year (a job may train for weeks; a
/// year still fits the millisecond arithmetic).
inline constexpr std::chrono::milliseconds max_job_timeout{365LL * 86'400'000};
/// SupervisorOptions::slow_window by default.
inline constexpr std::chrono::milliseconds default_slow_window{30'000};

/// Default wait between one attempt's end and the next one's start in a job
/// that restarts: 1 s. A fault a restart cures (a link flap, a device that
/// resets itself) gets a moment to clear, and a failure that repeats at once
/// costs a second per attempt instead of a busy loop; the job is still back
/// within about a second.
inline constexpr std::chrono::milliseconds default_restart_delay{1'000};

/// Most restarts a job may be given.
inline constexpr int max_max_restarts = 10'000;

struct SupervisorOptions {
  std::chrono::milliseconds grace_period = default_grace_period;
  std::chrono::milliseconds drain_timeout = default_drain_timeout;
  /// Longest the whole job may run before every rank is stopped, counted from
  /// the start of run(); zero (the default) means no limit.
  std::chrono::milliseconds job_timeout{0};
  ProcessTracking tracking = ProcessTracking::automatic;
  /// What the user does to ask for a stop, in the front end's words: the
  /// notice that starts a stop says SIGKILL follows "at once on a second
  /// Ctrl-C" (the CLI's "Ctrl-C"). Default "stop request" (request_stop()).
  std::string stop_request_name = "stop request";
  /// Set only in a process dedicated to one job (the job supervisor process,
  /// davincirun-supervisor), which has SIGCHLD blocked in every thread and
  /// normally is a child subreaper (PR_SET_CHILD_SUBREAPER). The supervisor
  /// then reaps every child of the process, including descendants re-parented
  /// to it, and once every rank has exited it SIGKILLs whatever the ranks
  /// left running anywhere below this process (a double-forked, setsid()
  /// grandchild included) before draining the last output. Default false:
  /// the supervisor touches only the processes it started.
  bool owns_all_children = false;
  /// With owns_all_children: an environment entry ("NAME=value", e.g.
  /// "DAVINCIRUN_JOB_TAG=<random>") that every process of the job inherits.
  /// Used only when this process is not a child subreaper (the kernel
  /// refused PR_SET_CHILD_SUBREAPER: a seccomp filter, qemu-user): a process
  /// a rank detached (double fork) is then re-parented to init, out of reach
  /// of the sweep by ancestry, so the sweep also SIGKILLs every process of
  /// this user whose environment holds this entry. Empty (the default): no
  /// such sweep. Not sent over the lifeline: davincirun-supervisor sets it.
  std::string job_tag = {};
  /// What the process that started the job is called in messages: "the
  /// signal came to <launcher_name>" ("davincirun" from the CLI). Default
  /// "the launcher".
  std::string launcher_name = "the launcher";
  /// The stall watchdog of a job of one server: stop the job (StopReason::
  /// stalled) when no rank wrote output for this long; zero (the default):
  /// none. A job of several servers leaves it to the peer channel, which
  /// hears every server's silence.
  std::chrono::milliseconds stall_timeout{0};
  /// Only messages that matter (stops, failures, warnings) reach the
  /// console; the rest (an agent joined, waiting for other servers) goes to
  /// <run>/events.txt only. Default false.
  bool quiet = false;
  /// For tests: the job stays this long in `hold_state` after entering it
  /// (the event that would end that state is kept until then), answering
  /// every other event as that state does; zero (the default): no hold.
  /// Set from DAVINCIRUN_TEST_HOLD ("draining:2000") by the supervisor
  /// program. Holds `starting`, `killing`, `draining` and
  /// `waiting_for_servers`.
  JobState hold_state = JobState::done;
  std::chrono::milliseconds hold{0};
  /// How often the whole job is started again, in place, after an attempt
  /// that a rank's failure (or the stall watchdog) stopped: every rank is
  /// stopped, then started again with the same JOB_ID, work directory and
  /// devices, DAVINCIRUN_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT one
  /// higher (docs/restarts.md). A stop request, a signal, the launcher's
  /// death and the job timeout never restart. Default 0: no restart.
  int max_restarts = 0;
  /// Time between the end of an attempt and the start of the next. Default
  /// 1 s (default_restart_delay).
  std::chrono::milliseconds restart_delay = default_restart_delay;
  /// Restart even when an attempt fails like the one before it (the same
  /// rank, the same root cause, and no output line the earlier attempt did
  /// not write): such a failure is a bug no restart cures, so by default
  /// (false) the job ends there, saying so.
  bool restart_on_same_error = false;
  /// When a rank fails (here or on another server: StopReason::rank_failed,
  /// peer_failed, peer_lost), the ranks left get no grace period: SIGTERM,
  /// then SIGKILL at once. Set by the plan in launch mode tf-config, where
  /// TensorFlow 2.x takes SIGTERM for a preemption notice and keeps running
  /// (its multi-worker runtime installs a SIGTERM notifier:
  /// tensorflow/core/common_runtime/eager/context_distributed_manager.cc),
  /// while its collectives can never complete without the failed rank. A
  /// stop the user asks for keeps grace_period, which TensorFlow's
  /// PreemptionCheckpointHandler uses to save a checkpoint. Default false.
  bool kill_on_failure = false;
  /// A rank whose progress (the epoch and step its output prints:
  /// rank_progress.hpp) trails the others' median for this long is marked
  /// slow: a notice naming it and its server, its row in the live views,
  /// the job record (the rule: src/output/slow_ranks.hpp, docs/job-record.md).
  /// Zero: never. Default 30 s (default_slow_window).
  std::chrono::milliseconds slow_window = default_slow_window;
};

// What the launcher sends its supervisor process, and the launch options
// among them (LaunchOptions::supervisor: a property in Python, a flag in
// the CLI). The rest is the supervisor process's own.
constexpr auto fields_of(const SupervisorOptions*) {
  using O = SupervisorOptions;
  return std::make_tuple(
      field("grace_period", &O::grace_period, "seconds between SIGTERM and SIGKILL when stopping ranks (default: {})")
          .only(on_wire | in_python)
          .flag("SEC")
          .range(0, max_grace_period.count()),
      field("drain_timeout", &O::drain_timeout,
            "seconds a rank's output may stay open after it exited, held by a process it left behind, before "
            "the job ends without it (default: {})")
          .only(on_wire | in_python)
          .flag("SEC")
          .range(0, max_drain_timeout.count()),
      field("job_timeout", &O::job_timeout,
            "stop every rank once the job has run this long (default and 0: no limit; exit status 124)")
          .only(on_wire | in_python)
          .flag("SEC")
          .range(0, max_job_timeout.count(), " (no limit)", " (one year)"),
      field("tracking", &O::tracking).only(on_wire),
      field("stop_request_name", &O::stop_request_name,
            "how the user asks for a stop, as the notice of a stop names it (\"Ctrl-C\"; default: {})")
          .only(on_wire | in_python),
      field("launcher_name", &O::launcher_name,
            "what the process that started the job is called in messages (\"the notebook kernel is gone\"; "
            "default: {})")
          .only(on_wire | in_python),
      field("quiet", &O::quiet).only(on_wire), field("kill_on_failure", &O::kill_on_failure).only(on_wire),
      field("max_restarts", &O::max_restarts,
            "restart the whole job in place up to N times after a rank fails (or the stall watchdog stops it); "
            "never after a stop request, a signal or the job timeout (default: {}; docs/restarts.md)")
          .only(on_wire | in_python)
          .flag("N", 0, "a number of restarts, e.g. 3")
          .range(0, max_max_restarts),
      field("restart_delay", &O::restart_delay,
            "seconds between an attempt's end and the next one's start (default: {})")
          .only(on_wire | in_python)
          .flag("SEC")
          .range(0, max_grace_period.count()),
      field("restart_on_same_error", &O::restart_on_same_error,
            "restart even when an attempt fails as the one before it did (same rank, same root cause, no new "
            "output); by default such a failure ends the job")
          .only(on_wire | in_python)
          .flag(""),
      field("slow_window", &O::slow_window,
            "mark a rank slow when the progress its output prints (epoch, step) trails the other ranks' median "
            "this long (default: {}; 0: never; docs/job-record.md)")
          .only(on_wire | in_python)
          .flag("SEC")
          .range(0, max_job_timeout.count(), " (never)", " (one year)"));
}

}  // namespace davincirun
