import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")

from approve_site import observability  # noqa: E402

# Tracing (OTEL_EXPORTER_OTLP_ENDPOINT) instruments Django before the handler loads its middleware.
observability.tracing_setup(web=True)
application = get_asgi_application()
