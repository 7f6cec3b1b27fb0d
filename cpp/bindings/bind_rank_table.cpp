// Rank tables, read-only from Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "davincirun/rank_table.hpp"

namespace py = pybind11;

namespace davincirun::python {

void bind_rank_table(py::module_& m) {
  py::class_<RankTableDevice>(m, "RankTableDevice")
      .def_readonly("device_id", &RankTableDevice::device_id)
      .def_readonly("rank_id", &RankTableDevice::rank_id)
      .def_readonly("device_ip", &RankTableDevice::device_ip);
  py::class_<RankTableServer>(m, "RankTableServer")
      .def_readonly("server_id", &RankTableServer::server_id)
      .def_readonly("host_ip", &RankTableServer::host_ip)
      .def_readonly("container_ip", &RankTableServer::container_ip)
      .def_readonly("devices", &RankTableServer::devices)
      .def_readonly("rank_start", &RankTableServer::rank_start);
  py::class_<RankTable>(m, "RankTable")
      .def_property_readonly("format", [](const RankTable& t) { return std::string(to_string(t.format)); })
      .def_readonly("status", &RankTable::status)
      .def_readonly("servers", &RankTable::servers)
      .def_readonly("world_size", &RankTable::world_size);
  m.def("load_rank_table", &load_rank_table, py::arg("path"), py::call_guard<py::gil_scoped_release>());
  m.def("parse_rank_table",
        [](const std::string& text, const std::string& source) { return parse_rank_table(text, source); },
        py::arg("text"), py::arg("source") = "<string>");
}

}  // namespace davincirun::python
