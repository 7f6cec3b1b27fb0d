// Rank tables, read-only from Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "davincirun/console_sink.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/machine_rank_table.hpp"
#include "davincirun/plan.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "davincirun/rank_table_merge.hpp"
#include "davincirun/server_identity.hpp"

namespace py = pybind11;

namespace davincirun::python {

void report_progress(const std::string& line) {
  py::gil_scoped_acquire gil;
  py::module_::import("sys").attr("stderr").attr("write")(notice_line(line));
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

void check_interrupt() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

void bind_rank_table(py::module_& m) {
  py::class_<RankTableDevice>(m, "RankTableDevice")
      .def_readonly("device_id", &RankTableDevice::device_id)
      .def_readonly("rank_id", &RankTableDevice::rank_id)
      .def_readonly("device_ip", &RankTableDevice::device_ip)
      .def_readonly("super_device_id", &RankTableDevice::super_device_id)
      .def_readonly("pod_name", &RankTableDevice::pod_name)
      .def_readonly("local_id", &RankTableDevice::local_id);
  py::class_<RankTableServer>(m, "RankTableServer")
      .def_readonly("server_id", &RankTableServer::server_id)
      .def_readonly("host_ip", &RankTableServer::host_ip)
      .def_readonly("container_ip", &RankTableServer::container_ip)
      .def_readonly("pod_names", &RankTableServer::pod_names)
      .def_readonly("devices", &RankTableServer::devices)
      .def_readonly("rank_start", &RankTableServer::rank_start);
  py::class_<RankTable>(m, "RankTable")
      .def_property_readonly("format", [](const RankTable& t) { return std::string(to_string(t.format)); })
      .def_readonly("status", &RankTable::status)
      .def_readonly("servers", &RankTable::servers)
      .def_readonly("world_size", &RankTable::world_size)
      .def_readonly("warnings", &RankTable::warnings);
  m.def("load_rank_table", &load_rank_table, py::arg("path"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "parse_rank_table",
      [](const std::string& text, const std::string& source) { return parse_rank_table(text, source); },
      py::arg("text"), py::arg("source") = "<string>");
  m.def(
      "wait_for_rank_table",
      [](const std::string& path, double wait_timeout, std::string no_wait_setting, std::string stop_name) {
        LaunchOptions rules;  // the one range rule of wait_timeout
        rules.set_seconds("wait_timeout", wait_timeout);
        RankTableLoadOptions options;
        options.wait_timeout = rules.wait_timeout;
        options.no_wait_setting = std::move(no_wait_setting);
        options.stop_name = std::move(stop_name);
        options.progress = report_progress;
        options.keep_waiting = check_interrupt;
        py::gil_scoped_release release;
        LoadedRankTable loaded = wait_for_rank_table(path, options);
        return std::make_pair(std::move(loaded.table), std::move(loaded.path));
      },
      py::arg("path"), py::arg("wait_timeout") = 300.0,
      py::arg("no_wait_setting") = RankTableLoadOptions{}.no_wait_setting,
      py::arg("stop_name") = RankTableLoadOptions{}.stop_name,
      "(table, resolved file path): the table at a file or directory, waiting for it; the waiting lines name "
      "`no_wait_setting` and `stop_name` as the ways not to wait and to stop.");
  m.def("write_normalized_rank_table", &write_normalized_rank_table, py::arg("table"), py::arg("path"),
        "Writes the copy ranks read (1.0, 1.2 or 2.0; mode 0600, a new file).");
  m.def("write_rank_table_file", &write_rank_table_file, py::arg("table"), py::arg("path"),
        "Writes a table for people and other machines (mode 0644, atomically, replacing `path`).",
        py::call_guard<py::gil_scoped_release>());
  py::class_<MachineRankTable>(m, "MachineRankTable", "This machine's one-server table (C++ machine_rank_table).")
      .def_readonly("table", &MachineRankTable::table)
      .def_readonly("server_reason", &MachineRankTable::server_reason, "Why server_id is what it is.")
      .def_readonly("warnings", &MachineRankTable::warnings, "Devices listed without device_ip, one sentence.");
  m.def(
      "machine_rank_table",
      [](const std::optional<std::string>& server_id, const std::optional<std::vector<int>>& devices,
         const std::string& system_root) {
        MachineRankTableOptions options;
        options.server_id = server_id;
        options.devices = devices;
        options.system_root = system_root;
        return machine_rank_table(options);
      },
      py::arg("server_id") = std::nullopt, py::arg("devices") = std::nullopt, py::arg("system_root") = "/",
      py::call_guard<py::gil_scoped_release>(), "This machine's devices and addresses as a validated table.");
  m.def("merge_rank_tables", &merge_rank_tables, py::arg("inputs"), py::arg("source"),
        py::call_guard<py::gil_scoped_release>(),
        "One validated table of the servers of `inputs`, in order (1.0; 2.0 from 2.0 tables).");
  py::class_<LocalServer>(m, "LocalServer", "This machine's part of a rank table.")
      .def_readonly("index", &LocalServer::index, "Its server's position in the table's servers.")
      .def_readonly("reason", &LocalServer::reason, "Why this machine is that server.")
      .def_readonly("server", &LocalServer::server, "The server, narrowed to this pod's devices in a 0.1 table.");
  m.def(
      "find_local_server",
      [](const RankTable& table, const std::optional<std::string>& server_id) {
        return find_local_server(table, Environment::current(), MachineIdentity::current(), server_id);
      },
      py::arg("table"), py::arg("server_id") = std::nullopt,
      "This machine's server (and pod) in `table`, from this process's environment and addresses.");
  m.def(
      "rank_table_named_by_environment", [] { return fs_text(rank_table_named_by(Environment::current())); },
      "The rank table this process's environment names: $RANK_TABLE_FILE_V_1_0, else $RANK_TABLE_FILE; \"\" for "
      "neither.");
}

}  // namespace davincirun::python
