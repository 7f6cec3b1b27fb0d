#include "foreign_flags.hpp"

#include <fmt/format.h>

namespace davincirun::cli {

namespace {

// torchrun accepts both spellings of its flags (--nproc_per_node,
// --nproc-per-node); msrun only the underscored one.
constexpr ForeignFlag kFlags[] = {
    {"--worker_num", "msrun", "",
     "the world size is the number of devices in the rank table (RANK_SIZE, MS_WORKER_NUM); without a table, "
     "--nproc N starts N ranks on this machine"},
    {"--nnodes", "torchrun", "", "the servers are those of the rank table; run davincirun once on each of them"},
    {"--local_worker_num", "msrun", "--nproc", "the number of ranks on this machine when there is no rank table"},
    {"--nproc_per_node", "torchrun", "--nproc", "the number of ranks on this machine when there is no rank table"},
    {"--nproc-per-node", "torchrun", "--nproc", "the number of ranks on this machine when there is no rank table"},
    {"--master_addr", "msrun and torchrun", "",
     "the master is rank 0's server in the rank table (MASTER_ADDR, MS_SCHED_HOST), alike on every server"},
    {"--master-addr", "torchrun", "",
     "the master is rank 0's server in the rank table (MASTER_ADDR), alike on every server"},
    {"--master_port", "msrun and torchrun", "",
     "the port is derived from the rank table and JOB_ID, alike on every server; to choose it, set MASTER_PORT (or "
     "MS_SCHED_PORT with --launch-mode dynamic-cluster) in the environment of every server"},
    {"--master-port", "torchrun", "",
     "the port is derived from the rank table and JOB_ID, alike on every server; to choose it, set MASTER_PORT in "
     "the environment of every server"},
    {"--node_rank", "msrun and torchrun", "",
     "this machine's server is found in the rank table from its addresses and host name; --server-id names it"},
    {"--node-rank", "torchrun", "",
     "this machine's server is found in the rank table from its addresses and host name; --server-id names it"},
    {"--log_dir", "msrun and torchrun", "--log-dir", "where each run's directory of per-rank logs is made"},
    {"--rank_table_file", "msrun", "--rank-table", "the rank table the job is launched from"},
    {"--cluster_time_out", "msrun", "--wait-timeout",
     "how long to wait for the rank table and the other servers; in --launch-mode dynamic-cluster it also sets "
     "MS_TOPO_TIMEOUT when that is unset"},
    {"--join", "msrun", "-", "davincirun always waits for every rank and reports how each ended"},
    {"--max_restarts", "torchrun", "--max-restarts",
     "how often the whole job is restarted in place after a rank fails (docs/restarts.md)"},
    {"--bind_core", "msrun", "",
     "davincirun does not pin ranks to cores; start the command under taskset or numactl to do so"},
};

}  // namespace

const ForeignFlag* find_foreign_flag(std::string_view flag) {
  for (const ForeignFlag& f : kFlags) {
    if (f.flag == flag) return &f;
  }
  return nullptr;
}

std::string refused_flag_message(const ForeignFlag& flag) {
  return fmt::format("{} is {}'s flag, not davincirun's: here {} (see davincirun --help)", flag.flag, flag.launchers,
                     flag.meaning);
}

std::string taken_flag_note(const ForeignFlag& flag) {
  if (flag.ours == "-") return fmt::format("{} ({}'s flag) is not needed: {}", flag.flag, flag.launchers, flag.meaning);
  return fmt::format("{} ({}'s flag) is taken as {}: {}", flag.flag, flag.launchers, flag.ours, flag.meaning);
}

}  // namespace davincirun::cli
