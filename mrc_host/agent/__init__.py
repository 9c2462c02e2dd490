"""The live MRC host agent: the sans-I/O core bound to raw AF_PACKET sockets.

- ``paths``: host configuration file -> queue-pair numbers, path spaces, carriers, frame addressing;
- ``payload``: the bytes a transfer carries (seeded pattern, chunk headers, receive ring layout);
- ``protocol``: the JSON-lines control protocol spoken on the agent's unix socket;
- ``netio``: raw sockets with a BPF filter, and the nftables rules that keep the kernel out;
- ``connection``: one queue pair (endpoint) per peer per direction, its handshake side, its chunks;
- ``ports``: port I/O; ``control``: the control-socket server; ``transfers``: transfer bookkeeping;
- ``agent``: the event loop that owns the clock and binds frames to connections;
- ``client``: the Python API; ``cli``: ``mrc``.

docs/agent.md describes the whole.
"""
