// Where the plan locks devices (LaunchPlan::device_lock_dir, device_locks_off):
// the default directory on a machine with NPUs, none on one without, and the
// directory a user names, which must be absolute.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <string>

#include "davincirun/environment.hpp"
#include "davincirun/plan.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

TEST_CASE("device locks: the plan takes an absolute lock directory only, empty means the default", "[device_lock]") {
  TempDir tmp;
  write_file(tmp / "table.json", R"({"version": "1.0", "server_count": "1", "status": "completed", "server_list": [)"
                                 R"({"server_id": "127.0.0.1", "device": [{"device_id": "0", "rank_id": "0"}]}]})");
  REQUIRE(::mkdir((tmp / "dev").c_str(), 0700) == 0);
  write_file(tmp / "dev/davinci0", "");  // a machine with an NPU (only the name is read)
  LaunchOptions options;
  options.command = {"true"};
  options.rank_table = tmp / "table.json";
  options.wait_timeout = std::chrono::milliseconds(0);
  options.device_dir = tmp / "dev";
  Environment env;
  SECTION("empty: the default") {
    env.set("DAVINCIRUN_LOCK_DIR", "");
    CHECK(plan_launch(options, env).device_lock_dir == default_device_lock_dir);
  }
  SECTION("no NPU on this machine and no directory named: no locks, and the plan says why") {
    options.device_dir = tmp / "no-such-dev";
    CHECK_THAT(plan_launch(options, env).device_locks_off, Catch::Contains("this machine has no NPU"));
    env.set("DAVINCIRUN_LOCK_DIR", "/x/locks");  // named: CPU jobs that ask for locks get them
    CHECK(plan_launch(options, env).device_lock_dir == "/x/locks");
  }
  SECTION("off") {
    env.set("DAVINCIRUN_LOCK_DIR", "off");
    CHECK(plan_launch(options, env).device_lock_dir.empty());
  }
  SECTION("absolute, from the variable or the option (which wins)") {
    env.set("DAVINCIRUN_LOCK_DIR", "/a/./b/");
    CHECK(plan_launch(options, env).device_lock_dir == "/a/b");
    options.device_lock_dir = "/c";
    CHECK(plan_launch(options, env).device_lock_dir == "/c");
  }
  for (const std::string relative : {"locks", "./locks", "~/locks", " /locks"}) {
    SECTION("relative: refused, '" + relative + "'") {
      env.set("DAVINCIRUN_LOCK_DIR", relative);
      CHECK_THROWS_WITH(plan_launch(options, env),
                        Contains("DAVINCIRUN_LOCK_DIR must be an absolute path (or \"off\"), got '" + relative + "'"));
      options.device_lock_dir = relative;
      CHECK_THROWS_WITH(plan_launch(options, env), Contains("LaunchOptions::device_lock_dir must be an absolute path"));
    }
  }
}
