#include "rank_table/rank_table_absence.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "common/edit_distance.hpp"
#include "common/text.hpp"

namespace davincirun::detail {

namespace {

// Names compared at most: a folder of many thousands (a shared /tmp) is
// read once per progress line, and a typo is rarely that far down.
constexpr std::size_t max_names = 10'000;

struct Listing {
  bool readable = false;
  std::vector<std::string> names;  // in the order of the directory
  std::size_t more = 0;            // names beyond max_names, not kept
};

Listing list_folder(const std::string& dir) {
  Listing out;
  const std::unique_ptr<DIR, int (*)(DIR*)> listing(::opendir(dir.c_str()), ::closedir);
  if (!listing) return out;
  out.readable = true;
  while (const dirent* entry = ::readdir(listing.get())) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (out.names.size() < max_names) {
      out.names.emplace_back(name);
    } else {
      ++out.more;
    }
  }
  return out;
}

std::string last_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path.substr(path.rfind('/') + 1);  // npos + 1 == 0: the whole of a bare name
}

std::string joined(const std::string& folder, const std::string& name) {
  if (folder == ".") return name;
  return folder.back() == '/' ? folder + name : folder + "/" + name;
}

// "." is where relative paths start; said in words, it is not mistaken for punctuation.
std::string shown(const std::string& folder) { return folder == "." ? "the working directory" : folder; }

std::string quoted(const std::string& name) { return "'" + printable(name) + "'"; }

bool dangling_link(const std::string& path) {
  struct stat info{};
  return ::lstat(path.c_str(), &info) == 0 && S_ISLNK(info.st_mode);
}

}  // namespace

std::string folder_of(const std::string& path) {
  std::string folder = path;
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  const std::size_t slash = folder.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  folder.resize(slash);
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  return folder;
}

std::size_t close_enough(std::size_t typed_length) { return std::clamp<std::size_t>(typed_length / 4, 1, 3); }

std::optional<std::string> missing_folder(const std::string& path) {
  const std::string folder = folder_of(path);
  struct stat info{};
  if (::stat(folder.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return std::nullopt;
    return fmt::format("{} is not a folder", folder);
  }
  // Permission denied, a symlink loop...: opening the file will say so. A
  // symbolic link whose target is missing may yet get it: waited for.
  if ((errno != ENOENT && errno != ENOTDIR) || dangling_link(folder)) return std::nullopt;
  std::string missing = folder;  // the highest folder on the way that does not exist
  std::string up = folder_of(folder);
  for (;;) {
    if (::stat(up.c_str(), &info) == 0) break;
    if ((errno != ENOENT && errno != ENOTDIR) || dangling_link(up)) return std::nullopt;
    if (folder_of(up) == up) return fmt::format("the folder {} does not exist", folder);
    missing = up;
    up = folder_of(up);
  }
  if (!S_ISDIR(info.st_mode)) return fmt::format("the folder {} does not exist: {} is not a folder", folder, up);
  std::string detail = fmt::format("the folder {} does not exist (the nearest that exists is {}", folder, shown(up));
  const std::string typed = last_name(missing);
  const Listing listing = list_folder(up);
  const std::optional<NearName> near = nearest_name(typed, listing.names);
  if (near && near->distance <= close_enough(typed.size())) {
    detail += fmt::format("; did you mean {}?", joined(up, printable(near->name)));
  }
  return detail + ")";
}

std::string absent_file_note(const std::string& path) {
  const std::string folder = folder_of(path);
  const std::string typed = last_name(path);
  const Listing listing = list_folder(folder);
  if (!listing.readable) return "";
  const std::optional<NearName> near = nearest_name(typed, listing.names);
  if (!near) return fmt::format(" ({} is empty)", shown(folder));
  if (near->distance <= close_enough(typed.size())) return fmt::format(" (did you mean {}?)", quoted(near->name));
  return fmt::format(" (the nearest name in {} is {})", shown(folder), quoted(near->name));
}

std::string directory_note(const std::string& dir, const std::vector<std::string_view>& wanted) {
  const Listing listing = list_folder(dir);
  if (!listing.readable) return "";
  if (listing.names.empty()) return " (it is empty)";
  std::vector<std::pair<std::size_t, const std::string*>> ranked;
  for (const std::string& name : listing.names) {
    std::size_t distance = unlike_edits + 1;
    for (const std::string_view table : wanted) distance = std::min(distance, edit_distance(table, name, unlike_edits));
    ranked.emplace_back(distance, &name);
  }
  constexpr std::size_t shown_names = 3;
  const std::size_t count = std::min(shown_names, ranked.size());
  std::partial_sort(
      ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(count), ranked.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : *a.second < *b.second; });
  std::string out = " (it holds ";
  const std::size_t rest = listing.names.size() + listing.more - count;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += (i + 1 == count && rest == 0) ? " and " : ", ";
    out += quoted(*ranked[i].second);
  }
  if (rest > 0) out += fmt::format(" and {} more", rest);
  return out + ")";
}

}  // namespace davincirun::detail
