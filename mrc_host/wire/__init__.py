"""MRC wire format: message types, scapy layers, fast template codec.

- ``messages``: the decoded values the sans-I/O core works with (no scapy import).
- ``framing``: a port's frame addressing and the wire's limits (no scapy import).
- ``layers``: scapy layers for every header and the scapy view of a frame (reference, tests).
- ``header_templates``: each kind's headers as scapy builds them (``write_templates`` writes it).
- ``codec``: the data path: ``FrameEncoder``/``encode``, ``decode``/``decode_inner``, ``trim``.
- ``samples``: one valid message of every type, for tests and benchmarks.

Byte layout: docs/protocol.md.
"""
