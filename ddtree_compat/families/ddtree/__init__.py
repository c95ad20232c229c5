"""The DDTree family: the DDTree implementations' own kernels (records, oracle, checks, where the implementations
keep each kernel, the correct reference backend and broken variants)."""
