"""The real driver: one agent process. runtime.py does its I/O (network -> validate -> store
-> fold; sign -> store -> publish), driver.py executes its behaviour's effects under trio.
agent.app wires it into the commands."""
