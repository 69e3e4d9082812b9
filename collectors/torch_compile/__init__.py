"""torch.compile as a source: compile phases, graph breaks, recompiles, caches, fusion map, eager vs compiled."""
