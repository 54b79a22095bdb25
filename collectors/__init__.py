"""Sandboxed environments, policies and the collection job that records agent trajectories."""
