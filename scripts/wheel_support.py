"""Helpers of scripts/build_wheels.sh, run with the wheel-tools venv's Python.

  headers SRC_INCLUDE DEST_INCLUDE [--debian-amd64 PYCONFIG --debian-arm64 PYCONFIG]
      Copies a CPython x86_64 include directory (pyenv's) to DEST_INCLUDE as
      the aarch64 one: every header but pyconfig.h is the same on both, and
      pyconfig.h differs in the lines of AARCH64_PYCONFIG. Given the
      pyconfig.h of Debian's amd64 and arm64 libpython3.X-dev of the same
      version, checks that exactly those macros differ between the two and
      that the patched file has Debian arm64's values.
  check WHEEL ARCH
      Checks a manylinux wheel: auditwheel's verdict, and every ELF file in
      it (the module, and the programs: `davincirun` and
      `davincirun-supervisor` in the scripts directory,
      davincirunsdk-<version>.data/scripts/, which pip installs to
      <prefix>/bin unchanged, and the package's own supervisor) read with
      readelf: the machine, the libraries needed and the newest symbol
      version of each. The programs must be executable (the mode in the
      zip) and listed in RECORD (what `pip uninstall` removes); no console
      script may claim the name davincirun. Prints one JSON object; exits 1
      when anything is wrong (the reasons in "errors").
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The pyconfig.h macros whose values differ between x86_64 and aarch64 builds
# of one CPython version (Debian's amd64 and arm64 libpython3.X-dev of
# bullseye 3.9, bookworm 3.11 and trixie 3.13 differ in these and no other):
# None means undefined. PY_SUPPORT_TIER exists from 3.11 on.
AARCH64_PYCONFIG = {
    "HAVE_GCC_ASM_FOR_X64": None,
    "HAVE_GCC_ASM_FOR_X87": None,
    "HAVE_USABLE_WCHAR_T": "1",
    "PY_SUPPORT_TIER": "2",
}
DEFINE = re.compile(r"^#define (\w+)(?: (.*))?$")
UNDEF = re.compile(r"^/\* #undef (\w+) \*/$")

# manylinux2014 (PEP 599): the libraries a wheel may need from the system,
# at symbol versions no newer than GLIBC_2.17.
ALLOWED_LIBRARIES = {
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}
MAX_GLIBC = (2, 17)
MACHINE = {"x86_64": "Advanced Micro Devices X86-64", "aarch64": "AArch64"}
POLICY = {arch: "manylinux_2_17_" + arch for arch in MACHINE}


def pyconfig_macros(path):
    """{name: value or None} of every #define / #undef line of a pyconfig.h."""
    macros = {}
    for line in Path(path).read_text().splitlines():
        m = DEFINE.match(line)
        if m:
            macros[m.group(1)] = m.group(2) or ""
            continue
        m = UNDEF.match(line)
        if m:
            macros[m.group(1)] = None
    return macros


def patch_pyconfig(text):
    """The x86_64 pyconfig.h text made aarch64's, and the macros changed."""
    lines = text.splitlines(keepends=True)
    seen = set()
    for i, line in enumerate(lines):
        m = DEFINE.match(line.rstrip("\n")) or UNDEF.match(line.rstrip("\n"))
        if not m or m.group(1) not in AARCH64_PYCONFIG:
            continue
        name = m.group(1)
        value = AARCH64_PYCONFIG[name]
        lines[i] = "/* #undef %s */\n" % name if value is None else "#define %s %s\n" % (name, value)
        seen.add(name)
    missing = set(AARCH64_PYCONFIG) - seen - {"PY_SUPPORT_TIER"}
    if missing:
        sys.exit("wheel_support: pyconfig.h has no line for %s" % ", ".join(sorted(missing)))
    return "".join(lines), sorted(seen)


def verify_against_debian(patched, amd64, arm64):
    """Debian amd64 and arm64 differ in exactly our macros; ours match arm64."""
    deb_x86, deb_arm, ours = pyconfig_macros(amd64), pyconfig_macros(arm64), pyconfig_macros(patched)
    differing = {k for k in set(deb_x86) | set(deb_arm) if deb_x86.get(k) != deb_arm.get(k)}
    unexpected = differing - set(AARCH64_PYCONFIG)
    if unexpected:
        sys.exit("wheel_support: Debian's amd64 and arm64 pyconfig.h also differ in %s: add them to AARCH64_PYCONFIG"
                 % ", ".join(sorted(unexpected)))
    for name in differing:
        if ours.get(name) != deb_arm.get(name):
            sys.exit("wheel_support: patched %s has %s=%r, Debian arm64 %r" % (patched, name, ours.get(name),
                                                                              deb_arm.get(name)))
    return sorted(differing)


def cmd_headers(args):
    src, dest = Path(args.src), Path(args.dest)
    tmp = dest.with_name(dest.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=False)
    pyconfig = tmp / "pyconfig.h"
    text, patched = patch_pyconfig(pyconfig.read_text())
    pyconfig.write_text(text)
    note = "pyconfig.h: %s set for aarch64" % ", ".join(patched)
    if args.debian_amd64:
        checked = verify_against_debian(pyconfig, args.debian_amd64, args.debian_arm64)
        note += "; checked against Debian's arm64 pyconfig.h (%s differ from amd64)" % ", ".join(checked)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    print(note)


def readelf(*args):
    return subprocess.run(["readelf", "-W"] + list(args), check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def check_elf(path, arch, errors):
    """Newest GLIBC version the ELF file needs; appends what is wrong."""
    name = path.name
    header = readelf("-h", str(path))
    if MACHINE[arch] not in header:
        errors.append("%s: not an %s ELF file" % (name, arch))
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", str(path))))
    for lib in sorted(needed - ALLOWED_LIBRARIES):
        errors.append("%s needs %s, outside manylinux2014" % (name, lib))
    newest = (0, 0)
    # The version-needs section: "Name: GLIBC_2.17  Flags: ..." under each file.
    for version in re.findall(r"Name: (\w+?)_([\d.]+)\s+Flags", readelf("-V", str(path))):
        prefix, number = version
        if prefix != "GLIBC":
            errors.append("%s needs %s_%s (only GLIBC symbol versions are allowed)" % (name, prefix, number))
            continue
        parts = tuple(int(p) for p in number.split("."))
        if parts > MAX_GLIBC:
            errors.append("%s needs GLIBC_%s, newer than 2.17" % (name, number))
        newest = max(newest, parts)
    return newest


def wheel_entries(wheel):
    """{name: Unix mode} of every entry, and the text of RECORD and entry_points.txt."""
    with zipfile.ZipFile(str(wheel)) as zf:
        modes = {info.filename: info.external_attr >> 16 for info in zf.infolist()}
        texts = {}
        for name in zf.namelist():
            if re.match(r"[^/]+\.dist-info/(RECORD|entry_points\.txt)$", name):
                texts[name.rsplit("/", 1)[1]] = zf.read(name).decode("utf-8")
    return modes, texts


def program_errors(entries, elves):
    """What is wrong with where the wheel puts its programs."""
    modes, texts = entries
    errors = []
    data = sorted({n.split("/", 1)[0] for n in modes if re.match(r"davincirunsdk-[^/]+\.data/", n)})
    if len(data) != 1:
        return ["expected one davincirunsdk-<version>.data directory, got %s" % data]
    record = {line.split(",", 1)[0] for line in texts.get("RECORD", "").splitlines()}
    for name in (data[0] + "/scripts/davincirun", data[0] + "/scripts/davincirun-supervisor",
                 "davincirunsdk/bin/davincirun-supervisor"):
        if name not in elves:
            errors.append("no ELF program %s" % name)
        elif modes[name] & 0o111 != 0o111:
            errors.append("%s is not executable (mode %o in the zip)" % (name, modes[name]))
        if name not in record:
            errors.append("RECORD does not list %s: pip uninstall would leave it" % name)
    if "davincirunsdk/bin/davincirun" in modes:
        errors.append("davincirunsdk/bin/davincirun: the command belongs in the scripts directory only")
    if re.search(r"^\s*davincirun\s*=", texts.get("entry_points.txt", ""), re.M):
        errors.append("entry_points.txt has a davincirun console script: it would clash with the program")
    return errors


def cmd_check(args):
    wheel, arch = Path(args.wheel), args.arch
    errors = []
    show = subprocess.run(["auditwheel", "show", str(wheel)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    m = re.search(r'consistent with the following platform tag:\s*"([^"]+)"', show.stdout)
    policy = m.group(1) if m else "?"
    if policy != POLICY[arch]:
        errors.append("auditwheel show: %s, expected %s: %s" % (policy, POLICY[arch], " ".join(show.stdout.split())))
    newest, elves = (0, 0), []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(str(wheel)) as zf:
        for info in zf.infolist():
            with zf.open(info) as f:
                if f.read(4) != b"\x7fELF":
                    continue
            path = Path(zf.extract(info, tmp))
            elves.append(info.filename)
            newest = max(newest, check_elf(path, arch, errors))
        names = zf.namelist()
    errors.extend(program_errors(wheel_entries(wheel), elves))
    modules = [n for n in elves if re.match(r"davincirunsdk/_core\.cpython-\d+m?-%s-linux-gnu\.so$" % arch, n)]
    if len(modules) != 1:
        errors.append("expected one module davincirunsdk/_core.cpython-3X-%s-linux-gnu.so, got %s" % (arch, modules))
    licenses = sorted(n.split("/licenses/", 1)[1] for n in names if "/licenses/" in n)
    for required in ("LICENSE", "third_party/fmt.txt", "third_party/nlohmann_json.txt", "third_party/libcxx.txt"):
        if required not in licenses:
            errors.append("no license file %s in the .dist-info" % required)
    print(json.dumps({"wheel": wheel.name, "policy": policy, "max_glibc": "%d.%d" % newest, "elf": elves,
                      "licenses": licenses, "errors": errors}))
    return 1 if errors else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("headers")
    p.add_argument("src")
    p.add_argument("dest")
    p.add_argument("--debian-amd64")
    p.add_argument("--debian-arm64")
    p = sub.add_parser("check")
    p.add_argument("wheel")
    p.add_argument("arch", choices=sorted(MACHINE))
    args = parser.parse_args()
    if args.command == "headers":
        return cmd_headers(args)
    if args.command == "check":
        return cmd_check(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
