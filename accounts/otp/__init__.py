"""Two-factor sign-in (issue 32, item 3; docs/accounts.md, "Two-factor
sign-in"): a TOTP authenticator app with one-time recovery codes, on
django-otp's devices.

- ``services``: who must use it, setting it up, checking a code (with its
  lock-out), recovery codes, turning it off, an administrator's reset;
- ``middleware``: after any sign-in (password, single sign-on, an
  invitation link), a session of a user who has a device, or must have one,
  reaches nothing but the code page (or the set-up page) and logging out;
- ``views``: those pages.
"""
