"""The verify family: SGLang's EAGLE-format greedy tree verify (``verify_tree_greedy``), its case type and grid
(:mod:`.records`), oracle (:mod:`.oracle`), check (:mod:`.checks`), CUDA-graph replay at capacity
(:mod:`.graphs`), the grid's topologies and hypothesis strategies, and broken variants (:mod:`.variants`)."""
