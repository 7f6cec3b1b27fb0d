// davincirunsdk._core: the C++ core seen from Python. The public API lives in
// the pure-Python package; this module is private.
#include "bindings.hpp"

#include "davincirun/launcher.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "Private C++ core of davincirunsdk; use the davincirunsdk package instead.";
  m.attr("__version__") = davincirun::version();
  davincirun::python::bind_errors(m);
  davincirun::python::bind_rank_table(m);
  davincirun::python::bind_job(m);
}
