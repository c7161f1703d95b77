"""FIFO: the "system default" baseline of the DGTP and Hermod papers.

Every item starts the moment it is ready, flows carry DSCP 0 and no rate
cap, so concurrent flows share links as TCP and the FIFO queues decide
(seed 000, section VI "FIFO"; seed 004, chapter 5, "Megatron-LM default":
no coflow priorities). Placement is the job's pins, then round-robin
(:func:`railbed.scheduler.default_placement`).
"""

from __future__ import annotations

from railbed.scheduler import Scheduler


class Fifo(Scheduler):
    name = "fifo"
