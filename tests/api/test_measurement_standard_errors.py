"""GET/PUT /api/v1/studies/{id}/measurements/ with the optional
``standard_error`` of each value (issue 20, item 4)."""

from workspace.models import Measurement


def test_put_sets_and_get_reads_standard_errors(make_study, cast, api):
    built = make_study("draft")
    alice = api(cast.alice)
    url = f"/api/v1/studies/{built.study.pk}/measurements/"
    body = [
        {"candidate": "J48", "metric": "AUC", "value": 0.8, "standard_error": 0.03},
        {"candidate": "JRip", "metric": "AUC", "value": 0.9},
    ]
    response = alice.put(url, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == body
    rows = {(r["candidate"], r["metric"]): r for r in alice.get(url).json()["results"]}
    assert rows[("J48", "AUC")] == {"candidate": "J48", "metric": "AUC", "value": 0.8, "standard_error": 0.03}
    assert rows[("JRip", "AUC")]["standard_error"] is None
    # null removes it
    assert alice.put(url, [{**body[0], "standard_error": None}], format="json").status_code == 200
    assert Measurement.objects.get(study=built.study, candidate__name="J48", metric__name="AUC").standard_error is None


def test_put_refuses_a_negative_standard_error_naming_it(make_study, cast, api, unchanged):
    built = make_study("draft")
    url = f"/api/v1/studies/{built.study.pk}/measurements/"
    with unchanged():
        response = api(cast.alice).put(
            url,
            [
                {"candidate": "J48", "metric": "AUC", "value": 0.8},
                {"candidate": "JRip", "metric": "AUC", "value": 0.9, "standard_error": -0.5},
            ],
            format="json",
        )
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "measurements[1].standard_error": ["must be 0 or more (a standard error), got -0.5"]
    }
