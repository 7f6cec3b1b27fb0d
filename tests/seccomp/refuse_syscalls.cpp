// refuse_syscalls: runs a command under a seccomp filter that refuses the
// system calls qemu-user 7.2 does not emulate and that filtered containers
// may refuse, so the fallbacks for them can be tested on any Linux machine.
//
//   refuse_syscalls [--clone-pidfd=ERRNO] [--clone3=ERRNO] [--subreaper=ERRNO] [--] COMMAND [ARG...]
//
//   --clone-pidfd  clone(2) whose flags hold CLONE_PIDFD fails (qemu-user: EINVAL)
//   --clone3       every clone3(2) fails; its flags cannot be inspected (qemu-user: ENOSYS)
//   --subreaper    prctl(2) PR_SET_CHILD_SUBREAPER and PR_GET_CHILD_SUBREAPER
//                  fail (qemu-user: EINVAL for both)
//   ERRNO          EINVAL, ENOSYS, EPERM or EACCES
//
// Everything else is allowed. The filter (PR_SET_NO_NEW_PRIVS, then
// SECCOMP_SET_MODE_FILTER) is inherited by every process COMMAND starts and
// cannot be lifted. Exit status: COMMAND's (it is exec'd), 2 on a usage
// error, 126/127 when COMMAND cannot be executed, 1 when the filter cannot
// be installed.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000  // Linux 5.2
#endif
#ifndef SYS_clone3
#define SYS_clone3 435  // Linux 5.3; one number on every architecture
#endif

namespace {

#if defined(__x86_64__)
constexpr unsigned this_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned this_arch = AUDIT_ARCH_AARCH64;
#else
#error "refuse_syscalls knows the audit architecture of x86_64 and aarch64 only"
#endif

// The low 32 bits of the first argument: BPF loads 32-bit words.
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned arg0_low = offsetof(seccomp_data, args);
#else
constexpr unsigned arg0_low = offsetof(seccomp_data, args) + 4;
#endif

sock_filter stmt(unsigned short code, unsigned k) { return BPF_STMT(code, k); }
sock_filter jump(unsigned short code, unsigned k, unsigned char jt, unsigned char jf) {
  return BPF_JUMP(code, k, jt, jf);
}
sock_filter load_nr() { return stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)); }
sock_filter load_arg0() { return stmt(BPF_LD | BPF_W | BPF_ABS, arg0_low); }
sock_filter refuse(int error) {
  return stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(error) & SECCOMP_RET_DATA));
}

int errno_by_name(const std::string& name) {
  if (name == "EINVAL") return EINVAL;
  if (name == "ENOSYS") return ENOSYS;
  if (name == "EPERM") return EPERM;
  if (name == "EACCES") return EACCES;
  return 0;
}

int usage(const char* message) {
  std::fprintf(stderr,
               "refuse_syscalls: %s\nusage: refuse_syscalls [--clone-pidfd=ERRNO] [--clone3=ERRNO] "
               "[--subreaper=ERRNO] [--] COMMAND [ARG...]\nERRNO: EINVAL, ENOSYS, EPERM or EACCES\n",
               message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int clone_pidfd = 0, clone3 = 0, subreaper = 0;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.rfind("--", 0) != 0) break;
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const int error = eq == std::string::npos ? 0 : errno_by_name(arg.substr(eq + 1));
    int* target = flag == "--clone-pidfd" ? &clone_pidfd
                  : flag == "--clone3"    ? &clone3
                  : flag == "--subreaper" ? &subreaper
                                          : nullptr;
    if (!target) return usage(("unknown option " + arg).c_str());
    if (error == 0) return usage(("expected " + flag + "=EINVAL, ENOSYS, EPERM or EACCES, got " + arg).c_str());
    *target = error;
  }
  if (i >= argc) return usage("no command");
  if (!clone_pidfd && !clone3 && !subreaper) return usage("nothing to refuse");

  // Each rule is a block that reloads the system call number; a call that
  // no block refuses falls through to "allow".
  std::vector<sock_filter> prog;
  prog.push_back(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, this_arch, 1, 0));
  prog.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));  // another ABI: not ours to judge
  if (clone_pidfd) {
    prog.push_back(load_nr());
    prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3));
    prog.push_back(load_arg0());  // clone's flags are its first argument on both architectures
    prog.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_PIDFD, 0, 1));
    prog.push_back(refuse(clone_pidfd));
  }
  if (clone3) {
    prog.push_back(load_nr());
    prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1));
    prog.push_back(refuse(clone3));
  }
  if (subreaper) {
    for (const unsigned option : {unsigned{PR_SET_CHILD_SUBREAPER}, unsigned{PR_GET_CHILD_SUBREAPER}}) {
      prog.push_back(load_nr());
      prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 3));
      prog.push_back(load_arg0());
      prog.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, option, 0, 1));
      prog.push_back(refuse(subreaper));
    }
  }
  prog.push_back(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));

  sock_fprog fprog{};
  fprog.len = static_cast<unsigned short>(prog.size());
  fprog.filter = prog.data();
  // Without CAP_SYS_ADMIN a filter needs no_new_privs (set-user-ID programs
  // then run without their privileges).
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    std::fprintf(stderr, "refuse_syscalls: prctl PR_SET_NO_NEW_PRIVS: %s\n", std::strerror(errno));
    return 1;
  }
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
    std::fprintf(stderr, "refuse_syscalls: seccomp SECCOMP_SET_MODE_FILTER: %s\n", std::strerror(errno));
    return 1;
  }
  ::execvp(argv[i], argv + i);
  const int error = errno;
  std::fprintf(stderr, "refuse_syscalls: cannot execute %s: %s\n", argv[i], std::strerror(error));
  return error == ENOENT ? 127 : 126;
}
