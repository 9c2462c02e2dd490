"""The committed P4Info is exactly what p4c makes of p4src/mrc_switch.p4.

The controller, the Linux shim and the tests all resolve names through the
committed file (mrc_fabric.p4info); if the program and that file drift apart, ids
would mean different things on the wire. Compared as protobufs (entity order and
text formatting do not matter, everything else does). Skips where p4c is missing.
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
from pathlib import Path

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from mrc_fabric.p4info import P4INFO_PATH, P4SRC, load_p4info

P4C = "p4c-bm2-ss"

needs_p4c = pytest.mark.skipif(
    shutil.which(P4C) is None, reason=f"{P4C} not installed (p4lang packages: make setup BMV2=1)"
)


def canonical(info: p4i.P4Info) -> p4i.P4Info:
    """A copy with every repeated top-level entity list sorted by id."""
    out = p4i.P4Info()
    out.CopyFrom(info)
    for fd in out.DESCRIPTOR.fields:
        if not fd.is_repeated or fd.message_type is None:
            continue
        if "preamble" not in fd.message_type.fields_by_name:
            continue
        items = sorted(getattr(out, fd.name), key=lambda m: m.preamble.id)
        copies = [type(m)() for m in items]
        for c, m in zip(copies, items, strict=True):
            c.CopyFrom(m)
        del getattr(out, fd.name)[:]
        getattr(out, fd.name).extend(copies)
    return out


def compile_p4info(out_dir: Path) -> p4i.P4Info:
    p4info_path = out_dir / "mrc_switch.p4info.txtpb"
    res = subprocess.run(
        [P4C, "--arch", "v1model", "--std", "p4-16", "-o", str(out_dir / "mrc_switch.json"),
         "--p4runtime-files", str(p4info_path), str(P4SRC / "mrc_switch.p4")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert res.returncode == 0, f"{P4C} failed:\n{res.stderr}{res.stdout}"
    info = p4i.P4Info()
    text_format.Parse(p4info_path.read_text(), info)
    return info


@pytest.mark.bmv2  # counted with the BMv2 tests: where CI installed BMv2 and p4c it must run
@needs_p4c
def test_committed_p4info_equals_p4c_output(tmp_path: Path) -> None:
    committed = canonical(load_p4info())
    compiled = canonical(compile_p4info(tmp_path))
    if committed != compiled:
        diff = "\n".join(
            difflib.unified_diff(
                text_format.MessageToString(committed).splitlines(),
                text_format.MessageToString(compiled).splitlines(),
                f"committed {P4INFO_PATH.name}", "p4c output", lineterm="",
            )
        )  # fmt: skip
        pytest.fail(f"P4Info differs from p4c's (make p4info copies it on purpose):\n{diff}")


def test_canonical_ignores_order_but_not_content() -> None:
    info = load_p4info()
    shuffled = p4i.P4Info()
    shuffled.CopyFrom(info)
    tables = list(shuffled.tables)[::-1]
    del shuffled.tables[:]
    shuffled.tables.extend(tables)
    assert canonical(shuffled) == canonical(info)
    shuffled.tables[0].size += 1
    assert canonical(shuffled) != canonical(info)
