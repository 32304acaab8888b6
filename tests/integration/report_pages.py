"""The demo's report pages checked in headless Chromium: shared by the demo's command
(``test_cli``, long tier) and its steps in-process (``test_demo_story``)."""

from __future__ import annotations

import json
from pathlib import Path

from children import cli_in_process


def assert_report_pages_render(
    engine, home: Path, report: Path, story: dict, tmp_path: Path
) -> None:
    """The demo's last step wrote the HTML report: headless Chromium finds every chart drawn
    with data, no script error and no request beyond the file; `tardy report --restatement`
    writes the reviewer's page of the demo's restatement, drawn the same way."""
    from browser import check_page

    assert report.parent == home / "reports" and report.suffix == ".html"
    page = check_page(report, tmp_path / "report.png")
    assert page.charts == ["daily", "periods", "lateness", "quarantine", "restatements"]
    assert page.errors == [] and page.requests == [] and page.not_drawn == []
    assert page.empty == [] and all(page.points[chart] > 0 for chart in page.charts), page.points
    restated = story["restatement"]["restatement_id"]
    assert restated in page.text and "demo: late and corrected sales for closed days" in page.text
    assert page.screenshot.stat().st_size > 10_000
    # The models section names both versions, each linked to its files, v1 stale.
    assert "Models trained on published versions" in page.text
    assert f"({restated}):" in page.text and "gold.store_features@v2" in page.text
    links = report.read_text().split('<section id="models">')[1].count('<a href="file://')
    assert links == 2
    # The data products section: a card per published model (one releases folder each),
    # with its owner from its MODEL block.
    products = report.read_text().split('<section id="products">')[1].split("</section>")[0]
    assert products.count("<tr>") == len(list((home / "releases").iterdir())) + 1
    assert "finance_analytics" in products and "data_science" in products

    engine.open(home)
    try:
        code, out, err = cli_in_process("report", "--restatement", restated, "--json")
    finally:
        engine.release()
    assert code == 0, err
    written = json.loads(out)
    single = Path(written["path"])
    assert 0 < written["statements"]["report"] <= 12  # a few small reads, whatever the history
    assert single.name == f"restatement-{restated}.html"
    review = check_page(single, tmp_path / "restatement.png")
    assert "intervals" in review.charts and review.points["intervals"] > 0
    assert review.errors == [] and review.requests == [] and review.not_drawn == []
    assert restated in review.text and f"tardy rollback {restated}" in review.text
    assert "a closed day whose rows or measure move by more than 25%" in review.text
