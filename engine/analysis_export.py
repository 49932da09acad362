"""A robustness analysis's summary as CSV: one builder for the page's
download and the API's (``engine.analyses`` stores the summary)."""

from typing import cast

from workspace.csv_safe import CSV_CONTENT_TYPE, csv_text

from .models import Analysis

ANALYSIS_CSV_CONTENT_TYPE = CSV_CONTENT_TYPE


def analysis_csv_rows(analysis: Analysis) -> list[list[object]]:
    """The summary as rows, header first: Monte Carlo, one row per
    candidate (most often best first); leave-one-out, one row per expert."""
    summary = cast(dict, analysis.result)["summary"]
    if analysis.kind == Analysis.Kind.LEAVE_ONE_OUT:
        header: list[object] = ["expert_left_out", "winner", "top_three", "kendall_tau", "changes_winner"]
        return [header] + [
            [
                row["expert"],
                " | ".join(row["winner"]),
                " | ".join(row["top_three"]),
                "" if row["tau"] is None else row["tau"],
                row["changes_winner"],
            ]
            for row in summary["rows"]
        ]
    ranks = len(summary["candidates"][0]["ranks"]) if summary["candidates"] else 0
    # The 95 % Wilson intervals, in analyses stored since issue 31.
    wilson = bool(summary["candidates"]) and "wilson_best" in summary["candidates"][0]
    header = ["candidate", "p_best", "se_best", *(["p_best_low_95", "p_best_high_95"] if wilson else [])]
    header += [f"p_rank_{r + 1}" for r in range(ranks)]
    header += [f"central_weight:{name}" for name in summary["attributes"]]
    return [header] + [
        [
            row["name"],
            row["p_best"],
            row["se_best"],
            *(row["wilson_best"] if wilson else []),
            *row["ranks"],
            *(row["central_weights"] or [""] * len(summary["attributes"])),
        ]
        for row in summary["candidates"]
    ]


def analysis_csv(analysis: Analysis) -> str:
    """The rows through the one CSV writer: a candidate's or an expert's
    name a spreadsheet would run as a formula starts with ``'``."""
    return csv_text(analysis_csv_rows(analysis), line_end="\n")


def analysis_csv_filename(run_id: int, analysis: Analysis) -> str:
    return f"run-{run_id}-{analysis.kind}-{analysis.pk}.csv"
