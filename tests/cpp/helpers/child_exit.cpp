// child_exit CODE [DELAY_MS] [MESSAGE]: prints MESSAGE and a newline (when
// given), sleeps DELAY_MS milliseconds, exits with CODE.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (argc > 3) {
    std::printf("%s\n", argv[3]);
    std::fflush(stdout);
  }
  if (argc > 2) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[2])));
  return std::atoi(argv[1]);
}
