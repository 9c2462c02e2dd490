"""Mininet node classes and topologies of the MRC testbed."""
