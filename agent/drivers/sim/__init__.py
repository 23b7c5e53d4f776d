"""The deterministic simulator: the real behaviours and intake in virtual time, with faults."""

from .config import FAULT_KINDS, Faults, SimConfig
from .world import Simulation, simulate

__all__ = ["FAULT_KINDS", "Faults", "SimConfig", "Simulation", "simulate"]
