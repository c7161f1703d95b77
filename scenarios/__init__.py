"""Runnable comparisons: cluster + job + schedulers + report.

``priority_demo``: the platform demo (two DSCP classes through one port).
"""
