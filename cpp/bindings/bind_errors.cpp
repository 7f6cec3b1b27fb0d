// C++ exceptions become the Python exceptions of davincirunsdk.errors, at
// this one place, with their details as attributes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <cstring>

#include "bindings.hpp"
#include "davincirun/errors.hpp"

namespace py = pybind11;

namespace davincirun::python {

namespace {

// Messages and details may quote bytes that are not UTF-8 (a command, a
// path): decoded as os.fsdecode() would, so that the error itself is raised.
void raise(const char* class_name, const char* message, const py::dict& attributes) {
  py::object cls = py::module_::import("davincirunsdk.errors").attr(class_name);
  py::object exc = cls(fs_text(message));
  for (auto item : attributes) py::setattr(exc, item.first, item.second);
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

void bind_errors(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const RankTableError& e) {
      py::dict a;
      a["kind"] = to_string(e.kind());
      a["source"] = fs_text(e.source());
      a["pointer"] = e.pointer() ? py::object(fs_text(*e.pointer())) : py::object(py::none());
      a["detail"] = fs_text(e.detail());
      raise("RankTableError", e.what(), a);
    } catch (const SpawnError& e) {
      py::dict a;
      a["rank"] = e.rank();
      a["command"] = fs_text(e.command());
      a["os_errno"] = e.os_errno();
      a["exit_code"] = e.exit_code();
      a["search_path"] = e.search_path().empty() ? py::object(py::none()) : py::object(fs_text(e.search_path()));
      // Not found / not executable are also FileNotFoundError / PermissionError,
      // what subprocess (and so davincirunsdk 0.1.x) raised.
      const char* name = "SpawnError";
      if (e.os_errno() == ENOENT) name = "CommandNotFoundError";
      if (e.os_errno() == EACCES) name = "CommandNotExecutableError";
      if (e.os_errno() == ENOENT || e.os_errno() == EACCES) {
        a["errno"] = e.os_errno();
        a["strerror"] = std::strerror(e.os_errno());
      }
      raise(name, e.what(), a);
    } catch (const DeviceBusyError& e) {
      py::dict a;
      a["devices"] = py::cast(e.devices());
      a["holder_pid"] = e.holder_pid();
      a["holder_description"] = fs_text(e.holder_description());
      raise("DeviceBusyError", e.what(), a);
    } catch (const NoRankTableError& e) {
      py::dict a;
      a["option"] = e.option();
      raise("NoRankTableError", e.what(), a);
    } catch (const OptionError& e) {
      py::dict a;
      a["option"] = e.option();
      raise("LaunchConfigError", e.what(), a);
    } catch (const ConfigError& e) {
      raise("LaunchConfigError", e.what(), py::dict());
    } catch (const SystemError& e) {
      py::dict a;
      a["os_errno"] = e.os_errno();
      raise("LauncherSystemError", e.what(), a);
    }
  });
}

}  // namespace davincirun::python
