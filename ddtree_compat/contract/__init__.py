"""The shared contract: the vocabulary every layer of the suite, and a third party writing a backend or a kernel
record, imports from this one place (the ground floor of ``docs/architecture.md``: torch-free, importing only the
core).

* :class:`Backend`, :class:`KernelImpl`: a backend's declaration (its name, the kernels it has, their runtime,
  places and static entries); :func:`unavailable`: the one answer to "can this kernel run here?"
  (:mod:`.backend`).
* :class:`Place`, :func:`locate`: where an SGLang release (or a DDTree tree of SGLang) keeps a kernel, looked up
  in the installed one; :class:`AdapterError`: the suite's own adapter failed (an ``error``, never a kernel
  fault); :class:`Absent`, :class:`MissingDependency`: the two reasons a kernel is a skip (:mod:`.places`).
* :class:`KernelRecord`, :class:`CaseContext`: one kernel under test, declared once (:mod:`.record`).

Everything named in :data:`__all__` is public; ``tests/unit/test_layers.py`` holds that each name exists here
and that nothing of this package imports from a floor above it.
"""

from .backend import (RUNTIMES, Backend, KernelImpl, backend_unavailable, implementation, interpreter_on,
                      kernels_of, unavailable, with_static)
from .places import Absent, AdapterError, MissingDependency, Place, import_module, locate, reason
from .record import CaseContext, KernelRecord, base_name

__all__ = [
    "Absent", "AdapterError", "Backend", "CaseContext", "KernelImpl", "KernelRecord", "MissingDependency", "Place",
    "RUNTIMES", "backend_unavailable", "base_name", "implementation", "import_module", "interpreter_on", "kernels_of",
    "locate", "reason", "unavailable", "with_static",
]
