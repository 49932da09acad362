"""Store each prioritisation's result (weights, consistency ratio, most
inconsistent judgments, by item name) when it is saved, so reading it does
not recompute it. Existing prioritisations get theirs computed here, from
the rows they were saved with."""

from django.db import migrations, models

from engine.prioritisation import prioritise


def _result(prioritisation, items, item_field):
    names = [item.name for item in items]
    if prioritisation.method == "direct":
        given = {getattr(w, f"{item_field}_id"): w.given for w in prioritisation.weights.all()}
        result = prioritise("direct", len(items), weights=[given[item.pk] for item in items])
    else:
        index = {item.pk: position for position, item in enumerate(items)}
        judgments = [
            (index[j.row_id], index[j.column_id], min(max(j.value, 1 / 9), 9.0)) for j in prioritisation.judgments.all()
        ]
        result = prioritise(prioritisation.method, len(items), judgments=judgments)
    return {
        "weights": dict(zip(names, [float(w) for w in result.weights], strict=True)),
        "consistency_ratio": result.consistency_ratio,
        "most_inconsistent": [
            {
                "row": names[j.row],
                "column": names[j.column],
                "value": float(j.value),
                "error": float(j.error),
                "suggested_value": float(j.suggested_value),
            }
            for j in result.most_inconsistent
        ],
    }


def store_results(apps, schema_editor):
    QualityAttribute = apps.get_model("workspace", "QualityAttribute")
    Metric = apps.get_model("workspace", "Metric")
    for prioritisation in apps.get_model("workspace", "AttributePrioritisation").objects.select_related("expert"):
        items = QualityAttribute.objects.filter(study_id=prioritisation.expert.study_id, is_selected=True)
        items = list(items.order_by("position", "id"))
        prioritisation.result = _result(prioritisation, items, "attribute")
        prioritisation.save(update_fields=["result"])
    for prioritisation in apps.get_model("workspace", "MetricPrioritisation").objects.all():
        items = Metric.objects.filter(attribute_id=prioritisation.attribute_id, is_selected=True)
        items = list(items.order_by("position", "id"))
        prioritisation.result = _result(prioritisation, items, "metric")
        prioritisation.save(update_fields=["result"])


class Migration(migrations.Migration):

    dependencies = [
        ("workspace", "0003_judgment_pair_and_default_range"),
    ]

    operations = [
        migrations.AddField(
            model_name="attributeprioritisation",
            name="result",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="metricprioritisation",
            name="result",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(store_results, migrations.RunPython.noop),
    ]
