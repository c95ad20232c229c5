"""The linear-attention family: the Gated DeltaNet layers of a hybrid target (Qwen3.5 / 3.6, Qwen3-Next) in a
speculative verify, their short convolution, and the recurrent-state commit after acceptance."""
