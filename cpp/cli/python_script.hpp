// `davincirun train.py`, the form davincirunsdk 0.1.x documented: a first
// word naming a Python script that is not executable runs under Python.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "davincirun/environment.hpp"

namespace davincirun::cli {

/// The Python interpreter `davincirun` runs scripts with, or nullopt when
/// none is found: $DAVINCIRUN_PYTHON from `env` when set (the `davincirun`
/// console script sets it to the interpreter running it); else, when
/// `self_exe` (this program's path) lies in an installed package,
/// `<base>/lib[64]/pythonX.Y/{site,dist}-packages/davincirunsdk/bin/davincirun`,
/// the interpreter of that installation, `<base>/bin/pythonX.Y`, else
/// `<base>/bin/python3` (a CPython 3.7 venv; Debian's versionless
/// `lib/python3/dist-packages`); else
/// `python3`, then `python`, looked up in the PATH of `env`.
std::optional<std::string> python_interpreter(const Environment& env, const std::string& self_exe);

/// True when `command[0]` ends in ".py" and names a regular file (relative
/// to `work_dir`; empty means ".") that this process may not execute: such a
/// command runs as `<python_interpreter()> command...`.
bool is_unexecutable_python_script(const std::vector<std::string>& command, const std::string& work_dir);

/// This program's own path (/proc/self/exe); empty when unreadable.
std::string self_executable();

}  // namespace davincirun::cli
