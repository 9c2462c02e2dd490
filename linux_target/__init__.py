"""The Linux-kernel SRv6 data-plane target and its P4Runtime shim.

One shim process per switch serves the P4Runtime v1 service for the P4Info of
``p4src/mrc_switch.p4`` and turns table writes into kernel state in the network
namespace it runs in: seg6local ``End`` next-csid routes for ``my_usid``, /48
routes with permanent neighbours for ``usid_route``, nftables netdev rules for
faults, and ``port_policy`` into the maps of the eBPF egress program every port
runs in front of HTB (``egress.py``, ``bpf/mrc_egress.c``: ECN marking,
trimming, priority queues, tail drop). See docs/linux-target.md.
"""
