"""Shared contract of the MRC testbed: addressing plan, EV layout, P4Info names, topology model."""
