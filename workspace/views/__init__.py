"""Pages, grouped by audience. Views check the shape of input (forms) and
call one service or selector; templates render what they are given."""

from .accounts import (
    PasswordChangePage,
    PasswordResetCompletePage,
    PasswordResetConfirmPage,
    PasswordResetDonePage,
    PasswordResetPage,
    ThrottledLoginView,
    email_confirm_page,
    email_page,
    token_revoke_page,
    tokens_page,
)
from .discussion import discussion_page, post_edit_page, post_visibility_page, thread_post_page
from .studies import home

__all__ = [
    "PasswordChangePage",
    "PasswordResetCompletePage",
    "PasswordResetConfirmPage",
    "PasswordResetDonePage",
    "PasswordResetPage",
    "ThrottledLoginView",
    "discussion_page",
    "email_confirm_page",
    "email_page",
    "home",
    "post_edit_page",
    "post_visibility_page",
    "thread_post_page",
    "token_revoke_page",
    "tokens_page",
]
