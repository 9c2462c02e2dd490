"""Traffic patterns on a ``Network``: flows, incast, permutation, all-to-all, collectives.

Each builder adds the connections it needs and posts its RDMA WRITEs, and returns a
``Job`` that knows when each of its ranks finished. A collective is made only of
writes: in a ring all-reduce rank r writes a 1/N chunk to rank r+1 at every step and
starts step k+1 once it has received step k from rank r-1; reduce-scatter and
all-gather take N-1 steps each. A rank finishes when it has received its last chunk and
its own last write is acknowledged; the job completion time is the slowest rank's.
Background flows repeat their write until the run ends and are not waited for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from mrc_host.core import Mode

from .network import START_NS, Connection, FlowSpec, Network, Write

PATTERNS = ("flow", "incast", "permutation", "all-to-all", "ring-allreduce", "all-gather", "background")


@dataclass
class Job:
    """A group of writes with one completion time: a flow, an incast, a collective."""

    name: str
    pattern: str
    start_ns: int  # relative to the start of the run
    background: bool = False
    connections: list[Connection] = field(default_factory=list)
    rank_done_ns: dict[int, int | None] = field(default_factory=dict)  # absolute times

    @property
    def done(self) -> bool:
        return bool(self.rank_done_ns) and all(t is not None for t in self.rank_done_ns.values())

    @property
    def completion_ns(self) -> int | None:
        """Job completion time: from its start to its slowest rank's finish."""
        if not self.done:
            return None
        return max(t for t in self.rank_done_ns.values() if t is not None) - START_NS - self.start_ns


def _flow(net: Network, base: FlowSpec, name: str, src: int, dst: int, payload: int) -> Connection:
    return net.add_flow(replace(base, name=name, src=src, dst=dst), payload)


def point_to_point(
    net: Network,
    job: Job,
    base: FlowSpec,
    pairs: list[tuple[int, int]],
    size: int,
    writes: int = 1,
    qps: int = 1,
    stagger_ns: int = 0,
) -> Job:
    """Per (src, dst) pair ``qps`` connections, each ``writes`` back-to-back writes of ``size / qps``
    (rounded up); pair k posts ``k * stagger_ns`` after the job's start (staggered starts).
    Single-path queue pairs of one pair go out on the planes in turn, each on a seeded random
    T1, as a RoCE host binds its queue pairs to its NIC ports (a multipath connection spreads
    itself).

    A rank is a pair (index in ``pairs``): done when the last write of its last connection is done.
    """
    part = max(1, -(-size // qps))
    spread = qps > 1 and base.mode is Mode.SINGLE_PATH and base.pin_path is None
    shape = net.shape
    rng = random.Random(net.seed * 1_000_003 + len(net.connections))
    for i, (src, dst) in enumerate(pairs):
        job.rank_done_ns[i] = None
        left = [writes * qps]

        def finished(w: Write, rank: int = i, left: list[int] = left) -> None:
            if w.done:
                left[0] -= 1
                if left[0] == 0:
                    job.rank_done_ns[rank] = net.loop.now

        for q in range(qps):
            name = f"{job.name}/{src}->{dst}" if len(pairs) > 1 else job.name
            spec = base
            if spread:
                t1s = 1 if shape.t0_of(src) == shape.t0_of(dst) else shape.t1
                spec = replace(base, pin_path=(q % shape.planes, rng.randrange(t1s)))
            conn = _flow(net, spec, f"{name}q{q}" if qps > 1 else name, src, dst, part)
            job.connections.append(conn)
            for _ in range(writes):
                net.post(conn, part, job.start_ns + i * stagger_ns, on_received=finished, on_sent=finished)
    return job


def background(net: Network, job: Job, base: FlowSpec, pairs: list[tuple[int, int]], size: int) -> Job:
    """Flows that post a new write whenever the last one is acknowledged, until the run ends."""
    job.background = True
    for src, dst in pairs:
        conn = _flow(net, base, f"{job.name}/{src}->{dst}", src, dst, size)
        job.connections.append(conn)

        def again(w: Write, conn: Connection = conn) -> None:
            net.post(conn, size, counted=False, on_sent=again)

        net.post(conn, size, job.start_ns, counted=False, on_sent=again)
    return job


def permutation_pairs(hosts: list[int], rng: random.Random) -> list[tuple[int, int]]:
    """A random derangement: every host sends to exactly one other and receives from one."""
    if len(hosts) < 2:
        raise ValueError("a permutation needs at least two hosts")
    while True:
        dst = hosts[:]
        rng.shuffle(dst)
        if all(a != b for a, b in zip(hosts, dst, strict=True)):
            return list(zip(hosts, dst, strict=True))


ALL_TO_ALL_ORDERS = ("shifted", "ascending")


def all_to_all_pairs(hosts: list[int], ascending: bool = False) -> list[tuple[int, int]]:
    """Every host to every other, each host's peers in turn from the next one on (host i's k-th
    write goes to host i + k, as collective libraries schedule an all-to-all). Each NIC port
    serves its queue pairs a packet each in turn, in the order their writes were posted: in
    ascending order (``ascending``, kept to study it) every host serves the same peer at the same
    moment, a 31-to-1 incast that moves from receiver to receiver (last-hop queues to 199 KiB,
    8 planes x 32 hosts), and the first packets on some planes come back 2-3 x later than on
    the first, taken for lost."""
    if ascending:
        return [(a, b) for a in hosts for b in hosts if a != b]
    n = len(hosts)
    return [(hosts[i], hosts[(i + k) % n]) for i in range(n) for k in range(1, n)]


def ring(
    net: Network,
    job: Job,
    base: FlowSpec,
    hosts: list[int],
    size: int,
    qps_per_pair: int = 1,
    allreduce: bool = True,
) -> Job:
    """Ring all-reduce (or all-gather) of ``size`` bytes per rank over ``hosts`` in ring order."""
    n = len(hosts)
    if n < 2:
        raise ValueError("a ring collective needs at least two hosts")
    steps = 2 * (n - 1) if allreduce else n - 1
    chunk = max(1, -(-size // n))
    part = max(1, -(-chunk // qps_per_pair))
    conns: list[list[Connection]] = []
    for r in range(n):
        src, dst = hosts[r], hosts[(r + 1) % n]
        row = [_flow(net, base, f"{job.name}/r{r}q{q}", src, dst, part) for q in range(qps_per_pair)]
        conns.append(row)
        job.connections.extend(row)
        job.rank_done_ns[r] = None
    received = [[0] * steps for _ in range(n)]  # [rank][step]: sub-writes of that step placed at rank
    sends_left = [steps * qps_per_pair for _ in range(n)]
    got_last = [False] * n

    def check_done(rank: int) -> None:
        if got_last[rank] and sends_left[rank] == 0 and job.rank_done_ns[rank] is None:
            job.rank_done_ns[rank] = net.loop.now

    def post_step(rank: int, step: int, at_ns: int | None) -> None:
        nxt = (rank + 1) % n

        def got(w: Write) -> None:
            on_received(nxt, step)

        def sent(w: Write) -> None:
            on_sent(rank)

        for q in range(qps_per_pair):
            net.post(conns[rank][q], part, at_ns, on_received=got, on_sent=sent)

    def on_sent(rank: int) -> None:
        sends_left[rank] -= 1
        check_done(rank)

    def on_received(rank: int, step: int) -> None:
        received[rank][step] += 1
        if received[rank][step] < qps_per_pair:
            return
        if step + 1 < steps:
            post_step(rank, step + 1, None)  # the chunk just received is what we pass on
        else:
            got_last[rank] = True
            check_done(rank)

    for r in range(n):
        post_step(r, 0, job.start_ns)
    return job


def jain(values: list[float]) -> float | None:
    """Jain's fairness index: 1 when every value is equal, 1/n when one takes everything."""
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))
