// failure_report(): the account of a failed job that the CLI prints and
// DistributedRuntimeError carries.
#include "davincirun/failure_report.hpp"

#include <signal.h>
#include <algorithm>

#include <fmt/format.h>

#include "davincirun/log_streamer.hpp"
#include "davincirun/root_cause.hpp"

namespace davincirun {

namespace {
double seconds_between(std::chrono::system_clock::time_point a, std::chrono::system_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "0, 2-7, 9" for ranks {0, 2, 3, 4, 5, 6, 7, 9}.
std::string rank_ranges(std::vector<int> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j == i ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return out;
}

std::string rank_outcome(const RankResult& r) {
  const bool by_sigterm = r.status.kind == ExitStatus::Kind::signaled && r.status.value == SIGTERM;
  if (r.killed_by_launcher) return "killed by the launcher (SIGKILL)";
  if (r.terminated_by_launcher && by_sigterm) return "stopped by the launcher (SIGTERM)";
  if (r.terminated_by_launcher) return r.status.describe() + " after SIGTERM from the launcher";
  return r.status.describe();
}
}  // namespace

std::string failure_report(const JobResult& result, std::size_t tail_lines) {
  if (result.success()) return {};
  std::string out;
  if (result.first_failure) {
    const RankResult& f = result.ranks[*result.first_failure];
    out += fmt::format("{} (pid {}) failed with {} after {:.1f} s\n", process_name(f.role, f.rank), f.pid,
                       f.status.describe(), seconds_between(f.started, f.ended));
    out += fmt::format("log: {}\n", f.log_path);
    const RootCause cause = rank_root_cause(f.log_path, std::min(tail_lines, RootCauseLimits::default_tail_lines));
    if (cause.found) {
      const bool elided = cause.text.find("\n...\n") != std::string::npos;
      out += fmt::format("root cause, from {}{}:\n{}", cause.source, elided ? " (\"...\": lines skipped)" : "",
                         cause.text);
      if (!cause.hint.empty()) out += fmt::format("hint: {}\n", cause.hint);
    } else if (std::string tail = read_log_tail(f.log_path, tail_lines); tail.empty()) {
      out += "(its log is empty)\n";
    } else {
      out += fmt::format("last lines of its log:\n{}\n", tail);
    }
  } else if (result.peer_stop) {
    // Another server's event: where, what, and the root cause it sent.
    const PeerStop& p = *result.peer_stop;
    out += fmt::format("the job was stopped because {}\n", describe(result.stop_reason, p));
    if (result.stop_reason == StopReason::peer_failed && p.status && !p.detail.empty()) {
      out += fmt::format("root cause, from its log on server {}:\n{}", p.server_id, p.detail);
      if (p.detail.back() != '\n') out += '\n';
    }
  } else if (result.stop_reason == StopReason::requested) {
    out += "the job was stopped on request\n";
  } else if (result.stop_reason == StopReason::timed_out) {
    // The job's span, from its first start to its last exit: the timeout plus the stop.
    auto first = std::min_element(result.ranks.begin(), result.ranks.end(),
                                  [](const RankResult& a, const RankResult& b) { return a.started < b.started; });
    auto last = std::max_element(result.ranks.begin(), result.ranks.end(),
                                 [](const RankResult& a, const RankResult& b) { return a.ended < b.ended; });
    out += first == result.ranks.end()
               ? std::string("the job ran past its timeout and was stopped\n")
               : fmt::format("the job ran past its timeout and was stopped; it ran {:.1f} s in all\n",
                             seconds_between(first->started, last->ended));
  } else if (!result.stop_detail.empty()) {
    // A signal ("davincirun got SIGTERM from pid 7 (kill)"), the launcher gone, a stall.
    out += fmt::format("the job was stopped because {}\n", result.stop_detail);
  }
  if (!result.first_failure &&
      (result.stopped_in == JobState::draining || result.stopped_in == JobState::waiting_for_servers)) {
    out += result.stopped_in == JobState::waiting_for_servers
               ? "(it came after this server's ranks had ended, while it waited for the other servers)\n"
               : "(it came after this server's ranks had ended)\n";
  }
  // The other ranks: one line each, or one line per outcome when more than
  // `group_above` ranks share it (32 stopped ranks need not be 31 lines).
  constexpr std::size_t group_above = 4;
  std::vector<std::pair<std::string, std::vector<const RankResult*>>> outcomes;
  for (std::size_t i = 0; i < result.ranks.size(); ++i) {
    if (result.first_failure && *result.first_failure == i) continue;
    std::string outcome = rank_outcome(result.ranks[i]);
    auto it = std::find_if(outcomes.begin(), outcomes.end(), [&](const auto& o) { return o.first == outcome; });
    if (it == outcomes.end())
      it = outcomes.emplace(outcomes.end(), std::move(outcome), std::vector<const RankResult*>{});
    it->second.push_back(&result.ranks[i]);
  }
  for (const auto& [outcome, ranks] : outcomes) {
    if (ranks.size() <= group_above) {
      for (const RankResult* r : ranks) {
        out += fmt::format("{} (pid {}): {}\n", process_name(r->role, r->rank), r->pid, outcome);
      }
      continue;
    }
    std::vector<int> ids;
    bool scheduler = false;
    for (const RankResult* r : ranks) {
      if (r->role == ProcessRole::scheduler) {
        scheduler = true;
      } else {
        ids.push_back(r->rank);
      }
    }
    out += fmt::format("{} ranks ({}){}: {}\n", ids.size(), rank_ranges(ids), scheduler ? " and the scheduler" : "",
                       outcome);
  }
  for (const auto& r : result.ranks) {
    if (r.log_error) {
      out += fmt::format("the log of {} is incomplete: {}\n", process_name(r.role, r.rank), *r.log_error);
    }
  }
  // A job that restarts: every attempt, how it ended and what came of it.
  if (result.attempts.size() > 1 || (!result.attempts.empty() && !result.attempts.back().decision.empty())) {
    out += "attempts:\n";
    for (const JobAttempt& a : result.attempts) {
      out += fmt::format("  attempt {}: {}{}{}{}\n", a.attempt, a.stop_detail.empty() ? "ended" : a.stop_detail,
                         a.root_cause.empty() ? "" : " (" + a.root_cause + ")", a.decision.empty() ? "" : "; ",
                         a.decision);
    }
  }
  return out;
}

}  // namespace davincirun
