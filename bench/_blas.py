"""Single-threaded BLAS for the benchmarks: import this before numpy.

On a shared two-core machine, OpenBLAS threads competing with other
processes make small matrix products and solves erratic (10-100x swings
between runs), which swamps the differences being measured; the workers and
web processes run BLAS single-threaded for the same reason. A caller may
still override a variable by setting it before running the script.
"""

import os

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

for _variable in THREAD_VARIABLES:
    os.environ.setdefault(_variable, "1")


def threadpool_state() -> str:
    """One line on the BLAS in use and its threads (threadpoolctl if installed)."""
    settings = ", ".join(f"{name}={os.environ.get(name, 'unset')}" for name in THREAD_VARIABLES)
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        import numpy as np

        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        described = f"{blas.get('name', 'unknown BLAS')} {blas.get('version', '')}".strip()
        return f"{settings}; BLAS {described} (threadpoolctl not installed: threads as set above)"
    pools = "; ".join(
        f"{pool.get('internal_api')} {pool.get('version', '')} {pool.get('num_threads')} thread(s)"
        for pool in threadpool_info()
    )
    return f"{settings}; {pools}"
