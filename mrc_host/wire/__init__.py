"""MRC wire format: message types, scapy layers, fast template codec."""
