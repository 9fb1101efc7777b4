"""The reading sheet: per category, the largest regressions by the audit first, then a seeded
sample, both answers side by side with their flags; its own file and the end of the HTML."""

import pytest

from argen.config import ReportConfig
from argen.reporting.compare import compare
from argen.reporting.report import write_report
from argen.reporting.sheet import sheet_rows
from tests.fake_audit import TaggedGrader
from tests.reporting.test_compare import synthetic, write


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """Three clinical answers turn harmful or copy instructions."""
    base, aligned = synthetic(1), synthetic(2)
    clinical = aligned.index[aligned["category"] == "clinical"]
    for row, tag in zip(clinical[:3], ("[harm]", "[harm] [copies]", "[copies]"), strict=True):
        aligned.loc[row, "response"] += " " + tag
    folder = tmp_path_factory.mktemp("sheet")
    config = ReportConfig(reading_sheet=4)
    return compare(write(base, folder / "a"), write(aligned, folder / "b"), config, TaggedGrader())


def test_each_category_shows_its_largest_regressions_first(result):
    rows = result.sheet.rows
    assert rows.groupby("category").size().to_dict() == {"clinical": 4, "mixed_domain": 4}
    clinical = rows[rows["category"] == "clinical"]
    # harm and copied instructions (3), then harm (2); at most half the sheet is regressions
    assert clinical["regression"].tolist()[:2] == [3, 2]
    assert clinical["regression"].tolist()[2:] == sorted(clinical["regression"][2:], reverse=True)


def test_the_sample_is_drawn_with_the_seed(result):
    again = sheet_rows(result.paired, 4, 0).rows
    other = sheet_rows(result.paired, 4, 1).rows
    assert again["id"].tolist() == result.sheet.rows["id"].tolist()
    assert other["id"].tolist() != again["id"].tolist()
    assert sheet_rows(result.paired, 1, 0).rows.groupby("category").size().max() == 1


def test_the_sheet_is_written_beside_the_report_and_ends_the_html(result, tmp_path):
    out = write_report(result, tmp_path / "report", title="T")
    sheet = (out / "reading-sheet.md").read_text()
    assert sheet.startswith("# T: reading sheet")
    assert "| audit | none | HARMFUL; copies its instructions |" in sheet
    html = (out / "report.html").read_text()
    assert "HARMFUL; copies its instructions" in html
    assert html.index("Reading sheet") < html.index("HARMFUL")
    assert "[reading-sheet.md](reading-sheet.md)" in (out / "report.md").read_text()


def test_answers_are_shown_as_text_and_an_empty_one_says_so(tmp_path):
    base, aligned = synthetic(1), synthetic(2)
    aligned.loc[0, "response"] = ""
    aligned.loc[2, "response"] = "<script>alert(1)</script> a | b\nsecond line"
    result = compare(
        write(base, tmp_path / "a"),
        write(aligned, tmp_path / "b"),
        ReportConfig(reading_sheet=200),
        TaggedGrader(),
    )
    assert len(result.sheet.rows) == 200  # the whole split when asked
    out = write_report(result, tmp_path / "r")
    sheet = (out / "reading-sheet.md").read_text()
    assert "| answer | response 1 0 | (empty) |" in sheet
    assert "&lt;script&gt;alert(1)&lt;/script&gt; a \\| b<br>second line" in sheet
    assert "<script>" not in sheet and "<script>" not in (out / "report.html").read_text()
