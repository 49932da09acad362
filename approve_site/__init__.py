import os

# BLAS single-threaded in every process of the site (web, workers, commands):
# set before numpy is first imported, which is when OpenBLAS/MKL read these.
# The machines this runs on have two cores shared by gunicorn and Celery; a
# second BLAS thread per process then competes with the other processes, and
# the engine's small solves and products became 50-100 times slower under
# load. Parallelism comes from processes (gunicorn and Celery workers), not
# from BLAS threads. An operator may still set the variables explicitly.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# Load the Celery app whenever Django starts, so shared_task binds to it.
from .celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
