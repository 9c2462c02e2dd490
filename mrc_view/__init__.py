"""``mrc view``: the fabric live in a web page -- links by load, faults, every connection's EVs.

Layer: above ``controller`` (its northbound client) and ``mrc_host`` (the agents' control
client) and ``mrc_fabric`` (the recording format); below ``topologies``, which starts it
(``mrc-testbed --view``, the CLI's ``view``). It never imports ``topologies``: all it needs
of a live run is in its run directory (topology.json, controller.sock, agents/*.sock).

Modules: ``live`` (read a running testbed every interval), ``model`` (the state a frame
shows), ``replay`` (a finished run's recording, at any time), ``security`` (token, Host and
Origin checks), ``server`` (aiohttp: the page, its data, fault actions), ``cli``.
"""
