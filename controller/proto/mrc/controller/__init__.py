"""Generated gRPC code of the controller API (see generate.py)."""
