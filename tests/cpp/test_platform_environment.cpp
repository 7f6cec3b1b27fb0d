// Platform defaults: every row of the rule table, the user's value winning,
// MA_ALGORITHM_OPERATOR that is no JSON object, and the cache disk.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "davincirun/errors.hpp"
#include "davincirun/platform_environment.hpp"
#include "test_support.hpp"

using namespace davincirun;
using davincirun_test::TempDir;

namespace {

using Vars = std::map<std::string, std::string>;

const PlatformPaths kPaths{"/logs/20240101-000000-job-1", "/cache/davincirun"};
const std::string kRun = kPaths.run_dir;
const std::string kOperatorIde = R"({"obs": {"obs_url": "obs://bucket/x"}, "ide_mode": true})";

Environment with(const Vars& vars) {
  Environment env;
  env.set("PATH", "/usr/bin");
  for (const auto& [name, value] : vars) env.set(name, value);
  return env;
}

// What apply_platform_defaults added to `inputs`, as name → value.
Vars added(const Vars& inputs, int rank, const PlatformPaths& paths, std::vector<PlatformDirectory>* dirs = nullptr) {
  Environment env = with(inputs);
  auto made = apply_platform_defaults(env, rank, paths);
  if (dirs) *dirs = made;
  Vars out;
  for (const auto& entry : env.entries()) {
    const std::string name = entry.substr(0, entry.find('='));
    if (name != "PATH" && !inputs.count(name)) out[name] = entry.substr(name.size() + 1);
  }
  return out;
}

struct Scenario {
  const char* name;
  Vars inputs;
  Vars expected;                  // beyond ASCEND_PROCESS_LOG_PATH
  std::vector<std::string> dirs;  // beyond the process log directory
};

std::vector<Scenario> scenarios() {
  const std::string ms_log = kRun + "/mindspore/log";
  // What MA_DIAG_MODE_ENV=faults sets without MindSpore >= 1.4.
  const Vars faults = {{"PRINT_MODEL", "1"},
                       {"DUMP_GE_GRAPH", "2"},
                       {"DUMP_GRAPH_LEVEL", "2"},
                       {"ASCEND_GLOBAL_LOG_LEVEL", "1"},
                       {"ASCEND_HOST_LOG_FILE_NUM", "1000"},
                       {"NPU_COLLECT_PATH", kRun + "/ascend/npu_collect/rank_3"}};
  return {
      {"no platform variables", {}, {}, {}},
      {"IDE mode",
       {{"MA_ALGORITHM_OPERATOR", kOperatorIde}},
       {{"SLOG_PRINT_TO_STDOUT", "1"}, {"ASCEND_SLOG_PRINT_TO_STDOUT", "1"}},
       {}},
      {"IDE mode by a non-zero number",
       {{"MA_ALGORITHM_OPERATOR", R"({"obs": {"obs_url": ""}, "ide_mode": 1})"}},
       {{"SLOG_PRINT_TO_STDOUT", "1"}, {"ASCEND_SLOG_PRINT_TO_STDOUT", "1"}},
       {}},
      {"ide_mode without obs.obs_url", {{"MA_ALGORITHM_OPERATOR", R"({"obs": {}, "ide_mode": true})"}}, {}, {}},
      {"ide_mode false", {{"MA_ALGORITHM_OPERATOR", R"({"obs": {"obs_url": "o"}, "ide_mode": false})"}}, {}, {}},
      {"ide_mode as text", {{"MA_ALGORITHM_OPERATOR", R"({"obs": {"obs_url": "o"}, "ide_mode": "true"})"}}, {}, {}},
      {"malformed MA_ALGORITHM_OPERATOR", {{"MA_ALGORITHM_OPERATOR", "{not json"}}, {}, {}},
      {"faults, not MindSpore",
       {{"MA_DIAG_MODE_ENV", "faults"}, {"MA_ENGINE_VERSION", "tensorflow_1.15.0-cann_5.1.0-py_3.7"}},
       faults,
       {kRun + "/ascend/npu_collect/rank_3/extra-info/graph"}},
      {"faults, MindSpore 1.3",
       {{"MA_DIAG_MODE_ENV", "faults"}, {"MA_ENGINE_VERSION", "mindspore_1.3.0-cann_5.0.2"}},
       faults,
       {kRun + "/ascend/npu_collect/rank_3/extra-info/graph"}},
      {"faults, MindSpore 1.10 (a later version than 1.4, not a smaller text)",
       {{"MA_DIAG_MODE_ENV", "faults"},
        {"MA_ENGINE_VERSION", "mindspore_1.10.1-cann_6.0.1-py_3.7-euler_2.8.3-aarch64"}},
       {{"PRINT_MODEL", "1"},
        {"DUMP_GE_GRAPH", "2"},
        {"DUMP_GRAPH_LEVEL", "2"},
        {"ASCEND_GLOBAL_LOG_LEVEL", "1"},
        {"ASCEND_HOST_LOG_FILE_NUM", "1000"},
        {"NPU_COLLECT_PATH", kRun + "/ascend/npu_collect/rank_3"},
        {"GLOG_v", "1"},
        {"GLOG_log_dir", ms_log},
        {"GLOG_logtostderr", "0"},
        {"MS_RDR_ENABLE", "1"},
        {"MS_RDR_PATH", ms_log},
        {"MS_OM_PATH", ms_log}},
       {kRun + "/ascend/npu_collect/rank_3/extra-info/graph", ms_log}},
      {"accuracy",
       {{"MA_DIAG_MODE_ENV", "accuracy"}, {"MA_RUN_MODE_ENV", "normal"}},
       {{"MS_DIAGNOSTIC_DATA_PATH", kRun + "/mindspore/diagnostic_data"}},
       {kRun + "/mindspore/diagnostic_data"}},
      {"profile",
       {{"MA_DIAG_MODE_ENV", "profile"}},
       {{"MS_DIAGNOSTIC_DATA_PATH", kRun + "/mindspore/diagnostic_data"}},
       {kRun + "/mindspore/diagnostic_data"}},
      {"performance",
       {{"MA_RUN_MODE_ENV", "performance"}},
       {{"ASCEND_GLOBAL_LOG_LEVEL", "3"},
        {"ASCEND_GLOBAL_EVENT_LEVEL", "0"},
        {"ASCEND_GLOBAL_EVENT_ENABLE", "0"},
        {"GLOG_v", "3"},
        {"GLOG_log_dir", ms_log},
        {"GLOG_logtostderr", "0"},
        {"MS_OM_PATH", ms_log}},
       {ms_log}},
      {"normal",
       {{"MA_RUN_MODE_ENV", "normal"}, {"MA_DIAG_MODE_ENV", "none"}},
       {{"GLOG_v", "1"}, {"GLOG_log_dir", ms_log}, {"GLOG_logtostderr", "0"}, {"MS_OM_PATH", ms_log}},
       {ms_log}},
      {"an unknown run mode", {{"MA_RUN_MODE_ENV", "fast"}}, {}, {}},
  };
}

std::vector<std::string> paths_of(const std::vector<PlatformDirectory>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) out.push_back(d.path);
  return out;
}

}  // namespace

TEST_CASE("every rule of the platform table, without the cache disk", "[platform_environment]") {
  const PlatformPaths no_cache{kRun, ""};
  for (const Scenario& s : scenarios()) {
    INFO("scenario: " << s.name);
    std::vector<PlatformDirectory> dirs;
    Vars expected = s.expected;
    expected["ASCEND_PROCESS_LOG_PATH"] = kRun + "/ascend/process_log/rank_3";
    // No mode set MS_OM_PATH: MindSpore's rank_<id>/om/ still stays out of the code folder.
    expected.emplace("MS_OM_PATH", kRun + "/mindspore/om");
    CHECK(added(s.inputs, 3, no_cache, &dirs) == expected);
    // CANN makes its log directory, MindSpore its om directory: neither is made here.
    CHECK(paths_of(dirs) == s.dirs);
    for (const auto& d : dirs) CHECK_FALSE(d.remove_after_job);
  }
}

TEST_CASE("a value the user set wins over every row, and names no directory", "[platform_environment]") {
  for (const Scenario& s : scenarios()) {
    INFO("scenario: " << s.name);
    Vars inputs = s.inputs;
    for (const auto& [name, value] : s.expected) inputs[name] = "user-" + name;
    inputs["ASCEND_PROCESS_LOG_PATH"] = "";  // set, though empty
    inputs["MS_OM_PATH"] = "/mine/om";
    inputs["ASCEND_WORK_PATH"] = "/mine/work";
    inputs["ASCEND_CACHE_PATH"] = "/mine/cache";
    std::vector<PlatformDirectory> dirs;
    CHECK(added(inputs, 0, kPaths, &dirs).empty());
    CHECK(dirs.empty());
    Environment env = with(inputs);
    apply_platform_defaults(env, 0, kPaths);
    for (const auto& [name, value] : inputs) CHECK(env.get(name) == value);
  }
}

TEST_CASE("the cache disk: ASCEND_WORK_PATH kept, ASCEND_CACHE_PATH removed after the job", "[platform_environment]") {
  std::vector<PlatformDirectory> dirs;
  const Vars got = added({}, 1, kPaths, &dirs);
  CHECK(got == Vars{{"ASCEND_PROCESS_LOG_PATH", kRun + "/ascend/process_log/rank_1"},
                    {"MS_OM_PATH", kRun + "/mindspore/om"},
                    {"ASCEND_WORK_PATH", "/cache/davincirun/work/20240101-000000-job-1"},
                    {"ASCEND_CACHE_PATH", "/cache/davincirun/kernel_cache/20240101-000000-job-1"}});
  REQUIRE(dirs.size() == 2);
  CHECK((dirs[0] == PlatformDirectory{"/cache/davincirun/work/20240101-000000-job-1", false}));
  CHECK((dirs[1] == PlatformDirectory{"/cache/davincirun/kernel_cache/20240101-000000-job-1", true}));
}

TEST_CASE("MA_ALGORITHM_OPERATOR that is no JSON object gives a warning, never IDE mode", "[platform_environment]") {
  for (const char* text : {"{not json", "[1, 2]", "\"ide_mode\"", "{\"obs\": "}) {
    INFO("MA_ALGORITHM_OPERATOR=" << text);
    const Environment env = with({{"MA_ALGORITHM_OPERATOR", text}});
    const auto warnings = platform_warnings(env);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("MA_ALGORITHM_OPERATOR is not a JSON object") != std::string::npos);
    CHECK(added({{"MA_ALGORITHM_OPERATOR", text}}, 0, {kRun, ""}).count("SLOG_PRINT_TO_STDOUT") == 0);
  }
  for (const std::string& text : {std::string(), kOperatorIde, std::string(R"({"obs": 3})")}) {
    INFO("MA_ALGORITHM_OPERATOR=" << text);
    CHECK(platform_warnings(with({{"MA_ALGORITHM_OPERATOR", text}})).empty());
  }
  CHECK(platform_warnings(with({})).empty());
}

TEST_CASE("the cache root: DAVINCIRUN_CACHE_ROOT, off, missing, not a directory, relative", "[platform_environment]") {
  TempDir tmp;
  CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", tmp.path()}})) == tmp.path() + "/davincirun");
  CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", tmp.path() + "//"}})) == tmp.path() + "/davincirun");
  CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", "off"}})).empty());
  CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", tmp / "missing"}})).empty());
  std::ofstream(tmp / "file") << "x";
  CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", tmp / "file"}})).empty());
  if (::geteuid() != 0) {  // root may write anywhere
    REQUIRE(::mkdir((tmp / "read-only").c_str(), 0500) == 0);
    CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", tmp / "read-only"}})).empty());
  }
  CHECK_THROWS_AS(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", "cache"}})), ConfigError);
  struct stat st{};
  const bool default_usable = ::stat("/cache", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/cache", W_OK | X_OK) == 0;
  CHECK(usable_cache_dir(with({})) == (default_usable ? "/cache/davincirun" : ""));
  CHECK(default_log_dir("") == "./log");
  CHECK(default_log_dir("/c/davincirun") == "/c/davincirun/log");
}

TEST_CASE("a cache root the user set that cannot be used gives a warning naming why", "[platform_environment]") {
  const auto warnings_for = [](const std::string& root) {
    return platform_warnings(with({{"DAVINCIRUN_CACHE_ROOT", root}}));
  };
  const auto missing = warnings_for("/nonexistent/davincirun-cache-root");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].find("DAVINCIRUN_CACHE_ROOT /nonexistent/davincirun-cache-root cannot be used (No such file") == 0);
  const auto file = warnings_for("/proc/version");
  REQUIRE(file.size() == 1);
  CHECK(file[0].find("(not a directory)") != std::string::npos);
  CHECK(warnings_for("off").empty());
  CHECK(warnings_for("/tmp").empty());
  CHECK(usable_cache_dir(with({{"DAVINCIRUN_CACHE_ROOT", "/nonexistent/x"}})).empty());
}
