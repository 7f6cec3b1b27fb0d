// davincirunsdk._core: the C++ core seen from Python. The public API lives in
// the pure-Python package; this module is private.
#include "bindings.hpp"
#include "davincirun/davincirun.hpp"

namespace davincirun::python {

pybind11::str fs_text(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "surrogateescape");
  if (!text) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(text);
}

pybind11::str lenient_text(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (!text) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(text);
}

}  // namespace davincirun::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "Private C++ core of davincirunsdk; use the davincirunsdk package instead.";
  m.attr("__version__") = davincirun::version();
  m.attr("NOTICE_PREFIX") = std::string(davincirun::notice_prefix);
  davincirun::python::bind_errors(m);
  davincirun::python::bind_rank_table(m);
  davincirun::python::bind_options(m);
  davincirun::python::bind_results(m);
  davincirun::python::bind_job(m);
  davincirun::python::bind_lifecycle(m);
}
