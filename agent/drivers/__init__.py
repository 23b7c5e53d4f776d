"""The drivers of the one agent shell (agent.shell), side by side.

Each runs the same behaviours (agent.behaviour) over the same intake, log and tree, and
differs only where it must: how effects meet the world.

- real/     processes on a network: trio, libp2p, a log on disk, LLM calls, Prometheus
- sim/      a whole swarm in virtual time with injected faults, deterministic per seed
- central   every behaviour in one process on one log: the benchmarks' and the eval's baseline

Nothing is imported here, so that taking the simulator does not pull in trio or libp2p.
"""
