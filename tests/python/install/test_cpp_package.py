"""C++ consumers: `cmake --install` gives a package that find_package(davincirun)
finds, and a small program links davincirun::davincirun and runs; the
`davincirun` command it installs runs a job too."""

import os
import shutil
import subprocess

import pytest
from conftest import REPO

CMAKE = shutil.which("cmake")
# Builds the library and a consumer (about a minute): -m "not slow" leaves it out.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CMAKE is None, reason="cmake is not installed")]


def run(args, **kwargs):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900, **kwargs)


def test_installed_package_builds_a_consumer(tmp_path, rank_table, job_env):
    build = os.path.join(REPO, "build", "tests")  # made by scripts/test.sh; reused to save a compile
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        build = str(tmp_path / "build")
        run([CMAKE, "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release"])
        run([CMAKE, "--build", build, "-j", "2"])
    prefix = tmp_path / "prefix"
    run([CMAKE, "--install", build, "--prefix", str(prefix)])
    assert (prefix / "include" / "davincirun" / "davincirun.hpp").is_file()

    consumer = tmp_path / "consumer"
    run([CMAKE, "-S", os.path.join(REPO, "tests", "consumer"), "-B", str(consumer),
         "-DCMAKE_PREFIX_PATH=" + str(prefix)])
    run([CMAKE, "--build", str(consumer)])
    assert (prefix / "libexec" / "davincirun" / "davincirun-supervisor").is_file()
    env = dict(os.environ, **job_env)
    env.pop("DAVINCIRUN_SUPERVISOR", None)
    env.pop("OMP_NUM_THREADS", None)
    out = run([str(consumer / "consumer"), rank_table(3), str(tmp_path / "log"), "sh", "-c", "echo hi $RANK_ID"],
              env=env).stdout.splitlines()
    assert out[:4] == ["world size 3", "rank 0 device 0", "rank 1 device 1", "rank 2 device 2"]
    # The launcher's notices (here: the OMP_NUM_THREADS default it chose) reach the consumer's console too.
    notices = [line for line in out[4:-1] if line.startswith("[davincirun] ")]
    assert [n.split(" for each rank")[0] for n in notices] == ["[davincirun] OMP_NUM_THREADS=1"]
    ranks = sorted(line for line in out[4:-1] if line not in notices)
    assert ranks == ["[rank 0] hi 0", "[rank 1] hi 1", "[rank 2] hi 2"]
    assert out[-1] == "exit code 0"

    # The command: <prefix>/bin/davincirun, a program that finds its
    # supervisor in <prefix>/libexec/davincirun.
    davincirun = prefix / "bin" / "davincirun"
    assert davincirun.read_bytes()[:4] == b"\x7fELF"
    out = run([str(davincirun), "-r", rank_table(2), "-l", str(tmp_path / "cli-log"), "sh", "-c", "echo hi $RANK_ID"],
              env=env).stdout
    assert "[rank 0] hi 0" in out and "[rank 1] hi 1" in out, out
