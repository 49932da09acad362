"""Pages, grouped by audience. Views check the shape of input (forms) and
call one service or selector; templates render what they are given."""

from .accounts import (
    PasswordChangePage,
    PasswordResetCompletePage,
    PasswordResetConfirmPage,
    PasswordResetDonePage,
    PasswordResetPage,
    ThrottledLoginView,
    token_revoke_page,
    tokens_page,
)
from .studies import home

__all__ = [
    "PasswordChangePage",
    "PasswordResetCompletePage",
    "PasswordResetConfirmPage",
    "PasswordResetDonePage",
    "PasswordResetPage",
    "ThrottledLoginView",
    "home",
    "token_revoke_page",
    "tokens_page",
]
