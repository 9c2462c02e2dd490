"""Fidelity of a live run: is this machine keeping up with the fabric it emulates?

A live result is only as good as the emulation (Mininet-HiFi, Handigol et al., CoNEXT 2012):
:mod:`.monitor` watches every run's processes, links and drops and gives a verdict,
*faithful* or *not faithful: which process or link, how much*, against the thresholds in
:mod:`.thresholds`; :mod:`.calibrate` finds the highest link rate a fabric stays faithful
at on this machine. docs/testbed.md ("Fidelity") is the user's side of it.
"""
