"""The pages a newcomer meets: login, logout, the study list, the admin."""

import io

from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from tests.fixtures import PASSWORD
from tests.two_factor import verified_client
from workspace import services
from workspace.models import Phase


def test_login_page_renders_a_form_with_csrf(client, db):
    # (db: the site policy says whether the page offers sign-up)
    response = client.get(reverse("login"))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="username"' in body and 'name="password"' in body
    assert "csrfmiddlewaretoken" in body


def test_login_logs_in_and_lands_on_the_study_list(cast):
    client = Client(enforce_csrf_checks=True)
    page = client.get(reverse("login"))
    token = page.cookies["csrftoken"].value
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert client.get(reverse("home")).context["user"].username == "alice"


def test_login_without_csrf_token_is_refused(cast):
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_wrong_password_shows_the_error_and_logs_nobody_in(client, cast):
    response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert "correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_login_is_throttled_after_repeated_failures(client, cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    for _ in range(3):
        assert client.post(reverse("login"), {"username": "alice", "password": "guess"}).status_code == 200
    # Locked out: even the right password is refused until the window passes.
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 429
    assert "Too many failed attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session
    cache.clear()
    assert client.post(reverse("login"), {"username": "alice", "password": PASSWORD}).status_code == 302


def test_login_throttle_ignores_a_forged_forwarded_for_header(client, cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    for attempt in range(3):
        client.post(
            reverse("login"), {"username": "alice", "password": "guess"}, HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}"
        )
    response = client.post(
        reverse("login"), {"username": "alice", "password": PASSWORD}, HTTP_X_FORWARDED_FOR="198.51.100.99"
    )
    assert response.status_code == 429


def test_logout_needs_post(client, cast):
    client.force_login(cast.alice)
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 302
    assert "_auth_user_id" not in client.session


def test_home_requires_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_home_lists_only_my_studies_with_my_roles(client, cast, make_study):
    mine = make_study(Phase.VOTING)  # alice designs; bob and carol are experts
    services.study_create(designer=cast.charlie, title="Charlie's secret study")
    client.force_login(cast.bob)
    body = client.get(reverse("home")).content.decode()
    assert mine.study.title in body
    assert "Charlie's secret study" not in body
    studies = list(client.get(reverse("home")).context["studies"])
    assert [s.pk for s in studies] == [mine.study.pk]
    assert [m.role for m in studies[0].my_memberships] == ["expert"]
    # Anyone may start a study from here, without typing its URL.
    assert '<a class="button button--primary" href="/studies/new/">New study</a>' in body


def test_home_query_count_does_not_grow_with_studies(client, cast, django_assert_num_queries):
    client.force_login(cast.alice)
    for count in (1, 6):
        while cast.alice.designed_studies.count() < count:
            services.study_create(designer=cast.alice, title=f"Study {cast.alice.designed_studies.count()}")
        # session, user, the studies with their designers, alice's memberships,
        # the experts of the studies she designs, the invitations addressed to
        # her (the dashboard: tests/pages/test_studyhome.py)
        with django_assert_num_queries(7):  # with the header's unread notifications
            response = client.get(reverse("home"))
        assert len(response.context["studies"]) == count


def test_admin_shows_the_demo_study(client, django_user_model):
    from django.core.management import call_command

    call_command("load_demo", "--force", stdout=io.StringIO())
    admin = django_user_model.objects.get(username="admin")
    verified_client(admin, client)  # staff sign in with a second factor (tests/two_factor.py)
    response = client.get(reverse("admin:workspace_study_changelist"))
    assert response.status_code == 200
    assert "Cancer diagnosis from microarray data" in response.content.decode()


def test_every_admin_list_and_change_page_opens(client, django_user_model):
    from django.contrib import admin
    from django.core.management import call_command

    from engine.services import run_execute, run_launch
    from workspace.models import Study

    call_command("load_demo", "--force", stdout=io.StringIO())
    study = Study.objects.get()
    run = run_launch(study=study, launched_by=study.designer)
    run_execute(run_id=run.pk)
    verified_client(django_user_model.objects.get(username="admin"), client)
    opened = []
    for model in admin.site._registry:
        meta = model._meta
        changelist = client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        assert changelist.status_code == 200, meta.label
        first = model.objects.first()
        if first is not None:
            change = client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[first.pk]))
            assert change.status_code == 200, meta.label
            opened.append(meta.label)
    # The demo fills every model the study uses, and the run is in the admin.
    assert {"engine.Run", "workspace.Study", "workspace.PeerWeight", "workspace.AttributeWeight"} <= set(opened)


def test_admin_freezes_thresholds_once_voting_has_closed(client, cast, make_study):
    cast.alice.is_staff = cast.alice.is_superuser = True
    cast.alice.save()
    verified_client(cast.alice, client)  # staff sign in with a second factor (tests/two_factor.py)
    draft, closed = make_study(Phase.DRAFT), make_study(Phase.CLOSED)
    draft_page = client.get(reverse("admin:workspace_study_change", args=[draft.study.pk])).content.decode()
    closed_page = client.get(reverse("admin:workspace_study_change", args=[closed.study.pk])).content.decode()
    assert 'name="attribute_threshold"' in draft_page
    assert 'name="attribute_threshold"' not in closed_page and 'name="metric_threshold"' not in closed_page
