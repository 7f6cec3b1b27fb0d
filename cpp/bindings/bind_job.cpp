// Planning and running jobs from Python.
//
// The job runs in its own davincirun-supervisor process (launcher.hpp). A
// C++ thread that never touches Python relays its lines into a queue; the
// Python thread that waits on the job releases the GIL while it sleeps, and
// wakes on output or at the end of the job to write the queued lines itself.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bindings.hpp"
#include "davincirun/console_sink.hpp"
#include "davincirun/launcher.hpp"
#include "queue_sink.hpp"

namespace py = pybind11;

namespace davincirun::python {

namespace {

double epoch_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::chrono::milliseconds to_millis(double seconds, const char* what) {
  const double max_seconds = static_cast<double>(max_grace_period.count()) / 1000.0;
  if (!std::isfinite(seconds) || seconds < 0 || seconds > max_seconds) {
    throw py::value_error(std::string(what) + " must be a number of seconds between 0 and 86400");
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

// Rank output is arbitrary bytes: show invalid UTF-8 as U+FFFD, never fail.
py::str lenient_text(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (!text) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

enum class ConsoleMode { python, terminal, none };

// A job started from Python. Owns the Job, its console sink and the thread
// running its event loop.
class PyJob {
 public:
  PyJob(const LaunchPlan& plan, ConsoleMode mode) {
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
          job_ = std::make_unique<Job>(plan, mode == ConsoleMode::terminal ? ConsoleTarget::stdio : ConsoleTarget::none);
        }
      } catch (...) {
        started.set_exception(std::current_exception());
        return;
      }
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
    queue_.wait(to_millis(seconds, "timeout"), on_output);
    return done_.load();
  }

  /// What arrived since the last call (lines within the display budget, or
  /// all of them when `everything`): (bytes of complete console lines,
  /// lines skipped over the budget, [(label, progress text)], [(rank index,
  /// exit code or None, signal or None, stopped by the launcher)], [(label,
  /// its last line, shown or not)]). With `lines=False` the lines stay
  /// queued (b"" and 0 are returned for them).
  py::tuple take_output(bool everything, bool lines) {
    QueueSink::Batch batch;
    {
      py::gil_scoped_release release;
      batch = queue_.take(everything, lines);
    }
    py::list progress;
    for (const auto& [label, text] : batch.progress) progress.append(py::make_tuple(lenient_text(label), lenient_text(text)));
    py::list last_lines;
    for (const auto& [label, text] : batch.last_lines) last_lines.append(py::make_tuple(lenient_text(label), lenient_text(text)));
    py::list exits;
    for (const auto& e : batch.exits) {
      py::object code = py::none(), signal = py::none();
      if (e.status.kind == ExitStatus::Kind::exited) code = py::int_(e.status.value);
      if (e.status.kind == ExitStatus::Kind::signaled) signal = py::int_(e.status.value);
      exits.append(py::make_tuple(e.index, code, signal, e.stopped_by_launcher));
    }
    return py::make_tuple(py::bytes(batch.lines), batch.skipped_lines, progress, exits, last_lines);
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
    return *result_;
  }

  const std::string& run_dir() const { return job_->run_dir(); }
  std::vector<pid_t> pids() const { return job_->pids(); }
  pid_t supervisor_pid() const { return job_->supervisor_pid(); }
  const char* tracking() const { return tracking_name(job_->tracking()); }

 private:
  QueueSink queue_;
  std::unique_ptr<Job> job_;
  std::thread loop_;
  std::mutex join_mutex_;
  std::atomic<bool> done_{false};
  std::optional<JobResult> result_;
  std::exception_ptr error_;
};

LaunchPlan plan(std::vector<std::string> command, std::string rank_table_file, std::string work_dir,
                std::string log_dir, std::optional<std::string> server_id,
                std::vector<std::pair<std::string, std::string>> env, double grace_period,
                double drain_timeout, double job_timeout, double wait_timeout, std::string device_dir,
                std::string supervisor_program, std::optional<std::vector<int>> ranks_to_show,
                std::vector<std::string> remove_after_job) {
  LaunchOptions o;
  o.remove_after_job = std::move(remove_after_job);
  o.ranks_to_show = std::move(ranks_to_show);
  o.supervisor_program = std::move(supervisor_program);
  o.command = std::move(command);
  o.rank_table_file = std::move(rank_table_file);
  o.work_dir = std::move(work_dir);
  o.log_dir = std::move(log_dir);
  o.server_id = std::move(server_id);
  o.env = std::move(env);
  o.device_dir = std::move(device_dir);
  o.supervisor.grace_period = to_millis(grace_period, "grace_period");
  o.supervisor.drain_timeout = to_millis(drain_timeout, "drain_timeout");
  if (!std::isfinite(job_timeout) || job_timeout < 0 || job_timeout > 365.0 * 86400.0) {
    throw py::value_error("job_timeout must be a number of seconds between 0 (no limit) and one year");
  }
  // Rounded up: a positive timeout, however small, must not become 0 (no limit).
  o.supervisor.job_timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(job_timeout * 1000)));
  if (!std::isfinite(wait_timeout) || wait_timeout < 0 || wait_timeout > 365.0 * 86400.0) {
    throw py::value_error("wait_timeout must be a number of seconds between 0 (no waiting) and one year");
  }
  o.wait_timeout = std::chrono::milliseconds(std::llround(wait_timeout * 1000));
  o.progress = report_progress;  // both called on this thread, which waits without the GIL
  o.keep_waiting = check_interrupt;
  py::gil_scoped_release release;
  return plan_launch(o, Environment::current());
}

}  // namespace

void bind_job(py::module_& m) {
  m.attr("DEFAULT_GRACE_PERIOD") = static_cast<double>(default_grace_period.count()) / 1000.0;
  {
    std::vector<std::string> names(identity_variable_names().begin(), identity_variable_names().end());
    m.attr("IDENTITY_VARIABLES") = py::tuple(py::cast(names));
  }
  m.attr("DEFAULT_DRAIN_TIMEOUT") = static_cast<double>(default_drain_timeout.count()) / 1000.0;

  py::class_<RankAssignment>(m, "RankAssignment")
      .def_readonly("rank", &RankAssignment::rank)
      .def_readonly("local_rank", &RankAssignment::local_rank)
      .def_readonly("physical_device_id", &RankAssignment::physical_device_id)
      .def_readonly("logical_device_id", &RankAssignment::logical_device_id)
      .def_readonly("device_ip", &RankAssignment::device_ip);

  py::class_<LaunchPlan>(m, "LaunchPlan")
      .def_property_readonly("job_id", [](const LaunchPlan& p) { return p.job.job_id; })
      .def_property_readonly("rank_table_file", [](const LaunchPlan& p) { return p.job.rank_table_file; })
      .def_property_readonly("world_size", [](const LaunchPlan& p) { return p.job.world_size; })
      .def_property_readonly("master_addr", [](const LaunchPlan& p) { return p.job.master_addr; })
      .def_property_readonly("master_port", [](const LaunchPlan& p) { return p.job.master_port; })
      .def_property_readonly("server_id", [](const LaunchPlan& p) { return p.table.servers[p.server_index].server_id; })
      .def_property_readonly("warnings", [](const LaunchPlan& p) { return p.table.warnings; })
      .def_readonly("ranks", &LaunchPlan::ranks)
      .def_readonly("work_dir", &LaunchPlan::work_dir)
      .def_readonly("log_dir", &LaunchPlan::log_dir)
      .def_property_readonly("environments", [](const LaunchPlan& p) {
        std::vector<std::vector<std::string>> out;
        for (const auto& e : p.environments) out.push_back(e.entries());
        return out;
      });

  m.def("plan_launch", &plan, py::arg("command"), py::arg("rank_table_file"), py::arg("work_dir"),
        py::arg("log_dir"), py::arg("server_id"), py::arg("env"), py::arg("grace_period"),
        py::arg("drain_timeout"), py::arg("job_timeout") = 0.0, py::arg("wait_timeout") = 300.0,
        py::arg("device_dir") = "/dev", py::arg("supervisor_program") = "",
        py::arg("ranks_to_show") = py::none(), py::arg("remove_after_job") = std::vector<std::string>{});

  m.def("colourize_prefixes", [](std::string_view lines) { return colourize_prefixes(lines); }, py::arg("lines"),
        "`lines` with each rank prefix in its rank's colour and each [davincirun] prefix in bold (ANSI).");

  m.def("read_log_tail",
        [](const std::string& path, std::size_t max_lines, std::size_t max_bytes) {
          return lenient_text(read_log_tail(path, max_lines, max_bytes));
        },
        py::arg("path"), py::arg("max_lines") = 20,
        py::arg("max_bytes") = 16 * 1024, "The last lines of a log file, as text (empty if unreadable).");

  py::class_<RankResult>(m, "RankResult")
      .def_readonly("rank", &RankResult::rank)
      .def_readonly("pid", &RankResult::pid)
      .def_readonly("log_path", &RankResult::log_path)
      .def_property_readonly("exit_code", [](const RankResult& r) -> std::optional<int> {
        if (r.status.kind == ExitStatus::Kind::exited) return r.status.value;
        return std::nullopt;
      })
      .def_property_readonly("signal", [](const RankResult& r) -> std::optional<int> {
        if (r.status.kind == ExitStatus::Kind::signaled) return r.status.value;
        return std::nullopt;
      })
      .def_property_readonly("returncode", [](const RankResult& r) { return r.status.shell_code(); })
      .def_property_readonly("success", [](const RankResult& r) { return r.status.success(); })
      .def_property_readonly("status", [](const RankResult& r) { return r.status.describe(); })
      .def_readonly("terminated_by_launcher", &RankResult::terminated_by_launcher)
      .def_readonly("killed_by_launcher", &RankResult::killed_by_launcher)
      .def_property_readonly("started", [](const RankResult& r) { return epoch_seconds(r.started); })
      .def_property_readonly("ended", [](const RankResult& r) { return epoch_seconds(r.ended); })
      .def_readonly("output_bytes", &RankResult::output_bytes)
      .def_readonly("log_error", &RankResult::log_error);

  py::class_<JobResult>(m, "JobResult")
      .def_readonly("ranks", &JobResult::ranks)
      .def_readonly("first_failure", &JobResult::first_failure)
      .def_readonly("leftover_processes_killed", &JobResult::leftover_processes_killed)
      .def_readonly("stop_signal", &JobResult::stop_signal)
      .def_readonly("summary_error", &JobResult::summary_error)
      .def_property_readonly("tracking", [](const JobResult& r) { return tracking_name(r.tracking); })
      .def_property_readonly("stop_reason", [](const JobResult& r) {
        switch (r.stop_reason) {
          case StopReason::none: return "none";
          case StopReason::rank_failed: return "rank_failed";
          case StopReason::requested: return "requested";
          case StopReason::timed_out: return "timed_out";
          case StopReason::signaled: return "signaled";
        }
        return "none";
      })
      .def_property_readonly("success", &JobResult::success)
      .def_property_readonly("exit_code", &JobResult::exit_code)
      .def("failure_report",
           [](const JobResult& r, std::size_t tail_lines) { return lenient_text(failure_report(r, tail_lines)); },
           py::arg("tail_lines") = 20);

  py::enum_<ConsoleMode>(m, "ConsoleMode")
      .value("python", ConsoleMode::python)
      .value("terminal", ConsoleMode::terminal)
      .value("none", ConsoleMode::none);

  py::class_<PyJob>(m, "Job")
      .def(py::init<const LaunchPlan&, ConsoleMode>(), py::arg("plan"), py::arg("console"),
           py::call_guard<py::gil_scoped_release>())
      .def("wait_for", &PyJob::wait_for, py::arg("timeout"), py::arg("on_output") = true,
           py::call_guard<py::gil_scoped_release>())
      .def("take_output", &PyJob::take_output, py::arg("everything") = false, py::arg("lines") = true)
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
