#include "davincirun/environment.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <random>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

extern char** environ;

namespace davincirun {

Environment::Environment(const std::vector<std::string>& entries) {
  for (const auto& e : entries) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    set(std::string_view(e).substr(0, eq), std::string_view(e).substr(eq + 1));
  }
}

Environment Environment::current() {
  std::vector<std::string> entries;
  for (char** p = environ; p && *p; ++p) entries.emplace_back(*p);
  return Environment(entries);
}

std::vector<std::string>::iterator Environment::find(std::string_view name) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->size() > name.size() && (*it)[name.size()] == '=' && it->compare(0, name.size(), name) == 0) return it;
  }
  return entries_.end();
}

std::vector<std::string>::const_iterator Environment::find(std::string_view name) const {
  return const_cast<Environment*>(this)->find(name);
}

std::optional<std::string> Environment::get(std::string_view name) const {
  auto it = find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->substr(name.size() + 1);
}

void Environment::set(std::string_view name, std::string_view value) {
  std::string entry = std::string(name) + "=" + std::string(value);
  auto it = find(name);
  if (it == entries_.end()) {
    entries_.push_back(std::move(entry));
  } else {
    *it = std::move(entry);
  }
}

void Environment::set_default(std::string_view name, std::string_view value) {
  if (find(name) == entries_.end()) set(name, value);
}

void Environment::unset(std::string_view name) {
  auto it = find(name);
  if (it != entries_.end()) entries_.erase(it);
}

const std::vector<std::string_view>& identity_variable_names() {
  static const std::vector<std::string_view> names = {"RANK_TABLE_FILE",
                                                      "RANK_ID",
                                                      "RANK_SIZE",
                                                      "RANK_START",
                                                      "DEVICE_ID",
                                                      "ASCEND_DEVICE_ID",
                                                      "RANK",
                                                      "LOCAL_RANK",
                                                      "WORLD_SIZE",
                                                      "LOCAL_WORLD_SIZE",
                                                      "MASTER_ADDR",
                                                      "GROUP_RANK",
                                                      "GROUP_WORLD_SIZE",
                                                      "ROLE_RANK",
                                                      "ROLE_WORLD_SIZE",
                                                      "TORCHELASTIC_RESTART_COUNT",
                                                      "DAVINCIRUN_RESTART_COUNT"};
  return names;
}

const std::vector<std::string_view>& scrubbed_variable_names() {
  static const std::vector<std::string_view> names = {
      "MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_NODE_ID", "TF_CONFIG", "CM_CHIEF_IP",
      "CM_CHIEF_PORT", "CM_CHIEF_DEVICE", "CM_WORKER_IP", "CM_WORKER_SIZE",
      // set by the supervisor per rank (an outer job's must not reach a scheduler)
      "DAVINCIRUN_METRICS_FILE"};
  return names;
}

namespace {

bool user_sets(const Environment& env, const std::vector<std::pair<std::string, std::string>>& extra,
               std::string_view name) {
  if (env.get(name)) return true;
  for (const auto& entry : extra) {
    if (entry.first == name) return true;
  }
  return false;
}

// Every framework binds to the interface the other servers reach this one
// on (socket_interface.hpp has the variables' sources).
void set_socket_interface(Environment& env, const JobEnvironment& job,
                          const std::vector<std::pair<std::string, std::string>>& extra) {
  if (!user_sets(env, extra, "GLOO_SOCKET_IFNAME")) env.set("GLOO_SOCKET_IFNAME", job.socket_interface);
  if (!user_sets(env, extra, "NCCL_SOCKET_IFNAME")) env.set("NCCL_SOCKET_IFNAME", "=" + job.socket_interface);
  if (!user_sets(env, extra, "HCCL_SOCKET_IFNAME") && !user_sets(env, extra, "HCCL_IF_IP")) {
    env.set("HCCL_SOCKET_IFNAME", "=" + job.socket_interface);
    env.set("HCCL_IF_IP", job.socket_address);
  }
}

}  // namespace

Environment rank_environment(const Environment& inherited, const JobEnvironment& job, const RankAssignment& rank,
                             const std::vector<std::pair<std::string, std::string>>& extra) {
  Environment env = inherited;
  for (std::string_view name : scrubbed_variable_names()) env.unset(name);
  env.set_default("HCCL_CONNECT_TIMEOUT", std::to_string(default_hccl_connect_timeout_s));
  // Watched live, each line must show at once (and a block buffer's lines
  // are lost when a rank crashes); a batch job keeps Python's buffering,
  // which costs a flood of print() far less (LaunchOptions::output_watched).
  if (job.python_unbuffered) env.set_default("PYTHONUNBUFFERED", "1");
  // ModelArts sets it; scripts written for ModelArts read it to find their machine.
  if (!job.host_ip.empty()) env.set_default("MA_CURRENT_HOST_IP", job.host_ip);
  if (!job.socket_interface.empty()) set_socket_interface(env, job, extra);
  if (job.local_world_size > 1) env.set_default("OMP_NUM_THREADS", std::to_string(default_omp_num_threads));
  env.set_default("ROLE_NAME", "default");
  env.set_default("TORCHELASTIC_RUN_ID", job.job_id);
  env.set_default("TORCHELASTIC_MAX_RESTARTS", std::to_string(job.max_restarts));
  env.set_default("TORCHELASTIC_USE_AGENT_STORE", "False");  // Python's str(False), as torchrun writes it
  env.set_default("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  const bool dynamic_cluster = job.launch_mode == LaunchMode::dynamic_cluster;
  if (dynamic_cluster && job.topo_timeout_s > 0) env.set_default("MS_TOPO_TIMEOUT", std::to_string(job.topo_timeout_s));
  for (const auto& [name, value] : extra) env.set(name, value);

  env.set("RANK_TABLE_FILE", job.rank_table_file);
  env.set("RANK_SIZE", std::to_string(job.world_size));
  env.set("JOB_ID", job.job_id);
  env.set("DAVINCIRUN_RESTART_COUNT", std::to_string(job.restart_count));
  if (dynamic_cluster) {
    env.set("MS_ROLE", rank.role == ProcessRole::scheduler ? "MS_SCHED" : "MS_WORKER");
    env.set("MS_SCHED_HOST", job.master_addr);
    env.set("MS_SCHED_PORT", std::to_string(job.sched_port));
    env.set("MS_WORKER_NUM", std::to_string(job.world_size));
  }
  if (rank.role == ProcessRole::scheduler) {
    env.set("RANK_ID", "0");  // as msrun sets it for its scheduler
    for (const char* name : {"DEVICE_ID", "ASCEND_DEVICE_ID", "RANK", "LOCAL_RANK", "RANK_START", "WORLD_SIZE",
                             "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK", "GROUP_WORLD_SIZE",
                             "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_ERROR_FILE"}) {
      env.unset(name);
    }
    return env;
  }
  if (dynamic_cluster) env.set("MS_NODE_ID", std::to_string(rank.rank));

  const std::string rank_id = std::to_string(rank.rank);
  const std::string logical = std::to_string(rank.logical_device_id);
  env.set("RANK_ID", rank_id);
  env.set("RANK_START", std::to_string(job.rank_start));
  env.set("DEVICE_ID", logical);
  env.set("ASCEND_DEVICE_ID", logical);
  env.set("RANK", rank_id);
  env.set("LOCAL_RANK", std::to_string(rank.local_rank));
  env.set("WORLD_SIZE", std::to_string(job.world_size));
  env.set("LOCAL_WORLD_SIZE", std::to_string(job.local_world_size));
  env.set("MASTER_ADDR", job.master_addr);
  env.set("MASTER_PORT", std::to_string(job.master_port));
  env.set("GROUP_RANK", std::to_string(job.group_rank));
  env.set("GROUP_WORLD_SIZE", std::to_string(job.group_world_size));
  env.set("ROLE_RANK", rank_id);
  env.set("ROLE_WORLD_SIZE", std::to_string(job.world_size));
  env.set("TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count));
  if (job.launch_mode == LaunchMode::tf_config) {
    // TensorFlow takes the first worker as the chief when the cluster names none.
    env.set("TF_CONFIG",
            fmt::format(R"({{"cluster":{},"task":{{"type":"worker","index":{}}}}})", job.tf_cluster_json, rank.rank));
  } else if (job.launch_mode == LaunchMode::cm) {
    env.set("CM_CHIEF_IP", job.master_addr);
    env.set("CM_CHIEF_PORT", std::to_string(job.cm_chief_port));
    env.set("CM_CHIEF_DEVICE", std::to_string(job.cm_chief_device));
    env.set("CM_WORKER_IP", job.cm_worker_ip);
    env.set("CM_WORKER_SIZE", std::to_string(job.world_size));
    for (const char* name : {"RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE"}) env.unset(name);
  }
  return env;
}

namespace {
std::string sanitize_job_id(std::string id) {
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  }
  return id;
}
}  // namespace

std::string resolve_job_id(const Environment& inherited, std::string_view shared_seed) {
  for (const char* name : {"JOB_ID", "BATCH_JOB_ID"}) {
    auto v = inherited.get(name);
    if (v && !v->empty()) return sanitize_job_id(*v);
  }
  if (auto v = inherited.get("MA_VJ_NAME"); v && !v->empty()) {
    std::string id = *v;
    if (id.rfind("ma-job", 0) == 0) id = "modelarts-job" + id.substr(6);
    return sanitize_job_id(id);
  }
  // Run directories already carry the start time; keep generated ids short.
  if (!shared_seed.empty()) return fmt::format("job-{:08x}", static_cast<std::uint32_t>(fnv1a64(shared_seed) >> 32));
  std::random_device rd;
  return fmt::format("job-{:08x}", rd());
}

}  // namespace davincirun
