"""The site's account policy (issue 32): who may sign up, and who must use
a second factor. One row, edited in the admin (``SitePolicy.current``)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_domain_name
from django.db import models


def domain_key(domain: str) -> str:
    """A domain as sign-up compares it: stripped, without a leading "@" or a
    trailing dot, in IDNA ASCII (``bücher.example`` is
    ``xn--bcher-kva.example``), lower case."""
    domain = domain.strip().removeprefix("@").rstrip(".").lower()
    try:
        return domain.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return domain


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
    # One domain per line ("example.org"), for SignUp.DOMAINS: exact
    # matches only (a subdomain is listed on its own line).
    signup_domains = models.TextField(
        blank=True,
        help_text="For “open to the listed e-mail domains”: one domain per line, like example.org. Only addresses "
        "at exactly these domains may sign up (list a subdomain such as lab.example.org on its own line).",
    )
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

    def domains(self) -> list[str]:
        """The listed sign-up domains, as ``domain_key`` compares them, in
        their order (blank lines aside)."""
        keys = [domain_key(line) for line in self.signup_domains.splitlines()]
        return list(dict.fromkeys(key for key in keys if key))

    def clean(self) -> None:
        wrong = []
        for line in self.signup_domains.splitlines():
            key = domain_key(line)
            if not key:
                continue
            try:
                validate_domain_name(key)
            except ValidationError:
                wrong.append(line.strip())
            else:
                if "." not in key:
                    wrong.append(line.strip())
        if wrong:
            raise ValidationError(
                {"signup_domains": f"not a domain (one per line, like example.org): {', '.join(wrong[:5])}"}
            )
        if self.signup == self.SignUp.DOMAINS and not self.domains():
            raise ValidationError({"signup_domains": "list at least one domain for sign-up open to listed domains"})

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


class SignUpRequest(models.Model):
    """Someone asked to sign up with ``email`` (docs/accounts.md "Self
    sign-up"): the link mailed to the address carries a random token, of
    which only its SHA-256 ``digest`` is kept. The account is created when
    the link is followed, once (``used_at``), before ``expires_at``. Written
    by the mail task only for an address no account has."""

    email = models.EmailField()
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "sign-up request"
        indexes = [models.Index(fields=["email"], name="signup_request_email")]

    def __str__(self) -> str:
        return f"Sign-up of {self.email}"
