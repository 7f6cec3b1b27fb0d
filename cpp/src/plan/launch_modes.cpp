#include "plan/launch_modes.hpp"

#include <fmt/format.h>

#include "common/ip_address.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun::detail {

std::string server_address(const RankTableServer& server) {
  if (server.host_ip) return *server.host_ip;
  if (server.container_ip) return *server.container_ip;
  return server.server_id;
}

namespace {

std::string host_port(const std::string& host, int port) {
  // "[::1]:2222": an IPv6 literal's colons would run into the port's.
  if (host.find(':') != std::string::npos) return fmt::format("\"[{}]:{}\"", host, port);
  return fmt::format("\"{}:{}\"", host, port);
}

std::string worker_list(const std::vector<std::string>& workers) {
  std::string json = R"({"worker":[)";
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (i > 0) json += ',';
    json += workers[i];
  }
  return json + "]}";
}

}  // namespace

std::string tf_cluster_json(const RankTable& table, const LocalServer& local, const std::string& job_id,
                            const std::string& ports_seed) {
  std::vector<std::string> workers(static_cast<std::size_t>(table.world_size));
  if (ports_seed.empty()) {
    const std::vector<int> ports = find_free_ports("127.0.0.1", workers.size());
    for (std::size_t r = 0; r < workers.size(); ++r) workers[r] = host_port("127.0.0.1", ports[r]);
    return worker_list(workers);
  }
  const int base = derived_port(ports_seed, job_id, "TF_CONFIG");
  const bool one_server = table.servers.size() == 1;
  for (const auto& server : table.servers) {
    const std::string host = one_server ? std::string("127.0.0.1") : server_address(server);
    for (const auto& device : server.devices) {
      workers[static_cast<std::size_t>(device.rank_id)] = host_port(host, base + device.rank_id - server.rank_start);
    }
  }
  const RankTableServer& whole = table.servers[local.index];
  for (const auto& device : local.server.devices) {
    check_port_free(base + device.rank_id - whole.rank_start, "TF_CONFIG",
                    fmt::format("rank {}'s TensorFlow server listens on it here", device.rank_id));
  }
  return worker_list(workers);
}

void plan_cm(JobEnvironment& job, const RankTable& table, const LocalServer& local,
             const std::vector<RankAssignment>& ranks) {
  for (std::size_t i = 0; i < table.servers.size(); ++i) {
    if (table.servers[i].rank_start != 0) continue;
    const std::vector<RankAssignment> chief_ranks =
        i == local.index && local.server.rank_start == 0 ? ranks : allocate_ranks(table, i, {});
    for (const auto& rank : chief_ranks) {
      if (rank.rank == 0) job.cm_chief_device = rank.logical_device_id;
    }
  }
  if (table.servers.size() == 1) {
    job.cm_worker_ip = "127.0.0.1";
    return;
  }
  job.cm_worker_ip = job.socket_address.empty() ? server_address(table.servers[local.index]) : job.socket_address;
  const auto refuse = [](const std::string& what, const std::string& value) {
    throw ConfigError(fmt::format(
        "launch mode cm: {} is '{}', not an IP address, and CANN reads CM_CHIEF_IP and CM_WORKER_IP as IPv4 or "
        "IPv6 addresses: give the servers a host_ip in the rank table",
        what, value));
  };
  if (!is_ip_address(job.master_addr)) refuse("the address of rank 0's server (CM_CHIEF_IP)", job.master_addr);
  if (!is_ip_address(job.cm_worker_ip)) refuse("this server's address (CM_WORKER_IP)", job.cm_worker_ip);
}

}  // namespace davincirun::detail
