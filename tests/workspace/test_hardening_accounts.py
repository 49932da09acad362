"""Issue 17, findings 3-5: the lock-out keyed on the name Django's
authentication reads (NFKC, case folded), look-alike usernames refused,
password-reset mail throttled and sent by a task, and one-line names that
refuse control, bidirectional and zero-width characters."""

import os
import subprocess
import sys
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from tests.fixtures import PASSWORD, api_error, error_fields
from tests.two_factor import verified_client
from workspace import invitations, services
from workspace.bundles import study_import_bundle
from workspace.errors import InvalidInput
from workspace.mail import password_reset_mail_send
from workspace.models import Phase, Study
from workspace.services._checks import subject_line
from workspace.services.accounts import username_key

User = get_user_model()
API = "/api/v1"
ADDRESS = "203.0.113.5"


def login(username, password, address=ADDRESS):
    return Client(REMOTE_ADDR=address).post(reverse("login"), {"username": username, "password": password})


def api_token(username, password, address=ADDRESS):
    return APIClient(REMOTE_ADDR=address).post(
        API + "/auth/token/", {"username": username, "password": password}, format="json"
    )


# --- finding 3: the lock-out and look-alike usernames --------------------------------


def test_the_username_key_is_nfkc_then_case_folded():
    assert username_key("ａｌｉｃｅ") == username_key("ALICE") == username_key(" Alice ") == "alice"
    assert username_key("STRASSE") == username_key("straße")
    assert username_key("bob") != username_key("alice")


def test_a_full_width_username_signs_in_as_the_account(cast):
    """Why the lock-out must key on the normalised name: Django's log-in form
    reads ``ａｌｉｃｅ`` as ``alice``."""
    assert login("ａｌｉｃｅ", PASSWORD).status_code == 302


@pytest.mark.parametrize("variant", ["ａｌｉｃｅ", "ALICE", "Ａｌｉｃｅ"])
def test_look_alike_usernames_count_against_the_same_lock_out(cast, settings, variant):
    settings.LOGIN_FAILURE_LIMIT = 3
    for _ in range(2):
        assert login("alice", "guess").status_code == 200
    # A wrong guess under a variant is counted too: the third failure.
    assert login(variant, "guess").status_code == 200
    for name in ("alice", variant):
        refused = login(name, PASSWORD)
        assert refused.status_code == 429, name
        assert "Too many failed attempts for this username from your address" in refused.content.decode()
    # Bob behind the same address is not affected.
    assert login("bob", PASSWORD).status_code == 302


def test_the_token_endpoint_counts_against_the_same_lock_out(cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"login": "1000/minute"}}
    for name in ("ａｌｉｃｅ", "ALICE"):
        assert api_token(name, "guess").status_code == 400
    assert login("alice", "guess").status_code == 200
    refused = api_token("alice", PASSWORD)
    assert refused.status_code == 429
    assert refused.json() == api_error(
        "throttled", "Too many failed attempts for this username from your address. Try again in 5 minutes."
    )
    assert int(refused["Retry-After"]) == settings.LOGIN_FAILURE_WINDOW
    assert api_token("ａｌｉｃｅ", PASSWORD).status_code == 429
    assert login("alice", PASSWORD).status_code == 429
    # Another address, and another account, are not locked.
    assert api_token("bob", PASSWORD).status_code == 201
    created = api_token("ａｌｉｃｅ", PASSWORD, address="198.51.100.7")
    assert created.status_code == 201  # read as the log-in form reads it
    assert cast.alice.api_tokens.count() == 1


def test_an_api_success_clears_that_usernames_count(cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    for _ in range(2):
        api_token("alice", "guess")
    assert api_token("ALICE", PASSWORD).status_code == 400  # no such account: another failure
    assert login("alice", PASSWORD).status_code == 429
    assert api_token("alice", PASSWORD, address="198.51.100.7").status_code == 201


@pytest.fixture
def link_key(make_study, cast):
    built = make_study(Phase.DRAFT)
    return invitations.invitation_create(study=built.study, created_by=cast.alice)[1]


@pytest.mark.parametrize("name", ["Ｂｏｂ", "BOB", "Bob", "ｂｏｂ"])
def test_link_sign_up_refuses_a_name_that_reads_as_an_existing_one(link_key, unchanged, name):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        invitations.invitation_accept_with_signup(key=link_key, username=name, password="a-fresh-passphrase-31")
    assert refused.value.errors == {"username": ["this username is taken: choose another, or log in if it is yours"]}


@pytest.mark.parametrize(("existing", "new"), [("straße", "STRASSE"), ("STRASSE", "straße"), ("Ǆemal", "ǆemal")])
def test_link_sign_up_refuses_a_look_alike_beyond_ascii_case(link_key, cast, existing, new):
    User.objects.create_user(username=existing, password=PASSWORD)
    with pytest.raises(InvalidInput) as refused:
        invitations.invitation_accept_with_signup(key=link_key, username=new, password="a-fresh-passphrase-31")
    assert list(refused.value.errors) == ["username"]
    assert not User.objects.filter(username=new).exists()


def test_the_sign_up_page_says_the_name_is_taken(make_study, cast):
    built = make_study(Phase.DRAFT)
    client = Client()
    client.force_login(cast.alice)
    link = client.post(f"/studies/{built.study.pk}/experts/link/").context["new_link"].removeprefix("http://testserver")
    response = Client().post(
        link, {"username": "ＣＡＲＯＬ", "password1": "a-fresh-passphrase-31", "password2": "a-fresh-passphrase-31"}
    )
    assert response.status_code == 200
    assert "this username is taken" in response.content.decode()
    assert User.objects.count() == 4


def test_a_new_name_is_kept_in_its_nfkc_form(link_key):
    membership = invitations.invitation_accept_with_signup(
        key=link_key, username="ｄａｎａ", password="a-fresh-passphrase-31"
    )
    assert membership.user.username == "dana"


def test_accounts_created_by_an_import_refuse_look_alikes(cast, unchanged):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.user_get_or_create(username="Alice", field="designer")
    assert list(refused.value.errors) == ["designer"]
    assert "reads as the existing account 'alice'" in refused.value.errors["designer"][0]
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.users_get_or_create(usernames=["dana", "CAROL"], fields=["experts[1]", "experts[2]"])
    assert list(refused.value.errors) == ["experts[2]"]
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.users_get_or_create(usernames=["dana", "DANA"])
    assert list(refused.value.errors) == ["usernames[1]"]
    # The exact name is the account itself; a full-width one is normalised first.
    assert services.user_get_or_create(username="ａｌｉｃｅ") == cast.alice


def test_a_staff_import_naming_a_look_alike_expert_is_refused(case_study, cast, unchanged):
    cast.alice.is_staff = True
    cast.alice.save()
    User.objects.create_user(username="clinician", password=PASSWORD)
    case_study["experts"] = ["Clinician" if name == "clinician" else name for name in case_study["experts"]]
    for section in ("priorities", "ranges", "peer_weights"):
        if isinstance(case_study.get(section), dict) and "clinician" in case_study[section]:
            case_study[section]["Clinician"] = case_study[section].pop("clinician")
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=case_study, importer=cast.alice)
    position = case_study["experts"].index("Clinician")
    assert f"experts[{position}]" in refused.value.errors


def test_an_invitation_by_a_full_width_name_is_addressed_to_the_normal_form(make_study, cast):
    built = make_study(Phase.DRAFT)
    invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice, username="ｄａｎａ")
    assert invitation.username == "dana"


# --- finding 4: password-reset mail ---------------------------------------------------


def reset(email, address=ADDRESS):
    return Client(REMOTE_ADDR=address).post(reverse("password_reset"), {"email": email})


@pytest.fixture
def alice_mail(cast, eager_celery):
    """Alice with an address; the reset mail's task runs in-process (with or
    without a broker configured: no worker runs in the tests)."""
    cast.alice.email = "alice@example.org"
    cast.alice.save()
    return cast.alice


def test_the_mail_is_sent_by_a_task_after_the_request_commits(alice_mail, django_capture_on_commit_callbacks):
    with mock.patch("workspace.mail.password_reset_mail_send.delay") as delay:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            response = reset("alice@example.org")
        assert response.status_code == 302 and mail.outbox == []
        assert len(callbacks) == 1
        delay.assert_not_called()
        callbacks[0]()
    delay.assert_called_once_with(email="alice@example.org", domain="testserver", use_https=False)
    # The task (run eagerly here, by a worker in production) sends it.
    assert password_reset_mail_send(email="alice@example.org", domain="testserver", use_https=False) == 1
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["alice@example.org"]
    assert mail.outbox[0].subject == "Reset your approve password"
    assert "http://testserver/accounts/password/reset/" in mail.outbox[0].body


def test_the_request_does_the_same_work_for_an_existing_and_a_missing_account(
    alice_mail, django_capture_on_commit_callbacks
):
    answers, queries = [], []
    for email in ("alice@example.org", "nobody@example.org"):
        with (
            mock.patch("workspace.mail.password_reset_mail_send.delay") as delay,
            django_capture_on_commit_callbacks(execute=True),
            CaptureQueriesContext(connection) as captured,
        ):
            response = reset(email)
        answers.append((response.status_code, response["Location"], response.content))
        queries.append(len(captured))
        delay.assert_called_once_with(email=email, domain="testserver", use_https=False)
    assert answers[0] == answers[1] == (302, reverse("password_reset_done"), b"")
    # No account is looked up in the request.
    assert queries == [0, 0]


def test_the_request_over_the_limit_per_address_sends_nothing_and_answers_the_same(
    alice_mail, settings, django_capture_on_commit_callbacks
):
    settings.PASSWORD_RESET_MAIL_LIMIT = 2
    answers = []
    for position, spelling in enumerate(["alice@example.org", "ALICE@example.org", "Alice@Example.org"]):
        with django_capture_on_commit_callbacks(execute=True):
            response = reset(spelling, address=f"198.51.100.{position}")
        answers.append((response.status_code, response["Location"]))
    assert answers == [(302, reverse("password_reset_done"))] * 3
    assert len(mail.outbox) == 2


def test_the_requests_over_the_limit_per_client_send_nothing(alice_mail, settings, django_capture_on_commit_callbacks):
    settings.PASSWORD_RESET_CLIENT_LIMIT = 3
    for position in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            assert reset(f"someone{position}@example.org").status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        response = reset("alice@example.org")
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    assert mail.outbox == []
    with django_capture_on_commit_callbacks(execute=True):
        reset("alice@example.org", address="198.51.100.9")
    assert len(mail.outbox) == 1


def test_the_task_sends_at_most_the_limit_per_account(alice_mail, settings):
    settings.PASSWORD_RESET_MAIL_LIMIT = 2
    sent = [password_reset_mail_send(email="alice@example.org", domain="testserver", use_https=True) for _ in range(3)]
    assert sent == [1, 1, 0] and len(mail.outbox) == 2
    assert "https://testserver/" in mail.outbox[0].body
    assert password_reset_mail_send(email="nobody@example.org", domain="testserver", use_https=True) == 0


def test_a_broker_outage_does_not_fail_the_page(alice_mail, django_capture_on_commit_callbacks):
    with (
        mock.patch("workspace.mail.password_reset_mail_send.delay", side_effect=OSError("broker down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = reset("alice@example.org")
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")


# --- finding 5: one-line text ---------------------------------------------------------

HOSTILE = {
    "carriage return": "Trial\rBcc: evil@example.org",
    "line feed": "Trial\nBcc: evil@example.org",
    "NUL": "J48\x00",
    "bell (C0)": "J48\x07",
    "next line (C1)": "J48\x85x",
    "delete": "J48\x7f",
    "right-to-left override": "J48\u202e",
    "left-to-right embedding": "\u202aJ48",
    "first strong isolate": "J48\u2068",
    "pop directional isolate": "J48\u2069",
    "zero-width space": "J48\u200b",
    "zero-width joiner": "J\u200d48",
    "word joiner": "J48\u2060",
    "byte order mark": "\ufeffJ48",
    "line separator": "J48\u2028x",
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_title_with_a_control_or_invisible_character_is_refused(cast, unchanged, value):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.study_create(designer=cast.alice, title=value)
    assert list(refused.value.errors) == ["title"]


def test_the_message_names_the_character(cast):
    with pytest.raises(InvalidInput) as refused:
        services.study_create(designer=cast.alice, title="Trial\r\nBcc: x")
    assert refused.value.errors == {
        "title": ["must be a single line of visible text: it contains a carriage return (U+000D)"]
    }
    with pytest.raises(InvalidInput) as refused:
        services.study_create(designer=cast.alice, title="abc\u202edef")
    assert refused.value.errors["title"] == [
        "must be a single line of visible text: it contains a bidirectional control (U+202E)"
    ]
    with pytest.raises(InvalidInput) as refused:
        services.study_create(designer=cast.alice, title="J48\u200b")
    assert refused.value.errors["title"] == [
        "must be a single line of visible text: it contains an invisible character (U+200B)"
    ]


def test_every_single_line_name_refuses_them(make_study, cast, unchanged):
    built = make_study(Phase.DRAFT)
    study = built.study
    attribute = built.attributes["Accuracy"]
    calls = {
        "title": lambda: services.study_update(study=study, title="New\ntitle"),
        "attribute": lambda: services.attribute_add(study=study, name="Speed\u200b"),
        "attribute rename": lambda: services.attribute_update(attribute=attribute, name="Accuracy\u2060"),
        "metric": lambda: services.metric_add(study=study, attribute=attribute, name="AUC\u200b"),
        "unit": lambda: services.metric_add(study=study, attribute=attribute, name="F1", unit="m\rs"),
        "candidate": lambda: services.candidate_add(study=study, name="J48\u200b"),
        "token": lambda: services.api_token_create(user=cast.alice, name="laptop\u202e"),
        "invitation": lambda: invitations.invitation_create(study=study, created_by=cast.alice, username="dana\u200b"),
    }
    fields = {
        "title": "title",
        "attribute": "name",
        "attribute rename": "name",
        "metric": "name",
        "unit": "unit",
        "candidate": "name",
        "token": "name",
        "invitation": "username",
    }
    for what, call in calls.items():
        with unchanged(), pytest.raises(InvalidInput) as refused:
            call()
        assert list(refused.value.errors) == [fields[what]], what
        assert "single line of visible text" in refused.value.errors[fields[what]][0], what


def test_j48_and_j48_with_a_zero_width_space_cannot_sit_side_by_side(make_study, unchanged):
    built = make_study(Phase.DRAFT)
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.candidates_add(study=built.study, candidates=[{"name": "J48\u200b"}])
    assert list(refused.value.errors) == ["candidates[0].name"]


def test_descriptions_and_posts_keep_their_lines(make_study, cast):
    built = make_study(Phase.DRAFT)
    attribute = services.attribute_add(study=built.study, name="Speed", description="fast\nand cheap")
    assert attribute.description == "fast\nand cheap"
    study = services.study_update(study=built.study, description="line one\r\nline two")
    assert study.description == "line one\r\nline two"


def test_a_prediction_set_name_refuses_them(make_study, cast):
    import io

    from evaluation.services import prediction_set_import

    built = make_study(Phase.DRAFT)
    with pytest.raises(InvalidInput) as refused:
        prediction_set_import(study=built.study, stream=io.BytesIO(b""), name="test set\u200b", uploaded_by=cast.alice)
    assert list(refused.value.errors) == ["name"]


def test_the_api_refuses_them_naming_the_field(cast):
    client = APIClient()
    client.force_authenticate(cast.alice)
    before = Study.objects.count()
    response = client.post(API + "/studies/", {"title": "Trial\u202eBcc"}, format="json")
    assert response.status_code == 400
    assert error_fields(response)["title"] == [
        "must be a single line of visible text: it contains a bidirectional control (U+202E)"
    ]
    assert Study.objects.count() == before


def test_a_bundle_import_refuses_them_naming_the_path(case_study, cast, unchanged):
    case_study["candidates"][1]["name"] = case_study["candidates"][0]["name"] + "\u200b"
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=case_study, importer=None)
    assert list(refused.value.errors) == ["candidates[1].name"]


def test_a_bundle_title_with_a_line_break_is_refused(case_study, cast, unchanged):
    case_study["title"] = "Trial\r\nBcc: evil@example.org"
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=case_study, importer=None)
    assert list(refused.value.errors) == ["title"]


def test_subject_line_makes_one_line():
    assert subject_line("Reminder: Trial\r\nBcc: evil@example.org") == "Reminder: Trial Bcc: evil@example.org"
    assert subject_line("J4\u200b8 \u202eabc\x85 x\u2028y") == "J48 abc x y"
    long = subject_line("x" * 500)
    assert len(long) == 150 and long.endswith("…")


def test_a_reminder_for_an_old_title_with_a_line_break_is_sent_with_a_clean_subject(
    make_study, cast, django_capture_on_commit_callbacks, eager_celery
):
    built = make_study(Phase.VOTING)
    # A title stored before titles were checked.
    Study.objects.filter(pk=built.study.pk).update(title="Trial\r\nBcc: evil@example.org")
    User.objects.filter(username="bob").update(email="bob@example.org")
    client = Client()
    client.force_login(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):  # the notifications' task sends it after the commit
        response = client.post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["bob"]})
    assert response.status_code == 200
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject == "Reminder: Trial Bcc: evil@example.org"
    assert message.to == ["bob@example.org"] and message.bcc == []
    assert "evil@example.org" not in message.message()["Bcc"] if message.message()["Bcc"] else True


@pytest.mark.parametrize("name", ["ａｌｉｃｅ", "ALICE", "Alice"])
def test_the_admin_refuses_a_look_alike_username(cast, name):
    admin = User.objects.create_superuser(username="root", password=PASSWORD)
    client = verified_client(admin)  # staff sign in with a second factor (tests/two_factor.py)
    before = User.objects.count()
    added = client.post(
        "/admin/auth/user/add/",
        {"username": name, "usable_password": "false", "password1": "", "password2": ""},
    )
    assert added.status_code == 200
    assert "this username is taken" in added.context["adminform"].form.errors["username"][0]
    assert User.objects.count() == before
    page = client.get(f"/admin/auth/user/{cast.bob.pk}/change/")
    data = {
        key: value
        for key, value in page.context["adminform"].form.initial.items()
        if key in ("username", "first_name", "last_name", "email", "is_active")
    }
    data.update({"username": name, "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"})
    renamed = client.post(f"/admin/auth/user/{cast.bob.pk}/change/", data)
    assert renamed.status_code == 200
    assert "this username is taken" in renamed.context["adminform"].form.errors["username"][0]
    cast.bob.refresh_from_db()
    assert cast.bob.username == "bob"
    # Bob keeping his own name is no clash.
    data["username"] = "bob"
    kept = client.post(f"/admin/auth/user/{cast.bob.pk}/change/", data)
    assert kept.status_code == 302, kept.context["adminform"].form.errors if kept.context else kept


def test_a_worker_finds_the_reset_mail_task():
    """Workers import the task's module (CELERY_IMPORTS): it is not in an
    app's tasks.py, which Celery would find by itself. A fresh process, as a
    worker starts."""
    script = (
        "import django; django.setup(); import sys; from approve_site.celery import app; "
        "assert 'workspace.mail' not in sys.modules; app.loader.import_default_modules(); "
        "print('workspace.mail.password_reset_mail_send' in app.tasks)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "approve_site.settings"}
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert found.stdout.strip() == "True", found.stderr


@pytest.mark.parametrize("control", [chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))])
def test_text_of_many_lines_refuses_every_bidirectional_control_as_a_title_does(make_study, cast, control):
    # One rule (services._checks): a post, a description, a round's message and reason hold none either.
    built = make_study(Phase.VOTING)
    accuracy = built.attributes["Accuracy"]
    with pytest.raises(InvalidInput) as refused:
        services.post_add(study=built.study, author=cast.bob, attribute=accuracy, body=f"a{control}b")
    assert refused.value.errors == {"body": [f"must not contain a bidirectional control (U+{ord(control):04X})"]}
    with pytest.raises(InvalidInput) as refused:
        services.study_create(designer=cast.alice, title="Trial", description=f"Line one\nline{control} two")
    assert list(refused.value.errors) == ["description"]


def test_text_of_many_lines_keeps_line_breaks_marks_and_joiners(make_study, cast):
    built = make_study(Phase.VOTING)
    body = "First line\nsecond, with a mark \u200f and a family \U0001f468\u200d\U0001f469\u200d\U0001f467"
    post = services.post_add(study=built.study, author=cast.bob, attribute=built.attributes["Accuracy"], body=body)
    assert post.body == body
