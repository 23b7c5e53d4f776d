"""A leaderless multi-agent planning swarm."""

__version__ = "0.1.0"
