// Large short-lived buffers (a 65,536-rank table's 8 MB text, its parsed
// document and its normalized copy) cost more in page faults than in use:
// 4 KiB at a time, ~1 us each. Asking for transparent huge pages first (2 MiB
// a fault) removes most of them where the kernel allows it on request
// (/sys/kernel/mm/transparent_hugepage/enabled: "madvise" or "always").
#pragma once

#include <cstddef>

namespace davincirun::detail {

/// madvise(MADV_HUGEPAGE) on the whole 2 MiB blocks inside [data, data +
/// bytes), before they are first touched; does nothing below 4 MiB or where
/// the kernel refuses (no error: only speed is at stake).
void advise_huge_pages(void* data, std::size_t bytes) noexcept;

}  // namespace davincirun::detail
