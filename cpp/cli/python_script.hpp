// `davincirun train.py`, the form davincirunsdk 0.1.x documented: a first
// word naming a Python script that is not executable runs under Python.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "davincirun/environment.hpp"

namespace davincirun::cli {

/// The name of the interpreter the wheel holding this program was built
/// for, e.g. "python3.11"; empty in a program built by CMake alone
/// (`cmake --install`, a development build). Defined in cli/wheel_python.cpp.
extern const char* const wheel_python;

/// The Python interpreter `davincirun` runs scripts with, or nullopt when
/// none is found. The first of, in this order:
///  1. $DAVINCIRUN_PYTHON from `env`, when set and not empty, as given;
///  2. `<dir>/<versioned_name>`, then `<dir>/python3`, where `<dir>` is the
///     directory of `self_exe` (this program's path): for an installed wheel
///     the scripts directory of its installation (`<venv>/bin`, a conda
///     environment's or a prefix's `bin`), whose own interpreter this is (a
///     CPython 3.7 venv has `python3` but no `python3.7`);
///  3. `<versioned_name>`, then `python3`, then `python`, looked up in the
///     PATH of `env`: where the program's directory holds no interpreter, as
///     `~/.local/bin` of `pip install --user` does not.
/// `versioned_name` is the name of the interpreter the program was built
/// for (the CLI passes wheel_python); empty, or an empty `self_exe`, skips
/// its steps. Each candidate of steps 2 and 3 must be an executable regular
/// file; a symbolic link is returned as found, never resolved (a venv's
/// `bin/python3` links to its base interpreter, but only its path in the
/// venv starts the venv).
std::optional<std::string> python_interpreter(const Environment& env, const std::string& self_exe,
                                              const std::string& versioned_name);

/// True when `command[0]` ends in ".py" and names a regular file (relative
/// to `work_dir`; empty means ".") that this process may not execute: such a
/// command runs as `<python_interpreter()> command...`.
bool is_unexecutable_python_script(const std::vector<std::string>& command, const std::string& work_dir);

/// This program's own path (/proc/self/exe); empty when unreadable.
std::string self_executable();

}  // namespace davincirun::cli
