"""The sans-I/O core: events, signing, HLC, the fold and the roles' decisions.

Nothing in this package opens a socket, reads a clock or draws a random number: time enters
only as values carried in events or passed in by the caller.
"""
