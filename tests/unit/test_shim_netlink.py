"""The csid route's message keeps its ``flavors next-csid`` whatever pyroute2 compiled first.

Why: pyroute2 marks a message class's attribute table compiled with a class attribute that a
subclass inherits. A restarted shim reads the routes its predecessor left (decoding their
seg6local encap with pyroute2's own class) before it writes its csid route with the subclass
that knows SEG6_LOCAL_FLAVORS: the subclass then encoded with the base's table and dropped the
flavors without a word, and the kernel got a plain ``End`` route (no uSID shift: every packet
for the switch's uSID lost).
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
from ipaddress import IPv6Network
from socket import AF_INET6
from pyroute2.netlink.rtnl.rtmsg import rtmsg
from linux_target import netlink_backend as nb

# what decoding a left-over seg6local route does first: pyroute2's own class compiled
plain = rtmsg()
plain["family"] = AF_INET6
plain["attrs"] = [("RTA_ENCAP_TYPE", 7), ("RTA_ENCAP", {"attrs": [("SEG6_LOCAL_ACTION", {"value": "End"})]})]
plain.encode()


class Ipr:
    def nlm_request(self, msg, **kwargs):
        self.msg = msg


backend = nb.NetlinkBackend.__new__(nb.NetlinkBackend)
backend.ipr, backend.anchor, backend._ifindex = Ipr(), "ls-usid0", {"ls-usid0": 5}
backend._set_csid_route(IPv6Network("fcbb:bb00:4000::/48"))
sent = backend.ipr.msg
sent.encode()
back = nb._CsidRouteMsg(sent.data)
back.decode()
encap = back.get_attr("RTA_ENCAP")
print("FLAVORS" if encap.get_attr("SEG6_LOCAL_FLAVORS") is not None else "NONE")
"""


def test_csid_route_keeps_its_flavors_after_a_seg6local_route_was_decoded() -> None:
    # a fresh interpreter: which class pyroute2 compiles first is the whole point
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "FLAVORS", out.stdout + out.stderr
