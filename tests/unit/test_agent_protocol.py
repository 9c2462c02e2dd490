"""The control protocol: sizes, EVs, request validation (every refusal names its field)."""

from __future__ import annotations

import json

import pytest

from mrc_host.agent.protocol import (
    MAX_LINE,
    ProtocolError,
    encode_line,
    is_final,
    parse_ev,
    parse_request,
    parse_size,
)
from mrc_host.core import Mode


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4096", 4096),
        (4096, 4096),
        ("64M", 64 << 20),
        ("8MiB", 8 << 20),
        ("8mib", 8 << 20),
        ("1.5G", 3 << 29),
        ("10MB", 10_000_000),
        ("2k", 2048),
        ("1KiB", 1024),
        ("0", 0),
    ],
)
def test_sizes(text: str | int, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "-1", "12X", "1e3", "5 MiBs", True, "2T0"])
def test_bad_sizes_name_the_field(text: object) -> None:
    with pytest.raises(ProtocolError, match=r"^size: "):
        parse_size(text)  # type: ignore[arg-type]


def test_sizes_are_bounded() -> None:
    with pytest.raises(ProtocolError, match="size"):
        parse_size("2T")


@pytest.mark.parametrize(("v", "ev"), [("10040001", 0x10040001), ("0x10040001", 0x10040001), (5, 5)])
def test_evs(v: str | int, ev: int) -> None:
    assert parse_ev(v) == ev


@pytest.mark.parametrize("v", ["xyz", "1ffffffff", -1, 1 << 32, False])
def test_bad_evs(v: object) -> None:
    with pytest.raises(ProtocolError, match=r"^ev: "):
        parse_ev(v)  # type: ignore[arg-type]


def test_send_request() -> None:
    line = json.dumps({"cmd": "send", "peer": "h3", "size": "64M", "mode": "ecmp", "progress": True})
    r = parse_request(line)
    assert (r.cmd, r.peer, r.size, r.mode, r.progress) == ("send", "h3", 64 << 20, Mode.ECMP, True)
    assert parse_request(b'{"cmd":"send","peer":"h3","size":1}').mode is Mode.MRC


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("not json", "request"),
        ("[1, 2]", "request"),
        ('{"cmd": "reboot"}', "cmd"),
        ("{}", "cmd"),
        ('{"cmd": "send", "size": 1}', "peer"),
        ('{"cmd": "send", "peer": "", "size": 1}', "peer"),
        ('{"cmd": "send", "peer": "h1"}', "size"),
        ('{"cmd": "send", "peer": "h1", "size": "lots"}', "size"),
        ('{"cmd": "send", "peer": "h1", "size": 1, "mode": "roce"}', "mode"),
        ('{"cmd": "deny"}', "ev"),
        ('{"cmd": "allow", "ev": "zz"}', "ev"),
        ('{"cmd": "deny", "ev": 1, "rule": {"t1": 1}}', "ev"),
        ('{"cmd": "deny", "rule": {}}', "rule"),
        ('{"cmd": "deny", "rule": {"colour": 1}}', "rule"),
        ('{"cmd": "allow", "rule": {"field": true}}', "rule.field"),
        (b"\xff\xfe", "request"),
    ],
)
def test_bad_requests_name_the_field(line: str | bytes, field: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_request(line)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_overlong_line_is_refused() -> None:
    with pytest.raises(ProtocolError, match="request"):
        parse_request("x" * (MAX_LINE + 1))


def test_reply_lines() -> None:
    line = encode_line({"ok": True, "n": 1})
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert is_final(json.loads(line)) and not is_final({"event": "progress"})
