#!/usr/bin/env bash
# Puts the third-party code the build needs, with its license, into
# third_party/, which git ignores and the sdist includes:
#
#   fmt, nlohmann_json  the headers of this machine's Debian packages
#                       (libfmt-dev, nlohmann-json3-dev); a build uses the
#                       system's first (cmake/dependencies.cmake), these
#                       otherwise, so a build from the sdist needs neither;
#   simdjson            the rank table's reader: the one-file amalgamation
#                       (singleheader/simdjson.h and simdjson.cpp) of
#                       Debian's source package simdjson 3.0.1 (bookworm's,
#                       the version of its libsimdjson-dev), downloaded from
#                       deb.debian.org and checked against its SHA-256. Every
#                       build compiles it into the core, so neither the
#                       programs nor the installed core need a libsimdjson.
#
#   third_party/<name>/include/...   the headers
#   third_party/simdjson/src/simdjson.cpp
#   third_party/<name>/copyright     the copyright and license file
#   third_party/<name>/VERSION       the version and where it came from
#
#   bash scripts/bundle_deps.sh [NAME...]   (default: all three; a present
#                                           simdjson of the pinned version is kept)
# scripts/build_sdist.sh runs it for all; scripts/setup.sh for simdjson.
set -euo pipefail
cd "$(dirname "$0")/.."
names=("$@")
((${#names[@]})) || names=(fmt nlohmann_json simdjson)

simdjson_version=3.0.1
simdjson_sha256=156b1bc5eb0561b2bd166b46d191fd3d95a3e709cc63761477d3b7aec2b6e9ed
simdjson_url=https://deb.debian.org/debian/pool/main/s/simdjson/simdjson_${simdjson_version}.orig.tar.gz

bundle_simdjson() {
  local dest=third_party/simdjson stamp="$simdjson_version (Debian source package simdjson, $simdjson_url)"
  if [[ -f $dest/VERSION && $(<"$dest/VERSION") == "$stamp" && -f $dest/src/simdjson.cpp ]]; then
    echo "bundle_deps: $dest: simdjson $simdjson_version already there"
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  curl -fsSL --retry 3 -o "$tmp/orig.tar.gz" "$simdjson_url" ||
    { echo "bundle_deps: cannot download $simdjson_url" >&2; return 1; }
  echo "$simdjson_sha256  $tmp/orig.tar.gz" | sha256sum -c --quiet - ||
    { echo "bundle_deps: $simdjson_url is not the expected file (SHA-256)" >&2; return 1; }
  local top=simdjson-$simdjson_version
  tar -xzf "$tmp/orig.tar.gz" -C "$tmp" "$top/LICENSE" "$top/singleheader/simdjson.h" "$top/singleheader/simdjson.cpp"
  rm -rf "$dest.new"
  mkdir -p "$dest.new/include" "$dest.new/src"
  cp "$tmp/$top/singleheader/simdjson.h" "$dest.new/include/"
  cp "$tmp/$top/singleheader/simdjson.cpp" "$dest.new/src/"
  cp "$tmp/$top/LICENSE" "$dest.new/copyright"
  echo "$stamp" >"$dest.new/VERSION"
  rm -rf "$dest"
  mv "$dest.new" "$dest"
  echo "bundle_deps: $dest: simdjson $simdjson_version"
}

# Copies a Debian package's own files under /usr/include, nothing else of the system.
bundle_debian_headers() {
  local name=$1 package=$2 version dest path rel
  version=$(dpkg-query -W -f='${Status} ${Version}' "$package" 2>/dev/null | sed -n 's/^install ok installed //p')
  if [[ -z $version ]]; then
    echo "bundle_deps: $package is not installed (apt-get install $package)" >&2
    return 1
  fi
  dest=third_party/$name
  rm -rf "$dest.new"
  mkdir -p "$dest.new/include"
  dpkg-query -L "$package" | grep '^/usr/include/.' | while read -r path; do
    [[ -f $path ]] || continue
    rel=${path#/usr/include/}
    mkdir -p "$dest.new/include/$(dirname "$rel")"
    cp -p "$path" "$dest.new/include/$rel"
  done
  cp "/usr/share/doc/$package/copyright" "$dest.new/copyright"
  echo "$version (Debian $package)" >"$dest.new/VERSION"
  rm -rf "$dest"
  mv "$dest.new" "$dest"
  echo "bundle_deps: $dest: $(find "$dest/include" -type f | wc -l) headers of $package $version"
}

for name in "${names[@]}"; do
  case $name in
    fmt) bundle_debian_headers fmt libfmt-dev ;;
    nlohmann_json) bundle_debian_headers nlohmann_json nlohmann-json3-dev ;;
    simdjson) bundle_simdjson ;;
    *) echo "bundle_deps: unknown name $name (fmt, nlohmann_json, simdjson)" >&2; exit 2 ;;
  esac
done
