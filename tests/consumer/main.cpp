// Validates a rank table and plans a launch with the installed library;
// prints the plan's world size and each rank's logical device.
#include <cstdio>

#include "davincirun/errors.hpp"
#include "davincirun/launcher.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer RANK_TABLE\n");
    return 2;
  }
  try {
    davincirun::LaunchOptions options;
    options.command = {"true"};
    options.rank_table_file = argv[1];
    const davincirun::LaunchPlan plan = davincirun::plan_launch(options, davincirun::Environment::current());
    std::printf("world size %d\n", plan.job.world_size);
    for (const auto& rank : plan.ranks) std::printf("rank %d device %d\n", rank.rank, rank.logical_device_id);
  } catch (const davincirun::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
