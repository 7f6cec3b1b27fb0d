// Rank tables, read-only from Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>

#include "bindings.hpp"
#include "davincirun/environment.hpp"
#include "davincirun/rank_table.hpp"
#include "davincirun/rank_table_loader.hpp"
#include "davincirun/server_identity.hpp"

namespace py = pybind11;

namespace davincirun::python {

void report_progress(const std::string& line) {
  py::gil_scoped_acquire gil;
  py::module_::import("sys").attr("stderr").attr("write")("[davincirun] " + line + "\n");
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
      .def_readonly("pod_name", &RankTableDevice::pod_name);
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
  m.def("parse_rank_table",
        [](const std::string& text, const std::string& source) { return parse_rank_table(text, source); },
        py::arg("text"), py::arg("source") = "<string>");
  m.def(
      "wait_for_rank_table",
      [](const std::string& path, double wait_timeout) {
        if (!std::isfinite(wait_timeout) || wait_timeout < 0 || wait_timeout > 365.0 * 86400.0) {
          throw py::value_error("wait_timeout must be a number of seconds between 0 and one year");
        }
        RankTableLoadOptions options;
        options.wait_timeout = std::chrono::milliseconds(std::llround(wait_timeout * 1000));
        options.progress = report_progress;
        options.keep_waiting = check_interrupt;
        py::gil_scoped_release release;
        LoadedRankTable loaded = wait_for_rank_table(path, options);
        return std::make_pair(std::move(loaded.table), std::move(loaded.path));
      },
      py::arg("path"), py::arg("wait_timeout") = 300.0,
      "(table, resolved file path): the table at a file or directory, waiting for it.");
  m.def("write_normalized_rank_table", &write_normalized_rank_table, py::arg("table"), py::arg("path"),
        "Writes the 1.0/1.2 copy ranks read (mode 0600, a new file).");
  m.def(
      "identify_server",
      [](const RankTable& table, std::optional<std::string> server_id) {
        ServerMatch match = identify_server(table, Environment::current(), MachineIdentity::current(), server_id);
        return std::make_pair(match.index, match.reason);
      },
      py::arg("table"), py::arg("server_id") = std::nullopt, "(index, reason): this machine's server.");
}

}  // namespace davincirun::python
