// The pieces of davincirunsdk._core, one function per area. Adapters only:
// every rule and policy lives in the core library.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace davincirun::python {

void bind_errors(pybind11::module_& m);
void bind_rank_table(pybind11::module_& m);
void bind_options(pybind11::module_& m);
void bind_results(pybind11::module_& m);
void bind_job(pybind11::module_& m);
void bind_lifecycle(pybind11::module_& m);

/// For waits that run without the GIL (RankTableLoadOptions::progress): takes
/// the GIL, writes the notice line to sys.stderr, and turns a pending Ctrl-C
/// into an exception that ends the wait.
void report_progress(const std::string& line);

/// For the same waits (RankTableLoadOptions::keep_waiting): takes the GIL and
/// turns a pending Ctrl-C into an exception that ends the wait.
void check_interrupt();

/// Bytes from the system (paths, arguments, messages) as Python text, decoded
/// as os.fsdecode() does: invalid UTF-8 becomes surrogate escapes.
pybind11::str fs_text(const std::string& bytes);

/// Rank output, which may be any bytes, as Python text: invalid UTF-8 shows as U+FFFD.
pybind11::str lenient_text(const std::string& bytes);

}  // namespace davincirun::python
