// The pieces of davincirunsdk._core, one function per area.
#pragma once

#include <pybind11/pybind11.h>

namespace davincirun::python {

void bind_errors(pybind11::module_& m);
void bind_rank_table(pybind11::module_& m);
void bind_job(pybind11::module_& m);

}  // namespace davincirun::python
