"""A staged restatement's review, as one Markdown file to post as a pull-request comment.

``tardy restate --no-promote --review PATH`` writes it (and always to the restatement's report
folder as ``review.md``): what was asked and why, the manifest (impacted intervals, the stock
equivalent), the diff and the circuit breaker (``Diff.markdown``), every audit's result, how to
query the staged environment, and the commands that promote or discard it.
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from tardy.engine.outcome import Outcome


def _spans(spans: list[list[str]]) -> str:
    return ", ".join(a if a == b else f"{a}..{b}" for a, b in spans) or "-"


def markdown(outcome: Outcome, request_path: str | None = None) -> str:
    """The review of ``outcome`` (a staged, or promoted, restatement)."""
    rid = outcome.restatement_id
    manifest = outcome.manifest
    lines = [f"## tardy restatement `{rid}`: {outcome.status}", ""]
    if request_path:
        lines.append(f"Request: `{request_path}`")
    if manifest is not None:
        if manifest.named:
            named = manifest.named
            lines.append(
                f"Named: {', '.join(f'`{m}`' for m in t.cast('list[str]', named['models']))} "
                f"over {named['start']}..{named['end']} and everything downstream."
            )
        else:
            lines.append(
                f"Detected: {manifest.late_rows:,} bronze changes not yet in prod "
                f"(bronze version {manifest.since_bronze_version} -> "
                f"{manifest.bronze_version})."
            )
        lines += ["", "### Impacted intervals", "", "| model | intervals | why |", "|---|---|---|"]
        for model, spans in manifest.impacted.items():
            if spans:
                why = manifest.reasons.get(model, "")
                lines.append(f"| `{model}` | {_spans(spans)} | {why} |")
        if manifest.stock_commands:
            lines += ["", "Stock equivalent (recomputes whole hulls, straight into prod):", ""]
            lines += [f"    {command}" for command in manifest.stock_commands]
    if outcome.diff is not None:
        lines += ["", outcome.diff.markdown().rstrip()]
    failed = [a for a in outcome.audits if a.failed]
    lines += [
        "",
        "### Audits",
        "",
        f"{len(outcome.audits)} audit runs, {len(failed)} returned rows "
        f"({sum(1 for a in failed if a.blocking)} blocking).",
    ]
    if failed:
        lines += ["", "| audit | model | interval | rows | blocking |", "|---|---|---|--:|---|"]
        lines += [
            f"| `{a.audit}` | `{a.model}` | {a.span_label} | {a.rows:,} "
            f"| {'yes' if a.blocking else 'no'} |"
            for a in failed
        ]
    if outcome.environment:
        example = next(iter(outcome.views.values()), "")
        lines += [
            "",
            "### Query it",
            "",
            f"Every model is readable as `<schema>__{outcome.environment}.<table>` while this "
            f"restatement is staged, e.g. `SELECT * FROM {example}`.",
        ]
    promote = f"tardy promote --request {request_path}" if request_path else f"tardy promote {rid}"
    discard = f"tardy discard --request {request_path}" if request_path else f"tardy discard {rid}"
    lines += [
        "",
        "### Next",
        "",
        f"- promote (on merge): `{promote}`",
        f"- discard (pull request closed): `{discard}`",
        f"- after promotion, undo: `tardy rollback {rid} --reason ...`",
        "",
    ]
    return "\n".join(lines)
