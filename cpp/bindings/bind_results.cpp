// Job results from Python: what a finished job and each of its ranks did.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include <fmt/format.h>

#include "bind_fields.hpp"
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
  // Each plain field from the field lists (job_types.hpp); what Python
  // computes from them is bound after.
  py::class_<RankResult> rank(m, "RankResult", "How one rank (or MindSpore's scheduler) ended.");
  def_fields<RankResult>(rank);
  rank.def_property_readonly("exit_code",
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
          "\"exit code 3\", \"signal 11 (SIGSEGV)\"...");

  py::class_<PeerStop> peer(m, "PeerStop",
                            "What stopped the job from another server of it, as that server's agent said "
                            "(docs/multi-server.md).");
  def_fields<PeerStop>(peer);
  peer.def_property_readonly(
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
          "The signal that killed the failed rank, or None.");

  py::class_<JobAttempt> attempt(m, "JobAttempt",
                                 "One attempt of a job: its first run, or a restart of the whole job in place "
                                 "(max_restarts; docs/restarts.md).");
  def_fields<JobAttempt>(attempt);
  attempt.def("__repr__", [](const JobAttempt& a) {
    return fmt::format("<JobAttempt {}: {}{}>", a.attempt, to_string(a.stop_reason),
                       a.decision.empty() ? std::string() : ", " + a.decision);
  });

  py::class_<JobResult> job(m, "JobResult", "How a job ended: every rank, the first failure, why it stopped.");
  def_fields<JobResult>(job);
  job.def("__repr__", [](const JobResult& r) {
    return fmt::format("<JobResult exit_code={}, stop_reason={}, {} rank(s), {} attempt(s)>", r.exit_code(),
                       to_string(r.stop_reason), r.ranks.size(), r.attempts.size());
  });
  job.def_property_readonly(
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
