"""The sampling family: the samplers of sampling verify (temperature > 0): SGLang's target-only tree sampler
and rejection (chain) sampler, and the DDTree implementations' own sampler. Decisions given the uniforms
(:mod:`.oracle`), the exact law of what they emit and the planted skews (:mod:`.law`), the stated hypothesis
test (:mod:`.distribution`), cases and records (:mod:`.records`)."""
