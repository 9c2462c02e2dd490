"""MRC host transport: wire format, sans-I/O core, simulator and raw-socket agent."""
