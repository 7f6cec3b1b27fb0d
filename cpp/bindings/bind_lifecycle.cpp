// The job's life cycle from Python: its transition table (lifecycle.hpp),
// for the docs and for the tests that drive every cell of it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "davincirun/lifecycle.hpp"

namespace py = pybind11;

namespace davincirun::python {

void bind_lifecycle(py::module_& m) {
  m.def(
      "job_transitions",
      [] {
        py::list cells;
        for (const JobTransition& t : job_transitions()) {
          py::dict cell;
          cell["state"] = to_string(t.state);
          cell["event"] = to_string(t.event);
          cell["answer"] = to_string(t.answer);
          cell["next"] = to_string(t.next);
          cell["tells_peers"] = t.tells_peers;
          cell["why"] = t.why;
          cells.append(cell);
        }
        return cells;
      },
      "Every cell of the job's life-cycle table (docs/architecture.md): a dict with \"state\", \"event\", "
      "\"answer\", \"next\", \"tells_peers\" and \"why\", states and events in their declared order.");
}

}  // namespace davincirun::python
