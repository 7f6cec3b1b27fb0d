// The pieces of davincirunsdk._core, one function per area.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace davincirun::python {

void bind_errors(pybind11::module_& m);
void bind_rank_table(pybind11::module_& m);
void bind_job(pybind11::module_& m);

/// For waits that run without the GIL (RankTableLoadOptions::progress): takes
/// the GIL, writes "[davincirun] <line>" to sys.stderr, and turns a pending
/// Ctrl-C into an exception that ends the wait.
void report_progress(const std::string& line);

/// For the same waits (RankTableLoadOptions::keep_waiting): takes the GIL and
/// turns a pending Ctrl-C into an exception that ends the wait.
void check_interrupt();

}  // namespace davincirun::python
