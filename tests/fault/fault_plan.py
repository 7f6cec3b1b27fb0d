"""The plan of a randomized fault-injection rep (fault_driver.py): the
servers of the job and its ranks on each, each rank's behaviour
(chaos_rank.cpp), the rep's ending and the server it happens on, the state
of the life cycle the ending is sent in (DAVINCIRUN_TEST_HOLD), and the
rank table the rep starts from.
"""

import json
import random
import signal

ENDINGS = ("success", "rank_failure", "interrupt", "terminate", "timeout", "caller_kill")
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT)

# Servers on this machine's loopback (the whole 127/8 is local): server i is 127.0.0.(i+1).
SERVER_SHARES = ((1, 0.6), (2, 0.25), (3, 0.15))

# The states a rep may hold its job in (docs/architecture.md, "The life
# cycle"), each with the endings that can be sent there. Starting takes any
# (kept until the ranks run); killing needs a stop first (the ending) and
# takes a second event there; draining and waiting_for_servers come after
# every rank of the server ended on its own, so they take a stop only.
HOLD_ENDINGS = {
    "starting": ENDINGS,
    "killing": ("rank_failure", "interrupt", "terminate", "timeout"),
    "draining": ("interrupt", "terminate", "timeout", "caller_kill"),
    "waiting_for_servers": ("interrupt", "terminate", "timeout", "caller_kill"),
}
HOLD_SHARE = 0.5  # of the reps whose ending some state takes
# Starting takes every ending and waiting_for_servers only jobs of several
# servers: weights that draw the states about as often as each other.
HOLD_WEIGHTS = {"starting": 1, "killing": 1.5, "draining": 1.5, "waiting_for_servers": 4}
# How long each state is held (ms). A stop ends starting, draining and
# waiting_for_servers early; killing and a job timeout sit out the hold.
HOLD_MS = {"starting": (500, 800), "killing": (600, 900), "draining": (2000, 2000),
           "waiting_for_servers": (2000, 2000)}
# A job timeout that fires once every rank of the server ended on its own,
# while the server is held in draining (or waits for the others): well
# after the ranks' 300 ms, well before the 2 s hold (from their end) is over.
LATE_TIMEOUT = (1.2, 1.6)


class RankPlan:
    """What one rank does; `line()` is its line in chaos_rank's plan file."""

    def __init__(self, kind, action, t_ms, code=0, sig=0, ignore_term=False, after_rank=-1):
        self.kind = kind  # exit0, exit0_early, exit_n, crash, hang, ignore_term, after_failure
        self.action = action  # exit, crash, hang
        self.t_ms = t_ms
        self.code = code
        self.sig = sig
        self.ignore_term = ignore_term
        self.after_rank = after_rank
        self.pace_ms = 0
        self.flood = False
        self.daemon = 0  # 1: a setsid() daemon on /dev/null; 2: one holding the output pipe
        self.close_after = -1

    def line(self):
        return "%s %d %d %d %d %d %d %d %d %d" % (
            self.action, self.t_ms, self.pace_ms, int(self.flood), self.daemon, self.close_after, self.code,
            self.sig, int(self.ignore_term), self.after_rank)

    def own_code(self):
        """The shell code the rank ends with by itself, None if it never ends by itself."""
        if self.action == "exit":
            return self.code
        if self.action == "crash":
            return 128 + self.sig
        return None


class Server:
    """One server of the job: its id and its ranks first..first+count-1 (its devices 0..count-1)."""

    def __init__(self, index, first, count):
        self.index = index
        self.server_id = "127.0.0.%d" % (index + 1)
        self.first = first
        self.count = count

    def ranks(self):
        return range(self.first, self.first + self.count)


class RepPlan:
    def __init__(self, seed, max_ranks=64):
        rng = random.Random(seed)
        self.seed = seed
        self.ranks = rng.randint(8, max(8, max_ranks))
        self.ending = rng.choice(ENDINGS)
        self.caller = rng.choice(("python", "cli"))
        self.output_notebook = rng.random() < 0.5
        self.grace = round(rng.uniform(0.2, 0.5), 3)
        self.delay = round(rng.uniform(0.0, 0.3), 3)  # from "every rank runs" (or the state) to the action
        self.servers = self._servers(rng)
        if len(self.servers) > 1:
            self.caller = "cli"  # one `davincirun --server-id` per server, as on separate machines
        held = [s for s, endings in sorted(HOLD_ENDINGS.items())
                if self.ending in endings and (s != "waiting_for_servers" or len(self.servers) > 1)]
        self.hold = None
        if held and rng.random() < HOLD_SHARE:
            self.hold = rng.choices(held, [HOLD_WEIGHTS[s] for s in held])[0]
        self.hold_ms = rng.randint(*HOLD_MS[self.hold]) if self.hold else 0
        if self.hold == "starting":
            self.delay = min(self.delay, 0.1)  # the stop comes while starting is held
        # The server the ending happens on: any, but the one that waits for
        # the others is rank 0's (the hub).
        self.origin = 0 if self.hold == "waiting_for_servers" else rng.randrange(len(self.servers))
        # The event sent while held in killing, after the ending's stop.
        self.second = None
        if self.hold == "killing":
            self.second = rng.choice(("interrupt", "terminate", "caller_kill") if self.caller == "cli"
                                     else ("interrupt", "caller_kill"))
        self.job_timeout = None
        if self.ending == "timeout":
            late = self.hold in ("draining", "waiting_for_servers")
            self.job_timeout = round(rng.uniform(*LATE_TIMEOUT) if late else rng.uniform(0.05, 0.5), 3)
        self.primary = None
        self.behaviours = [None] * self.ranks
        for server in self.servers:
            for r in server.ranks():
                self.behaviours[r] = self._decorate(rng, self._behaviour(rng, server.index == self.origin))
        self._place_ending(rng)
        self.start_order = rng.sample(range(len(self.servers)), len(self.servers))  # the hub first or later

    def _servers(self, rng):
        x, count = rng.random(), 1
        for n, share in SERVER_SHARES:
            x -= share
            if x < 0:
                count = n
                break
        sizes = [2] * count  # each server at least two ranks: one to fail or to hang, one more
        for _ in range(self.ranks - 2 * count):
            sizes[rng.randrange(count)] += 1
        servers, first = [], 0
        for i, size in enumerate(sizes):
            servers.append(Server(i, first, size))
            first += size
        return servers

    def server_of(self, rank):
        for s in self.servers:
            if s.first <= rank < s.first + s.count:
                return s
        raise ValueError("rank %d is on no server" % rank)

    def ends_on_its_own(self, server):
        """Whether every rank of `server` ends by itself before the ending comes:
        every rank of the job on success, the origin's when it is held after them."""
        return self.ending == "success" or (
            server.index == self.origin and self.hold in ("draining", "waiting_for_servers"))

    def _behaviour(self, rng, origin):
        t = rng.randint(0, 300)
        if self.ending == "success" or (origin and self.hold in ("draining", "waiting_for_servers")):
            return RankPlan("exit0", "exit", t)
        if self.ending != "rank_failure" or not origin:
            # No rank fails here: a failure on another server (or a stop) stops these.
            kind = rng.choice(("exit0", "hang", "ignore_term"))
            return RankPlan(kind, "exit" if kind == "exit0" else "hang", t, ignore_term=kind == "ignore_term")
        kinds = ("exit0_early", "exit0", "hang", "ignore_term", "after_failure")
        if self.hold == "starting":
            # Exits during the hold are read together when it ends, with
            # sigchld tracking in start order: a rank failing after the
            # first one could be read first.
            kinds = kinds[:-1]
        kind = rng.choice(kinds)
        if kind == "exit0_early":
            return RankPlan(kind, "exit", rng.randint(0, 30))
        if kind == "exit0":
            return RankPlan(kind, "exit", t)
        if kind in ("hang", "ignore_term"):
            return RankPlan(kind, "hang", t, ignore_term=kind == "ignore_term")
        if rng.random() < 0.5:  # fails too, once the first failure has really happened
            return RankPlan(kind, "exit", rng.randint(0, 50), code=rng.randint(1, 120))
        return RankPlan(kind, "crash", rng.randint(0, 50), sig=int(rng.choice(CRASH_SIGNALS)))

    def _place_ending(self, rng):
        origin = self.servers[self.origin]
        if self.ending == "rank_failure":
            self.primary = origin.first + rng.randrange(origin.count)
            if rng.random() < 0.5:
                p = RankPlan("exit_n", "exit", rng.randint(0, 300), code=rng.randint(1, 120))
            else:
                p = RankPlan("crash", "crash", rng.randint(0, 300), sig=int(rng.choice(CRASH_SIGNALS)))
            self.behaviours[self.primary] = self._decorate(rng, p)
            for b in self.behaviours:
                if b.kind == "after_failure":
                    b.after_rank = self.primary
        if self.ending == "success":
            return
        # Something must still run when the stop comes: on every server but
        # an origin held after its ranks ended, a rank that never ends by
        # itself (on a server whose ranks had all ended, the stop would find
        # it done, or waiting for the others). Held in killing, the origin
        # has a rank that ignores SIGTERM, so that its stop gets there.
        for server in self.servers:
            if self.ends_on_its_own(server):
                continue
            want_kill = server.index == self.origin and self.hold == "killing"
            ok = [r for r in server.ranks() if r != self.primary and self.behaviours[r].action == "hang"
                  and (self.behaviours[r].ignore_term or not want_kill)]
            if not ok:
                r = rng.choice([r for r in server.ranks() if r != self.primary])
                kind = "ignore_term" if want_kill else "hang"
                self.behaviours[r] = self._decorate(
                    rng, RankPlan(kind, "hang", rng.randint(0, 300), ignore_term=want_kill))

    @staticmethod
    def _decorate(rng, b):
        b.pace_ms = rng.choice((0, 1, 5, 10, 20))
        b.flood = rng.random() < 0.05
        x = rng.random()
        b.daemon = 1 if x < 0.08 else 2 if x < 0.16 else 0
        if rng.random() < 0.1:
            b.close_after = rng.randint(0, 4000)
        return b

    def plan_text(self):
        return "%d\n%s\n" % (self.ranks, "\n".join(b.line() for b in self.behaviours))

    def describe(self):
        """One line: what the rep is, for a failure's report."""
        where = ""
        if len(self.servers) > 1:
            where = ", %d servers (%s), origin %s" % (
                len(self.servers), "+".join(str(s.count) for s in self.servers),
                self.servers[self.origin].server_id)
        return "%d ranks%s, ending %s%s%s, caller %s, grace %.3f s%s" % (
            self.ranks, where, self.ending, " held in %s %d ms" % (self.hold, self.hold_ms) if self.hold else "",
            ", then %s" % self.second if self.second else "", self.caller, self.grace,
            ", job_timeout %.3f s" % self.job_timeout if self.job_timeout else "")


def write_rank_table(path, plan):
    """The rep's table: format 1.0, each server's devices 0..n-1 holding its
    ranks in order; a device_ip on every device when there are several
    servers (required then), in 10.<seed>.x.x so that reps differ in JOB_ID
    and ports."""
    multi = len(plan.servers) > 1
    server_list = []
    for s in plan.servers:
        devices = []
        for d, r in enumerate(s.ranks()):
            device = {"device_id": str(d), "rank_id": str(r)}
            if multi:
                device["device_ip"] = "10.%d.%d.%d" % (plan.seed % 250, s.index + 1, d + 1)
            devices.append(device)
        server_list.append({"server_id": s.server_id, "device": devices})
    table = {"version": "1.0", "server_count": str(len(plan.servers)), "server_list": server_list,
             "status": "completed"}
    with open(path, "w") as f:
        json.dump(table, f)
