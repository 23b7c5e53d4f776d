"""The four roles: thin loops that read the tree, decide (agent.core.decide), sign, publish."""
