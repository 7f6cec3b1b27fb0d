// Environment builder: the variables each rank process starts with.
//
// The whole contract, with the framework that reads each variable and the
// source of that fact, is in docs/environment.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/device_allocation.hpp"
#include "davincirun/enum_names.hpp"

namespace davincirun {

/// How the ranks of a job find each other (docs/environment.md has each
/// variable's reader and source).
enum class LaunchMode {
  /// One process per device, each told the rank table and its identity
  /// (RANK_TABLE_FILE, RANK_ID, DEVICE_ID...: HCCL's rendezvous, read by
  /// MindSpore, TensorFlow's adapter and torch_npu) and MASTER_ADDR/MASTER_PORT
  /// (torch.distributed's env:// rendezvous).
  rank_table,
  /// MindSpore's dynamic cluster, as its msrun starts it (MindSpore >= 2.0;
  /// the only distributed mode of its CPU backend): the same processes as
  /// workers (MS_ROLE=MS_WORKER, MS_NODE_ID = RANK_ID) plus one scheduler
  /// process on the server of rank 0 running the same command with
  /// MS_ROLE=MS_SCHED; every process gets MS_SCHED_HOST, MS_SCHED_PORT and
  /// MS_WORKER_NUM. The scheduler is a member of the job like a rank
  /// (ProcessRole::scheduler). docs/mindspore.md.
  dynamic_cluster,
  /// rank_table plus TF_CONFIG, TensorFlow's cluster description, which its
  /// MultiWorkerMirroredStrategy reads (tensorflow/python/distribute/
  /// cluster_resolver/tfconfig_cluster_resolver.py): every rank a "worker"
  /// at host:port, in rank order; this rank its task. docs/tensorflow.md.
  tf_config,
  /// CANN's rank-table-free mode for TensorFlow on NPUs: CM_CHIEF_IP,
  /// CM_CHIEF_PORT, CM_CHIEF_DEVICE, CM_WORKER_IP and CM_WORKER_SIZE instead
  /// of RANK_TABLE_FILE, RANK_ID and RANK_SIZE, which CANN forbids alongside
  /// them (CANN environment variable reference, envref_07_0050..0054).
  cm,
};

/// to_string(): "rank-table", "dynamic-cluster", "tf-config" or "cm", as the front ends spell the option.
DAVINCIRUN_ENUM_NAMES(LaunchMode, "rank-table", "dynamic-cluster", "tf-config", "cm");

/// An environment block: ordered "NAME=value" entries with unique names.
class Environment {
 public:
  Environment() = default;
  /// From "NAME=value" strings; entries without '=' are dropped, and a later
  /// duplicate name wins, as getenv() would see it.
  explicit Environment(const std::vector<std::string>& entries);
  /// A copy of this process's `environ`.
  static Environment current();

  std::optional<std::string> get(std::string_view name) const;
  /// Sets or overwrites.
  void set(std::string_view name, std::string_view value);
  /// Sets only when absent ("kept if already set").
  void set_default(std::string_view name, std::string_view value);
  void unset(std::string_view name);
  const std::vector<std::string>& entries() const noexcept { return entries_; }

 private:
  std::vector<std::string>::iterator find(std::string_view name);
  std::vector<std::string>::const_iterator find(std::string_view name) const;
  std::vector<std::string> entries_;
};

/// Values shared by every rank of a job.
struct JobEnvironment {
  std::string rank_table_file;  ///< absolute path of the table the ranks read
  int world_size = 0;           ///< RANK_SIZE, WORLD_SIZE
  int rank_start = 0;           ///< first rank on this server (RANK_START)
  int local_world_size = 0;     ///< ranks on this server (LOCAL_WORLD_SIZE)
  std::string job_id;           ///< JOB_ID
  std::string master_addr;      ///< MASTER_ADDR
  int master_port = 0;          ///< MASTER_PORT
  std::string host_ip;          ///< default MA_CURRENT_HOST_IP: this server's host_ip, else its server_id
  /// A multi-server job's network interface (socket_interface.hpp): its name
  /// and this machine's address on it; both empty for none.
  std::string socket_interface;
  std::string socket_address;
  /// Which variables below the ranks get besides the rank table's.
  LaunchMode launch_mode = LaunchMode::rank_table;
  /// MindSpore's dynamic cluster (LaunchMode::dynamic_cluster): every
  /// process gets MS_SCHED_HOST = master_addr, MS_SCHED_PORT = sched_port,
  /// MS_WORKER_NUM = world_size, and MS_ROLE.
  int sched_port = 0;  ///< MS_SCHED_PORT
  /// MS_TOPO_TIMEOUT when unset (dynamic cluster): seconds MindSpore's
  /// processes wait for the cluster to form, which msrun sets from its
  /// --cluster_time_out (MindSpore 2.10 parallel/cluster/process_entity/_api.py);
  /// here LaunchOptions::wait_timeout, rounded up, the time a server waits
  /// for the others. 0: not set.
  int topo_timeout_s = 0;
  /// PYTHONUNBUFFERED=1 by default (LaunchOptions::output_watched).
  bool python_unbuffered = true;
  /// torchrun's node of the job: this server's position in the table
  /// (GROUP_RANK) and the number of servers (GROUP_WORLD_SIZE).
  int group_rank = 0;
  int group_world_size = 1;
  /// The job's restarts (SupervisorOptions::max_restarts):
  /// TORCHELASTIC_MAX_RESTARTS, and the restarts so far
  /// (DAVINCIRUN_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT): 0 for the first
  /// attempt, set anew for each later one by the job's supervisor process.
  int max_restarts = 0;
  int restart_count = 0;
  /// LaunchMode::tf_config: TF_CONFIG's "cluster" value, the JSON object
  /// {"worker": ["<host>:<port>", ...]} listing every rank in rank order
  /// (launch_modes.cpp says where hosts and ports come from).
  std::string tf_cluster_json;
  /// LaunchMode::cm (CM_CHIEF_IP is master_addr, CM_WORKER_SIZE world_size):
  int cm_chief_port = 0;     ///< CM_CHIEF_PORT: where rank 0's process listens
  int cm_chief_device = 0;   ///< CM_CHIEF_DEVICE: rank 0's logical device id on its server
  std::string cm_worker_ip;  ///< CM_WORKER_IP: this server's address, as the chief reaches it
};

/// OMP_NUM_THREADS a rank gets when it is unset and its server runs more
/// than one rank: 1, as torchrun does (torch 2.x torch/distributed/run.py:
/// "Setting OMP_NUM_THREADS environment variable for each process to be 1
/// in default" when nproc_per_node > 1). Without it every rank starts as
/// many OpenMP threads as the machine has cores.
inline constexpr int default_omp_num_threads = 1;

/// Variables of the launch modes, removed from the inherited environment
/// (and set anew by the mode that uses them): a platform launcher may leave
/// them set for its own process, and they would mislead every rank.
/// MindSpore's MS_* then tries to bind a scheduler port ("Address already in
/// use") instead of reading the rank table; a TF_CONFIG describes another
/// cluster (and an Estimator reading one without a chief fails); CANN's
/// CM_* beside RANK_TABLE_FILE is an error.
const std::vector<std::string_view>& scrubbed_variable_names();

/// Default HCCL_CONNECT_TIMEOUT in seconds when the user set none: 1800, as
/// davincirunsdk 0.1.x did (HCCL's own default is 120).
inline constexpr int default_hccl_connect_timeout_s = 1800;

/// The environment of one rank, built in layers:
///  1. `inherited` (the launcher's own environment) without the
///     scrubbed_variable_names();
///  2. defaults, kept when already set: HCCL_CONNECT_TIMEOUT=1800,
///     PYTHONUNBUFFERED=1 (with job.python_unbuffered), MA_CURRENT_HOST_IP=job.host_ip (when not empty);
///     OMP_NUM_THREADS=1 when job.local_world_size > 1 (default_omp_num_threads);
///     the job-wide part of torchrun's worker contract (torch 2.x
///     torch/distributed/elastic/agent/server/local_elastic_agent.py,
///     _start_workers): ROLE_NAME=default (torchrun's default role),
///     TORCHELASTIC_RUN_ID=job.job_id, TORCHELASTIC_MAX_RESTARTS=job.max_restarts,
///     TORCHELASTIC_USE_AGENT_STORE=False (no agent hosts a TCPStore here:
///     rank 0 creates it at MASTER_PORT), TORCH_NCCL_ASYNC_ERROR_HANDLING=1;
///     in dynamic-cluster mode with job.topo_timeout_s > 0, MS_TOPO_TIMEOUT;
///     with job.socket_interface, GLOO_SOCKET_IFNAME=<name>,
///     NCCL_SOCKET_IFNAME==<name>, and HCCL_SOCKET_IFNAME==<name> with
///     HCCL_IF_IP=<address>, each kept when set in `inherited` or `extra`;
///     the HCCL pair only when neither of the two is (HCCL_IF_IP wins over
///     HCCL_SOCKET_IFNAME, so one would override the user's other);
///  3. `extra` (the caller's explicit variables) overwrite;
///  4. identity, always overwritten: RANK_TABLE_FILE, RANK_ID, RANK_SIZE,
///     RANK_START, DEVICE_ID, ASCEND_DEVICE_ID, JOB_ID, RANK, LOCAL_RANK,
///     WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
///     DAVINCIRUN_RESTART_COUNT (job.restart_count), and torchrun's
///     per-rank names GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK (= RANK, one
///     role), ROLE_WORLD_SIZE (= WORLD_SIZE), TORCHELASTIC_RESTART_COUNT
///     (an inherited value belongs to another launch, such as a torchrun
///     that started davincirun, and would be wrong for every rank); then
///     per job.launch_mode: dynamic-cluster also MS_ROLE=MS_WORKER,
///     MS_NODE_ID (= RANK_ID), MS_SCHED_HOST, MS_SCHED_PORT, MS_WORKER_NUM,
///     as msrun sets them (MindSpore 2.10 parallel/cluster/process_entity/
///     _api.py); tf-config also TF_CONFIG = {"cluster": <job.tf_cluster_json>,
///     "task": {"type": "worker", "index": RANK}}; cm also CM_CHIEF_IP
///     (master_addr), CM_CHIEF_PORT, CM_CHIEF_DEVICE, CM_WORKER_IP,
///     CM_WORKER_SIZE (world_size), and RANK_TABLE_FILE, RANK_ID and
///     RANK_SIZE removed, even when `extra` names them, since CANN refuses
///     them beside the CM_* variables.
/// For MindSpore's scheduler (`rank.role` ProcessRole::scheduler) layer 4 is
/// what msrun gives its scheduler: MS_ROLE=MS_SCHED, MS_SCHED_HOST,
/// MS_SCHED_PORT, MS_WORKER_NUM, RANK_ID=0, RANK_SIZE, plus RANK_TABLE_FILE,
/// JOB_ID and DAVINCIRUN_RESTART_COUNT; the per-device and torch names (DEVICE_ID, ASCEND_DEVICE_ID,
/// RANK, LOCAL_RANK, RANK_START, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT and torchrun's per-rank names) are removed: it holds no
/// device and is no torch rank.
/// TORCHELASTIC_ERROR_FILE is set per rank by the job's supervisor
/// (torch_error_file_for() in root_cause.hpp), which knows the run directory.
Environment rank_environment(const Environment& inherited, const JobEnvironment& job, const RankAssignment& rank,
                             const std::vector<std::pair<std::string, std::string>>& extra = {});

/// The rank identity names rank_environment() always sets itself; values
/// given for them in `extra` have no effect. (JOB_ID and MASTER_PORT are set
/// too, but from JobEnvironment, whose planner honours `extra`.)
const std::vector<std::string_view>& identity_variable_names();

/// JOB_ID for a new job: $JOB_ID when set; else $BATCH_JOB_ID; else
/// $MA_VJ_NAME with its "ma-job" prefix replaced by "modelarts-job" (as
/// davincirunsdk 0.1.x did on ModelArts); else, when `shared_seed` is not
/// empty (the text of a multi-server table, which every server reads
/// alike), "job-<8 hex digits of its digest>", the same on every server
/// without any communication; else "job-<8 random hex digits>".
/// Characters other than letters, digits, '-' and '_' are replaced by '-'.
std::string resolve_job_id(const Environment& inherited, std::string_view shared_seed = {});

/// The port a variable `name` (e.g. "MASTER_PORT") holds as `text`: decimal,
/// 1..65535. Throws ConfigError naming the variable and the text otherwise.
int parse_port(std::string_view name, const std::string& text);

/// A TCP port on `host` that was free a moment ago (bind to port 0, read it,
/// close). Throws SystemError when no socket can be bound.
int find_free_port(const std::string& host = "127.0.0.1");

/// `count` TCP ports on `host` that were free a moment ago, no two alike:
/// each socket stays bound until all are found. Throws SystemError.
std::vector<int> find_free_ports(const std::string& host, std::size_t count);

/// First and last port derived_port() gives: below Linux's default
/// ephemeral range (32768-60999, net.ipv4.ip_local_port_range), where the
/// kernel picks the local ports of outgoing connections.
inline constexpr int first_derived_port = 20000;
inline constexpr int last_derived_port = 31999;

/// The 64-bit FNV-1a digest of `bytes` (stable across machines and runs).
std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t seed = 14695981039346656037ULL) noexcept;

/// A port every server of a job computes alike without talking: a 64-bit
/// FNV-1a digest of `table_json` (the normalized rank table), `job_id` and
/// `purpose` (e.g. "MASTER_PORT"), mapped onto first_derived_port..
/// last_derived_port. Two jobs on one host (other job ids) get other ports,
/// except by a 1 in 12,000 chance.
int derived_port(std::string_view table_json, std::string_view job_id, std::string_view purpose);

/// Throws ConfigError when TCP port `port` cannot be bound on this machine
/// (any address, SO_REUSEADDR as torch.distributed's store and MindSpore's
/// scheduler bind it) because something holds it: "<variable> <port> is
/// already in use on this machine (<whose>)...". Other bind errors are
/// ignored: the framework will report them better.
void check_port_free(int port, std::string_view variable, std::string_view whose);

}  // namespace davincirun
