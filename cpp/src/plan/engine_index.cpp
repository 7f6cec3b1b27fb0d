// The engine's index of this agent (rules: engine_index.hpp).
#include "plan/engine_index.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "plan/job_engines.hpp"

namespace davincirun::detail {

namespace {

std::optional<std::string> value_of(const Environment& env, std::string_view name) {
  auto v = env.get(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

std::optional<std::size_t> decimal(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::strtoul(text.c_str(), nullptr, 10));
}

// One engine: its index variable and the checks that make it a server index.
class Reading {
 public:
  Reading(const Environment& env, std::size_t servers, EngineIndex& out) : env_(env), servers_(servers), out_(out) {}

  // The index variable; false when unset (the next engine is read).
  bool index(std::string_view name) {
    const auto v = value_of(env_, name);
    out_.looked_at.push_back(v ? fmt::format("{} '{}'", name, *v) : fmt::format("{} not set", name));
    if (!v) return false;
    index_ = decimal(*v);
    out_.reason = fmt::format("{} {}", name, *v);
    if (!index_) fail(fmt::format("{} '{}' is not a decimal number", name, *v));
    return true;
  }

  // The first of `names` that is set, as index(); false when none is.
  bool first_index(const std::vector<std::string_view>& names) {
    for (const std::string_view name : names) {
      if (index(name)) return true;
    }
    return false;
  }

  // A count that, when set, must be the number of servers.
  void count(std::string_view name) {
    const auto v = value_of(env_, name);
    if (!v) return;
    out_.reason += fmt::format(", {} {}", name, *v);
    if (decimal(*v) != servers_) {
      fail(fmt::format("{} {} is not the rank table's {} servers", name, *v, servers_));
    }
  }

  // This agent's position among the agents of its node, which must be 0.
  void only_agent(std::string_view name, std::size_t expected, std::string_view advice) {
    const auto v = value_of(env_, name);
    if (!v) return;
    if (decimal(*v) != expected) {
      fail(
          fmt::format("{} is {}: several agents run on this node, but one davincirun per server starts all its "
                      "devices ({})",
                      name, *v, advice));
    }
  }

  void fail(std::string problem) {
    if (out_.problem.empty()) out_.problem = std::move(problem);
  }

  void finish() {
    if (!out_.problem.empty() || !index_) return;
    if (*index_ >= servers_) {
      out_.problem = fmt::format("{} is beyond the rank table's {} servers", out_.reason, servers_);
      return;
    }
    out_.index = index_;
  }

 private:
  const Environment& env_;
  std::size_t servers_;
  EngineIndex& out_;
  std::optional<std::size_t> index_;
};

// Volcano's svc plugin sets VC_<task>_NUM (the task's replicas) for every
// task of the job; each task numbers its own pods from 0.
std::vector<std::string> volcano_task_counts(const Environment& env) {
  std::vector<std::string> names;
  for (const auto& entry : env.entries()) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (name.size() > 7 && name.substr(0, 3) == "VC_" && name.substr(name.size() - 4) == "_NUM") {
      names.emplace_back(name);
    }
  }
  return names;
}

}  // namespace

EngineIndex engine_index(const Environment& env, std::size_t server_count) {
  EngineIndex out;
  Reading r(env, server_count, out);
  for (const JobEngine& engine : job_engines()) {
    if (!r.first_index(engine.index_variables)) continue;
    const auto& counts = engine.count_variables;
    const auto count = std::find_if(counts.begin(), counts.end(),
                                    [&](std::string_view name) { return value_of(env, name).has_value(); });
    if (count != counts.end()) r.count(*count);
    if (!engine.one_agent_variable.empty()) {
      r.only_agent(engine.one_agent_variable, engine.one_agent_value, engine.one_agent_advice);
    }
    if (engine.counts_per_task) {
      const auto tasks = volcano_task_counts(env);
      if (tasks.size() > 1) {
        r.fail(
            fmt::format("the Volcano job has {} tasks ({}), each numbering its pods from 0: the task index is no "
                        "server index",
                        tasks.size(), fmt::join(tasks, ", ")));
      } else if (tasks.size() == 1) {
        r.count(tasks.front());
      }
    }
    r.finish();
    return out;
  }
  return out;
}

}  // namespace davincirun::detail
