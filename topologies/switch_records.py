"""``<run>/switches.json``: how the usual tools reach each switch of a run.

Written once the fabric is up (:func:`write_switch_records`, from ``topologies.clos.finish_start``:
``mrc-testbed`` and ``mn --custom`` alike), read by ``mrc-testbed
switches`` / ``p4`` / ``p4rt-shell`` and the CLI verbs of the same names
(``topologies.switch_tools``), and by anyone's script. Per switch: its P4Runtime address
(a unix socket in the run directory) and device id, and on BMv2 its Thrift port
(``simple_switch_CLI --thrift-port N``) with the exact command line and environment that
reach it; for the run: the program the switches run (its P4Info and BMv2 JSON) and the
controller's election id, so that a second P4Runtime client connects as a backup that
reads and never takes the switches from the controller (docs/mininet-p4.md).

The file is read back as untrusted input: :func:`load_switch_records` names the file
and the field that is wrong instead of failing somewhere later.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mrc_fabric.p4_contract import read_pipeline
from mrc_fabric.p4info import P4INFO_PATH
from mrc_fabric.topology import Topology
from mrc_p4rt.channel import CONTROLLER_ELECTION_ID, UINT64

SWITCHES_FILE = "switches.json"
THRIFT_IP = "127.0.0.1"
CLI_ENV = ("PYTHONPATH", "LD_LIBRARY_PATH")  # what simple_switch_CLI needs from a p4bench-style install
REPO = Path(__file__).resolve().parent.parent
P4RT_SHELL_VENV = REPO / ".venv-p4rt-shell"  # make p4rt-shell (its own venv: it pins old protobuf)
BMV2_JSON = REPO / "p4src" / "build" / "mrc_switch.json"


class SwitchRecordError(ValueError):
    """switches.json is missing, unreadable or names no such switch; the message says which."""


def election_pair(election_id: int) -> str:
    """An election id in p4runtime-shell's ``HIGH,LOW`` notation."""
    return f"{election_id >> 64},{election_id & UINT64}"


@dataclass(frozen=True)
class SwitchRecord:
    """One switch as the tools see it."""

    name: str
    role: str  # t0 | t1
    plane: int
    index: int
    target: str  # bmv2 | linux
    device_id: int  # P4Runtime device id (BMv2 --device-id)
    p4runtime: str  # P4Runtime address: unix:<run>/<name>.p4rt.sock
    thrift_port: int | None = None  # BMv2 only: simple_switch_CLI --thrift-port
    log: str = ""  # the switch's own log
    cli_argv: list[str] = field(default_factory=list)  # simple_switch_CLI and its Thrift address
    cli_env: dict[str, str] = field(default_factory=dict)  # the variables it needs

    @property
    def cli_shell(self) -> str:
        """The simple_switch_CLI command line to paste into a root shell ('' on Linux switches)."""
        if not self.cli_argv:
            return ""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.cli_env.items())
        return (env + " " if env else "") + shlex.join(self.cli_argv)


@dataclass(frozen=True)
class SwitchRecords:
    """Every switch of a run, the program they run and the controller's election id."""

    run_dir: Path
    target: str
    p4info: str
    bmv2_json: str
    p4_source: str  # the user's program (--p4), or "" for p4src/mrc_switch.p4
    controller_election_id: str  # "HIGH,LOW"
    switches: list[SwitchRecord]

    def switch(self, name: str) -> SwitchRecord:
        for s in self.switches:
            if s.name == name:
                return s
        raise SwitchRecordError(
            f"no switch {name!r} in {self.run_dir / SWITCHES_FILE}; switches: "
            + " ".join(s.name for s in self.switches)
        )

    def p4runtime_shell(self, sw: SwitchRecord, election_low: int = 1) -> list[str]:
        """p4runtime-shell for ``sw`` as a backup client, (1, election_low): below the
        controller's (2, 0), so it reads and never takes the switch from the controller."""
        python = P4RT_SHELL_VENV / "bin" / "python"
        return [str(python), "-m", "p4runtime_sh", "--grpc-addr", sw.p4runtime, "--device-id",
                str(sw.device_id), "--election-id", f"1,{election_low}"]  # fmt: skip


def _cli_argv(thrift_port: int) -> tuple[list[str], dict[str, str]]:
    """simple_switch_CLI as the testbed runs it (``bmv2_switch.cli_command``: its ``#!`` python may
    be one without Thrift) at the switch's Thrift address, and the variables a p4bench-style
    install needs (``/opt/p4bench/env.sh`` sets them)."""
    from topologies.bmv2_switch import Bmv2Error, cli_command

    try:
        argv = cli_command()
    except Bmv2Error:
        argv = ["simple_switch_CLI"]
    env = {k: os.environ[k] for k in CLI_ENV if os.environ.get(k)}
    return [*argv, "--thrift-ip", THRIFT_IP, "--thrift-port", str(thrift_port)], env


def records_of(net: Any, topology: Topology, run_dir: Path) -> SwitchRecords:
    """The records of a fabric that is up: ``net`` the Mininet net, ``topology`` its model."""
    pipeline = read_pipeline(run_dir)
    out = []
    for s in topology.switches:
        node = net.get(s.name)
        thrift = getattr(node, "thrift_port", None)
        argv, env = _cli_argv(thrift) if thrift else ([], {})
        log = getattr(node, "switch_log", None) or getattr(node, "log_path", "")
        out.append(
            SwitchRecord(
                name=s.name,
                role=s.role.value,
                plane=s.plane,
                index=s.index,
                target=s.target.value,
                device_id=s.device_id,
                p4runtime=getattr(node, "p4rt_address", s.p4rt_address),
                thrift_port=thrift,
                log=str(log),
                cli_argv=argv,
                cli_env=env,
            )
        )
    target = topology.switches[0].target.value if topology.switches else ""
    committed = str(BMV2_JSON) if target == "bmv2" else ""
    return SwitchRecords(
        run_dir=run_dir,
        target=target,
        p4info=pipeline["p4info"] if pipeline else str(P4INFO_PATH),
        bmv2_json=pipeline["bmv2_json"] if pipeline else committed,
        p4_source=pipeline["source"] if pipeline else "",
        controller_election_id=election_pair(CONTROLLER_ELECTION_ID),
        switches=out,
    )


def write_switch_records(net: Any, topology: Topology, run_dir: Path) -> Path:
    """``<run_dir>/switches.json`` for a fabric that is up; returns its path."""
    rec = records_of(net, topology, run_dir)
    data = asdict(rec)
    data["run_dir"] = str(rec.run_dir)
    for d, s in zip(data["switches"], rec.switches, strict=True):
        d["simple_switch_CLI"] = s.cli_shell
        d["p4runtime_shell"] = shlex.join(rec.p4runtime_shell(s))
    path = Path(rec.run_dir) / SWITCHES_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
    return path


def _field(d: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = d.get(key)
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise SwitchRecordError(f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def load_switch_records(run_dir: Path | str) -> SwitchRecords:
    """Read ``<run_dir>/switches.json`` back, field by field."""
    path = Path(run_dir) / SWITCHES_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SwitchRecordError(
            f"{path}: missing (written once a testbed's fabric is up; is a testbed running there?)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise SwitchRecordError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("switches"), list):
        raise SwitchRecordError(f"{path}: expected an object with a list 'switches'")
    switches = []
    for i, d in enumerate(data["switches"]):
        where = f"{path.name}: switches[{i}]"
        if not isinstance(d, dict):
            raise SwitchRecordError(f"{where}: expected an object")
        thrift = d.get("thrift_port")
        if thrift is not None and (not isinstance(thrift, int) or not 0 < thrift < 65536):
            raise SwitchRecordError(f"{where}.thrift_port: {thrift!r} is not a TCP port")
        argv, env = d.get("cli_argv", []), d.get("cli_env", {})
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            raise SwitchRecordError(f"{where}.cli_argv: expected a list of strings")
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise SwitchRecordError(f"{where}.cli_env: expected an object of strings")
        switches.append(
            SwitchRecord(
                name=_field(d, "name", str, where),
                role=_field(d, "role", str, where),
                plane=_field(d, "plane", int, where),
                index=_field(d, "index", int, where),
                target=_field(d, "target", str, where),
                device_id=_field(d, "device_id", int, where),
                p4runtime=_field(d, "p4runtime", str, where),
                thrift_port=thrift,
                log=str(d.get("log", "")),
                cli_argv=argv,
                cli_env=env,
            )
        )
    top = path.name
    return SwitchRecords(
        run_dir=Path(run_dir),
        target=_field(data, "target", str, top),
        p4info=_field(data, "p4info", str, top),
        bmv2_json=str(data.get("bmv2_json", "")),
        p4_source=str(data.get("p4_source", "")),
        controller_election_id=_field(data, "controller_election_id", str, top),
        switches=switches,
    )
