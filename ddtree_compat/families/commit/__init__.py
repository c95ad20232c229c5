"""The commit family: SGLang's KV-cache commit kernels after verify (records, the commit plan oracle, one check
per kernel, verify + commit in one CUDA graph, broken variants)."""
