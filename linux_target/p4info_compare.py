"""Is a P4Info pushed by a controller the one this shim implements?

The comparison is semantic: the same tables, match fields, actions, params and
counters with the same names, ids, widths and sizes, in any order, whatever the
text formatting, documentation or annotations. Anything else would make ids
mean different things on the two sides, so it is refused.
"""

from __future__ import annotations

from finsy.proto import p4i


def _canonical(info: p4i.P4Info) -> dict[str, dict[int, tuple[object, ...]]]:
    return {
        "table": {
            t.preamble.id: (
                t.preamble.name,
                tuple(sorted((m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields)),
                tuple(sorted((r.id, r.scope) for r in t.action_refs)),
                t.size,
            )
            for t in info.tables
        },
        "action": {
            a.preamble.id: (a.preamble.name, tuple(sorted((p.id, p.name, p.bitwidth) for p in a.params)))
            for a in info.actions
        },
        "counter": {c.preamble.id: (c.preamble.name, c.spec.unit, c.size) for c in info.counters},
        "direct_counter": {c.preamble.id: (c.preamble.name,) for c in info.direct_counters},
        "meter": {m.preamble.id: (m.preamble.name,) for m in info.meters},
        "register": {r.preamble.id: (r.preamble.name,) for r in info.registers},
        "action_profile": {a.preamble.id: (a.preamble.name,) for a in info.action_profiles},
    }


def p4info_difference(expected: p4i.P4Info, given: p4i.P4Info) -> str | None:
    """None when equal, else a sentence naming the first difference."""
    want, got = _canonical(expected), _canonical(given)
    for kind in want:
        for oid in sorted(set(want[kind]) | set(got[kind])):
            a, b = want[kind].get(oid), got[kind].get(oid)
            if a == b:
                continue
            if a is None:
                assert b is not None
                return f"p4info: {kind} {b[0]} (id {oid}) is not implemented by the Linux target"
            if b is None:
                return f"p4info: {kind} {a[0]} (id {oid}) is missing"
            return f"p4info: {kind} {a[0]} (id {oid}) differs from the Linux target's P4Info"
    return None
