// child_lock_holder DIR JOB_ID DEVICES [COMMAND...]: locks DEVICES (comma-
// separated ids) in DIR with davincirun::DeviceLocks, holder JOB_ID and
// COMMAND; prints "locked" and sleeps 60 s holding them. When a device is
// busy, prints "busy <holder pid>" and exits 3; on another error, prints
// "error <message>" and exits 4.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "davincirun/device_lock.hpp"
#include "davincirun/errors.hpp"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  std::vector<int> devices;
  std::istringstream list(argv[3]);
  for (std::string id; std::getline(list, id, ',');) devices.push_back(std::atoi(id.c_str()));
  try {
    davincirun::DeviceLocks locks(argv[1], devices, {argv[2], std::vector<std::string>(argv + 4, argv + argc)});
    std::printf("locked\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));
  } catch (const davincirun::DeviceBusyError& e) {
    std::printf("busy %d\n", static_cast<int>(e.holder_pid()));
    return 3;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 4;
  }
  return 0;
}
