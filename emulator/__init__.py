"""The emulated backend: Mininet testbed, tc, traffic, clean-up, CLI.

The only package that touches namespaces, links, processes and sockets.
"""
