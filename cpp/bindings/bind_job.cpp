// Planning and running jobs from Python.
//
// The job runs in its own davincirun-supervisor process (job.hpp). A
// C++ thread that never touches Python relays its lines into a queue; the
// Python thread that waits on the job releases the GIL while it sleeps, and
// wakes on output or at the end of the job to write the queued lines itself.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bindings.hpp"
#include "davincirun/davincirun.hpp"

namespace py = pybind11;

namespace davincirun::python {

namespace {

// Where a job's live output goes: "python" (queued for the Python thread
// that waits, which writes it where Python's output goes), "terminal" (fd 1
// and 2, written by the supervisor process) or "none" (log files only).
enum class ConsoleMode { python, terminal, none };
DAVINCIRUN_ENUM_NAMES(ConsoleMode, "python", "terminal", "none");

ConsoleMode console_mode(const std::string& name) {
  if (const auto mode = enum_parse<ConsoleMode>(name)) return *mode;
  throw py::value_error("console must be \"python\", \"terminal\" or \"none\", got \"" + name + "\"");
}

// A job started from Python. Owns the Job, its console sink and the thread
// running its event loop.
class PyJob {
 public:
  PyJob(const LaunchPlan& plan, const std::string& console) {
    const ConsoleMode mode = console_mode(console);
    std::promise<void> started;
    std::future<void> ready = started.get_future();
    loop_ = std::thread([this, &plan, mode, started = std::move(started)]() mutable {
      // One thread starts the job and relays its lines, so the console sink
      // is only ever called from it.
      try {
        if (mode == ConsoleMode::python) {
          job_ = std::make_unique<Job>(plan, queue_);
        } else {
          // Ranks' lines to fd 1, notices to fd 2, written by the job's
          // supervisor process through a queue that never slows the ranks.
          job_ =
              std::make_unique<Job>(plan, mode == ConsoleMode::terminal ? ConsoleTarget::stdio : ConsoleTarget::none);
        }
      } catch (...) {
        started.set_exception(std::current_exception());
        return;
      }
      // Taken before wait() runs here: the Job forgets its supervisor once
      // it has reaped it, which a short job's can be before Python asks.
      supervisor_pid_ = job_->supervisor_pid();
      started.set_value();
      try {
        result_ = job_->wait();
      } catch (...) {
        error_ = std::current_exception();
      }
      done_.store(true);
      queue_.wake();
    });
    try {
      ready.get();  // `plan` stays valid until the Job has copied it
    } catch (...) {
      loop_.join();
      throw;
    }
  }

  PyJob(const PyJob&) = delete;
  PyJob& operator=(const PyJob&) = delete;

  // A job dropped while running is killed, never left behind.
  ~PyJob() {
    if (loop_.joinable()) {
      if (!done_.load()) job_->request_kill_dropped();
      loop_.join();
    }
  }

  /// Waits up to `seconds` for the end or, when `on_output`, for output;
  /// returns True once the job is over.
  bool wait_for(double seconds, bool on_output) {
    if (done_.load()) return true;
    queue_.wait(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds)),
                on_output);
    return done_.load();
  }

  /// What arrived since the last call (lines within the display budget, or
  /// all of them when `everything`): (bytes of complete console lines,
  /// lines skipped over the budget, [(rank index, progress text)], [(rank
  /// index, exit code or None, signal or None, stopped by the launcher,
  /// attempt)], [(rank index, its last line, shown or not)], [(attempt,
  /// [pid by index])]: a job that restarts started them). With `lines=False` the
  /// lines stay queued (b"" and 0 are returned for them).
  py::tuple take_output(bool everything, bool lines) {
    PolledSink::Batch batch;
    {
      py::gil_scoped_release release;
      batch = queue_.take(everything, lines);
    }
    py::list progress;
    for (const auto& [index, text] : batch.progress) progress.append(py::make_tuple(index, lenient_text(text)));
    py::list last_lines;
    for (const auto& [index, text] : batch.last_lines) last_lines.append(py::make_tuple(index, lenient_text(text)));
    py::list exits;
    for (const auto& e : batch.exits) {
      py::object code = py::none(), signal = py::none();
      if (e.status.kind == ExitStatus::Kind::exited) code = py::int_(e.status.value);
      if (e.status.kind == ExitStatus::Kind::signaled) signal = py::int_(e.status.value);
      exits.append(py::make_tuple(e.index, code, signal, e.stopped_by_launcher, e.attempt));
    }
    py::list attempts;
    for (const auto& a : batch.attempts) attempts.append(py::make_tuple(a.attempt, a.pids));
    return py::make_tuple(py::bytes(batch.lines), batch.skipped_lines, progress, exits, last_lines, attempts);
  }

  /// Each rank's latest status since the last call (rank_progress.hpp):
  /// [(rank index, progress text, output bytes a second, slow, why slow)].
  py::list take_status() {
    std::vector<RankStatus> statuses;
    {
      py::gil_scoped_release release;
      statuses = queue_.take_status();
    }
    py::list out;
    for (const auto& s : statuses) {
      out.append(py::make_tuple(s.index, lenient_text(s.progress), s.bytes_per_s, s.slow, lenient_text(s.slow_detail)));
    }
    return out;
  }

  void set_display_budget(std::size_t bytes) { queue_.set_budget(bytes); }

  void request_stop() { job_->request_stop(); }
  void request_kill() { job_->request_kill(); }
  void request_kill_dropped() { job_->request_kill_dropped(); }
  bool done() const { return done_.load(); }

  /// Callable from several threads (the waiting one, a notebook view's).
  JobResult result() {
    if (!done_.load()) throw std::logic_error("the job is still running");
    {
      std::lock_guard<std::mutex> lock(join_mutex_);
      if (loop_.joinable()) loop_.join();
    }
    if (error_) std::rethrow_exception(error_);
    if (!result_) throw std::logic_error("the job ended without a result");
    return *result_;
  }

  const std::string& run_dir() const { return job_->run_dir(); }
  std::vector<pid_t> pids() const { return job_->pids(); }
  /// The supervisor's pid as the job started, also once it has ended.
  pid_t supervisor_pid() const { return supervisor_pid_; }
  const char* tracking() const { return to_string(job_->tracking()); }

 private:
  PolledSink queue_;
  std::unique_ptr<Job> job_;
  std::thread loop_;
  std::mutex join_mutex_;
  std::atomic<bool> done_{false};
  pid_t supervisor_pid_ = -1;  // set before `started`, read after it
  std::optional<JobResult> result_;
  std::exception_ptr error_;
};

}  // namespace

void bind_job(py::module_& m) {
  m.def(
      "parent_pid", [](pid_t pid) { return parent_pid(pid); }, py::arg("pid"),
      "The parent of process `pid`, from /proc; None when it does not exist.");
  m.def(
      "find_executable",
      [](const py::bytes& name, const py::bytes& path_list) -> std::optional<py::str> {
        int error = 0;
        const std::optional<std::string> found = find_executable(name, path_list, error);
        if (!found) return std::nullopt;
        return fs_text(*found);
      },
      py::arg("name"), py::arg("path_list"),
      "What a rank's command `name` runs when its PATH is `path_list` (both as os.fsencode() gives them), as the "
      "launch looks it up; None when not found or not executable.");
  m.attr("DEFAULT_SEARCH_PATH") = std::string(default_search_path);

  m.def(
      "colourize_prefixes", [](std::string_view lines) { return colourize_prefixes(lines); }, py::arg("lines"),
      "`lines` with each rank prefix in its rank's colour and each [davincirun] prefix in bold (ANSI).");

  m.def(
      "display_width", [](std::string_view text) { return display_width(text); }, py::arg("text"),
      "Columns `text` takes on a terminal: two per East Asian Wide character (CJK), none per combining mark.");
  m.def(
      "fit_width",
      [](std::string_view text, std::size_t columns) { return std::string(text.substr(0, fit_width(text, columns))); },
      py::arg("text"), py::arg("columns"), "The longest start of `text` that takes at most `columns` columns.");

  m.def(
      "read_log_tail",
      [](const std::string& path, std::size_t max_lines, std::size_t max_bytes) {
        return lenient_text(read_log_tail(path, max_lines, max_bytes));
      },
      py::arg("path"), py::arg("max_lines") = 20, py::arg("max_bytes") = 16 * 1024,
      "The last lines of a log file, as text (empty if unreadable).");

  py::class_<RootCause>(m, "RootCause", "What a rank's log says about why it failed (root_cause.hpp).")
      .def_property_readonly(
          "text", [](const RootCause& c) { return lenient_text(c.text); },
          "The block: lines of the log in its order, \"...\" where lines were skipped; '\\n'-terminated.")
      .def_property_readonly(
          "exception", [](const RootCause& c) { return lenient_text(c.exception); },
          "The exception line (\"RuntimeError: ...\"); empty without a traceback.")
      .def_property_readonly(
          "error_code", [](const RootCause& c) { return lenient_text(c.error_code); },
          "The most telling CANN error-code line (\"EI0006: ...\"); empty without one.")
      .def_readonly("found", &RootCause::found, "A traceback, an error code or an error section was found.")
      .def_readonly("source", &RootCause::source, "\"its log\", or \"its torch error file\".")
      .def_readonly("hint", &RootCause::hint,
                    "What to do where the framework's own message misleads (MindSpore's 'use mpirun' on a machine "
                    "without NPUs); empty otherwise.");
  m.def(
      "root_cause", [](const std::string& path, std::size_t tail_lines) { return rank_root_cause(path, tail_lines); },
      py::arg("path"), py::arg("tail_lines") = RootCauseLimits::default_tail_lines,
      py::call_guard<py::gil_scoped_release>(),
      "A rank's root cause: from the torch error file beside its log (written by torch's @record) when there is "
      "one, else from the last 256 KiB of the log file at `path` (empty if unreadable), with its last `tail_lines` "
      "lines.");
  m.def(
      "find_root_cause",
      [](const std::string& text, std::size_t tail_lines) { return find_root_cause(text, tail_lines); },
      py::arg("text"), py::arg("tail_lines") = RootCauseLimits::default_tail_lines,
      "The root cause in a log's text (str or bytes), with its last `tail_lines` lines.");

  py::class_<PyJob>(m, "Job")
      .def(py::init<const LaunchPlan&, const std::string&>(), py::arg("plan"), py::arg("console"),
           py::call_guard<py::gil_scoped_release>())
      .def("wait_for", &PyJob::wait_for, py::arg("timeout"), py::arg("on_output") = true,
           py::call_guard<py::gil_scoped_release>())
      .def("take_output", &PyJob::take_output, py::arg("everything") = false, py::arg("lines") = true)
      .def("take_status", &PyJob::take_status)
      .def("set_display_budget", &PyJob::set_display_budget, py::arg("bytes"))
      .def("request_stop", &PyJob::request_stop)
      .def("request_kill", &PyJob::request_kill)
      .def("request_kill_dropped", &PyJob::request_kill_dropped)
      .def_property_readonly("done", &PyJob::done)
      .def("result", &PyJob::result, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("run_dir", &PyJob::run_dir)
      .def_property_readonly("pids", &PyJob::pids)
      .def_property_readonly("supervisor_pid", &PyJob::supervisor_pid)
      .def_property_readonly("tracking", &PyJob::tracking);
}

}  // namespace davincirun::python
