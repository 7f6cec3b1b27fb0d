// Which server of the rank table this machine is (rules: server_identity.hpp).
#include "davincirun/server_identity.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "davincirun/errors.hpp"

namespace davincirun {
namespace {

// The canonical text of an IP literal (inet_pton, then inet_ntop), or nullopt
// when `text` is not one. A zone ("fe80::1%eth0") is dropped: getifaddrs
// addresses are printed without one, and a table names the address, not the
// interface. An IPv4-mapped IPv6 address is the IPv4 address it carries.
std::optional<std::string> canonical_address(const std::string& text) {
  const std::string s = text.find(':') == std::string::npos ? text : text.substr(0, text.find('%'));
  char buf[INET6_ADDRSTRLEN];
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, s.c_str(), &v4) != 1) {
    if (inet_pton(AF_INET6, s.c_str(), &v6) != 1) return std::nullopt;
    if (!IN6_IS_ADDR_V4MAPPED(&v6)) return std::string(inet_ntop(AF_INET6, &v6, buf, sizeof buf));
    std::memcpy(&v4, &v6.s6_addr[12], sizeof v4);
  }
  return std::string(inet_ntop(AF_INET, &v4, buf, sizeof buf));
}

// host_ip and server_id may be addresses or names: addresses compare as
// addresses, anything else as text.
bool same_host(const std::string& table_value, const std::string& probe) {
  const auto a = canonical_address(table_value);
  const auto b = canonical_address(probe);
  return a && b ? *a == *b : table_value == probe;
}

// "node1" and "node1.cluster.local" name one machine, whichever side is
// short; "node1.a" and "node1.b" do not. An IP literal is not a host name.
bool same_host_name(const std::string& table_value, const std::string& host_name) {
  if (canonical_address(table_value)) return false;
  auto short_name = [](const std::string& s) { return s.substr(0, s.find('.')); };
  return table_value == host_name || table_value == short_name(host_name) || short_name(table_value) == host_name;
}

bool same_text(const std::string& table_value, const std::string& probe) { return table_value == probe; }

using Matcher = bool (*)(const std::string& table_value, const std::string& probe);
using Field = std::pair<const char*, std::string>;  // ("container_ip", "10.0.0.5")

// One value of this machine to look for in the table.
struct Probe {
  std::string what;  // in reasons: "POD_IP", "an address of this machine"
  std::string value;
  Matcher matches;
};

struct Rule {
  const char* name;                                // "container_ip": the table field(s) it reads
  std::vector<Field> (*fields)(const RankTableServer&);
  std::vector<Probe> probes;
  std::vector<std::string> looked_at;              // for the no-match error
};

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::string server_list(const RankTable& table) {
  std::vector<std::string> ids;
  for (const auto& s : table.servers) ids.push_back(s.server_id);
  return join(ids, ", ");
}

void probe_variable(Rule& rule, const Environment& env, const char* name, Matcher matches) {
  const auto value = env.get(name);
  if (!value || value->empty()) {
    rule.looked_at.push_back(fmt::format("{} not set", name));
    return;
  }
  rule.probes.push_back({name, *value, matches});
  rule.looked_at.push_back(fmt::format("{} '{}'", name, *value));
}

void probe_addresses(Rule& rule, const MachineIdentity& machine) {
  for (const auto& a : machine.addresses) rule.probes.push_back({"an address of this machine", a, same_host});
  rule.looked_at.push_back(machine.addresses.empty() ? "no interface addresses"
                                                     : "interface addresses " + join(machine.addresses, ", "));
}

// The single server matching `rule`, nullopt when none does; throws when
// several do, since picking one would start the wrong devices.
std::optional<ServerMatch> apply(const RankTable& table, Rule& rule) {
  std::vector<ServerMatch> hits;
  bool table_has_field = false;
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    std::optional<std::string> reason;
    for (const auto& [field, value] : rule.fields(table.servers[i])) {
      table_has_field = true;
      for (const auto& p : rule.probes) {
        if (!reason && p.matches(value, p.value)) reason = fmt::format("{} {} matches {}", field, value, p.what);
      }
    }
    if (reason) hits.push_back({i, *reason});
  }
  if (!table_has_field) rule.looked_at.push_back(fmt::format("no server has a {}", rule.name));
  if (hits.size() == 1) return hits.front();
  if (hits.empty()) return std::nullopt;
  std::vector<std::string> list;
  for (const auto& h : hits) list.push_back(fmt::format("{} ({})", table.servers[h.index].server_id, h.reason));
  throw ConfigError(fmt::format(
      "this machine matches {} servers of the rank table by {}: {}; say which one it is with server_id / --server-id",
      hits.size(), rule.name, join(list, ", ")));
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
        return {i, fmt::format("server_id {} was given explicitly", *explicit_server_id)};
      }
    }
    throw ConfigError(fmt::format("server id '{}' is not in the rank table (servers: {})", *explicit_server_id,
                                  server_list(table)));
  }

  Rule pod{"pod_name", [](const RankTableServer& s) {
             std::vector<Field> f;
             for (const auto& p : s.pod_names) f.emplace_back("pod_name", p);
             return f;
           }, {}, {}};
  // Only the first variable set counts: the launcher narrows the server's
  // devices to the pod that same variable names.
  for (const char* name : {"MA_CURRENT_INSTANCE_NAME", "BATCH_TASK_CURRENT_INSTANCE"}) {
    probe_variable(pod, env, name, same_text);
    if (!pod.probes.empty()) break;
  }

  Rule container{"container_ip", [](const RankTableServer& s) {
                   return s.container_ip ? std::vector<Field>{{"container_ip", *s.container_ip}} : std::vector<Field>{};
                 }, {}, {}};
  probe_variable(container, env, "POD_IP", same_host);
  probe_variable(container, env, "MA_CURRENT_IP", same_host);
  probe_addresses(container, machine);

  Rule host{"host_ip/server_id", [](const RankTableServer& s) {
              std::vector<Field> f;
              if (s.host_ip) f.emplace_back("host_ip", *s.host_ip);
              f.emplace_back("server_id", s.server_id);
              return f;
            }, {}, {}};
  probe_variable(host, env, "MA_CURRENT_HOST_IP", same_host);
  probe_variable(host, env, "XDL_IP", same_host);

  Rule local{"server_id", [](const RankTableServer& s) { return std::vector<Field>{{"server_id", s.server_id}}; },
             {}, {}};
  probe_addresses(local, machine);
  if (machine.host_name.empty()) {
    local.looked_at.push_back("host name unknown");
  } else {
    local.probes.push_back({fmt::format("this machine's host name '{}'", machine.host_name), machine.host_name,
                            same_host_name});
    local.looked_at.push_back(fmt::format("host name '{}'", machine.host_name));
  }

  std::vector<std::string> tried;
  for (Rule* rule : {&pod, &container, &host, &local}) {
    if (auto match = apply(table, *rule)) return *match;
    tried.push_back(fmt::format("{}: {}", rule->name, join(rule->looked_at, "; ")));
  }
  if (table.servers.size() == 1) return {0, "the rank table has one server"};
  throw ConfigError(fmt::format(
      "cannot tell which of the {} servers of the rank table ({}) this machine is; tried {}; "
      "say which one it is with server_id / --server-id",
      table.servers.size(), server_list(table), join(tried, " | ")));
}

}  // namespace davincirun
