#!/usr/bin/env bash
# Copies the headers of fmt and nlohmann/json, with their licenses, from this
# machine's Debian packages (libfmt-dev, nlohmann-json3-dev) into
# third_party/, which git ignores and the sdist includes: a build from the
# sdist then needs neither on the target machine (cmake/dependencies.cmake
# uses the system's first, these otherwise). scripts/build_sdist.sh runs it.
#
#   third_party/<name>/include/...   the headers, as the package installs them
#   third_party/<name>/copyright     the package's copyright and license file
#   third_party/<name>/VERSION       the package's version
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A packages=([fmt]=libfmt-dev [nlohmann_json]=nlohmann-json3-dev)
for name in fmt nlohmann_json; do
  package=${packages[$name]}
  version=$(dpkg-query -W -f='${Status} ${Version}' "$package" 2>/dev/null | sed -n 's/^install ok installed //p')
  if [[ -z $version ]]; then
    echo "bundle_deps: $package is not installed (apt-get install $package)" >&2
    exit 1
  fi
  dest=third_party/$name
  rm -rf "$dest.new"
  mkdir -p "$dest.new/include"
  # The package's own files under /usr/include, nothing else of the system.
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
done
