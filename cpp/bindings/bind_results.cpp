// Job results from Python: what a finished job and each of its ranks did.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "bindings.hpp"
#include "davincirun/davincirun.hpp"

namespace py = pybind11;

namespace davincirun::python {

void bind_results(py::module_& m) {
  m.def(
      "describe_exit",
      [](std::optional<int> exit_code, std::optional<int> signal) {
        if (exit_code) return ExitStatus{ExitStatus::Kind::exited, *exit_code}.describe();
        if (signal) return ExitStatus{ExitStatus::Kind::signaled, *signal}.describe();
        return ExitStatus{ExitStatus::Kind::unknown, 0}.describe();
      },
      py::arg("exit_code"), py::arg("signal"),
      "How a process ended, in the words of RankResult.status: \"exit code 3\" for an exit code, else "
      "\"signal 9 (SIGKILL)\" for a signal, else an unknown exit status.");
  py::class_<RankResult>(m, "RankResult", "How one rank (or MindSpore's scheduler) ended.")
      .def_property_readonly(
          "role", [](const RankResult& r) { return to_string(r.role); },
          "\"rank\", or \"scheduler\" for MindSpore's scheduler (launch_mode=\"dynamic-cluster\").")
      .def_readonly("rank", &RankResult::rank, "Its rank id; -1 for the scheduler.")
      .def_readonly("pid", &RankResult::pid, "Its process id.")
      .def_readonly("log_path", &RankResult::log_path, "Its log file, every byte it wrote.")
      .def_property_readonly("exit_code",
                             [](const RankResult& r) -> std::optional<int> {
                               if (r.status.kind == ExitStatus::Kind::exited) return r.status.value;
                               return std::nullopt;
                             })
      .def_property_readonly("signal",
                             [](const RankResult& r) -> std::optional<int> {
                               if (r.status.kind == ExitStatus::Kind::signaled) return r.status.value;
                               return std::nullopt;
                             })
      .def_property_readonly(
          "returncode", [](const RankResult& r) { return r.status.shell_code(); },
          "As a shell reports it: the exit code, or 128 + the signal.")
      .def_property_readonly("success", [](const RankResult& r) { return r.status.success(); })
      .def_property_readonly(
          "status", [](const RankResult& r) { return r.status.describe(); },
          "\"exit code 3\", \"signal 11 (SIGSEGV)\"...")
      .def_readonly("terminated_by_launcher", &RankResult::terminated_by_launcher,
                    "It got SIGTERM from the launcher before it exited.")
      .def_readonly("killed_by_launcher", &RankResult::killed_by_launcher, "It got SIGKILL after the grace period.")
      .def_property_readonly(
          "started", [](const RankResult& r) { return seconds_since_epoch(r.started); }, "Seconds since the epoch.")
      .def_property_readonly(
          "ended", [](const RankResult& r) { return seconds_since_epoch(r.ended); }, "Seconds since the epoch.")
      .def_readonly("output_bytes", &RankResult::output_bytes, "Bytes it wrote (stdout and stderr).")
      .def_readonly("log_error", &RankResult::log_error,
                    "Why its log file could not take every byte, e.g. \"No space left on device at byte N\"; None.");

  py::class_<PeerStop>(m, "PeerStop",
                       "What stopped the job from another server of it, as that server's agent said "
                       "(docs/multi-server.md).")
      .def_readonly("server_id", &PeerStop::server_id, "Where it happened.")
      .def_property_readonly(
          "role",
          [](const PeerStop& p) { return p.status ? std::optional<std::string>(to_string(p.role)) : std::nullopt; },
          "\"rank\" or \"scheduler\" when a process failed there, else None.")
      .def_property_readonly(
          "rank", [](const PeerStop& p) { return p.status ? std::optional<int>(p.rank) : std::nullopt; },
          "The failed rank (-1: the scheduler), or None.")
      .def_property_readonly(
          "exit_code",
          [](const PeerStop& p) {
            return p.status && p.status->kind == ExitStatus::Kind::exited ? std::optional<int>(p.status->value)
                                                                          : std::nullopt;
          },
          "The failed rank's exit code, or None.")
      .def_property_readonly(
          "signal",
          [](const PeerStop& p) {
            return p.status && p.status->kind == ExitStatus::Kind::signaled ? std::optional<int>(p.status->value)
                                                                            : std::nullopt;
          },
          "The signal that killed the failed rank, or None.")
      .def_property_readonly(
          "detail", [](const PeerStop& p) { return lenient_text(p.detail); },
          "The failed rank's root cause from its log there, or why the job stopped, in words.");

  py::class_<JobResult>(m, "JobResult", "How a job ended: every rank, the first failure, why it stopped.")
      .def_readonly("ranks", &JobResult::ranks, "Every rank of this machine, in the plan's order.")
      .def_readonly("first_failure", &JobResult::first_failure,
                    "Index in `ranks` of the first rank that failed (by time), or None.")
      .def_readonly("leftover_processes_killed", &JobResult::leftover_processes_killed,
                    "Processes the ranks left running outside their process groups, killed at the end.")
      .def_readonly("stop_signal", &JobResult::stop_signal, "The signal behind stop_reason 'signaled', else 0.")
      .def_property_readonly(
          "stop_signal_receiver", [](const JobResult& r) { return to_string(r.stop_signal_origin.receiver); },
          "With stop_reason \"signaled\": \"launcher\" (the davincirun command got it) or \"supervisor\" (the "
          "job's supervisor process got it).")
      .def_property_readonly(
          "stop_signal_sender_pid",
          [](const JobResult& r) {
            return r.stop_signal_origin.sender_pid > 0 ? std::optional<int>(r.stop_signal_origin.sender_pid)
                                                       : std::nullopt;
          },
          "With stop_reason \"signaled\": the pid of the process that sent the signal, when known; else None.")
      .def_property_readonly(
          "stop_signal_sender",
          [](const JobResult& r) {
            return r.stop_signal_origin.sender_name.empty()
                       ? std::nullopt
                       : std::optional<std::string>(r.stop_signal_origin.sender_name);
          },
          "With stop_reason \"signaled\": the sender's command name (/proc/<pid>/comm), when known; else None.")
      .def_property_readonly(
          "stop_detail", [](const JobResult& r) { return lenient_text(r.stop_detail); },
          "What stopped the job, in the words its stop notice began with (\"stop requested\", \"rank 3 (pid 77) "
          "failed with exit code 1\"); \"\" when nothing stopped it.")
      .def_property_readonly(
          "stopped_in", [](const JobResult& r) { return to_string(r.stopped_in); },
          "The state of the job's life cycle its stop came in (\"running\", \"waiting_for_servers\"...; "
          "docs/architecture.md); \"done\" when nothing stopped it.")
      .def_readonly("peer_stop", &JobResult::peer_stop,
                    "With stop_reason \"peer_failed\", \"peer_stopped\", \"peer_lost\" or \"stalled\": what the other "
                    "server said "
                    "(PeerStop), else None.")
      .def_readonly("summary_error", &JobResult::summary_error, "Why summary.json could not be written, or None.")
      .def_property_readonly(
          "tracking", [](const JobResult& r) { return to_string(r.tracking); },
          "How the ranks' exits were observed: \"pidfd\" or \"sigchld\".")
      .def_readonly("tracking_fallback", &JobResult::tracking_fallback,
                    "Why exits were tracked by SIGCHLD on a kernel with pidfds (clone() refused CLONE_PIDFD: "
                    "a seccomp filter, qemu-user), or None.")
      .def_readonly("child_subreaper", &JobResult::child_subreaper,
                    "False when the job's supervisor process could not become a child subreaper: detached "
                    "descendants were then found only by DAVINCIRUN_JOB_TAG.")
      .def_property_readonly(
          "stop_reason", [](const JobResult& r) { return to_string(r.stop_reason); },
          "\"none\", \"rank_failed\", \"requested\", \"timed_out\", \"signaled\", \"launcher_gone\", "
          "\"peer_failed\" (a rank on another server failed), \"peer_stopped\" (the job was stopped on another "
          "server), \"peer_lost\" (another server's agent, host or link lost, or never there) or \"stalled\" "
          "(the stall watchdog).")
      .def_property_readonly("success", &JobResult::success)
      .def_property_readonly("exit_code", &JobResult::exit_code,
                             "0, the first failure's shell code, 130 when stopped, 124 on the job or stall "
                             "timeout, another server's failed rank's code (else 1) when another server stopped it.")
      .def(
          "failure_report",
          [](const JobResult& r, std::size_t tail_lines) { return lenient_text(failure_report(r, tail_lines)); },
          py::arg("tail_lines") = 20);
}

}  // namespace davincirun::python
