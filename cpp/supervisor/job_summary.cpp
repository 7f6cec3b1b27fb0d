#include "job_summary.hpp"

#include <chrono>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/private_file.hpp"
#include "davincirun/errors.hpp"

namespace davincirun::detail {

namespace {

using Json = nlohmann::ordered_json;

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

// A list of structs that have a field list.
template <typename T>
struct IsFieldList : std::false_type {};
template <typename T>
struct IsFieldList<std::vector<T>> : std::bool_constant<has_fields<T>> {};

template <typename T, typename Then>
void put_fields(Json& j, const T& value, Then&& then);

// A value: enums by name, times in seconds since the epoch, nothing as
// null, a struct by its summary fields, a list of structs as an array.
template <typename T>
Json value_of(const T& value) {
  if constexpr (has_fields<T>) {
    Json j = Json::object();
    put_fields(j, value, [](std::string_view) {});
    return j;
  } else if constexpr (IsFieldList<T>::value) {
    Json list = Json::array();
    for (const auto& each : value) list.push_back(value_of(each));
    return list;
  } else if constexpr (std::is_enum_v<T>) {
    return to_string(value);
  } else if constexpr (std::is_same_v<T, std::chrono::system_clock::time_point>) {
    return seconds_since_epoch(value);
  } else if constexpr (IsOptional<T>::value) {
    return value ? value_of(*value) : Json();
  } else {
    return value;
  }
}

// `value`'s summary fields into `j` in list order; after each, `then(key)`
// adds what summary.json shows of other fields at that place.
template <typename T, typename Then>
void put_fields(Json& j, const T& value, Then&& then) {
  for_each_field_in<T, in_summary>([&](const auto& f) {
    if constexpr (std::is_same_v<typename std::decay_t<decltype(f)>::Member, ExitStatus>) {
      const ExitStatus& s = f.of(value);  // in numbers and words
      j["exit_code"] = s.kind == ExitStatus::Kind::exited ? Json(s.value) : Json();
      j["signal"] = s.kind == ExitStatus::Kind::signaled ? Json(s.value) : Json();
      j["status"] = s.describe();
    } else {
      j[f.key()] = value_of(f.of(value));
    }
    then(std::string_view(f.key()));
  });
}

template <typename T>
void put_fields(Json& j, const T& value) {
  put_fields(j, value, [](std::string_view) {});
}

// A rank: how it ended, with its devices after its rank.
Json rank_entry(const RankAssignment& a, const RankResult& r) {
  Json j;
  put_fields(j, r, [&](std::string_view key) {
    if (key == "rank") put_fields(j, a);
  });
  return j;
}

// What stopped the job from another server (the peer channel); the failed
// rank's role, rank and status only when one failed there.
Json peer_entry(const PeerStop& p) {
  Json peer;
  put_fields(peer, p, [&](std::string_view key) {
    if (key != "server_id") return;
    peer["role"] = p.status ? Json(to_string(p.role)) : Json();
    peer["rank"] = p.status && p.role == ProcessRole::rank ? Json(p.rank) : Json();
    peer["status"] = p.status ? Json(p.status->describe()) : Json();
  });
  return peer;
}

// How the job's stop reads: its words, the state it came in, the signal's
// origin, the first failure (a rank id, or "scheduler") and another server's say.
void put_stop(Json& j, const JobResult& result) {
  j["stop_detail"] = result.stop_detail.empty() ? Json() : Json(result.stop_detail);
  j["stopped_in"] = result.stop_reason == StopReason::none ? Json() : Json(to_string(result.stopped_in));
  if (result.stop_reason == StopReason::signaled) {
    const SignalOrigin& o = result.stop_signal_origin;
    j["stop_signal"] = result.stop_signal;
    j["stop_signal_receiver"] = to_string(o.receiver);
    j["stop_signal_sender_pid"] = o.sender_pid > 0 ? Json(o.sender_pid) : Json();
    j["stop_signal_sender"] = o.sender_name.empty() ? Json() : Json(o.sender_name);
  }
  j["first_failure"] = !result.first_failure ? Json()
                       : result.ranks[*result.first_failure].role == ProcessRole::scheduler
                           ? Json("scheduler")
                           : Json(result.ranks[*result.first_failure].rank);
  j["peer_stop"] = result.peer_stop ? peer_entry(*result.peer_stop) : Json();
}

}  // namespace

void write_job_summary(const std::string& path, const JobSpec& plan, const std::string& table_copy,
                       const JobResult& result) {
  Json j;
  put_fields(j, plan, [&](std::string_view key) {
    if (key == "rank_table_source") j["rank_table"] = table_copy;
  });
  put_fields(j, result, [&](std::string_view key) {
    if (key == "child_subreaper") {
      j["success"] = result.success();
      j["exit_code"] = result.exit_code();
    } else if (key == "stop_reason") {
      put_stop(j, result);
    }
  });
  j["ranks"] = Json::array();
  for (std::size_t i = 0; i < result.ranks.size() && i < plan.ranks.size(); ++i) {
    j["ranks"].push_back(rank_entry(plan.ranks[i], result.ranks[i]));
  }
  // Rank output can be any bytes: replace invalid UTF-8 rather than fail.
  const std::string text = j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";

  write_private_file(path, text, "create " + path);
}

}  // namespace davincirun::detail
