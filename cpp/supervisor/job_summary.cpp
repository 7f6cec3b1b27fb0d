#include "job_summary.hpp"

#include <nlohmann/json.hpp>

#include "common/private_file.hpp"
#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

using Json = nlohmann::ordered_json;

Json rank_entry(const RankAssignment& a, const RankResult& r) {
  Json j;
  j["role"] = to_string(r.role);
  j["rank"] = r.rank;
  j["local_rank"] = a.local_rank;
  j["physical_device_id"] = a.physical_device_id;
  j["logical_device_id"] = a.logical_device_id;
  j["pid"] = r.pid;
  j["log"] = r.log_path;
  j["exit_code"] = r.status.kind == ExitStatus::Kind::exited ? Json(r.status.value) : Json();
  j["signal"] = r.status.kind == ExitStatus::Kind::signaled ? Json(r.status.value) : Json();
  j["status"] = r.status.describe();
  j["terminated_by_launcher"] = r.terminated_by_launcher;
  j["killed_by_launcher"] = r.killed_by_launcher;
  j["started"] = seconds_since_epoch(r.started);
  j["ended"] = seconds_since_epoch(r.ended);
  j["output_bytes"] = r.output_bytes;
  j["log_error"] = r.log_error ? Json(*r.log_error) : Json();
  return j;
}

}  // namespace

void write_job_summary(const std::string& path, const JobSpec& plan, const std::string& table_copy,
                       const JobResult& result) {
  Json j;
  j["job_id"] = plan.job_id;
  j["server_id"] = plan.server_id;
  j["rank_table_source"] = plan.rank_table_source;
  j["rank_table"] = table_copy;
  j["world_size"] = plan.world_size;
  j["command"] = plan.command;
  j["process_tracking"] = to_string(result.tracking);
  j["process_tracking_fallback"] = result.tracking_fallback ? Json(*result.tracking_fallback) : Json();
  j["child_subreaper"] = result.child_subreaper;
  j["success"] = result.success();
  j["exit_code"] = result.exit_code();
  j["stop_reason"] = to_string(result.stop_reason);
  j["stop_detail"] = result.stop_detail.empty() ? Json() : Json(result.stop_detail);
  j["stopped_in"] = result.stop_reason == StopReason::none ? Json() : Json(to_string(result.stopped_in));
  if (result.stop_reason == StopReason::signaled) {
    const SignalOrigin& o = result.stop_signal_origin;
    j["stop_signal"] = result.stop_signal;
    j["stop_signal_receiver"] = to_string(o.receiver);
    j["stop_signal_sender_pid"] = o.sender_pid > 0 ? Json(o.sender_pid) : Json();
    j["stop_signal_sender"] = o.sender_name.empty() ? Json() : Json(o.sender_name);
  }
  // A rank id, or "scheduler".
  j["first_failure"] = !result.first_failure ? Json()
                       : result.ranks[*result.first_failure].role == ProcessRole::scheduler
                           ? Json("scheduler")
                           : Json(result.ranks[*result.first_failure].rank);
  // What stopped the job from another server (the peer channel).
  if (result.peer_stop) {
    const PeerStop& p = *result.peer_stop;
    Json peer;
    peer["server_id"] = p.server_id;
    peer["role"] = p.status ? Json(to_string(p.role)) : Json();
    peer["rank"] = p.status && p.role == ProcessRole::rank ? Json(p.rank) : Json();
    peer["status"] = p.status ? Json(p.status->describe()) : Json();
    peer["detail"] = p.detail;
    j["peer_stop"] = peer;
  } else {
    j["peer_stop"] = Json();
  }
  j["leftover_processes_killed"] = result.leftover_processes_killed;
  j["ranks"] = Json::array();
  for (std::size_t i = 0; i < result.ranks.size() && i < plan.ranks.size(); ++i) {
    j["ranks"].push_back(rank_entry(plan.ranks[i], result.ranks[i]));
  }
  // Rank output can be any bytes: replace invalid UTF-8 rather than fail.
  const std::string text = j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";

  write_private_file(path, text, "create " + path);
}

}  // namespace davincirun::detail
