# approve: the web application and the Celery worker share this image.
FROM python:3.11-slim

# BLAS single-threaded in gunicorn and the workers: on small machines a second
# BLAS thread per process makes the engine's small solves 50-100 times slower
# under load (approve_site/__init__.py sets the same defaults).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1 \
    MKL_NUM_THREADS=1

WORKDIR /app

RUN groupadd --system approve \
    && useradd --system --gid approve --home-dir /app --no-create-home --shell /usr/sbin/nologin approve

# Dependencies first, so code changes do not reinstall them: the production
# lock alone, every package pinned and checked against its hashes (README.md,
# "Dependencies"), so two builds install the same files.
COPY requirements.txt .
RUN pip install --require-hashes -r requirements.txt

COPY . .

# Static files are collected into the image (WhiteNoise serves them). The
# settings refuse DEBUG=false without a strong key, so the build makes a
# throwaway one that exists only for this command and is never stored.
RUN DEBUG=false \
    SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(64))')" \
    python manage.py collectstatic --noinput

USER approve

EXPOSE 8000

# Workers, threads and timeouts: gunicorn.conf.py (WEB_CONCURRENCY, GUNICORN_THREADS, ...).
CMD ["gunicorn", "--config", "gunicorn.conf.py", "approve_site.wsgi"]
