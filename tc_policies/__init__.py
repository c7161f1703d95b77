"""tc configurations as data (HTB shaping, DSCP strict priority, FIFO), applied with pyroute2."""

from tc_policies.plan import DscpPriorityPolicy, FifoPolicy, Policy, TcPlan, policy_by_name

__all__ = ["DscpPriorityPolicy", "FifoPolicy", "Policy", "TcPlan", "policy_by_name"]
