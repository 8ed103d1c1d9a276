"""DDTree's ``DDTREE metrics:`` lines (a draft-tree method printed by the servers that run it), read for every
engine beside its own lines: ``log`` (parser and window averages) and ``intervals`` (each interval's accepted depth
against what its commit length and length-capped last steps explain)."""
