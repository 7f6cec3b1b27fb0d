#include "common/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace davincirun::detail {

void advise_huge_pages(void* data, std::size_t bytes) noexcept {
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  if (data == nullptr || bytes < 2 * huge) return;
  // Offsets from `data` (no pointer made from an integer).
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t skip = (huge - address % huge) % huge;
  const std::uintptr_t length = (bytes - skip) / huge * huge;
  if (length > 0) ::madvise(static_cast<char*>(data) + skip, length, MADV_HUGEPAGE);
}

}  // namespace davincirun::detail
