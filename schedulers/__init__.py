"""Schedulers (DGTP, Hermod, LEO, DGCL-SPST and their baselines): pure algorithms.

Not built yet: the traffic-engine issue defines the scheduler interface and
FIFO; later issues add the papers' schedulers. Never imports the emulator.
"""
