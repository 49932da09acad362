"""The one phase-permission table (``services.PHASE_RULES``): the services
refuse by it, pages and templates ask it."""

import pytest
from django.template import Context, Template

from workspace import services
from workspace.errors import PhaseConflict
from workspace.models import Phase, Study
from workspace.services import PHASE_RULES, Action

pytestmark = pytest.mark.django_db

PHASES = list(Phase.values)


def test_every_action_has_a_rule_over_real_phases():
    assert set(PHASE_RULES) == set(Action)
    for rule in PHASE_RULES.values():
        assert rule.phases and set(rule.phases) <= set(PHASES)
        assert list(rule.phases) == sorted(rule.phases, key=PHASES.index)


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("phase", PHASES)
def test_allows_refusal_and_require_agree(action, phase):
    study = Study(phase=phase)
    allowed = phase in PHASE_RULES[action].phases
    assert services.phase_allows(study, action) is allowed
    refusal = services.phase_refusal(study, action)
    assert (refusal is None) is allowed
    if allowed:
        services.require_phase(study, action)
    else:
        assert refusal == (
            f"{PHASE_RULES[action].doing} is only possible in the "
            f"{' or '.join(Phase(p).label.lower() for p in PHASE_RULES[action].phases)} phase; "
            f"the study is in the {Phase(phase).label.lower()} phase"
        )
        with pytest.raises(PhaseConflict, match=refusal):
            services.require_phase(study, action)


def test_a_page_names_the_change_its_own_way():
    refusal = services.phase_refusal(Study(phase=Phase.VOTING), Action.REMOVE_METRIC, "Removing metrics")
    assert refusal == "Removing metrics is only possible in the draft phase; the study is in the voting phase"


@pytest.mark.parametrize("phase", PHASES)
def test_the_services_refuse_by_the_table(make_study, phase):
    built = make_study(phase)
    allowed = services.phase_allows(built.study, Action.ADD_ATTRIBUTE)
    try:
        services.attribute_add(study=built.study, name="Robustness", kind="main")
    except PhaseConflict as conflict:
        assert not allowed
        assert str(conflict) == services.phase_refusal(built.study, Action.ADD_ATTRIBUTE)
    else:
        assert allowed


@pytest.mark.parametrize("phase", PHASES)
def test_templates_ask_the_table(phase):
    study = Study(phase=phase)
    template = Template(
        "{% load phases %}{% if study|allows:'launch_run' %}runs{% endif %}"
        "{% if study|selection_fixed %} selected{% endif %}"
        "{% if study|opened:'vote' %} voted{% endif %}"
    )
    expected = (
        ("runs" if phase == Phase.CLOSED else "")
        + (" selected" if phase in (Phase.ASSESSMENT, Phase.CLOSED) else "")
        + (" voted" if phase != Phase.DRAFT else "")
    )
    assert template.render(Context({"study": study})) == expected
