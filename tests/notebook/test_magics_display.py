"""The display objects: plain text, list behaviour, and HTML that never runs memory text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hostile import ATTACKER_HOST, HOSTILE_FACTS, PAYLOADS, assert_inert, parse
from IPython.core.interactiveshell import InteractiveShell
from IPython.lib.pretty import pretty
from IPython.utils.capture import capture_output

from jupyter_agent_memory import AgentMemory
from jupyter_agent_memory.engine.prompt import Section
from jupyter_agent_memory.notebook.display import (
    AgentSummary,
    DiffView,
    FactsView,
    HistoryView,
    JournalResult,
    PromptView,
    format_size,
    short_sha,
)


def test_format_size_and_short_sha() -> None:
    assert [format_size(n) for n in (0, 1023, 1024, 1536, 5 * 1024 * 1024)] == [
        "0 B", "1023 B", "1.0 KB", "1.5 KB", "5.0 MB"]
    assert short_sha("0123456789abcdef" * 4) == "0123456789ab"


def test_facts_view() -> None:
    view = FactsView("# Facts\n- a\n")
    assert view._repr_html_() == (
        '<div class="jp-AgentMemory-markdown mathjax_ignore tex2jax_ignore"><h1>Facts</h1>\n'
        "<ul>\n<li>a</li>\n</ul>\n</div>"
    )
    assert not hasattr(view, "_repr_markdown_")
    assert str(view) == "# Facts\n- a\n"
    blank = FactsView("  \n")
    assert blank._repr_html_() == "<p><em>FACT.md is empty.</em></p>"
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
    assert re.search(r"<th [^>]*>meta</th>", page)
    assert "{&quot;k&quot;: &quot;&lt;v&gt;&quot;}" in page
    # Odd values written by other tools still render.
    odd = JournalResult([{"ts": 1, "tags": "not-a-list", "text": None}])
    assert "not-a-list" in odd._repr_html_()
    assert JournalResult(empty_message="No <x>.")._repr_html_() == (
        '<div class="mathjax_ignore tex2jax_ignore"><p><em>No &lt;x&gt;.</em></p></div>'
    )


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
    # Lines that themselves start with "++" or "--" are counted and coloured as changes.
    dashes = DiffView("--- rule\nkeep\n", "++ plus\nkeep\n")
    assert (dashes.added, dashes.removed) == (1, 1) and dashes.summary() == "+1 -1 lines"
    spans = dashes._repr_html_().split("</span>")
    assert "font-weight:bold" in spans[0] and "font-weight:bold" in spans[1]
    assert "rgba(244,67,54" in spans[3] and "rgba(76,175,80" in spans[4]
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
    cells = re.findall(r"<td [^>]*>(.*?)</td>", page)
    assert cells == ["memories", "<em>builder text</em>", "40", "10",
                     "facts",
                     '<code style="overflow-wrap:anywhere">/agents/a/memory/FACT.md</code>',
                     "8", "2"]
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


# -- memory written by a model is never live HTML ------------------------------------------
# Notebook front ends run the HTML of live outputs as it is, and an HTML export copies it, so
# every payload must come out as visible text in text/html and raw in text/plain.


@pytest.fixture
def shell(ip: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shell with the extension loaded and a fresh agents root."""
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_ROOT", str(tmp_path / "agents"))
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_AGENT", raising=False)
    monkeypatch.chdir(tmp_path)
    ip.run_line_magic("load_ext", "jupyter_agent_memory")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_agent_memory")


@pytest.fixture
def hostile(shell: InteractiveShell) -> AgentMemory:
    """The active agent ``hostile``, whose FACT.md a model filled with every payload."""
    with capture_output():
        shell.run_line_magic("agent_memory", "hostile")
    mem = AgentMemory.open("hostile")
    assert mem.call_tool({"action": "update", "content": HOSTILE_FACTS}) == "Memory updated."
    return mem


def bundle(shell: InteractiveShell, obj: object) -> dict[str, Any]:
    """The mime bundle a kernel would send for ``obj``."""
    data, _metadata = shell.display_formatter.format(obj)
    return data


def run(shell: InteractiveShell, line: str) -> Any:
    name, _, args = line.partition(" ")
    with capture_output():
        return shell.run_line_magic(name, args)


def visible_text(payload: str) -> str:
    """What a reader must still see of ``payload``: the text itself, or an image's label."""
    if payload.startswith("!["):
        return "image: " + payload[2:payload.index("]")]
    return payload


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_each_payload_alone_renders_inert_and_visible(name: str) -> None:
    payload = PAYLOADS[name]
    data, _ = InteractiveShell.instance().display_formatter.format(FactsView(payload + "\n"))
    assert set(data) == {"text/plain", "text/html"}
    assert data["text/plain"] == payload + "\n"
    text = assert_inert(data["text/html"])
    assert visible_text(payload) in text


def test_fact_magic_bundle_is_sanitised_html_and_raw_text(
    shell: InteractiveShell, hostile: AgentMemory
) -> None:
    data = bundle(shell, run(shell, "fact"))
    assert set(data) == {"text/plain", "text/html"}
    assert data["text/plain"] == HOSTILE_FACTS
    page = data["text/html"]
    text = assert_inert(page)
    for payload in PAYLOADS.values():
        assert visible_text(payload) in text
    for marker in ("<script", "<iframe", "<style", "<img", "<svg", "<details"):
        assert marker not in page.lower()
    # Markdown still renders: headings, lists, safe links (which cannot open the page).
    assert page.startswith('<div class="jp-AgentMemory-markdown mathjax_ignore tex2jax_ignore">')
    assert "<h1>Facts</h1>" in page
    assert "<li>The user prefers metric units.</li>" in page
    assert ('<a href="https://example.org/docs" rel="noopener noreferrer nofollow">safe link</a>'
            in page)
    # An image is a link to click, never a request made by displaying it.
    assert (f'<a href="http://{ATTACKER_HOST}/md.png?secret=xsrf" '
            'rel="noopener noreferrer nofollow">image: tracker</a>') in page


def test_markdown_structure_survives_sanitising() -> None:
    page = FactsView(
        "## Units\n\n1. metric\n2. ~~imperial~~\n\n> quoted *text* and `code`\n\n"
        "| a | b |\n|--:|:--|\n| 1 | 2 |\n\n```\n<b>not bold</b>\n```\n\n---\n"
    )._repr_html_()
    assert_inert(page)
    for fragment in ("<h2>Units</h2>", "<ol>\n<li>metric</li>\n<li><s>imperial</s></li>",
                     "<blockquote>\n<p>quoted <em>text</em> and <code>code</code></p>",
                     '<th style="text-align:right">a</th>', '<td style="text-align:left">2</td>',
                     "<pre><code>&lt;b&gt;not bold&lt;/b&gt;\n</code></pre>", "<hr>"):
        assert fragment in page


def test_journal_table_escapes_payloads_in_every_field(
    shell: InteractiveShell, hostile: AgentMemory
) -> None:
    for name, payload in PAYLOADS.items():
        hostile.append(payload, tags=[payload, name])
    # Another tool wrote odd shapes and extra keys holding payloads.
    with (hostile.path / "memory" / "JOURNAL.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"ts": PAYLOADS["img"], "tags": PAYLOADS["script"],
                            "text": {"nested": PAYLOADS["iframe"]},
                            PAYLOADS["svg"]: PAYLOADS["details"]}) + "\n")
    result = run(shell, "journal search -n 100")
    assert len(result) == len(PAYLOADS) + 1
    data = bundle(shell, result)
    assert set(data) == {"text/plain", "text/html"}
    text = assert_inert(data["text/html"])
    for payload in PAYLOADS.values():
        assert payload in text
    assert PAYLOADS["img"] in data["text/plain"] and PAYLOADS["script"] in data["text/plain"]
    # Escaped TeX must not be typeset back into a link by the notebook's MathJax.
    assert data["text/html"].startswith('<div class="mathjax_ignore tex2jax_ignore">')


def test_prompt_views_escape_memory(shell: InteractiveShell, hostile: AgentMemory) -> None:
    hostile.write_soul(PAYLOADS["script"] + "\n")
    hostile.append(PAYLOADS["img"], tags=["x"])
    for line in ("memprompt", "memprompt --facts"):
        data = bundle(shell, run(shell, line))
        assert set(data) == {"text/plain", "text/html"}
        text = assert_inert(data["text/html"])
        assert PAYLOADS["iframe"] in text and PAYLOADS["contents-write"] in text
        assert PAYLOADS["iframe"] in data["text/plain"]
    assert PAYLOADS["script"] in assert_inert(bundle(shell, run(shell, "memprompt"))["text/html"])


def test_history_and_diff_views_escape_memory(
    shell: InteractiveShell, hostile: AgentMemory
) -> None:
    hostile.update_facts(PAYLOADS["svg"] + " (new)\n")
    data = bundle(shell, run(shell, "fact --diff"))
    text = assert_inert(data["text/html"])
    assert "+" + PAYLOADS["svg"] + " (new)" in text and "-" + PAYLOADS["img"] in text
    assert_inert(bundle(shell, run(shell, "fact --history"))["text/html"])
    # %%fact_update displays its diff as well.
    with capture_output() as cap:
        shown = shell.run_cell_magic("fact_update", "", PAYLOADS["style"] + "\n")
    assert cap.stdout == "Memory updated.\n"
    assert PAYLOADS["style"] in assert_inert(bundle(shell, shown)["text/html"])


def test_agent_summary_escapes_a_hostile_folder_name(tmp_path: Path) -> None:
    summary = AgentSummary(agent_id=PAYLOADS["img"], path=tmp_path / PAYLOADS["svg"],
                           sizes={"FACT.md": 1}, template=PAYLOADS["script"])
    text = assert_inert(summary._repr_html_())
    assert PAYLOADS["img"] in text and PAYLOADS["script"] in text


def test_html_export_of_the_outputs_runs_nothing(
    shell: InteractiveShell, hostile: AgentMemory
) -> None:
    import nbformat
    from nbconvert import HTMLExporter

    hostile.append(PAYLOADS["iframe"], tags=[PAYLOADS["script"]])
    notebook = nbformat.v4.new_notebook()
    for line in ("fact", "journal", "memprompt"):
        data = bundle(shell, run(shell, line))
        cell = nbformat.v4.new_code_cell(f"%{line}")
        cell.outputs = [nbformat.v4.new_output("execute_result", data=data, execution_count=1)]
        notebook.cells.append(cell)
    page, _resources = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    elements, text = parse(page)
    for tag, attrs in elements:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert "srcdoc" not in attrs and tag != "iframe"
        assert not attrs.get("href", "").lower().startswith("javascript:")
    for payload in PAYLOADS.values():
        assert visible_text(payload) in text
    # The exporter's own scripts are the only ones; none carries a payload.
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, flags=re.S | re.I)
    assert scripts and not [s for s in scripts if "alert(" in s or "pwned" in s]


def test_rendering_libraries_load_on_first_render_only() -> None:
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'jupyter_agent_memory')\n"
        "import jupyter_agent_memory.notebook.display as d\n"
        "before = sorted(m for m in ('markdown_it',) if m in sys.modules)\n"
        "d.FactsView('# x')._repr_html_()\n"
        "after = sorted(m for m in ('markdown_it',) if m in sys.modules)\n"
        "print(before, after)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "IPYTHONDIR": tempfile.mkdtemp()}, check=True)
    assert done.stdout.strip() == "[] ['markdown_it']"


def test_a_lone_surrogate_shows_as_a_replacement_character() -> None:
    page = FactsView("half \ud83d emoji\n")._repr_html_()
    assert "<p>half \ufffd emoji</p>" in page
    page.encode("utf-8")  # sendable


def test_search_matches_are_highlighted_and_escaped() -> None:
    entries = [{"ts": "2026-01-02T00:00:00.000Z", "tags": [],
                "text": "Report <b>REPORT</b> & report"}]
    page = JournalResult(entries, highlight="report")._repr_html_()
    marks = re.findall(r"<mark [^>]*>(.*?)</mark>", page)
    assert marks == ["Report", "REPORT", "report"]
    assert "&lt;b&gt;<mark" in page and "</mark>&lt;/b&gt; &amp; " in page
    # A query holding markup is highlighted as text, never inserted as markup.
    hostile = JournalResult([{"ts": "", "tags": [], "text": "a <i>x</i> b"}],
                            highlight="<i>")._repr_html_()
    assert re.findall(r"<mark [^>]*>(.*?)</mark>", hostile) == ["&lt;i&gt;"]
    assert "<i>" not in hostile


def test_times_are_absolute_and_relative() -> None:
    from datetime import datetime, timezone

    from jupyter_agent_memory.notebook.display import format_when, relative_time

    now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    assert relative_time("2026-12-01T11:59:30.000Z", now) == "just now"
    assert relative_time("2026-12-01T11:55:00.000Z", now) == "5 min ago"
    assert relative_time("2026-11-28T12:00:00Z", now) == "3 days ago"
    assert relative_time("2026-12-01T13:00:00Z", now) == "in 1 hour"
    assert format_when("2026-12-01T10:00:00.000Z", now) == "2026-12-01 10:00:00 UTC (2 hours ago)"
    assert format_when("not a time", now) == "not a time"
    page = JournalResult([{"ts": "2026-12-01T10:00:00.000Z", "tags": [], "text": "x"}],
                         now=now)._repr_html_()
    assert ('<span title="2026-12-01T10:00:00.000Z" style="white-space:nowrap">'
            "<code>2026-12-01 10:00:00</code> <small>2 hours ago</small></span>") in page


@pytest.mark.slow  # megabytes of text through the real formatters
def test_big_views_send_a_bounded_amount() -> None:
    from jupyter_agent_memory.notebook.display import VIEW_LIMIT

    big = "".join(f"- fact number {i} about something\n" for i in range(100_000))  # ~3.4 MB
    prompt = PromptView(big)._repr_html_()
    assert len(prompt) < VIEW_LIMIT + 5_000
    assert re.search(r"… [\d,]+ more characters not shown here", prompt)
    assert PromptView(big, limit=None)._repr_html_().count("- fact number") == 100_000
    assert str(PromptView(big)).count("- fact number") == 100_000  # code gets all of it
    plain = pretty(PromptView(big))
    assert len(plain) < 1.1 * VIEW_LIMIT and plain.startswith(f"System prompt: {len(big)} chars")
    assert re.search(
        r"\n… [\d,]+ more characters not shown \(str\(\) of the view has all\)\n-{72}$", plain)
    assert len(pretty(FactsView(big))) < 1.1 * VIEW_LIMIT
    facts = FactsView(big)._repr_html_()
    assert len(facts) < 1.3 * VIEW_LIMIT and "more characters not shown" in facts
    assert "<li>fact number 99999 about something</li>" in FactsView(big, limit=None)._repr_html_()
    diff = DiffView("", big)._repr_html_()
    assert len(diff) < 2 * VIEW_LIMIT and "more diff lines not shown here" in diff
    # Text wraps at spaces, never inside a word, and scrolls in a bounded box.
    assert "overflow-wrap:break-word;word-break:normal" in prompt and "max-height:" in prompt


def test_long_result_tables_send_a_bounded_amount() -> None:
    from jupyter_agent_memory.notebook.display import CELL_LIMIT, VIEW_LIMIT, SessionsView

    entries = [{"ts": "2026-01-01T00:00:00.000Z", "tags": ["t"], "text": f"entry {i}"}
               for i in range(50_000)]
    result = JournalResult(entries)
    page = result._repr_html_()
    assert len(page) < 1.2 * VIEW_LIMIT
    shown = len(re.findall(r">entry \d+<", page))
    assert 0 < shown < 50_000
    assert f"… {50_000 - shown:,} more rows not shown here" in page
    assert len(result) == 50_000  # code still has every entry
    huge = JournalResult([{"ts": "", "tags": ["x" * 100_000], "text": "y" * 1_000_000}])
    page = huge._repr_html_()
    assert len(page) < 3 * CELL_LIMIT
    assert f"… {1_000_000 - CELL_LIMIT:,} more characters" in page
    assert huge[0]["text"] == "y" * 1_000_000
    receipts = [{"ts": "2026-01-01T00:00:00Z", "session_id": f"{i:016x}", "tokens": 5,
                 "prompt_sha256": "ab" * 32, "client": {"name": "c" * 300}}
                for i in range(2000)]
    assert len(SessionsView(receipts)._repr_html_()) < 1.2 * VIEW_LIMIT
