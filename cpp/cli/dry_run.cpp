#include "dry_run.hpp"

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/job.hpp"

namespace davincirun::cli {

namespace {
std::string name_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }
}  // namespace

std::string describe_plan(const LaunchPlan& plan, const std::vector<std::string>& command,
                          const Environment& inherited) {
  const RankTableServer& server = plan.table.servers[plan.server_index];
  std::string out = fmt::format(
      "job {}: rank table {} (format {}), server {} of {}, ranks {}..{} of world size {}\n"
      "command: {}\n"
      "master {}:{}, work dir {}, logs under {}\n"
      "this machine is server {}: {}\n"
      "{}\n"
      "device locks: {}\n"
      "cache disk: {}; ASCEND_PROCESS_LOG_PATH and the other platform defaults are set when the run directory "
      "exists (docs/environment.md)\n",
      plan.job.job_id,
      plan.job.rank_table_file.empty() ? std::string("generated for this machine") : plan.job.rank_table_file,
      to_string(plan.table.format), server.server_id, plan.table.servers.size(), plan.job.rank_start,
      plan.job.rank_start + plan.job.local_world_size - 1, plan.job.world_size, detail::shell_quote(command),
      plan.job.master_addr, plan.job.master_port, plan.work_dir, plan.log_dir, server.server_id, plan.server_reason,
      plan.job.launch_mode == LaunchMode::cm
          ? "RANK_TABLE_FILE, RANK_ID and RANK_SIZE are not set: CANN refuses them beside the CM_* variables"
          : "RANK_TABLE_FILE will name the normalized copy written into the run directory",
      plan.device_lock_dir.empty() ? plan.device_locks_off : plan.device_lock_dir,
      plan.cache_dir.empty() ? "not used" : plan.cache_dir);
  switch (plan.job.launch_mode) {
    case LaunchMode::dynamic_cluster:
      out +=
          fmt::format("launch mode dynamic-cluster: MindSpore's scheduler at {}:{}{}\n", plan.job.master_addr,
                      plan.job.sched_port, plan.job.rank_start == 0 ? ", started here" : ", on the server of rank 0");
      break;
    case LaunchMode::tf_config:
      out += fmt::format("launch mode tf-config: TF_CONFIG's cluster {}; each rank is the worker of its rank\n",
                         plan.job.tf_cluster_json);
      break;
    case LaunchMode::cm:
      out += fmt::format("launch mode cm: CANN's chief at {}:{} (rank 0, logical device {}); this server is {}\n",
                         plan.job.master_addr, plan.job.cm_chief_port, plan.job.cm_chief_device, plan.job.cm_worker_ip);
      break;
    case LaunchMode::rank_table: break;
  }
  if (plan.peers.enabled) {
    out += fmt::format(
        "peer channel: the agents meet at {}:{}{}; peer timeout {:g} s; job key {}\n", plan.peers.hub_address,
        plan.peers.port, plan.peers.hub ? " (this server listens there)" : ", the server of rank 0",
        std::chrono::duration<double>(plan.peers.peer_timeout).count(),
        plan.peers.key_from_environment ? "from DAVINCIRUN_JOB_KEY" : "derived from the table and JOB_ID");
  } else if (plan.table.servers.size() > 1) {
    out += "peer channel: off (--no-peers or DAVINCIRUN_PEERS=0): each server's job runs on its own\n";
  }
  if (plan.peers.stall_timeout.count() > 0) {
    out += fmt::format("stall watchdog: stop after {:g} s without output from any rank\n",
                       std::chrono::duration<double>(plan.peers.stall_timeout).count());
  }
  const SupervisorOptions& s = plan.options.supervisor;
  if (s.max_restarts > 0) {
    out += fmt::format(
        "restarts: up to {} after a rank fails or the job stalls, {:g} s apart; {}; logs of attempt 2 on end in "
        ".attempt2.log... (docs/restarts.md)\n",
        s.max_restarts, std::chrono::duration<double>(s.restart_delay).count(),
        s.restart_on_same_error ? "even when the same error repeats (--restart-on-same-error)"
                                : "not when the same error repeats with no new output");
  }
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    const RankAssignment& a = plan.ranks[i];
    if (a.role == ProcessRole::scheduler) {
      out += fmt::format("\nscheduler (MindSpore's dynamic cluster, no device), log {}\n", rank_log_file_name(a));
    } else {
      out += fmt::format("\nrank {} (local rank {}): physical device {}, logical device {}{}, log {}\n", a.rank,
                         a.local_rank, a.physical_device_id, a.logical_device_id,
                         a.device_ip ? ", device ip " + *a.device_ip : std::string(), rank_log_file_name(a));
    }
    const Environment& env = plan.environments[i];
    for (const auto& entry : env.entries()) {
      const std::string name = name_of(entry);
      if (name == "RANK_TABLE_FILE") {
        // Set by the supervisor process to the copy it writes; say so
        // rather than show the source path the ranks will not read.
        out += "  + RANK_TABLE_FILE=<run directory>/rank_table.json\n";
        continue;
      }
      auto before = inherited.get(name);
      if (!before) {
        out += "  + " + entry + "\n";
      } else if (*before != entry.substr(name.size() + 1)) {
        out += "  ~ " + entry + "\n";
      }
    }
    for (const auto& entry : inherited.entries()) {
      if (!env.get(name_of(entry))) out += "  - " + name_of(entry) + "\n";
    }
  }
  return out;
}

}  // namespace davincirun::cli
