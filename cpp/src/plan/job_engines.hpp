// The job engines davincirun runs under (Open MPI, MPICH-style PMI, Slurm,
// Volcano) and the variables each sets in the processes it starts: one
// table, read by the planner for this agent's index among the servers
// (engine_index.hpp) and by the supervisor process's console, which under
// an engine's terminal stays plain. Internal to the core.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "davincirun/environment.hpp"

namespace davincirun::detail {

/// One engine and its variables. A variable that is set but empty counts as
/// unset everywhere.
struct JobEngine {
  std::string_view name;  ///< "Open MPI"
  /// Any of them set: this process is a task the engine started, one per
  /// node, whose terminal is the engine's, merging every task's output.
  std::vector<std::string_view> task_variables;
  /// The first of them set: this task's index among the engine's nodes.
  /// Empty: the index is not read (engine_index.hpp says why per engine).
  std::vector<std::string_view> index_variables;
  /// The first of them set: the number of nodes.
  std::vector<std::string_view> count_variables;
  /// When set, must be `one_agent_value` (one task per node), else
  /// `one_agent_advice` says how to start one.
  std::string_view one_agent_variable;
  std::size_t one_agent_value = 0;
  std::string_view one_agent_advice;
  /// Volcano's svc plugin: VC_<task>_NUM, the replicas of each task of the
  /// job, count the nodes instead of `count_variables`.
  bool counts_per_task = false;
};

/// Every engine, the innermost launcher first (mpirun may run inside a
/// Slurm allocation, and Slurm inside a pod):
///  - Open MPI: task OMPI_COMM_WORLD_SIZE, or PMIX_RANK (PRRTE, Open MPI 5);
///    index OMPI_COMM_WORLD_RANK; count OMPI_COMM_WORLD_SIZE;
///    OMPI_COMM_WORLD_LOCAL_SIZE 1;
///  - an MPICH-style PMI launcher: task PMI_RANK (its index is not read);
///  - Slurm: task SLURM_STEP_ID (srun); index SLURM_NODEID; count
///    SLURM_STEP_NUM_NODES, else SLURM_JOB_NUM_NODES, else SLURM_NNODES;
///    SLURM_LOCALID 0;
///  - Volcano: no task variable (a pod has a terminal of its own); index
///    VC_TASK_INDEX, else VK_TASK_INDEX (the env plugin sets both); counts
///    per task.
const std::vector<JobEngine>& job_engines();

/// The engine this process is a task of (any of its task_variables set in
/// `env`), or nullptr.
const JobEngine* engine_of_task(const Environment& env);

}  // namespace davincirun::detail
