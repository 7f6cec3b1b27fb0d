#include "common/remove_tree.hpp"

#include <ftw.h>
#include <stdio.h>

namespace davincirun::detail {

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);  // unlink(2) or rmdir(2); failures are left in place
  return 0;        // go on with the rest
}

}  // namespace

void remove_tree(const std::string& path) noexcept {
  // FTW_DEPTH: a directory after its entries; FTW_PHYS: symlinks are entries
  // of their own, never followed. 16 descriptors at most.
  ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace davincirun::detail
