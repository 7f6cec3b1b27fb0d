// Platform defaults: one table of variables (kRules), the conditions that
// select its rows, and the directories the chosen values name.
#include "davincirun/platform_environment.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "davincirun/errors.hpp"

namespace davincirun {

namespace {

// When a row applies: a set of these bits, against the conditions of one job.
enum Condition : unsigned {
  always = 1U << 0,
  ide = 1U << 1,               // ModelArts IDE mode (MA_ALGORITHM_OPERATOR)
  faults = 1U << 2,            // MA_DIAG_MODE_ENV=faults
  faults_mindspore = 1U << 3,  // ... and MA_ENGINE_VERSION names MindSpore 1.4 or later
  diagnostic_data = 1U << 4,   // MA_DIAG_MODE_ENV=accuracy or profile
  performance = 1U << 5,       // MA_RUN_MODE_ENV=performance (no diagnosis mode)
  normal = 1U << 6,            // MA_RUN_MODE_ENV=normal (no diagnosis mode)
  cache = 1U << 7,             // the cache disk is in use
};

// The ModelArts modes, first match wins: a diagnosis mode over a run mode, as in 0.1.x.
struct ModeRule {
  std::string_view variable;
  std::string_view value;
  unsigned condition;
};
constexpr ModeRule kModes[] = {
    {"MA_DIAG_MODE_ENV", "faults", faults},
    {"MA_DIAG_MODE_ENV", "accuracy", diagnostic_data},
    {"MA_DIAG_MODE_ENV", "profile", diagnostic_data},
    {"MA_RUN_MODE_ENV", "performance", performance},
    {"MA_RUN_MODE_ENV", "normal", normal},
};

enum class Dir { none, value, value_extra_info_graph, value_removed_after_job };

// One variable's default under some conditions. In values, {run} is the run
// directory, {member} "rank_<rank>" (or "scheduler" for MindSpore's
// scheduler, rank -1), {cache} the cache directory and {run_name} the run
// directory's own name.
struct Rule {
  unsigned when;
  std::string_view name;
  std::string_view value;
  Dir dir = Dir::none;
};

constexpr unsigned glog_modes = faults_mindspore | performance | normal;

// Dir::none where the reader makes a missing directory itself: CANN's
// logging makes ASCEND_PROCESS_LOG_PATH (its envvar reference, 5.0.4 to
// 9.0: "不存在该目录,会自动创建"), MindSpore makes MS_OM_PATH and the
// rank_<id>/om below it (observed, 2.0.0 and 2.10.0). Made here, they cost
// every run a mkdir and an rmdir per rank for nothing.
constexpr Rule kRules[] = {
    {always, "ASCEND_PROCESS_LOG_PATH", "{run}/ascend/process_log/{member}"},
    {ide, "SLOG_PRINT_TO_STDOUT", "1"},
    {ide, "ASCEND_SLOG_PRINT_TO_STDOUT", "1"},
    {faults, "PRINT_MODEL", "1"},
    {faults, "DUMP_GE_GRAPH", "2"},
    {faults, "DUMP_GRAPH_LEVEL", "2"},
    {faults, "ASCEND_GLOBAL_LOG_LEVEL", "1"},
    {faults, "ASCEND_HOST_LOG_FILE_NUM", "1000"},
    {faults, "NPU_COLLECT_PATH", "{run}/ascend/npu_collect/{member}", Dir::value_extra_info_graph},
    {performance, "ASCEND_GLOBAL_LOG_LEVEL", "3"},
    {performance, "ASCEND_GLOBAL_EVENT_LEVEL", "0"},
    {performance, "ASCEND_GLOBAL_EVENT_ENABLE", "0"},
    {faults_mindspore | normal, "GLOG_v", "1"},
    {performance, "GLOG_v", "3"},
    {glog_modes, "GLOG_log_dir", "{run}/mindspore/log", Dir::value},
    {glog_modes, "GLOG_logtostderr", "0"},
    {glog_modes, "MS_OM_PATH", "{run}/mindspore/log", Dir::value},
    {faults_mindspore, "MS_RDR_ENABLE", "1"},
    {faults_mindspore, "MS_RDR_PATH", "{run}/mindspore/log", Dir::value},
    {diagnostic_data, "MS_DIAGNOSTIC_DATA_PATH", "{run}/mindspore/diagnostic_data", Dir::value},
    // After the modes' rows, which set it to their log directory: where
    // MindSpore writes rank_<id>/om/ (analyze_fail.ir of a failed graph
    // compile), else the ranks' working directory, the code folder.
    {always, "MS_OM_PATH", "{run}/mindspore/om"},
    {cache, "ASCEND_WORK_PATH", "{cache}/work/{run_name}", Dir::value},
    {cache, "ASCEND_CACHE_PATH", "{cache}/kernel_cache/{run_name}", Dir::value_removed_after_job},
};

enum class IdeMode { no, yes, malformed };

// 0.1.x's rule: MA_ALGORITHM_OPERATOR, when not empty, is a JSON object
// with obs.obs_url and a true ide_mode. A true ide_mode is JSON true or a
// non-zero number; a value that is no JSON object is `malformed` (0.1.x
// raised there), never IDE mode.
IdeMode ide_mode(const Environment& env) {
  const auto text = env.get("MA_ALGORITHM_OPERATOR");
  if (!text || text->empty()) return IdeMode::no;
  const auto json = nlohmann::json::parse(*text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return IdeMode::malformed;
  const auto obs = json.find("obs");
  if (obs == json.end() || !obs->is_object() || !obs->contains("obs_url")) return IdeMode::no;
  const auto flag = json.find("ide_mode");
  if (flag == json.end()) return IdeMode::no;
  if (flag->is_boolean()) return flag->get<bool>() ? IdeMode::yes : IdeMode::no;
  if (flag->is_number()) return flag->get<double>() != 0 ? IdeMode::yes : IdeMode::no;
  return IdeMode::no;
}

// MA_ENGINE_VERSION looks like "mindspore_1.7.0-cann_5.1.0-py_3.7-euler_2.8.3-aarch64":
// its first '-' field names the framework, its version after the '_'.
// 0.1.x compared the version as text against "1.4"; here as numbers, so 1.10 counts.
bool mindspore_at_least_1_4(const Environment& env) {
  const std::string engine = env.get("MA_ENGINE_VERSION").value_or("");
  const std::string framework = engine.substr(0, engine.find('-'));
  if (framework.find("mindspore") == std::string::npos) return false;
  const std::size_t underscore = framework.find('_');
  if (underscore == std::string::npos) return false;
  const std::string version = framework.substr(underscore + 1, framework.find('_', underscore + 1) - underscore - 1);
  char* end = nullptr;
  const long major = std::strtol(version.c_str(), &end, 10);
  if (end == version.c_str()) return false;
  long minor = 0;
  if (*end == '.') minor = std::strtol(end + 1, nullptr, 10);
  return major > 1 || (major == 1 && minor >= 4);
}

unsigned conditions_of(const Environment& env, bool cache_in_use) {
  unsigned conditions = always;
  if (ide_mode(env) == IdeMode::yes) conditions |= ide;
  for (const ModeRule& mode : kModes) {
    if (env.get(mode.variable).value_or("") != mode.value) continue;
    conditions |= mode.condition;
    if (mode.condition == faults && mindspore_at_least_1_4(env)) conditions |= faults_mindspore;
    break;
  }
  if (cache_in_use) conditions |= cache;
  return conditions;
}

std::string expand(std::string_view value, int rank, const PlatformPaths& paths) {
  const std::string run_name = paths.run_dir.substr(paths.run_dir.rfind('/') + 1);
  const std::pair<std::string_view, std::string> fields[] = {
      {"{run}", paths.run_dir},
      {"{member}", rank < 0 ? std::string("scheduler") : "rank_" + std::to_string(rank)},
      {"{cache}", paths.cache_dir},
      {"{run_name}", run_name}};
  std::string out(value);
  for (const auto& [key, replacement] : fields) {
    for (std::size_t pos = out.find(key); pos != std::string::npos; pos = out.find(key, pos + replacement.size())) {
      out.replace(pos, key.size(), replacement);
    }
  }
  return out;
}

// Why `root` cannot hold the cache (missing, no directory, not writable
// and searchable: access(2) W_OK|X_OK), or nullptr when it can.
const char* unusable_cache_root(const std::string& root) {
  struct stat st{};
  if (::stat(root.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  if (::access(root.c_str(), W_OK | X_OK) != 0) return "this user cannot write into it";
  return nullptr;
}

}  // namespace

std::string usable_cache_dir(const Environment& launcher) {
  std::string root = launcher.get("DAVINCIRUN_CACHE_ROOT").value_or("");
  if (root == "off") return {};
  if (root.empty()) root = std::string(default_cache_root);
  if (root[0] != '/') {
    throw ConfigError(fmt::format("DAVINCIRUN_CACHE_ROOT must be an absolute path (or \"off\"), got '{}'", root));
  }
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (unusable_cache_root(root)) return {};
  return (root == "/" ? "" : root) + "/davincirun";
}

std::string default_log_dir(const std::string& cache_dir) { return cache_dir.empty() ? "./log" : cache_dir + "/log"; }

std::vector<std::string> platform_warnings(const Environment& environment) {
  std::vector<std::string> warnings;
  if (ide_mode(environment) == IdeMode::malformed) {
    warnings.emplace_back(
        "MA_ALGORITHM_OPERATOR is not a JSON object; the ModelArts IDE-mode rule (SLOG_PRINT_TO_STDOUT=1) is not "
        "applied");
  }
  // A cache root the user chose on purpose is not dropped in silence (a
  // missing /cache is the normal case off ModelArts and says nothing).
  const std::string root = environment.get("DAVINCIRUN_CACHE_ROOT").value_or("");
  if (!root.empty() && root != "off" && root[0] == '/') {
    if (const char* why = unusable_cache_root(root)) {
      warnings.push_back(
          fmt::format("DAVINCIRUN_CACHE_ROOT {} cannot be used ({}): the cache disk is not used, and "
                      "the logs go to ./log unless log_dir is given",
                      root, why));
    }
  }
  return warnings;
}

std::vector<PlatformDirectory> apply_platform_defaults(Environment& env, int rank, const PlatformPaths& paths) {
  const unsigned conditions = conditions_of(env, !paths.cache_dir.empty());
  std::vector<PlatformDirectory> dirs;
  const auto add_dir = [&dirs](PlatformDirectory dir) {
    for (const auto& known : dirs) {
      if (known == dir) return;
    }
    dirs.push_back(std::move(dir));
  };
  for (const Rule& rule : kRules) {
    if ((rule.when & conditions) == 0 || env.get(rule.name)) continue;
    const std::string value = expand(rule.value, rank, paths);
    env.set(rule.name, value);
    switch (rule.dir) {
      case Dir::none: break;
      case Dir::value: add_dir({value, false}); break;
      case Dir::value_extra_info_graph: add_dir({value + "/extra-info/graph", false}); break;
      case Dir::value_removed_after_job: add_dir({value, true}); break;
    }
  }
  return dirs;
}

}  // namespace davincirun
