"""Host configuration -> queue-pair numbers, path spaces, carriers (no sockets, no root)."""

from __future__ import annotations

import pytest

from controller.compiler import compile_host_configs
from mrc_fabric.ev import EV
from mrc_fabric.hostconfig import HostConfig
from mrc_fabric.topology import build_clos
from mrc_host.agent.paths import ROLE_RECEIVER, ROLE_SENDER, HostPaths, QpId, payload_mtu
from mrc_host.core import Mode
from mrc_host.wire.codec import decode


@pytest.fixture(scope="module")
def configs() -> dict[str, HostConfig]:
    topo = build_clos(2, 2, 2, 2, prefix="ut")
    # through JSON, as the agent reads it
    return {n: HostConfig.from_dict(c.to_dict()) for n, c in compile_host_configs(topo).items()}


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("role", [ROLE_SENDER, ROLE_RECEIVER])
def test_qp_numbers_round_trip_and_pair_up(mode: Mode, role: int) -> None:
    q = QpId(role, mode, 5, 1023)
    assert q.value < 1 << 24
    assert QpId.decode(q.value) == q
    assert q.peer.peer == q and q.peer.role != q.role
    assert q.peer.value != q.value


@pytest.mark.parametrize("value", [-1, 1 << 24, 1 << 23, 3 << 20])
def test_qp_numbers_no_agent_hands_out_are_refused(value: int) -> None:
    assert QpId.decode(value) is None


def test_carriers_match_the_controller_templates(configs: dict[str, HostConfig]) -> None:
    cfg = configs["uth0"]
    hp = HostPaths(cfg)
    for dst in ("uth1", "uth3"):
        pp = hp.peer(dst, Mode.MRC)
        for plane in range(2):
            for t1 in range(pp.path_space.t1_count):
                ev = EV(plane, t1, 12345).value
                assert pp.carrier(ev) == cfg.carrier(dst, ev).packed
        ecmp = hp.peer(dst, Mode.ECMP)
        ev = EV(1, 0, 777).value
        assert ecmp.carrier(ev) == cfg.carrier(dst, ev, ecmp=True).packed


def test_path_space_counts_t1_choices(configs: dict[str, HostConfig]) -> None:
    hp = HostPaths(configs["uth0"])
    assert hp.peer("uth3", Mode.MRC).path_space.t1_count == 2  # other T0: one path per T1
    assert hp.peer("uth1", Mode.MRC).path_space.t1_count == 1  # same T0: one path per plane
    assert hp.peer("uth3", Mode.ECMP).path_space.t1_count == 2  # ECMP draws as many EVs
    assert hp.peer("uth3", Mode.MRC).path_space.planes == 2


def test_frames_are_addressed_from_the_config(configs: dict[str, HostConfig]) -> None:
    from mrc_host.wire.messages import Probe

    cfg = configs["uth0"]
    pp = HostPaths(cfg).peer("uth3", Mode.MRC)
    ev = EV(1, 1, 9).value
    probe = Probe(qp=7, probe_id=1, ev_under_test=ev)
    probe.meta.ev = ev
    frame = pp.encoders[1].encode(probe, pp.carrier(ev))
    assert frame[0:6] == bytes.fromhex(cfg.ports[1].t0_mac.replace(":", ""))
    assert frame[6:12] == bytes.fromhex(cfg.ports[1].mac.replace(":", ""))
    msg = decode(frame)
    assert msg.meta.ev == ev
    assert msg.meta.src == cfg.ports[1].address
    assert msg.meta.dst == cfg.destinations["uth3"].addresses[1]


def test_unknown_peer_is_named(configs: dict[str, HostConfig]) -> None:
    with pytest.raises(KeyError, match="nosuch"):
        HostPaths(configs["uth0"]).peer("nosuch", Mode.MRC)


def test_nic_prefixes_and_peer_lookup(configs: dict[str, HostConfig]) -> None:
    hp = HostPaths(configs["uth2"])
    assert hp.nic_prefixes() == ["fcbb:bb00:c002::/64", "fcbb:bb00:c402::/64"]
    assert hp.peer_name_of_index(0) == "uth0" and hp.peer_name_of_index(2) is None
    assert hp.by_address["fcbb:bb00:c401::1"].name == "uth1"


def test_a_config_without_ports_is_refused(configs: dict[str, HostConfig]) -> None:
    cfg = HostConfig.from_dict(configs["uth0"].to_dict())
    cfg.ports.pop()
    with pytest.raises(ValueError, match="ports"):
        HostPaths(cfg)


def test_payload_mtu_fits_the_frame() -> None:
    assert payload_mtu(1500) == 1364
