// Validates a rank table, plans a launch with the installed library and runs
// it: prints the plan's world size, each rank's logical device, then the
// job's exit code. The supervisor program comes from the package config.
#include <cstdio>

#include "davincirun/davincirun.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: consumer RANK_TABLE LOG_DIR COMMAND...\n");
    return 2;
  }
  try {
    davincirun::LaunchOptions options;
    options.rank_table = argv[1];
    options.log_dir = argv[2];
    options.command.assign(argv + 3, argv + argc);
    options.supervisor_program = DAVINCIRUN_SUPERVISOR_PROGRAM;
    const davincirun::LaunchPlan plan = davincirun::plan_launch(options, davincirun::Environment::current());
    std::printf("world size %d\n", plan.job.world_size);
    for (const auto& rank : plan.ranks) std::printf("rank %d device %d\n", rank.rank, rank.logical_device_id);
    std::fflush(stdout);
    davincirun::Job job(plan, davincirun::ConsoleTarget::stdio);
    const davincirun::JobResult result = job.wait();
    std::printf("exit code %d\n", result.exit_code());
  } catch (const davincirun::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
