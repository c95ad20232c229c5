"""The verify-attention family: SGLang's tree-verify attention under the ancestor-only mask (records and
profiles, the float reference and tolerances, the layout and judge, broken variants)."""
