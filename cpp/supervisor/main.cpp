// `davincirun-supervisor`: the per-job supervisor process. Started only by
// the launcher (davincirun::Job), which passes its end of the lifeline
// socket as descriptor 3; see job_host.hpp.
#include <cstdio>
#include <cstring>

#include "job_host.hpp"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--lifeline-fd=3") != 0) {
    std::fprintf(stderr,
                 "davincirun-supervisor: this program is started by the davincirun launcher, "
                 "not by hand; run `davincirun --help`\n");
    return 2;
  }
  return davincirun::detail::run_job_host(3);
}
