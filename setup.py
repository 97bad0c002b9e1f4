"""The one compiled part: the full scan's loop over records (metnos/mechanisms/store/_scan_loop.pyx).

Optional: without a C compiler the build goes on without it and the scan runs its Python loop,
which gives the same events more slowly (``metnos.mechanisms.store.event_scan.compiled_loop``).
Everything else about the package is in pyproject.toml.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("metnos.mechanisms.store._scan_loop", ["metnos/mechanisms/store/_scan_loop.pyx"], optional=True)],
        language_level=3,
        quiet=True,
    )
)
