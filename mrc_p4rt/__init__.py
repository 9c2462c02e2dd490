"""The P4Runtime client pieces shared by the controller and the Linux target's test client.

Both ``controller/`` and ``linux_target/`` talk P4Runtime to switches, and neither may
import the other (imports flow mrc_fabric <- controller / linux_target <- topologies).
What both need lives here, depending only on ``mrc_fabric`` (the P4Info) and finsy (the
generated protos and its ``P4RpcStatus`` decoder):

- :mod:`mrc_p4rt.entries` -- table entries as plain values, by P4Info alias;
- :mod:`mrc_p4rt.codec`   -- those values to and from ``p4.v1.TableEntry``;
- :mod:`mrc_p4rt.status`  -- the one error type for a failed P4Runtime call, with the
  per-update ``p4.v1.Error`` list of a failed Write;
- :mod:`mrc_p4rt.channel` -- waiting for a server and opening an arbitrated stream.

The server side of P4Runtime (validation, the kernel) stays in ``linux_target``.
"""
