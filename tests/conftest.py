import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from agent.logging import configure_logging  # noqa: E402

# In-process runtimes (drivers, net tests) log at info and above; agents log to files.
configure_logging("console", "info")
