"""Your own P4 program on every BMv2 switch: ``mrc-testbed --p4 PROGRAM.p4``.

:func:`compile_program` runs p4c (``p4c-bm2-ss --arch v1model``) on the program into the
run directory (``<run>/p4/<name>.json`` and ``<name>.p4info.txtpb``, p4c's messages in
``<name>.p4c.log``, all three named in ``<run>/p4/pipeline.json``) and checks its P4Info against
the MRC contract
(:func:`mrc_fabric.p4names.missing_contract_names`): a program that lacks a table, match field,
action, parameter or counter the controller programs is refused with every gap named.
The controller then pushes that program (it reads ``p4/pipeline.json`` of its run directory, or
``mrc-controller --p4info --bmv2-json``),
installs the MRC tables by name and never reads, diffs or deletes the program's other
tables: those are the user's (``p4 SWITCH table_add ...`` in the CLI, p4runtime-shell,
or a few lines in a topology script; docs/mininet-p4.md).

Only BMv2 runs a user's program: the Linux target serves the committed P4Info alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mrc_fabric.p4_contract import PIPELINE_FILE, read_pipeline
from mrc_fabric.p4info import load_p4info
from mrc_fabric.p4names import missing_contract_names
from mrc_fabric.topology import Target
from topologies import target as targets
from topologies.rundir import RunDir
from topologies.target import BMV2_BINARY, CHOICES, TargetChoice, TargetError

P4C = "p4c-bm2-ss"
COMPILE_TIMEOUT_S = 300.0


class P4ProgramError(TargetError):
    """The program did not compile, or does not keep the MRC contract; the message says how."""


@dataclass(frozen=True)
class UserPipeline:
    """A compiled user program: what the controller pushes to every BMv2 switch."""

    source: Path  # the .p4 file given
    bmv2_json: Path  # p4c's BMv2 JSON
    p4info: Path  # p4c's P4Info (text format)

    def as_dict(self) -> dict[str, str]:
        return {"source": str(self.source), "bmv2_json": str(self.bmv2_json), "p4info": str(self.p4info)}


def load(run_dir: Path) -> UserPipeline | None:
    """The program a run's switches run, if it is a user's (``<run>/p4/pipeline.json``)."""
    d = read_pipeline(run_dir)
    return None if d is None else UserPipeline(Path(d["source"]), Path(d["bmv2_json"]), Path(d["p4info"]))


def target_for(requested: str, source: Path | None) -> TargetChoice:
    """``--target`` as ``topologies.target`` chooses it, or, with a program of one's own, BMv2."""
    return targets.choose_target(requested) if source is None else choose_target(requested, source)


def prepare(source: Path | None, run: RunDir, progress: Callable[[str], None]) -> None:
    """With a program: compile it into the run directory and record it for the controller."""
    if source is not None:
        pipeline = compile_program(source, run.sub("p4"))
        progress(f"P4 program: {source}, compiled into {pipeline.bmv2_json.parent}")


def choose_target(requested: str, source: Path) -> TargetChoice:
    """BMv2, or a :class:`TargetError` saying why a user program cannot run here."""
    if requested not in CHOICES:
        raise TargetError(f"--target: {requested!r} is not one of {', '.join(CHOICES)}")
    if requested == "linux":
        raise TargetError(
            f"--p4 {source}: only BMv2 runs a P4 program; the Linux target serves the committed "
            "P4Info alone (leave out --target linux)"
        )
    missing = [f"{b} not found (make setup BMV2=1)" for b in (BMV2_BINARY, P4C) if shutil.which(b) is None]
    if missing:
        raise TargetError(f"--p4 {source}: " + "; ".join(missing))
    return TargetChoice(Target.BMV2, f"--p4 {source}: BMv2 runs this program")


def compile_program(source: Path, out_dir: Path, timeout_s: float = COMPILE_TIMEOUT_S) -> UserPipeline:
    """p4c on ``source`` into ``out_dir``, then the contract check; raises P4ProgramError."""
    source = Path(source).resolve()
    if not source.is_file():
        raise P4ProgramError(f"--p4 {source}: no such file")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = source.stem
    pipeline = UserPipeline(source, out_dir / f"{stem}.json", out_dir / f"{stem}.p4info.txtpb")
    log = out_dir / f"{stem}.p4c.log"
    cmd = [P4C, "--arch", "v1model", "--std", "p4-16", "-o", str(pipeline.bmv2_json),
           "--p4runtime-files", str(pipeline.p4info), str(source)]  # fmt: skip
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise P4ProgramError(f"--p4 {source}: {P4C} did not run: {exc}") from None
    log.write_text(f"# {' '.join(cmd)}\n{res.stdout}{res.stderr}")
    if res.returncode != 0 or not pipeline.bmv2_json.exists() or not pipeline.p4info.exists():
        errors = [ln for ln in (res.stderr + res.stdout).splitlines() if ln.strip()][:12]
        raise P4ProgramError(
            f"--p4 {source}: {P4C} failed (exit {res.returncode}; all of it in {log}):\n  "
            + "\n  ".join(errors)
        )
    gaps = missing_contract_names(load_p4info(pipeline.p4info))
    if gaps:
        raise P4ProgramError(
            f"--p4 {source} does not keep the MRC contract (docs/p4-pipeline.md), so the controller "
            "cannot program it:\n  " + "\n  ".join(gaps)
        )
    (out_dir.parent / PIPELINE_FILE).write_text(json.dumps(pipeline.as_dict(), indent=1) + "\n")
    return pipeline
