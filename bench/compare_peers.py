"""Every launcher bench/compare.py compares, and how each is invoked.

BUILDERS is the one place that says how each peer starts `n` ranks of a
command: build(peer, run) returns the argv, the environment it adds, and
where each rank's log is afterwards. discover() finds each peer on this
machine or says why it is skipped.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections import namedtuple

from _common import free_port, installed_copy

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# key, column title; the order of the table's columns.
PEERS = [
    ("bash", "bash loop"),
    ("bash-cat", "bash |cat"),
    ("bash-tee", "bash |tee"),
    ("dvr-path", "dvr (PATH)"),
    ("dvr", "davincirun"),
    ("api", "API (proc)"),
    ("api-call", "API/call"),
    ("v015", "0.1.5"),
    ("mpirun", "mpirun"),
    ("torchrun", "torchrun"),
    ("msrun", "msrun"),
]
TITLES = dict(PEERS)
DAVINCIRUN = ("dvr-path", "dvr", "api", "api-call")
FLOORS = ("bash", "bash-cat", "bash-tee")
LAUNCHERS = ("v015", "mpirun", "torchrun", "msrun")  # what davincirun should be ahead of

# One run of a peer: `rank_argv` is the command every rank runs, `dir` a
# fresh directory (the launcher's working directory), `log_dir` inside it.
Run = namedtuple("Run", "n rank_argv dir log_dir table")
# argv, the variables added to the environment, logs(): rank r's log path or
# None, strip: what the peer adds to its logs (mpirun's tags, before each
# chunk it reads, so also inside lines written in two writes).
Launch = namedtuple("Launch", "argv env logs strip")

# Each rank's output to its own file, as a shell script would do it.
_LOOP = 'n=$1; d=$2; shift 2; for ((i = 0; i < n; i++)); do RANK_ID=$i "$@" %s & done; wait'
BASH = _LOOP % '> "$d/rank_$i.log" 2>&1'
BASH_CAT = _LOOP % '2>&1 | cat > "$d/rank_$i.log"'  # one extra copy of each byte
BASH_TEE = _LOOP % '2>&1 | tee "$d/rank_$i.log"'  # two copies: the log and the console

# The Python API of davincirunsdk (new or 0.1.5), in a `python -c` process;
# the first failed rank's code becomes the exit status (raise_exception=False).
API = ("import json, sys\nfrom davincirunsdk import start_and_wait_distributed_train as run\n"
       "sys.exit(run(json.loads(sys.argv[1]), log_dir=sys.argv[2], rank_table=sys.argv[3], raise_exception=False))")
# 0.1.5 reads RANK_TABLE_FILE; random_cache_dir=False, or it creates /cache/<uuid> on this machine.
API_015 = ("import json, sys\nfrom davincirunsdk import start_and_wait_distributed_train as run\n"
           "sys.exit(run(json.loads(sys.argv[1]), log_dir=sys.argv[2], random_cache_dir=False, "
           "raise_exception=False))")
# The API inside a running interpreter: the import once, then `k` calls, each timed.
API_CALLS = ("import json, sys, time\nfrom davincirunsdk import start_and_wait_distributed_train as run\n"
             "argv, log_dir, table, k, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), "
             "sys.argv[5]\ntimes = []\nfor _ in range(k):\n    t = time.perf_counter()\n"
             "    run(argv, log_dir=log_dir, rank_table=table)\n    times.append(time.perf_counter() - t)\n"
             "open(out, 'w').write(json.dumps(times))")


def _logs_at(pattern):
    """logs() for a peer whose log file names hold a run id: the first match."""
    def logs(r):
        found = sorted(glob.glob(pattern.format(r=r)))
        return found[0] if found else None
    return logs


def _davincirun(path, run):
    return Launch([path, "-r", run.table, "-l", run.log_dir, "--"] + run.rank_argv, {},
                  lambda r: os.path.join(run.log_dir, "latest", "rank_%d.device_%d.log" % (r, r)), None)


def _v015(peer, run):
    job = "bench015-%s" % os.path.basename(run.dir)
    # 0.1.5 also writes every log to /tmp/logdir/<JOB_ID>-proc-rank-*.txt (fixed):
    # BATCH_JOB_ID names them, so that cleanup_v015() removes exactly those.
    env = {"RANK_TABLE_FILE": run.table, "BATCH_JOB_ID": job,
           "ASCEND_PROCESS_LOG_PATH": os.path.join(run.dir, "ascend")}
    name = os.path.join(run.log_dir, job + "-proc-rank-%d-device-%d.txt")
    argv = [peer.path, "-c", API_015, json.dumps(run.rank_argv), run.log_dir]
    return Launch(argv, env, lambda r: name % (r, r), None)


def _msrun(peer, run):
    # msrun runs `python3 ARGS` (it puts `python` before anything else) from
    # PATH: a python3 in a directory of the run, linked to the ranks' program.
    bindir = os.path.join(run.dir, "msrun-bin")
    os.makedirs(bindir, exist_ok=True)
    os.symlink(run.rank_argv[0], os.path.join(bindir, "python3"))
    argv = [peer.path, "--worker_num", str(run.n), "--local_worker_num", str(run.n), "--master_port",
            str(free_port()), "--log_dir", run.log_dir, "--join", "True", "python3"] + run.rank_argv[1:]
    return Launch(argv, {"PATH": bindir + os.pathsep + os.environ.get("PATH", "")},
                  lambda r: os.path.join(run.log_dir, "worker_%d.log" % r), None)


BUILDERS = {
    "bash": lambda peer, run: Launch(["bash", "-c", BASH, "bash", str(run.n), run.log_dir] + run.rank_argv, {},
                                     lambda r: os.path.join(run.log_dir, "rank_%d.log" % r), None),
    "bash-cat": lambda peer, run: Launch(["bash", "-c", BASH_CAT, "bash", str(run.n), run.log_dir] + run.rank_argv,
                                         {}, lambda r: os.path.join(run.log_dir, "rank_%d.log" % r), None),
    "bash-tee": lambda peer, run: Launch(["bash", "-c", BASH_TEE, "bash", str(run.n), run.log_dir] + run.rank_argv,
                                         {}, lambda r: os.path.join(run.log_dir, "rank_%d.log" % r), None),
    "dvr-path": lambda peer, run: _davincirun(peer.path, run),
    "dvr": lambda peer, run: _davincirun(peer.path, run),
    "api": lambda peer, run: Launch([sys.executable, "-c", API, json.dumps(run.rank_argv), run.log_dir, run.table],
                                    {}, lambda r: os.path.join(run.log_dir, "latest", "rank_%d.device_%d.log" % (r, r)),
                                    None),
    "v015": _v015,
    "mpirun": lambda peer, run: Launch(
        [peer.path, "--allow-run-as-root", "--oversubscribe", "-np", str(run.n), "--output-filename", run.log_dir,
         "--merge-stderr-to-stdout", "--tag-output"] + run.rank_argv, {},
        _logs_at(os.path.join(run.log_dir, "*", "rank.{r}", "stdout")), re.compile(rb"\[\d+,\d+\]<std\w+>:")),
    "torchrun": lambda peer, run: Launch(
        [peer.path, "--standalone", "--nproc-per-node", str(run.n), "--tee", "3", "--log-dir", run.log_dir,
         "--no-python"] + run.rank_argv, {}, _logs_at(os.path.join(run.log_dir, "*", "attempt_0", "{r}", "stdout.log")),
        None),
    "msrun": _msrun,
}


def build(peer, run):
    return BUILDERS[peer.key](peer, run)


def cleanup_v015(run_dir):
    job = "bench015-%s" % os.path.basename(run_dir)
    for path in glob.glob("/tmp/logdir/%s-proc-rank-*.txt" % job):
        os.unlink(path)


class Peer:
    def __init__(self, key, path=None, info="", reason=None, notes=()):
        self.key, self.title, self.path, self.info, self.reason = key, TITLES[key], path, info, reason
        self.notes = list(notes)

    @property
    def available(self):
        return self.reason is None


def file_kind(path):
    """'an ELF program' or 'a script (#!...)'."""
    with open(path, "rb") as f:
        head = f.read(256)
    if head.startswith(b"\x7fELF"):
        return "an ELF program"
    if head.startswith(b"#!"):
        with open(path, "rb") as f:
            found = re.search(rb"^from ([\w.]+) import", f.read(4096), re.M)
        runs = ", running %s" % found.group(1).decode() if found else ""
        return "a script (%s%s)" % (head.split(b"\n")[0].decode(errors="replace"), runs)
    return "an unknown kind of file"


def _dist_version(name, python=sys.executable):
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version(%r))" % name],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _main_checkout():
    """The main worktree of this repository (build/ is per worktree)."""
    try:
        common = subprocess.run(["git", "-C", REPO, "rev-parse", "--path-format=absolute", "--git-common-dir"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        return os.path.dirname(common) if common else None
    except (OSError, subprocess.SubprocessError):
        return None


def ensure_v015(venv, log):
    """The Python of a virtual environment holding davincirunsdk 0.1.5, made
    once (pip, from PyPI) and reused. 0.1.5 imports tornado without
    declaring it: it is installed beside it."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", "import davincirunsdk, importlib.metadata as m; print(m.version('davincirunsdk'))"]
    if os.access(python, os.X_OK) and subprocess.run(check, capture_output=True, text=True).stdout.strip() == "0.1.5":
        return python, "reused"
    log("making %s (davincirunsdk==0.1.5 from PyPI)..." % venv)
    for argv in ([sys.executable, "-m", "venv", "--clear", venv],
                 [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "davincirunsdk==0.1.5",
                  "tornado"]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip() and "WARNING" not in line]
            raise RuntimeError("%s failed: %s" % (" ".join(argv[:4]), lines[-1] if lines else done.returncode))
    if subprocess.run(check, capture_output=True, text=True).stdout.strip() != "0.1.5":
        raise RuntimeError("davincirunsdk 0.1.5 does not import in %s" % venv)
    return python, "made now"


def discover(args, log):
    """{key: Peer} for every column, available or with the reason it is not;
    peers left out by --peers are not looked for (no 0.1.5 venv is made)."""
    wanted = set(args.peers.split(",")) | {"bash"} if args.peers else set(TITLES)
    peers = _discover(args, log, wanted)
    for key in TITLES:
        if key not in wanted:
            peers[key] = Peer(key, reason="not in --peers")
    return peers


def _discover(args, log, wanted):
    peers = {key: Peer(key, info="") for key in ("bash", "bash-cat", "bash-tee")}
    bash = shutil.which("bash")
    for key in peers:
        peers[key].path, peers[key].info = bash, "%s (plus cat/tee)" % bash if key != "bash" else bash

    scripts = sysconfig.get_path("scripts")
    path = os.path.join(scripts, "davincirun")
    if os.access(path, os.X_OK):
        real = os.path.realpath(path)
        peers["dvr-path"] = Peer("dvr-path", real, "%s: %s" % (real, file_kind(real)))
    else:
        peers["dvr-path"] = Peer("dvr-path", reason="no davincirun in %s (pip install . first)" % scripts)

    try:
        import davincirunsdk

        package = os.path.dirname(os.path.abspath(davincirunsdk.__file__))
        version = _dist_version("davincirunsdk") or "?"
    except ImportError as e:
        package, version = None, None
        peers["api"] = Peer("api", reason="davincirunsdk does not import: %s" % e)
        peers["api-call"] = Peer("api-call", reason=peers["api"].reason)
    native = args.davincirun or (package and os.path.join(package, "bin", "davincirun"))
    if native and os.access(native, os.X_OK):
        # Measured as installed: a copy (installed_copy() says why).
        peers["dvr"] = Peer("dvr", installed_copy(native),
                            "%s, copied as pip installs it: %s" % (os.path.abspath(native), file_kind(native)))
    elif package and not args.davincirun:
        # Since 0.2 the wheel installs the program itself into the scripts
        # directory: the "dvr (PATH)" column is the native program.
        peers["dvr"] = Peer("dvr", reason="the package holds no second copy: dvr (PATH) is the native program")
    else:
        peers["dvr"] = Peer("dvr", reason="no native davincirun (%s)" % (native or "package not installed"))
    if package:
        info = "davincirunsdk %s from %s (python %s)" % (version, package, sys.executable)
        peers["api"] = Peer("api", sys.executable, info)
        peers["api-call"] = Peer("api-call", sys.executable, info + "; import once, then timed calls")

    venv = args.venv_dir or os.path.join(REPO, "build", "bench-venvs", "davincirunsdk-0.1.5")
    try:
        if "v015" in wanted:
            python, how = ensure_v015(venv, log)
            peers["v015"] = Peer("v015", python, "davincirunsdk 0.1.5 in %s (%s)" % (venv, how))
    except (OSError, RuntimeError) as e:
        peers["v015"] = Peer("v015", reason="no davincirunsdk 0.1.5 venv: %s" % e)

    mpirun = shutil.which("mpirun")
    if mpirun:
        first = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        peers["mpirun"] = Peer("mpirun", mpirun, "%s: %s" % (mpirun, first.strip()))
    else:
        peers["mpirun"] = Peer("mpirun", reason="no mpirun on PATH (apt-get install openmpi-bin)")

    torchrun = os.path.join(scripts, "torchrun")
    torch = _dist_version("torch") if "torchrun" in wanted else None
    if os.access(torchrun, os.X_OK) and torch:
        peers["torchrun"] = Peer("torchrun", torchrun, "%s: %s, torch %s" % (torchrun, file_kind(torchrun), torch))
    else:
        peers["torchrun"] = Peer("torchrun", reason="no torchrun/torch in %s" % scripts)

    candidates = [args.msrun] if args.msrun else [
        os.path.join(root, "build", "mindspore-env", "bin", "msrun") for root in (REPO, _main_checkout()) if root]
    msrun = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
    if msrun:
        python = os.path.join(os.path.dirname(msrun), "python")
        peers["msrun"] = Peer("msrun", msrun, "%s: MindSpore %s" % (msrun, _dist_version("mindspore", python) or "?"))
    else:
        peers["msrun"] = Peer("msrun", reason="no MindSpore environment (bash scripts/mindspore_env.sh makes "
                                              "build/mindspore-env); looked at %s" % ", ".join(candidates))
    return peers
