"""The display objects on their own: plain text, HTML escaping, and list behaviour."""

from __future__ import annotations

from pathlib import Path

from jupyter_agent_memory.display import (
    AgentSummary,
    DiffView,
    FactsView,
    HistoryView,
    JournalResult,
    PromptView,
    format_size,
    short_sha,
)
from jupyter_agent_memory.prompt import Section


def test_format_size_and_short_sha() -> None:
    assert [format_size(n) for n in (0, 1023, 1024, 1536, 5 * 1024 * 1024)] == [
        "0 B", "1023 B", "1.0 KB", "1.5 KB", "5.0 MB"]
    assert short_sha("0123456789abcdef" * 4) == "0123456789ab"


def test_facts_view() -> None:
    view = FactsView("# Facts\n- a\n")
    assert view._repr_markdown_() == "# Facts\n- a\n"
    assert str(view) == "# Facts\n- a\n"
    blank = FactsView("  \n")
    assert blank._repr_markdown_() == "*FACT.md is empty.*"
    assert str(blank) == "(FACT.md is empty)"


def test_journal_result_is_a_list() -> None:
    entries = [{"ts": "2026-01-02T00:00:00.000Z", "tags": ["a"], "text": "two\nlines"},
               {"ts": "2026-01-01T00:00:00.000Z", "tags": [], "text": "one"}]
    result = JournalResult(entries, skipped=2, scanned=5)
    assert result == entries and len(result) == 2 and result[1]["text"] == "one"
    assert [e["text"] for e in result] == ["two\nlines", "one"]
    assert str(result).splitlines() == [
        "2026-01-02T00:00:00.000Z  [a] two",
        "                              lines",
        "2026-01-01T00:00:00.000Z  one",
        "(2 entries, newest first; 2 corrupted lines skipped)",
    ]
    assert repr(result).startswith("JournalResult([{'ts'")


def test_journal_result_html_escapes_everything() -> None:
    result = JournalResult([{"ts": "<ts>", "tags": ["<t>", "a&b"], "text": "<script>x</script>",
                             "meta": {"k": "<v>"}}])
    page = result._repr_html_()
    for raw in ("<ts>", "<t>", "<script>", "<v>", "a&b"):
        assert raw not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "&lt;t&gt;, a&amp;b" in page
    assert "<th>meta</th>" in page and "{&quot;k&quot;: &quot;&lt;v&gt;&quot;}" in page
    # Odd values written by other tools still render.
    odd = JournalResult([{"ts": 1, "tags": "not-a-list", "text": None}])
    assert "not-a-list" in odd._repr_html_()
    assert JournalResult(empty_message="No <x>.")._repr_html_() == "<p><em>No &lt;x&gt;.</em></p>"


def test_history_view() -> None:
    sha = "ab" * 32
    view = HistoryView([{"ts": "2026-01-01T00:00:00.000001Z", "sha256": sha, "size": 2048}])
    assert str(view) == f"2026-01-01T00:00:00.000001Z  {sha[:12]}  2.0 KB"
    assert f'title="{sha}"' in view._repr_html_()
    assert str(HistoryView()) == "No earlier FACT.md versions yet."


def test_diff_view() -> None:
    diff = DiffView("a\nb\nc\n", "a\nB\nc\nd\n", "old", "new")
    assert diff.changed and (diff.added, diff.removed) == (2, 1)
    assert diff.summary() == "+2 -1 lines"
    assert str(diff).splitlines() == ["--- old", "+++ new", "@@ -1,3 +1,4 @@", " a", "-b", "+B",
                                      " c", "+d"]
    page = DiffView("<a>\n", "<b>\n")._repr_html_()
    assert "&lt;a&gt;" in page and "<a>" not in page
    same = DiffView("x\n", "x\n")
    assert not same.changed and str(same) == "No differences."
    assert "No differences." in same._repr_html_()


def test_prompt_view_sizes_and_warnings() -> None:
    sections = [Section("memories", None, 40, 10),
                Section("facts", Path("/agents/a/memory/FACT.md"), 8, 2)]
    view = PromptView("## Memories <x>", sections=sections, tokens=12, budget_tokens=5,
                      warnings=["over <budget>"], memory_tokens=12, base_from_file=False,
                      bootstrap=False)
    assert view.over_budget
    text = str(view).splitlines()
    assert text[0] == ("System prompt: 15 chars · ~12 tokens · memory ~12 tokens of a 5-token "
                       "budget · base: client default · bootstrap: off")
    assert text[1] == "WARNING: over <budget>"
    assert text[2:4] == ["  memories  40 chars, ~10 tokens",
                         "  facts     8 chars, ~2 tokens  /agents/a/memory/FACT.md"]
    page = view._repr_html_()
    assert "over &lt;budget&gt;" in page and "## Memories &lt;x&gt;" in page
    assert "<td>40</td><td>10</td></tr>" in page
    assert not PromptView("x", tokens=3, budget_tokens=5).over_budget


def test_agent_summary() -> None:
    summary = AgentSummary(agent_id="research", path="/agents/research",
                           sizes={"SOUL.md": 10, "JOURNAL.jsonl": -1}, template="<guide>")
    assert str(summary).splitlines() == [
        "agent          research",
        "folder         /agents/research",
        "SOUL.md        10 B",
        "JOURNAL.jsonl  missing",
        "template       <guide>",
    ]
    assert "&lt;guide&gt;" in summary._repr_html_()
