// LaunchOptions and planning from Python: the one options object, its
// fields under the names of the Python keywords, its rules in C++.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bind_fields.hpp"
#include "bindings.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"

namespace py = pybind11;

namespace davincirun::python {

namespace {

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
  options.def(py::init<>());
  def_options(options);  // every option of the list (plan.hpp, supervisor_options.hpp)
  options.def("validate", &LaunchOptions::validate, "Raises LaunchConfigError when an option breaks its rule.");

  py::class_<RankAssignment> assignment(m, "RankAssignment",
                                        "One rank (or MindSpore's scheduler) to start on this machine.");
  def_fields<RankAssignment>(assignment);

  py::class_<LaunchPlan>(m, "LaunchPlan", "Everything decided before anything starts.")
      .def_property_readonly("job_id", [](const LaunchPlan& p) { return p.job.job_id; })
      .def_property_readonly("rank_table_file", [](const LaunchPlan& p) { return fs_text(p.job.rank_table_file); })
      .def_property_readonly("world_size", [](const LaunchPlan& p) { return p.job.world_size; })
      .def_property_readonly("master_addr", [](const LaunchPlan& p) { return p.job.master_addr; })
      .def_property_readonly("master_port", [](const LaunchPlan& p) { return p.job.master_port; })
      .def_property_readonly("server_id", [](const LaunchPlan& p) { return p.table.servers[p.server_index].server_id; })
      .def_readonly("warnings", &LaunchPlan::warnings, "What was accepted with a warning, one sentence each.")
      .def_readonly("notes", &LaunchPlan::notes,
                    "What the launcher chose for the ranks unasked (an OMP_NUM_THREADS default), one sentence each.")
      .def_property_readonly(
          "device_lock_dir", [](const LaunchPlan& p) { return fs_text(p.device_lock_dir); },
          "Where the devices are locked; \"\" when they are not (see device_locks_off).")
      .def_readonly("device_locks_off", &LaunchPlan::device_locks_off,
                    "Why the devices are not locked (no NPU on this machine, or off as asked); \"\" when they are.")
      .def_readonly("ranks", &LaunchPlan::ranks,
                    "This server's ranks, by rank, then (dynamic-cluster mode) MindSpore's scheduler.")
      .def_property_readonly(
          "max_restarts", [](const LaunchPlan& p) { return p.options.supervisor.max_restarts; },
          "How often the job restarts at most (max_restarts; 0: never).")
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
