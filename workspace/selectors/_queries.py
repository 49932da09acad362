"""What the selector modules share: who asks, and a count as a subquery."""

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import F, Func, QuerySet, Subquery
from django.db.models.functions import Coalesce

User = AbstractBaseUser | AnonymousUser


def count_of(queryset: QuerySet) -> Coalesce:
    """``SELECT COUNT(*)`` of ``queryset`` as a subquery expression."""
    counted = queryset.order_by().annotate(total=Func(F("pk"), function="COUNT")).values("total")
    return Coalesce(Subquery(counted[:1]), 0)
