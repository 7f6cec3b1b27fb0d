"""Open MPI's mpirun across test hosts (netns_support.py), without ssh: an
rsh agent script (plm_rsh_agent) runs the remote command inside the target
host's namespaces, as Host.argv() does for every host command. Debian 12's
openmpi-bin (4.1; scripts/setup.sh installs it).

    argv = mpirun_argv(network, tmp_path, ["node.sh", "-r", table, "--", ...])
    proc = network.hosts[0].popen(argv)      # mpirun runs on h1, like a login node
"""

import os
import shlex
import shutil

import pytest


def require_mpirun():
    if not shutil.which("mpirun"):
        pytest.skip("Open MPI is not installed: apt-get install openmpi-bin")


def rsh_agent(network, directory):
    """Writes the agent: `agent [options] <host> <command words...>`, where,
    as with ssh, the words are one shell command for the remote side."""
    cases = []
    for host in network.hosts:
        enter = " ".join(shlex.quote(word) for word in host.argv(["/bin/sh", "-c"]))
        cases.append('  %s) exec %s "$*" ;;' % (host.name, enter))
    path = os.path.join(str(directory), "rsh-agent.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                "# ssh's place for mpirun: run the command in the test host's namespaces.\n"
                'while [ "${1#-}" != "$1" ]; do shift; done  # options ssh would take\n'
                'host=$1; shift\n'
                'case "$host" in\n%s\n'
                '  *) echo "rsh-agent: no test host $host" >&2; exit 255 ;;\n'
                "esac\n" % "\n".join(cases))
    os.chmod(path, 0o755)
    return path


def mpirun_argv(network, directory, command, hosts=None):
    """mpirun starting `command` once per host of `hosts` (default: all),
    run as root, launching through rsh_agent()."""
    require_mpirun()
    hosts = hosts or network.hosts
    hostfile = os.path.join(str(directory), "hostfile")
    with open(hostfile, "w") as f:
        for host in hosts:
            f.write("%s slots=1\n" % host.name)
    return [
        "mpirun", "--allow-run-as-root", "--hostfile", hostfile, "--map-by", "ppr:1:node",
        "--mca", "plm_rsh_agent", rsh_agent(network, directory),
        # The daemons talk over the bridge, not a loopback of their own.
        "--mca", "oob_tcp_if_include", "eth0", "--mca", "btl_tcp_if_include", "eth0",
        *command,
    ]
