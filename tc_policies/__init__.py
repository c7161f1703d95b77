"""tc configurations as data (HTB shaping, DSCP strict priority, FIFO), applied with pyroute2."""

from tc_policies.plan import POLICIES, DscpPriorityPolicy, FifoPolicy, Policy, TcPlan, policy_by_name

__all__ = ["POLICIES", "DscpPriorityPolicy", "FifoPolicy", "Policy", "TcPlan", "policy_by_name"]
