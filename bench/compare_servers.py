"""compare.py's "servers" measure: one job of N servers on this machine,
one small Python rank each, the last server's rank failing 1 s after every
rank runs. davincirun: N `davincirun --server-id` joined by the peer
channel (many_servers.py); torchrun: N agents of one c10d rendezvous;
mpirun: an `orted` per node (many_servers_peers.py). Rows: the time until
every rank runs, from the failure until every other rank is gone and until
every launcher process has exited, and the processes left at the cap
(--cap; torchrun's other ranks never stop, see many_servers_peers.py)."""

import tempfile

import many_servers
import many_servers_peers

FAIL_AFTER = 1.0


def _rows(b, n):
    head = "%d servers, one rank each, the last fails" % n
    return (b.row("servers-%d-up" % n, head + ": all up", "s"),
            b.row("servers-%d-gone" % n, head + ": others gone after it", "s"),
            b.row("servers-%d-exit" % n, head + ": launchers gone", "s"),
            b.row("servers-%d-left" % n, head + ": processes left", "", kind="count"))


def _record_davincirun(b, rows, n, peer):
    with tempfile.TemporaryDirectory(dir=b.tmp) as tmp:
        out, gone, stop, codes, left = many_servers.run(n, "fail", FAIL_AFTER, 1.0, 30.0, tmp,
                                                        davincirun=b.peers[peer].path)
    up, gone_row, exit_row, left_row = rows
    b.record(up, peer, value=out["up"], text=None if out["up"] is not None else "not all up")
    b.record(gone_row, peer, value=gone)
    b.record(exit_row, peer, value=stop)
    b.record(left_row, peer, value=left)


def _record_peer(b, rows, n, peer):
    cap = b.args.cap
    with tempfile.TemporaryDirectory(dir=b.tmp) as tmp:
        up, gone, agents_gone, _, _, left = many_servers_peers.run(peer, b.peers[peer].path, n, FAIL_AFTER, cap,
                                                                   tmp, b.tag(), base_env=b.env)
    up_row, gone_row, exit_row, left_row = rows
    never = "never (> %g s)" % cap
    b.record(up_row, peer, value=up, text=None if up is not None else "not all up")
    b.record(gone_row, peer, value=gone, text=None if gone is not None else never)
    b.record(exit_row, peer, value=agents_gone, text=None if agents_gone is not None else never)
    b.record(left_row, peer, value=left)


def measure_servers(b):
    b.check_load("servers")
    for n in b.args.servers:
        rows = _rows(b, n)
        for peer in b.usable(["dvr", "mpirun", "torchrun"]):
            if peer == "dvr":
                _record_davincirun(b, rows, n, peer)
            else:
                _record_peer(b, rows, n, peer)
