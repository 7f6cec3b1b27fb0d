// The per-job supervisor process (davincirun-supervisor): the parent of
// every rank, a child subreaper, in a session of its own. It locks the job's
// devices, creates the run directory, starts the ranks, writes their logs,
// and stops the whole job when its launcher asks, or when the launcher's end
// of the lifeline socket closes because the launcher exited or was killed.
// Nothing the job started outlives it.
#pragma once

namespace davincirun::detail {

/// The supervisor process's main: `lifeline_fd` is its end of the socket to
/// the launcher (protocol in job/job_protocol.hpp). Call from a process's
/// main thread before it starts any thread: it blocks SIGCHLD, SIGINT,
/// SIGTERM and SIGHUP (read through signalfds), ignores SIGPIPE and SIGXFSZ,
/// and makes the process a child subreaper.
/// Returns the process exit status: 0 when a result was delivered (whatever
/// it says), 1 when the job could not start (an error frame was sent), 2 on a
/// protocol failure.
int run_job_host(int lifeline_fd);

}  // namespace davincirun::detail
