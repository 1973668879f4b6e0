"""Real workloads (typed event streams plus probes) and the per-design adapters ("arms") that run them.

``locomo`` loads LoCoMo conversations; ``base`` defines the arm protocol that every design adapter and every
baseline implements, so that all of them land in one table.
"""
