// LaunchOptions and planning from Python: the one options object, its
// fields under the names of the Python keywords, its rules in C++.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"

namespace py = pybind11;

namespace davincirun::python {

namespace {

// A duration option as a property in seconds (int or float); its range is
// the option's rule (LaunchOptions::set_seconds), raised as LaunchConfigError.
void def_seconds(py::class_<LaunchOptions>& cls, const char* name, const char* doc) {
  const std::string option = name;
  cls.def_property(
      name, [option](const LaunchOptions& o) { return o.seconds(option); },
      [option](LaunchOptions& o, const py::object& value) {
        if (py::isinstance<py::bool_>(value) ||
            !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value))) {
          throw py::type_error(option + ": expected a number of seconds, got " + py::repr(value).cast<std::string>());
        }
        o.set_seconds(option, value.cast<double>());
      },
      doc);
}

py::typing::List<py::str> fs_texts(const std::vector<std::string>& items) {
  py::typing::List<py::str> out;
  for (const auto& item : items) out.append(fs_text(item));
  return out;
}

LaunchPlan plan(LaunchOptions options) {
  options.progress = report_progress;  // both called on this thread, which waits without the GIL
  options.keep_waiting = check_interrupt;
  py::gil_scoped_release release;
  return plan_launch(options, Environment::current());
}

}  // namespace

void bind_options(py::module_& m) {
  py::class_<LaunchOptions> options(m, "LaunchOptions", R"(Everything a launch can be asked to do (C++ LaunchOptions).

Fields are named like the keywords of start_distributed_train(); strings and
lists of strings also take bytes (reaching the ranks unchanged). validate()
checks every rule that needs no rank table; plan_launch() calls it first.
Rule violations raise LaunchConfigError naming the option.)");
  options.def(py::init<>())
      .def_property(
          "command", [](const LaunchOptions& o) { return fs_texts(o.command); },
          [](LaunchOptions& o, std::vector<std::string> v) { o.command = std::move(v); },
          "The program every rank runs and its arguments (no shell).")
      .def_readwrite("rank_table", &LaunchOptions::rank_table, "Rank table file or directory; empty: $RANK_TABLE_FILE.")
      .def_readwrite("work_dir", &LaunchOptions::work_dir, "Working directory of the ranks. Default \".\".")
      .def_readwrite("log_dir", &LaunchOptions::log_dir,
                     "Where each run's log directory is made. Default \"\": <cache root>/davincirun/log when "
                     "the cache disk is usable, else ./log.")
      .def_readwrite("server_id", &LaunchOptions::server_id, "This machine's server_id in the table, or None.")
      .def_property(
          "env",
          [](const LaunchOptions& o) {
            py::typing::List<py::typing::Tuple<py::str, py::str>> out;
            for (const auto& [name, value] : o.env) out.append(py::make_tuple(fs_text(name), fs_text(value)));
            return out;
          },
          [](LaunchOptions& o, std::vector<std::pair<std::string, std::string>> v) { o.env = std::move(v); },
          "Extra variables for every rank: [(name, value)].")
      .def_property(
          "launch_mode", [](const LaunchOptions& o) { return std::string(to_string(o.launch_mode)); },
          [](LaunchOptions& o, const std::string& v) { o.launch_mode = parse_launch_mode(v); },
          "\"rank-table\" (default) or \"dynamic-cluster\" (MindSpore's scheduler and workers).")
      .def_readwrite("nproc", &LaunchOptions::nproc, "No rank table: this many ranks on this machine; None (default).")
      .def_readwrite("devices", &LaunchOptions::devices,
                     "Physical device ids: narrows a one-server table, or the devices of nproc; None (default).")
      .def_readwrite("device_dir", &LaunchOptions::device_dir, "Where /dev/davinciN are looked for. Default \"/dev\".")
      .def_readwrite("ranks_to_show", &LaunchOptions::ranks_to_show,
                     "Rank ids whose output is shown live; None: every rank.")
      .def_property(
          "remove_after_job", [](const LaunchOptions& o) { return fs_texts(o.remove_after_job); },
          [](LaunchOptions& o, std::vector<std::string> v) { o.remove_after_job = std::move(v); },
          "Absolute directories the job's supervisor process removes once the job is over.")
      .def_readwrite("supervisor_program", &LaunchOptions::supervisor_program,
                     "The davincirun-supervisor executable; empty: found by the library.")
      .def_readwrite("device_lock_dir", &LaunchOptions::device_lock_dir,
                     "Where devices are locked; empty: $DAVINCIRUN_LOCK_DIR or /tmp/davincirun-locks; \"off\".")
      .def_property(
          "stop_request_name", [](const LaunchOptions& o) { return o.supervisor.stop_request_name; },
          [](LaunchOptions& o, std::string v) { o.supervisor.stop_request_name = std::move(v); },
          "How the user asks for a stop, as the notice of a stop names it (\"Ctrl-C\"). Default \"stop request\".")
      .def_property(
          "launcher_name", [](const LaunchOptions& o) { return o.supervisor.launcher_name; },
          [](LaunchOptions& o, std::string v) { o.supervisor.launcher_name = std::move(v); },
          "What the process that started the job is called in messages (\"the notebook kernel is gone\"). "
          "Default \"the launcher\".")
      .def_readwrite("no_wait_setting", &LaunchOptions::no_wait_setting,
                     "How the user turns waiting for the rank table off, as the waiting lines name it "
                     "(\"wait_timeout=0\"). Default \"wait_timeout 0\".");
  def_seconds(options, "wait_timeout",
              "Seconds to wait for a rank table still being written; 0: no waiting. Default 300.");
  def_seconds(options, "grace_period", "Seconds between SIGTERM and SIGKILL when ranks are stopped. Default 10.");
  def_seconds(options, "drain_timeout", "Seconds a rank's output may stay open after it exited. Default 2.");
  def_seconds(options, "job_timeout", "Seconds the job may run before every rank is stopped; 0: no limit.");
  def_seconds(options, "peer_timeout",
              "Several servers: seconds another server's agent may stay silent before the job stops. Default 30.");
  def_seconds(options, "stall_timeout",
              "Seconds without output from any rank of the job before its stacks are dumped and it is stopped; "
              "0 (default): no watchdog.");
  options.def_readwrite("peers", &LaunchOptions::peers,
                        "Several servers: stop the job on every server together (the peer channel). Default True.");
  options.def_readwrite("peer_port", &LaunchOptions::peer_port,
                        "The port of the peer channel on rank 0's server; None: $DAVINCIRUN_PEER_PORT, else derived.");
  options.def_readwrite("output_watched", &LaunchOptions::output_watched,
                        "Someone watches the output live: Python ranks get PYTHONUNBUFFERED=1 unless it is set. "
                        "Default True.");
  options.def("validate", &LaunchOptions::validate, "Raises LaunchConfigError when an option breaks its rule.");

  py::class_<RankAssignment>(m, "RankAssignment", "One rank (or MindSpore's scheduler) to start on this machine.")
      .def_property_readonly(
          "role", [](const RankAssignment& a) { return to_string(a.role); },
          "\"rank\", or \"scheduler\" (rank, local rank and device ids -1).")
      .def_readonly("rank", &RankAssignment::rank)
      .def_readonly("local_rank", &RankAssignment::local_rank)
      .def_readonly("physical_device_id", &RankAssignment::physical_device_id)
      .def_readonly("logical_device_id", &RankAssignment::logical_device_id)
      .def_readonly("device_ip", &RankAssignment::device_ip);

  py::class_<LaunchPlan>(m, "LaunchPlan", "Everything decided before anything starts.")
      .def_property_readonly("job_id", [](const LaunchPlan& p) { return p.job.job_id; })
      .def_property_readonly("rank_table_file", [](const LaunchPlan& p) { return fs_text(p.job.rank_table_file); })
      .def_property_readonly("world_size", [](const LaunchPlan& p) { return p.job.world_size; })
      .def_property_readonly("master_addr", [](const LaunchPlan& p) { return p.job.master_addr; })
      .def_property_readonly("master_port", [](const LaunchPlan& p) { return p.job.master_port; })
      .def_property_readonly("server_id", [](const LaunchPlan& p) { return p.table.servers[p.server_index].server_id; })
      .def_readonly("warnings", &LaunchPlan::warnings, "What was accepted with a warning, one sentence each.")
      .def_readonly("ranks", &LaunchPlan::ranks,
                    "This server's ranks, by rank, then (dynamic-cluster mode) MindSpore's scheduler.")
      .def_property_readonly("launch_mode",
                             [](const LaunchPlan& p) { return std::string(to_string(p.options.launch_mode)); })
      .def_property_readonly("work_dir", [](const LaunchPlan& p) { return fs_text(p.work_dir); })
      .def_property_readonly("log_dir", [](const LaunchPlan& p) { return fs_text(p.log_dir); })
      .def_property_readonly(
          "cache_dir", [](const LaunchPlan& p) { return fs_text(p.cache_dir); },
          "<cache root>/davincirun when the cache disk is in use, else \"\".")
      .def_property_readonly(
          "environments",
          [](const LaunchPlan& p) {
            py::typing::List<py::typing::List<py::str>> out;
            for (const auto& e : p.environments) out.append(fs_texts(e.entries()));
            return out;
          },
          "Each rank's environment, as [\"NAME=value\"].");

  m.def("plan_launch", &plan, py::arg("options"),
        "Validates `options`, waits for and reads the rank table, and plans the launch (C++ plan_launch).");
}

}  // namespace davincirun::python
