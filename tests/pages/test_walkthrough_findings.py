"""What issue 31's new-user walk-through tripped over in the pages: the
progress grid's ranges sentence, the votes step's threshold of zero."""

import pytest

from workspace import services
from workspace.models import Phase

pytestmark = pytest.mark.django_db


def _client(client, user):
    client.force_login(user)
    return client


def test_the_progress_grid_mentions_defaults_only_when_some_apply(make_study, cast, client):
    # Walk-through finding: every metric had its own range, yet "the designer's default applies to the other metrics".
    built = make_study(Phase.ASSESSMENT, inputs=True)
    metrics = list(built.study.metrics.filter(is_selected=True))
    ranges = {m.name: [0.1, 0.9] if m.better == "higher" else [0.9, 0.1] for m in metrics}
    services.ranges_set(expert=built.bob, ranges=ranges)
    home = _client(client, cast.alice).get(f"/studies/{built.study.pk}/").content.decode()
    assert f"{len(metrics)} ranges set." in home
    assert f"{len(metrics)} ranges set; the designer's default applies" not in home


def test_the_votes_step_says_a_metric_threshold_of_zero_in_words(make_study, cast, client):
    built = make_study(Phase.VOTING)
    built.study.metric_threshold = 0
    built.study.save(update_fields=["metric_threshold"])
    page = _client(client, cast.bob).get(f"/studies/{built.study.pk}/my/votes/").content.decode()
    assert "A metric is selected when its attribute is, whatever its votes." in page
    assert "at least 0 votes" not in page


def test_an_excluded_expert_s_step_not_given_reads_not_needed(make_study, cast, client):
    built = make_study(Phase.ASSESSMENT)
    services.expert_absence_set(
        study=built.study, expert=built.carol, absence="excluded", reason="on leave", acting=cast.alice, tell=False
    )
    page = _client(client, cast.carol).get(f"/studies/{built.study.pk}/my/peer-weights/")
    states = {s["step"].key: s["state"] for s in page.context["steps"]}
    assert states["peer_weights"] == "not-needed"
    assert "not needed" in page.content.decode() and "missing" not in states.values()
