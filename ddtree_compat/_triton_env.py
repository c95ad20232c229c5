"""Import Triton if it is there (the fault injectors and other in-house kernels are optional), and one
scoped adjustment of its CPU interpreter (:func:`interpreter_scalar_index`)."""

from __future__ import annotations

from contextlib import contextmanager


def triton_or_none():
    """``(triton, triton.language)``, or ``(None, None)`` when Triton is not importable."""
    try:
        import triton
        import triton.language as tl
    except ImportError:  # not installed (or a module it imports is not): kernels unavailable, backends skip
        return None, None
    return triton, tl


@contextmanager
def interpreter_scalar_index():
    """While active, Triton's interpreter turns a loaded scalar into a Python int with ``.item()``.

    Triton 3.6's interpreter converts a scalar it loaded (a one-element NumPy array) with ``int(array)``
    when the scalar bounds a ``range`` (``for start_n in range(0, cur_seq_len_prefix, BLOCK_N)`` in
    SGLang's ``extend_attention`` kernel); NumPy >= 2.4 rejects that ("only 0-dimensional arrays can be
    converted to Python scalars"). Known upstream as triton-lang/triton#9171, fixed after 3.6.0 by
    #9172. The interpreter sets ``tensor.__index__`` in ``_patch_lang_tensor`` at each launch; this
    wraps that hook to set it again with ``.item()`` (the same value), and restores the hook on exit.
    Only the CPU interpret tier needs it; compiled Triton never goes through this path. A no-op when
    Triton or the hook is missing.
    """
    try:
        from triton.runtime import interpreter
    except ImportError:  # no Triton: nothing to adjust
        yield
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        yield
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    interpreter._patch_lang_tensor = patch_lang_tensor
    try:
        yield
    finally:
        interpreter._patch_lang_tensor = original
