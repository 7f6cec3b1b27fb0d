// The job engines and their variables (job_engines.hpp).
#include "plan/job_engines.hpp"

namespace davincirun::detail {

const std::vector<JobEngine>& job_engines() {
  static const std::vector<JobEngine> engines = [] {
    std::vector<JobEngine> all(4);
    JobEngine& open_mpi = all[0];
    open_mpi.name = "Open MPI";
    open_mpi.task_variables = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"};
    open_mpi.index_variables = {"OMPI_COMM_WORLD_RANK"};
    open_mpi.count_variables = {"OMPI_COMM_WORLD_SIZE"};
    open_mpi.one_agent_variable = "OMPI_COMM_WORLD_LOCAL_SIZE";
    open_mpi.one_agent_value = 1;
    open_mpi.one_agent_advice = "mpirun --map-by ppr:1:node";
    JobEngine& pmi = all[1];
    pmi.name = "PMI";
    pmi.task_variables = {"PMI_RANK"};
    JobEngine& slurm = all[2];
    slurm.name = "Slurm";
    slurm.task_variables = {"SLURM_STEP_ID"};
    slurm.index_variables = {"SLURM_NODEID"};
    slurm.count_variables = {"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"};
    slurm.one_agent_variable = "SLURM_LOCALID";
    slurm.one_agent_value = 0;
    slurm.one_agent_advice = "srun --ntasks-per-node=1";
    JobEngine& volcano = all[3];
    volcano.name = "Volcano";
    volcano.index_variables = {"VC_TASK_INDEX", "VK_TASK_INDEX"};
    volcano.counts_per_task = true;
    return all;
  }();
  return engines;
}

const JobEngine* engine_of_task(const Environment& env) {
  for (const JobEngine& engine : job_engines()) {
    for (const std::string_view name : engine.task_variables) {
      if (!env.get(name).value_or("").empty()) return &engine;
    }
  }
  return nullptr;
}

}  // namespace davincirun::detail
