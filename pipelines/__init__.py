"""Apache Beam jobs that filter, deduplicate, decontaminate and build disjoint CPT / SFT / RL pools."""
