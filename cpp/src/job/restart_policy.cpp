// The restart rule (restart_policy.hpp): a verdict on each attempt that is
// over, from its result, what ruled a restart out, and its logs.
#include "davincirun/restart_policy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "davincirun/root_cause.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

namespace {

// The last `limit` bytes of the file at `path`; nullopt when it cannot be read.
std::optional<std::string> read_tail(const std::string& path, std::size_t limit) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return std::nullopt;
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::size_t start = size > limit ? size - limit : 0;
  std::string out(size - start, '\0');
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(start + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  if (start > 0) out.erase(0, std::min(out.size(), out.find('\n') + 1));  // its first line is partial
  return out;
}

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool hex_digit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool joiner(char c) { return c == '.' || c == ':' || c == '-' || c == '/'; }

// `line` with what changes from run to run masked: "0x7f3a..." and runs of
// digits joined by . : - / ("17:53:41.123", "2026-12-04", "0.6931").
std::string masked(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '0' && i + 2 < line.size() && (line[i + 1] == 'x' || line[i + 1] == 'X') && hex_digit(line[i + 2])) {
      i += 2;
      while (i < line.size() && hex_digit(line[i])) ++i;
      out += "0x#";
      continue;
    }
    if (!digit(line[i])) {
      out += line[i++];
      continue;
    }
    const std::size_t start = i;
    std::size_t groups = 0;
    while (i < line.size() && digit(line[i])) {
      while (i < line.size() && digit(line[i])) ++i;
      ++groups;
      if (i + 1 < line.size() && joiner(line[i]) && digit(line[i + 1])) {
        ++i;
      } else {
        break;
      }
    }
    if (groups > 1) {
      out += '#';
    } else {
      out.append(line.substr(start, i - start));
    }
  }
  return out;
}

template <typename F>
void each_line(std::string_view text, F&& f) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find_first_of("\r\n", at);
    if (end == std::string_view::npos) end = text.size();
    if (end > at) f(text.substr(at, end - at));
    at = end + 1;
  }
}

// The failure in one line: the exception, else the CANN error code line.
std::string root_cause_line(const RankResult& failed) {
  const RootCause cause = rank_root_cause(failed.log_path);
  return !cause.exception.empty() ? cause.exception : cause.error_code;
}

bool alike(const RankResult& a, const RankResult& b) {
  return a.status.kind == b.status.kind && a.status.value == b.status.value;
}

// What `failed` may repeat in the attempt before: the same process, when it
// failed there alike, and that attempt's first failure when it failed
// alike. When every rank fails the same way, which one is first is chance,
// and the one first now may have been stopped by us then.
std::vector<const RankResult*> failures_before(const JobAttempt& before, const RankResult& failed) {
  std::vector<const RankResult*> out;
  for (const RankResult& r : before.ranks) {
    if (r.role == failed.role && r.rank == failed.rank && alike(r, failed)) out.push_back(&r);
  }
  if (before.first_failure && alike(*before.first_failure, failed)) out.push_back(&*before.first_failure);
  return out;
}

}  // namespace

std::string restarted_decision(int attempt, int max_restarts) {
  return fmt::format("restarted ({} of {} restarts)", attempt, max_restarts);
}

std::string no_restarts_left_decision(int max_restarts) {
  return fmt::format("not restarted: no restarts left (max_restarts {})", max_restarts);
}

bool wrote_nothing_new(const std::string& before, const std::string& now) {
  const auto old_text = read_tail(before, repeat_read_bytes);
  const auto new_text = read_tail(now, repeat_read_bytes);
  if (!old_text || !new_text) return false;
  std::unordered_set<std::string> seen;
  each_line(*old_text, [&](std::string_view line) { seen.insert(masked(line)); });
  bool nothing_new = true;
  each_line(*new_text, [&](std::string_view line) {
    if (nothing_new && seen.count(masked(line)) == 0) nothing_new = false;
  });
  return nothing_new;
}

AttemptVerdict judge_attempt(const JobResult& attempt, const std::string& ruled_out_by,
                             const SupervisorOptions& options) {
  AttemptVerdict verdict;
  if (attempt.attempts.empty() || attempt.success()) return verdict;
  const JobAttempt& now = attempt.attempts.back();
  if (now.first_failure) verdict.root_cause = root_cause_line(*now.first_failure);
  if (!ruled_out_by.empty()) {
    verdict.decision = fmt::format("not restarted: {}", ruled_out_by);
    return verdict;
  }
  if (now.attempt > options.max_restarts) {
    verdict.decision = no_restarts_left_decision(options.max_restarts);
    return verdict;
  }
  const JobAttempt* before = attempt.attempts.size() > 1 ? &attempt.attempts[attempt.attempts.size() - 2] : nullptr;
  const RankResult* then = nullptr;
  if (!options.restart_on_same_error && before != nullptr && now.first_failure) {
    for (const RankResult* r : failures_before(*before, *now.first_failure)) {
      if (root_cause_line(*r) == verdict.root_cause && wrote_nothing_new(r->log_path, now.first_failure->log_path)) {
        then = r;
        break;
      }
    }
  }
  if (then != nullptr && now.first_failure) {
    const RankResult& f = *now.first_failure;
    verdict.decision = fmt::format(
        "not restarted: it failed as attempt {} did ({} with {}{}), writing no line that {} had not written in "
        "attempt {}, so a restart would most likely fail again (restart_on_same_error, --restart-on-same-error, "
        "restarts all the same)",
        before->attempt, process_name(f.role, f.rank), f.status.describe(),
        verdict.root_cause.empty() ? std::string() : ", " + verdict.root_cause, process_name(then->role, then->rank),
        before->attempt);
    return verdict;
  }
  verdict.restart = true;
  verdict.decision = restarted_decision(now.attempt, options.max_restarts);
  return verdict;
}

}  // namespace davincirun
