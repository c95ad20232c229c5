"""The static tier: every kernel compiled ahead of time for every target arch on a CPU machine.

For each arch in :data:`~ddtree_compat.arch.STATIC_ARCHES` (sm80 .. sm121), each kernel a
backend declares in ``static_kernels`` (:mod:`~ddtree_compat.static.kernels`) and each
specialization the sweep would launch, the kernel is compiled (Triton: ``triton.compile`` for
``GPUTarget("cuda", cc, 32)``; SGLang's tvm-ffi JIT modules: nvcc, with the build SGLang's
``load_jit`` generates for that arch) and the binary is checked:

* resources against the arch's limits (:mod:`~ddtree_compat.static.limits`, NVIDIA's tables):
  over a limit is ``out of resources``, naming kernel, config and arch;
* SASS (:mod:`~ddtree_compat.static.sass`, cuobjdump/nvdisasm): a cubin the arch loads, no
  instruction it cannot execute (wgmma off sm90, tcgen05 off the sm100 family, ...), local memory
  and spills reported.

Modules: ``limits``, ``sass``, ``kernels`` (entries; SGLang's), ``triton_aot``, ``attention_aot`` (SGLang's
verify attention with the launch it makes on each arch) and ``nvcc`` (compile jobs, run in a worker process), ``runner`` (cells, the worker pool, the verdict), ``planted`` (a
test-only over-sized kernel).
"""
