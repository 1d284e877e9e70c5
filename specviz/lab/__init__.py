"""The lab: measurements that the pages and the CLI share.

Timed comparisons (`measure`), sweeps over γ and drafters (`sweeps`), relaxed verification's speed
against quality (`quality`), "is it really the same?" (`same_distribution`), the transformers peer
(`peer`) and the cost of verifying a tree (`verify_cost`). Each returns records; nothing here draws.
"""
