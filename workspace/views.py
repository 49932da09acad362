"""Pages. Views check the shape of input and call one service or selector."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.shortcuts import render
from rest_framework.throttling import BaseThrottle

from .api.throttling import CACHE_ERRORS, log_cache_unreachable
from .selectors import studies_with_my_roles


@login_required
def home(request):
    """The studies the user designs or gives opinions in, with their roles."""
    return render(request, "workspace/home.html", {"studies": studies_with_my_roles(request.user)})


class ThrottledLoginView(LoginView):
    """Django's login page, refusing a client address after too many failed
    attempts in a row (password guessing). The API's token endpoint has
    its own throttle (``login`` scope)."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def failures_key(self):
        # The client address as the API's throttles see it (NUM_PROXIES).
        return f"login-failures:{BaseThrottle().get_ident(self.request)}"

    def locked_out(self) -> bool:
        try:
            return cache.get(self.failures_key(), 0) >= settings.LOGIN_FAILURE_LIMIT
        except CACHE_ERRORS as error:  # fail open, as the API's throttles do
            log_cache_unreachable("log-in lock-out", error)
            return False

    def post(self, request, *args, **kwargs):
        if self.locked_out():
            form = self.get_form()
            minutes = max(1, settings.LOGIN_FAILURE_WINDOW // 60)
            form.add_error(None, f"Too many failed attempts from your address. Try again in {minutes} minutes.")
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        key = self.failures_key()
        try:
            cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW)
            cache.incr(key)
        except CACHE_ERRORS as error:
            log_cache_unreachable("log-in lock-out", error)
        return super().form_invalid(form)
