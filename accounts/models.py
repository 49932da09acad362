"""The site's account policy (issue 32): who may sign up, and who must use
a second factor. One row, edited in the admin (``SitePolicy.current``)."""

from django.conf import settings
from django.db import models


class SitePolicy(models.Model):
    """How accounts come to exist on this site, and who needs two-factor
    sign-in. There is one policy: ``current()`` reads it (and makes it with
    the defaults the first time)."""

    class SignUp(models.TextChoices):
        CLOSED = "closed", "Closed: only an administrator creates accounts"
        INVITATION = "invitation", "Invitation only: through a study's invitation link"
        DOMAINS = "domains", "Open to the listed e-mail domains"
        OPEN = "open", "Open to anyone"

    signup = models.CharField(max_length=10, choices=SignUp.choices, default=SignUp.INVITATION)
    # One domain per line ("example.org"), for SignUp.DOMAINS.
    signup_domains = models.TextField(blank=True)
    # Designers must set up two-factor sign-in (staff always must).
    designers_need_two_factor = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "site policy"
        verbose_name_plural = "site policy"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(signup__in=["closed", "invitation", "domains", "open"]),
                name="site_policy_signup_valid",
            ),
        ]

    def __str__(self) -> str:
        return "Site policy"

    @classmethod
    def current(cls) -> "SitePolicy":
        policy, _ = cls.objects.get_or_create(pk=1)
        return policy


class OidcIdentity(models.Model):
    """An account's identity at an OpenID Connect provider: the provider
    (``issuer``) and its stable id for the person (``subject``, the ID
    token's ``sub``). A sign-in with a known pair signs that account in;
    e-mail addresses and names can change or be recycled, this pair cannot."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    email = models.EmailField(blank=True, help_text="the address the provider verified at the last sign-in")
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "OpenID Connect identity"
        verbose_name_plural = "OpenID Connect identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.user} at {self.issuer}"
