// Which server of the rank table this machine is (rules: server_identity.hpp).
#include "davincirun/server_identity.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/edit_distance.hpp"
#include "common/ip_address.hpp"
#include "davincirun/errors.hpp"
#include "plan/engine_index.hpp"

namespace davincirun {
namespace {

// The variables naming this pod (ModelArts), in the order they are read.
constexpr const char* pod_variables[] = {"MA_CURRENT_INSTANCE_NAME", "BATCH_TASK_CURRENT_INSTANCE"};

// A value of the table or of this machine, with its canonical address when it
// is an IP literal, made once: a table may list thousands of servers.
struct Text {
  explicit Text(std::string text) : value(std::move(text)), address(detail::canonical_ip(value)) {}
  std::string value;
  std::optional<std::string> address;
};

// host_ip and server_id may be addresses or names: addresses compare as
// addresses, anything else as text (detail::address_key).
bool same_host(const Text& table_value, const Text& probe) {
  return (table_value.address ? *table_value.address : table_value.value) ==
         (probe.address ? *probe.address : probe.value);
}

// "node1" and "node1.cluster.local" name one machine, whichever side is
// short; "node1.a" and "node1.b" do not. An IP literal is not a host name.
bool same_host_name(const Text& table_text, const Text& host_text) {
  if (table_text.address) return false;
  const std::string& table_value = table_text.value;
  const std::string& host_name = host_text.value;
  auto short_name = [](const std::string& s) { return s.substr(0, s.find('.')); };
  return table_value == host_name || table_value == short_name(host_name) || short_name(table_value) == host_name;
}

bool same_text(const Text& table_value, const Text& probe) { return table_value.value == probe.value; }

using Matcher = bool (*)(const Text& table_value, const Text& probe);
using TableField = std::pair<const char*, std::string>;  // ("container_ip", "10.0.0.5")

// One value of this machine to look for in the table.
struct Probe {
  std::string what;  // in reasons: "POD_IP", "an address of this machine"
  Text value;
  Matcher matches;
  bool interface_address = false;  // value is one of MachineIdentity::addresses
};

struct Rule {
  const char* name;  // "container_ip": the table field(s) it reads
  std::vector<TableField> (*fields)(const RankTableServer&);
  std::vector<Probe> probes;
  std::vector<std::string> looked_at;  // for the no-match error
};

// The table's server ids for a message: all of a few, the first of many (a
// table of 4,096 servers would make the message 60 KB).
std::string server_list(const RankTable& table) {
  constexpr std::size_t shown = 16;
  std::vector<std::string_view> ids;
  for (std::size_t i = 0; i < table.servers.size() && i < shown; ++i) ids.push_back(table.servers[i].server_id);
  std::string text = fmt::format("{}", fmt::join(ids, ", "));
  if (table.servers.size() > shown) text += fmt::format(" and {} more", table.servers.size() - shown);
  return text;
}

// "; did you mean 'X'?" when a server id is within two edits of `typed`.
std::string nearest_server(const RankTable& table, const std::string& typed) {
  std::vector<std::string> ids;
  ids.reserve(table.servers.size());
  for (const auto& s : table.servers) ids.push_back(s.server_id);
  const auto near = detail::nearest_name(typed, ids);
  return near && near->distance <= 2 ? fmt::format("; did you mean '{}'?", near->name) : std::string();
}

void probe_variable(Rule& rule, const Environment& env, const char* name, Matcher matches) {
  const auto value = env.get(name);
  if (!value || value->empty()) {
    rule.looked_at.push_back(fmt::format("{} not set", name));
    return;
  }
  rule.probes.push_back({name, Text(*value), matches, false});
  rule.looked_at.push_back(fmt::format("{} '{}'", name, *value));
}

void probe_addresses(Rule& rule, const MachineIdentity& machine) {
  for (const auto& a : machine.addresses)
    rule.probes.push_back({"an address of this machine", Text(a), same_host, true});
  rule.looked_at.push_back(machine.addresses.empty()
                               ? "no interface addresses"
                               : fmt::format("interface addresses {}", fmt::join(machine.addresses, ", ")));
}

// The single server matching `rule`, nullopt when none does. Several
// matching is an error, since picking one would start the wrong devices,
// unless the engine's index names one of them (pods of one node share its
// address, and the engine tells them apart).
std::optional<ServerMatch> apply(const RankTable& table, Rule& rule, const detail::EngineIndex& engine) {
  std::vector<ServerMatch> hits;
  bool table_has_field = false;
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    std::optional<ServerMatch> hit;
    for (const auto& [field, value] : rule.fields(table.servers[i])) {
      table_has_field = true;
      if (rule.probes.empty()) continue;
      const Text text(value);
      for (const auto& p : rule.probes) {
        if (!hit && p.matches(text, p.value)) {
          hit = ServerMatch{i, fmt::format("{} {} matches {}", field, value, p.what),
                            p.interface_address ? p.value.value : std::string()};
        }
      }
    }
    if (hit) hits.push_back(std::move(*hit));
  }
  if (!table_has_field) rule.looked_at.push_back(fmt::format("no server has a {}", rule.name));
  if (hits.size() == 1) return hits.front();
  if (hits.empty()) return std::nullopt;
  std::vector<std::string> list;
  for (auto& h : hits) {
    if (engine.index == h.index) {
      h.reason = fmt::format("{}; {} servers match by {}, and {} picks this one", h.reason, hits.size(), rule.name,
                             engine.reason);
      return h;
    }
    list.push_back(fmt::format("{} ({})", table.servers[h.index].server_id, h.reason));
  }
  const std::string engine_note = !engine.problem.empty() ? fmt::format(" ({})", engine.problem)
                                  : engine.index          ? fmt::format(" ({} names another server)", engine.reason)
                                                          : std::string();
  throw OptionError("server_id",
                    fmt::format("this machine matches {} servers of the rank table by {}: {}{}; say which one it is "
                                "with ",
                                hits.size(), rule.name, fmt::join(list, ", "), engine_note),
                    "");
}

}  // namespace

MachineIdentity MachineIdentity::current() {
  MachineIdentity machine;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (const ifaddrs* p = list; p; p = p->ifa_next) {
      if (!p->ifa_addr) continue;
      const int family = p->ifa_addr->sa_family;
      const void* raw = nullptr;
      if (family == AF_INET) raw = &reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr;
      if (family == AF_INET6) raw = &reinterpret_cast<const sockaddr_in6*>(p->ifa_addr)->sin6_addr;
      char buf[INET6_ADDRSTRLEN];
      if (!raw || !inet_ntop(family, raw, buf, sizeof buf)) continue;
      if (std::find(machine.addresses.begin(), machine.addresses.end(), buf) == machine.addresses.end()) {
        machine.addresses.emplace_back(buf);
        if (p->ifa_name) machine.interfaces.emplace(buf, p->ifa_name);
      }
    }
    freeifaddrs(list);
  }
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) == 0) machine.host_name = name;
  return machine;
}

ServerMatch identify_server(const RankTable& table, const Environment& env, const MachineIdentity& machine,
                            const std::optional<std::string>& explicit_server_id) {
  if (explicit_server_id) {
    for (std::size_t i = 0; i < table.servers.size(); ++i) {
      if (table.servers[i].server_id == *explicit_server_id) {
        return {i, fmt::format("server_id {} was given explicitly", *explicit_server_id), {}};
      }
    }
    throw OptionError("server_id",
                      fmt::format("server id '{}' is not in the rank table (servers: {}){}", *explicit_server_id,
                                  server_list(table), nearest_server(table, *explicit_server_id)));
  }

  Rule pod{"pod_name",
           [](const RankTableServer& s) {
             std::vector<TableField> f;
             for (const auto& p : s.pod_names) f.emplace_back("pod_name", p);
             return f;
           },
           {},
           {}};
  // Only the first variable set counts: the launcher narrows the server's
  // devices to the pod that same variable names.
  for (const char* name : pod_variables) {
    probe_variable(pod, env, name, same_text);
    if (!pod.probes.empty()) break;
  }

  Rule container{"container_ip",
                 [](const RankTableServer& s) {
                   return s.container_ip ? std::vector<TableField>{{"container_ip", *s.container_ip}}
                                         : std::vector<TableField>{};
                 },
                 {},
                 {}};
  probe_variable(container, env, "POD_IP", same_host);
  probe_variable(container, env, "MA_CURRENT_IP", same_host);
  probe_addresses(container, machine);

  Rule host{"host_ip/server_id",
            [](const RankTableServer& s) {
              std::vector<TableField> f;
              if (s.host_ip) f.emplace_back("host_ip", *s.host_ip);
              f.emplace_back("server_id", s.server_id);
              return f;
            },
            {},
            {}};
  probe_variable(host, env, "MA_CURRENT_HOST_IP", same_host);
  probe_variable(host, env, "XDL_IP", same_host);

  Rule local{"server_id",
             [](const RankTableServer& s) { return std::vector<TableField>{{"server_id", s.server_id}}; },
             {},
             {}};
  probe_addresses(local, machine);
  if (machine.host_name.empty()) {
    local.looked_at.emplace_back("host name unknown");
  } else {
    local.probes.push_back({fmt::format("this machine's host name '{}'", machine.host_name), Text(machine.host_name),
                            same_host_name, false});
    local.looked_at.push_back(fmt::format("host name '{}'", machine.host_name));
  }
  // Slurm's node name may differ from the host name (slurmd -N, NodeName=).
  probe_variable(local, env, "SLURMD_NODENAME", same_host_name);

  const detail::EngineIndex engine = detail::engine_index(env, table.servers.size());
  std::vector<std::string> tried;
  for (Rule* rule : {&pod, &container, &host, &local}) {
    if (auto match = apply(table, *rule, engine)) return *match;
    tried.push_back(fmt::format("{}: {}", rule->name, fmt::join(rule->looked_at, "; ")));
  }
  if (engine.index) {
    return {*engine.index,
            fmt::format("{} is the position of server {} in the rank table (its servers in rank order, one agent each)",
                        engine.reason, table.servers[*engine.index].server_id),
            {}};
  }
  tried.push_back(fmt::format("engine index: {}{}", fmt::join(engine.looked_at, "; "),
                              engine.problem.empty() ? std::string() : "; " + engine.problem));
  if (table.servers.size() == 1) return {0, "the rank table has one server", {}};
  throw OptionError("server_id",
                    fmt::format("cannot tell which of the {} servers of the rank table ({}) this machine is; tried {}; "
                                "say which one it is with ",
                                table.servers.size(), server_list(table), fmt::join(tried, " | ")),
                    "");
}

LocalServer find_local_server(const RankTable& table, const Environment& env, const MachineIdentity& machine,
                              const std::optional<std::string>& explicit_server_id) {
  const ServerMatch match = identify_server(table, env, machine, explicit_server_id);
  LocalServer local{match.index, match.reason, table.servers[match.index], match.local_address};
  const RankTableServer& server = table.servers[match.index];
  if (server.pod_names.size() < 2) return local;
  std::optional<std::string> pod;
  for (const char* name : pod_variables) {
    if (auto v = env.get(name); v && !v->empty()) {
      pod = *v;
      break;
    }
  }
  if (!pod || std::find(server.pod_names.begin(), server.pod_names.end(), *pod) == server.pod_names.end()) {
    throw ConfigError(fmt::format(
        "server {} holds the pods {}; this pod's name ({}) does not name one of them "
        "(checked MA_CURRENT_INSTANCE_NAME, BATCH_TASK_CURRENT_INSTANCE)",
        server.server_id, fmt::join(server.pod_names, ", "), pod ? "'" + *pod + "'" : std::string("not set")));
  }
  local.server.devices.clear();
  for (const auto& d : server.devices) {
    if (d.pod_name == pod) local.server.devices.push_back(d);
  }
  local.server.rank_start = local.server.devices.front().rank_id;
  for (const auto& d : local.server.devices) local.server.rank_start = std::min(local.server.rank_start, d.rank_id);
  return local;
}

}  // namespace davincirun
