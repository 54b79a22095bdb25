"""Sandboxed environments, policies and the collection runner that records agent trajectories."""
