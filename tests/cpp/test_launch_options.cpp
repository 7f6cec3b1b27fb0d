// LaunchOptions: one object for every front end, and one place for its rules
// (validate()) and for reading seconds (set_seconds()).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "davincirun/errors.hpp"
#include "davincirun/plan.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

LaunchOptions valid() {
  LaunchOptions options;
  options.command = {"python", "train.py"};
  return options;
}

// The option validate() names, and its message; "" when it passes.
std::pair<std::string, std::string> refusal(const LaunchOptions& options) {
  try {
    options.validate();
  } catch (const OptionError& e) {
    return {e.option(), e.what()};
  }
  return {};
}

}  // namespace

TEST_CASE("validate: the defaults and a command pass, each rule names its option", "[launch_options]") {
  CHECK(refusal(valid()).first.empty());
  using namespace std::string_literals;
  struct Case {
    const char* what;
    void (*change)(LaunchOptions&);
    const char* option;
    const char* message;
  };
  const Case cases[] = {
      {"no command", [](LaunchOptions& o) { o.command.clear(); }, "command", "no command given"},
      {"an empty program", [](LaunchOptions& o) { o.command = {"", "x"}; }, "command", "no command given"},
      {"a NUL in an argument", [](LaunchOptions& o) { o.command.push_back("a\0b"s); }, "command", "NUL"},
      {"'=' in a variable name", [](LaunchOptions& o) { o.env = {{"A=B", "x"}}; }, "env",
       "env: invalid variable name 'A=B'"},
      {"an empty variable name", [](LaunchOptions& o) { o.env = {{"", "x"}}; }, "env", "invalid variable name ''"},
      {"a NUL in a value", [](LaunchOptions& o) { o.env = {{"A", "x\0y"s}}; }, "env",
       "env: the value of A contains a NUL character"},
      {"a negative grace period", [](LaunchOptions& o) { o.supervisor.grace_period = -1ms; }, "grace_period",
       "grace_period must be a number of seconds between 0 and 86400, got -0.001"},
      {"a grace period over a day", [](LaunchOptions& o) { o.supervisor.grace_period = 86'400'001ms; }, "grace_period",
       "between 0 and 86400"},
      {"a job timeout over a year", [](LaunchOptions& o) { o.supervisor.job_timeout = 366 * 24h; }, "job_timeout",
       "job_timeout must be a number of seconds between 0 (no limit) and 31536000 (one year), got 31622400"},
      {"a negative wait", [](LaunchOptions& o) { o.wait_timeout = -5s; }, "wait_timeout", "between 0 (no waiting)"},
      {"a drain timeout over a day", [](LaunchOptions& o) { o.supervisor.drain_timeout = 25h; }, "drain_timeout",
       "drain_timeout must be"},
      {"a negative rank to show", [](LaunchOptions& o) { o.ranks_to_show = std::vector<int>{0, -1}; }, "ranks_to_show",
       "ranks_to_show: rank -1 does not exist"},
      {"a NUL in the rank table path", [](LaunchOptions& o) { o.rank_table = "a\0b"s; }, "rank_table",
       "rank_table contains a NUL byte"},
      {"a NUL in the log dir", [](LaunchOptions& o) { o.log_dir = "log\0"s; }, "log_dir", "NUL"},
      {"a NUL in the server id", [](LaunchOptions& o) { o.server_id = "a\0"s; }, "server_id", "NUL"},
      {"a relative directory to remove", [](LaunchOptions& o) { o.remove_after_job = {"cache"}; }, "remove_after_job",
       "'cache' is not an absolute path"},
      {"a relative lock directory", [](LaunchOptions& o) { o.device_lock_dir = "locks"; }, "device_lock_dir",
       "LaunchOptions::device_lock_dir must be an absolute path (or \"off\"), got 'locks'"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    LaunchOptions options = valid();
    c.change(options);
    const auto [option, message] = refusal(options);
    CHECK(option == c.option);
    CHECK_THAT(message, Contains(c.message));
  }
  LaunchOptions off = valid();
  off.device_lock_dir = "off";
  CHECK(refusal(off).first.empty());
}

TEST_CASE("set_seconds: the nearest millisecond, never 0 for a positive value, within the option's range",
          "[launch_options]") {
  LaunchOptions o = valid();
  o.set_seconds("grace_period", 2.5);
  CHECK(o.supervisor.grace_period == 2500ms);
  o.set_seconds("job_timeout", 0.0001);  // 0 would mean no limit
  CHECK(o.supervisor.job_timeout == 1ms);
  o.set_seconds("job_timeout", 1.0004);
  CHECK(o.supervisor.job_timeout == 1000ms);
  o.set_seconds("wait_timeout", 0);
  CHECK(o.wait_timeout == 0ms);
  o.set_seconds("drain_timeout", 86400);
  CHECK(o.supervisor.drain_timeout == 86'400'000ms);
  CHECK(o.seconds("grace_period") == 2.5);
  CHECK(refusal(o).first.empty());
  for (const double bad : {-0.001, 86400.001, 1e20, std::nan(""), std::numeric_limits<double>::infinity()}) {
    INFO(bad);
    try {
      o.set_seconds("grace_period", bad);
      FAIL("accepted");
    } catch (const OptionError& e) {
      CHECK(e.option() == "grace_period");
      CHECK_THAT(e.what(), Contains("grace_period must be a number of seconds between 0 and 86400"));
    }
    CHECK(o.supervisor.grace_period == 2500ms);  // unchanged
  }
  CHECK_THROWS_AS(o.set_seconds("grace", 1), OptionError);
  CHECK_THROWS_AS(o.seconds("log_dir"), OptionError);
}

TEST_CASE("an OptionError is a ConfigError, so every front end reports it like one", "[launch_options]") {
  LaunchOptions o;
  CHECK_THROWS_AS(o.validate(), ConfigError);
  CHECK_THROWS_AS(plan_launch(o, Environment{}), OptionError);  // before any rank table is looked for
}

TEST_CASE("an OptionError names its option where a front end can put its own spelling", "[launch_options]") {
  const OptionError first("work_dir", "work_dir '/tmp/work_dir' is not a directory");
  CHECK(first.name_at() == 0);
  CHECK(first.message_naming("--work-dir") == "--work-dir '/tmp/work_dir' is not a directory");  // the path untouched
  const OptionError none("log_dir", "cannot create log directory '/x/log_dir': Permission denied");
  CHECK(none.name_at() == std::string::npos);
  CHECK(none.message_naming("--log-dir") == none.what());
  const OptionError inside("rank_table", "no rank table: set RANK_TABLE_FILE or give ", " (a path)");
  CHECK(std::string(inside.what()) == "no rank table: set RANK_TABLE_FILE or give rank_table (a path)");
  CHECK(inside.message_naming("--rank-table") == "no rank table: set RANK_TABLE_FILE or give --rank-table (a path)");
  LaunchOptions o;
  o.command = {"true"};
  try {
    plan_launch(o, Environment{});  // no rank table, no RANK_TABLE_FILE
    FAIL("planned");
  } catch (const OptionError& e) {
    CHECK(e.option() == "rank_table");
    CHECK_THAT(e.message_naming("--rank-table"), Contains("set RANK_TABLE_FILE or give --rank-table"));
    CHECK_THAT(e.what(), !Contains("pass"));
  }
}

TEST_CASE("the rank table is the option's, else RANK_TABLE_FILE_V_1_0, else RANK_TABLE_FILE, else a NoRankTableError",
          "[launch_options]") {
  // Missing files, not waited for: the error names the table that was chosen.
  LaunchOptions o = valid();
  o.wait_timeout = 0ms;
  auto chosen = [&](const LaunchOptions& options, const Environment& env) -> std::string {
    try {
      plan_launch(options, env);
    } catch (const RankTableError& e) {
      return e.source();
    }
    return "";
  };
  const Environment both({"RANK_TABLE_FILE=/nonexistent/env.json", "RANK_TABLE_FILE_V_1_0=/nonexistent/v1.json"});
  CHECK(chosen(o, both) == "/nonexistent/v1.json");  // davincirunsdk 0.1.x's order
  CHECK(chosen(o, Environment({"RANK_TABLE_FILE=/nonexistent/env.json"})) == "/nonexistent/env.json");
  CHECK(chosen(o, Environment({"RANK_TABLE_FILE_V_1_0=", "RANK_TABLE_FILE=/nonexistent/env.json"})) ==
        "/nonexistent/env.json");  // empty counts as unset
  LaunchOptions explicit_table = o;
  explicit_table.rank_table = "/nonexistent/option.json";
  CHECK(chosen(explicit_table, both) == "/nonexistent/option.json");

  try {
    plan_launch(o, Environment{});
    FAIL("no rank table was accepted");
  } catch (const NoRankTableError& e) {
    CHECK(e.option() == "rank_table");
    CHECK_THAT(e.what(), Contains("no rank table"));
  }
}

TEST_CASE("rank_table_named_by reads RANK_TABLE_FILE_V_1_0, else RANK_TABLE_FILE", "[launch_options]") {
  CHECK(rank_table_named_by(Environment({"RANK_TABLE_FILE=/t/env.json", "RANK_TABLE_FILE_V_1_0=/t/v1.json"})) ==
        "/t/v1.json");
  CHECK(rank_table_named_by(Environment({"RANK_TABLE_FILE=/t/env.json"})) == "/t/env.json");
  CHECK(rank_table_named_by(Environment({"RANK_TABLE_FILE_V_1_0=", "RANK_TABLE_FILE=/t/env.json"})) == "/t/env.json");
  CHECK(rank_table_named_by(Environment({"RANK_TABLE_FILE="})).empty());
  CHECK(rank_table_named_by(Environment()).empty());
}
