"""Per-packet fault draws from the packet's identity, not from a shared random stream.

Why: random loss (and probabilistic trimming) used to take the fabric's next random number
for each packet that reached a lossy port. Two modes run with the same seed then drew
different numbers for the same packet as soon as their traffic differed by one packet, so
which packets a seed lost was a matter of mode: MRC and ECMP compared seed by seed were two
unrelated loss patterns, and a 1.5 % difference on one seed of ten said nothing about either.

Here a packet copy is named by its connection's hosts, queue pair, PSN (or, for a control
packet, its kind and how many control packets its side sent before) and how many times its
side had sent that PSN; each hop of its path is a ``hop`` number (the port's kind). The draw
at a hop is a hash of (seed, name, hop), uniform on [0, 1): the same packet copy meets the
same luck at the same hop in every mode and every run of a seed (common random numbers),
while distinct copies and distinct hops draw independently (each is still a Bernoulli trial
of the fault's probability).

The mixer is a 32-bit xor-shift-multiply finaliser (lowbias32's shape, from Chris Wellons'
hash prospector) with odd multipliers below 2**30. Its values are ``i64`` (a plain int in
Python): compiled they are machine integers, and every product stays below 2**62, so nothing
overflows. As tagged ints mypyc sent each 32-bit product down its slow path (a Python long):
a 64 MiB run with loss everywhere cost 28 % more CPU that way.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

_MASK32: Final = 0xFFFF_FFFF
_MASK30: Final = 0x3FFF_FFFF  # a word times _GOLDEN (< 2**32) stays below 2**62
_GOLDEN: Final = 0x9E37_79B9  # 2**32 / golden ratio: spreads small integers before mixing


def mix32(x: i64) -> i64:
    """A bijection of 32-bit integers whose output bits each flip with about half of the
    input bits (tested for uniform, independent draws in tests/unit/test_sim_draws.py)."""
    x &= _MASK32
    x ^= x >> 16
    x = (x * 0x2C1B3C6D) & _MASK32
    x ^= x >> 12
    x = (x * 0x297A2D39) & _MASK32
    x ^= x >> 15
    return x


def seed_salt(seed: int) -> i64:
    """A run's share of every packet copy's name (a network keeps its own)."""
    return mix32(i64(seed & _MASK30) * _GOLDEN + 0x5BD1E995)


def packet_key(salt: i64, src: i64, dst: i64, qp: i64, number: i64, copy: i64) -> i64:
    """The 32-bit name of one packet copy (see the module docstring for the fields): hosts
    and QP in one word, PSN (or count) and copy in another, each folded in by one mix."""
    h = mix32(salt ^ ((src << 16 ^ dst) & _MASK30) * _GOLDEN)
    h = mix32(h ^ qp ^ (copy & 0xFF) << 24)
    return mix32(h ^ (number & _MASK30) * _GOLDEN)


def hop_salt(hop: i64) -> i64:
    """What a hop adds to a packet copy's key (a port keeps its own: ``Port.draw_salt``)."""
    return mix32(hop + 0x27D4_EB2F)


def unit(salted_key: i64) -> float:
    """The draw for a packet copy's key xor a hop's salt: uniform on [0, 1)."""
    return float(mix32(salted_key)) / 4_294_967_296.0
