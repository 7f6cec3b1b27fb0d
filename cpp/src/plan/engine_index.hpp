// The index a job engine (Open MPI, Slurm, Volcano) gives this agent, read
// as the position of this machine's server in the rank table: rule 6 of
// server_identity.hpp, and the tie-breaker between servers sharing an
// address. Internal to the planner.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "davincirun/environment.hpp"

namespace davincirun::detail {

/// What the engine variables say. At most one engine is read: the first
/// whose index variable is set, innermost launcher first (mpirun may run
/// inside a Slurm allocation, and Slurm inside a pod).
struct EngineIndex {
  /// The server's position, when the engine's variables are consistent with
  /// a table of `server_count` servers and one agent per server.
  std::optional<std::size_t> index;
  /// For reasons: "OMPI_COMM_WORLD_RANK 1 (OMPI_COMM_WORLD_SIZE 2)".
  std::string reason;
  /// Why an index variable that is set cannot be used ("SLURM_STEP_NUM_NODES 4
  /// is not the table's 2 servers"); empty when it can or none is set.
  std::string problem;
  /// For the no-match error: each variable looked at and its value.
  std::vector<std::string> looked_at;
};

/// Reads, in the order of job_engines() (which names the variables), the
/// first engine whose index variable is set:
///  - Open MPI: OMPI_COMM_WORLD_RANK; OMPI_COMM_WORLD_SIZE must equal
///    `server_count` and OMPI_COMM_WORLD_LOCAL_SIZE, when set, be 1;
///  - Slurm: SLURM_NODEID; SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES,
///    else SLURM_NNODES, when set, must equal `server_count`, and
///    SLURM_LOCALID, when set, be 0 (one agent per node);
///  - Volcano: VC_TASK_INDEX, else VK_TASK_INDEX (the env plugin sets both);
///    the svc plugin's VC_<task>_NUM variables, when any, must be one (a job
///    of one task: each task numbers its pods from 0) equal to `server_count`.
/// The index must also be below `server_count`. Values are decimal; empty
/// variables count as unset.
EngineIndex engine_index(const Environment& env, std::size_t server_count);

}  // namespace davincirun::detail
