"""The compiled line scanner (``_linescan``): the same lines as the pure-Python plans, no GIL.

``find_lines`` is checked against a small Python model of what it must return (the lines whose
lower-cased bytes, with our own layout's line start removed in text mode, hold the needle, plus
the lines with a relevant escape), on random blocks that mix our layout with near misses. The
search as a whole is checked with the scanner on and off in ``test_property_journal.py``; the
build recipe and the helper thread that reads blocks ahead are checked here too.

These tests need the scanner built (``pip install .`` builds it where a C compiler is at hand).
With ``JUPYTER_AGENT_MEMORY_PURE_PYTHON=1`` set they are skipped: the scanner is off by request.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_agent_memory import AgentMemory, journal, journal_plans

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scanner_build  # noqa: E402  (the build hook lives next to pyproject.toml)

PURE = os.environ.get(journal_plans.PURE_PYTHON_ENV, "").strip() not in ("", "0")
find_lines: Any = journal_plans.FIND_LINES

needs_scanner = pytest.mark.skipif(PURE, reason="JUPYTER_AGENT_MEMORY_PURE_PYTHON is set")


@needs_scanner
def test_the_installed_package_has_the_compiled_scanner() -> None:
    assert find_lines is not None, (
        "the compiled line scanner is not built: install a C compiler and the Python headers, "
        "then reinstall (or set JUPYTER_AGENT_MEMORY_PURE_PYTHON=1 to test without it)"
    )


# -- the model ---------------------------------------------------------------------------------


def model(buf: bytes, needle: bytes, lo: int, text_only: bool, escapes: bytes) -> list[int]:
    """What find_lines must return, computed the slow way."""
    found: set[int] = set()
    start = lo
    for line in buf[lo:].split(b"\n"):
        lowered = line.lower()
        searched = journal_plans.strip_skeleton(lowered) if text_only else lowered
        if needle in searched:
            found.add(start)
        start += len(line) + 1
    # Escapes: walk the backslashes as JSON pairs them, from lo on.
    pos = buf.find(b"\\", lo)
    while 0 <= pos < len(buf) - 1:
        if buf[pos + 1] in escapes:
            found.add(max(lo, buf.rfind(b"\n", lo, pos) + 1))
        pos = buf.find(b"\\", pos + 2)
    return sorted(found)


PIECES = ['"', "\\", "]", "[", ",", ":", "{", "}", "\\u00e9", "\\n", " "]
chars = st.sampled_from(list("taTAgGsSxX2025zZ") + PIECES)
values = st.lists(chars, max_size=12).map("".join)


@st.composite
def lines(draw: st.DrawFn) -> str:
    """Our layout, or a near miss of it (other case, a missing or broken piece), or noise."""
    ts = draw(st.sampled_from(["2025-01-01T00:00:07.000Z", "2025", "", "a\\\"b", "TS"]))
    tags = draw(st.lists(values, max_size=3).map(lambda t: ",".join(f'"{x}"' for x in t)))
    text = draw(values)
    head = draw(st.sampled_from(['{"ts":"', '{"TS":"', '{"ts": "', '{"tS":"', '{"ts":']))
    middle = draw(st.sampled_from(['","tags":[', '","TAGS":[', '","tags":', '", "tags":[']))
    tail = draw(st.sampled_from(['],"text":"', '],"TEXT":"', '],"text": "', '],"txt":"']))
    kind = draw(st.integers(0, 4))
    if kind == 4:
        return draw(values)
    return f"{head}{ts}{middle}{tags}{tail}{text}" + draw(st.sampled_from(['"}', "", '"', "\\"]))


needles = st.text(alphabet=list('tagsx2025z"],:{\\ '), min_size=1, max_size=5).map(str.lower)


@needs_scanner
@settings(max_examples=600, deadline=None)
@given(
    block=st.lists(lines(), min_size=1, max_size=12),
    needle=needles,
    text_only=st.booleans(),
    escapes=st.sampled_from([b"", b"u", b'"u', b"\\nu"]),
    torn_head=st.text(alphabet=list('ab"\\'), max_size=5),
    newline_at_end=st.booleans(),
)
def test_find_lines_equals_the_model(
    block: list[str],
    needle: str,
    text_only: bool,
    escapes: bytes,
    torn_head: str,
    newline_at_end: bool,
) -> None:
    body = "\n".join(block) + ("\n" if newline_at_end else "")
    # buf[:lo] is the tail of a line the scan must not look at.
    buf = (torn_head + "\n" + body).encode("utf-8") if torn_head else body.encode("utf-8")
    lo = len(torn_head) + 1 if torn_head else 0
    want = model(buf, needle.encode(), lo, text_only, escapes)
    assert find_lines(buf, needle.encode(), lo, text_only, escapes) == want


@needs_scanner
@settings(max_examples=400, deadline=None)
@given(
    buf=st.binary(max_size=400),
    needle=needles,
    text_only=st.booleans(),
    lo_fraction=st.floats(0, 1),
)
def test_find_lines_on_arbitrary_bytes_equals_the_model(
    buf: bytes, needle: str, text_only: bool, lo_fraction: float
) -> None:
    """Any bytes at all (NUL, invalid UTF-8, lone quotes): the same lines, never a crash."""
    cut = buf.find(b"\n", int(len(buf) * lo_fraction))
    lo = cut + 1 if cut >= 0 else 0
    want = model(buf, needle.encode(), lo, text_only, b"nu")
    assert find_lines(buf, needle.encode(), lo, text_only, b"nu") == want


@needs_scanner
def test_find_lines_on_long_lines_crosses_every_vector_boundary() -> None:
    """Needles at every offset of lines longer than a vector, both cases, in text and keys."""
    for width in range(1, 40):
        for needle in (b"t", b"ta", b"tag", b"zeppelin", b"2025"):
            text = "x" * width + needle.decode().upper() + "y" * (40 - width)
            good = f'{{"ts":"2025-01-01T00:00:00.000Z","tags":["tag"],"text":"{text}"}}'
            miss = '{"ts":"2025-01-01T00:00:00.000Z","tags":["tag"],"text":"' + "y" * width + '"}'
            buf = f"{good}\n{miss}\n{good}".encode()
            for text_only in (True, False):
                want = model(buf, needle, 0, text_only, b"")
                assert find_lines(buf, needle, 0, text_only, b"") == want, (width, needle)


@needs_scanner
@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((b"abc", b"", 0, True, b""), ValueError, "non-empty needle"),
        ((b"abc", b"A", 0, True, b""), ValueError, "lower-case ASCII"),
        ((b"abc", b"a\n", 0, True, b""), ValueError, "without a newline"),
        ((b"abc", "\xe9".encode(), 0, True, b""), ValueError, "lower-case ASCII"),
        ((b"abc", b"a", 4, True, b""), ValueError, "lo <= len"),
        ((b"abc", b"a", -1, True, b""), ValueError, "0 <= lo"),
        (("abc", b"a", 0, True, b""), TypeError, "needs bytes"),
        ((b"abc", b"a", 0, True, "u"), TypeError, "needs bytes"),
        ((b"abc", b"a", 0, True), TypeError, "exactly 5 arguments"),
    ],
)
def test_find_lines_refuses_bad_arguments(args: tuple[Any, ...], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        find_lines(*args)


@needs_scanner
def test_find_lines_lets_other_threads_run() -> None:
    """The scan runs without the GIL: another thread keeps counting while it runs."""
    buf = b"a" * (256 << 20)
    counted = []

    def scan() -> None:
        counted.append(find_lines(buf, b"b", 0, False, b""))

    thread = threading.Thread(target=scan)
    ticks = 0
    thread.start()
    while thread.is_alive():
        ticks += 1
    thread.join()
    assert counted == [[]]
    # Holding the GIL, the scan (tens of milliseconds) would leave this loop a handful of turns.
    assert ticks > 10_000, ticks


# -- searches through the scanner ----------------------------------------------------------------


def _big_journal(mem: AgentMemory, lines: int) -> None:
    """A journal of ``lines`` entries in our layout, a planted one every 50,000."""
    rows = []
    for i in range(lines):
        text = f"entry {i} with a tag-like word" if i % 50_000 else f"ZEPPELIN {i} 2025 tag"
        entry = {"ts": f"2025-01-01T00:00:{i % 60:02d}.000Z", "tags": ["note"], "text": text}
        rows.append(journal.encode_line(entry))
    (mem.path / "memory" / "JOURNAL.jsonl").write_bytes(b"".join(rows))


@needs_scanner
@pytest.mark.parametrize(
    ("query", "matches"),
    [("zeppelin", 2), ("2025", 18), ("tag", 1000), ("entry 7", 1000), ("TAG-LIKE", 1000)],
)
def test_whole_file_searches_with_the_scanner_and_read_ahead_equal_the_reference(
    mem: AgentMemory, query: str, matches: int
) -> None:
    _big_journal(mem, 60_000)  # about 6 MB: many full-size blocks, read ahead
    plain = AgentMemory.open(mem.path, journal_index=False)
    path = mem.path / "memory" / "JOURNAL.jsonl"
    with path.open("rb") as f:
        want = journal.reference_search(f, query=query, limit=1000)
    got = plain.search(query=query, limit=1000)
    assert got == want
    assert len(got) == matches
    # Only the lines whose text holds the query were decoded, though '2025' and 'tag' are in
    # every line's keys or timestamp.
    assert got.scanned == matches


@needs_scanner
def test_no_block_read_is_left_running_after_a_search_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"".join(b'{"ts":"x","tags":[],"text":"line %d"}\n' % i for i in range(200_000))
    path = tmp_path / "j.jsonl"
    path.write_bytes(data)
    submitted: list[Any] = []
    pool = journal._read_ahead_pool()

    class Recording:
        def submit(self, *args: Any) -> Any:
            future = pool.submit(*args)
            submitted.append(future)
            return future

    monkeypatch.setattr(journal, "_read_ahead_pool", Recording)
    with path.open("rb") as f:
        read, _st = journal._reader(f)
        blocks = journal._backward_blocks(read, 0, len(data), None, True)
        got = [next(blocks) for _ in range(8)]
        blocks.close()
        assert submitted, "blocks of full size were not read ahead"
        assert all(future.done() for future in submitted)
        # What was read ahead is exactly what a plain read gives.
        plain = list(journal._backward_blocks(read, 0, len(data)))
    assert got == plain[:8]


@needs_scanner
def test_a_forked_child_reads_ahead_with_threads_of_its_own(mem: AgentMemory) -> None:
    """The parent's pool has no threads in a child: a search there must not wait on them."""
    _big_journal(mem, 60_000)
    plain = AgentMemory.open(mem.path, journal_index=False)
    assert len(plain.search(query="zeppelin")) == 2  # the parent's pool now exists
    assert journal._POOL
    pid = os.fork()
    if pid == 0:  # the child: a search that reads ahead, or a hang the alarm ends
        signal.alarm(20)
        ok = len(AgentMemory.open(mem.path, journal_index=False).search(query="zeppelin")) == 2
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_pure_python_search_does_not_read_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pure-Python scan holds the GIL: a helper thread would slow it down."""
    needle = journal_plans._Needle("tag", quoted=False)
    monkeypatch.setattr(journal_plans, "FIND_LINES", None)
    assert not needle.served_compiled()
    monkeypatch.setattr(journal_plans, "FIND_LINES", lambda *a: [])
    assert needle.served_compiled()
    assert not journal_plans._Needle("café", quoted=False).served_compiled()


def test_the_environment_switch_turns_the_scanner_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(journal_plans.PURE_PYTHON_ENV, "1")
    assert journal_plans._compiled_scanner() is None
    monkeypatch.setenv(journal_plans.PURE_PYTHON_ENV, "0")
    installed = importlib.util.find_spec("jupyter_agent_memory._linescan") is not None
    assert (journal_plans._compiled_scanner() is not None) == installed


# -- the build recipe ----------------------------------------------------------------------------


@pytest.fixture
def building(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build recipe's tests build for real, whatever this process was started with."""
    monkeypatch.delenv(scanner_build.PURE_ENV, raising=False)


def _build(folder: Path, *flags: str) -> Any:
    """The scanner compiled into ``folder`` with ``flags``, imported."""
    target = folder / ("_linescan" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    scanner_build.compile_scanner(ROOT / scanner_build.SOURCE, target, flags)
    spec = importlib.util.spec_from_file_location("jupyter_agent_memory._linescan", target)
    assert spec is not None and spec.loader is not None
    built = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(built)
    return built


def test_compile_scanner_builds_a_module_that_works(tmp_path: Path, building: None) -> None:
    built = _build(tmp_path)
    buf = b'{"ts":"2025","tags":["tag"],"text":"no"}\n{"ts":"1","tags":[],"text":"A Tag"}\n'
    assert built.find_lines(buf, b"tag", 0, True, b"") == [buf.index(b"\n") + 1]
    assert built.find_lines(buf, b"tag", 0, False, b"") == [0, buf.index(b"\n") + 1]


def test_the_portable_variant_without_vector_instructions_equals_the_model(
    tmp_path: Path, building: None
) -> None:
    """What builds where SSE2 is missing (ARM, say): the byte-by-byte loops alone."""
    portable = _build(tmp_path, "-U__SSE2__")

    @settings(max_examples=300, deadline=None)
    @given(st.lists(lines(), min_size=1, max_size=12), needles, st.booleans())
    def check(block: list[str], needle: str, text_only: bool) -> None:
        buf = "\n".join(block).encode("utf-8")
        want = model(buf, needle.encode(), 0, text_only, b"u")
        assert portable.find_lines(buf, needle.encode(), 0, text_only, b"u") == want

    check()
    text = b'{"ts":"1","tags":[],"text":"' + b"x" * 40 + b'Zeppelin"}'
    assert portable.find_lines(text + b"\n" + text, b"zeppelin", 0, True, b"") == [0, len(text) + 1]


def test_without_a_compiler_the_build_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, building: None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to run there
    with pytest.raises(scanner_build.ScannerBuildError, match="no C compiler"):
        scanner_build.compile_scanner(ROOT / scanner_build.SOURCE, tmp_path / "x.so")


def test_a_compile_error_is_one_line_naming_the_compiler(tmp_path: Path, building: None) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C;\n")
    with pytest.raises(scanner_build.ScannerBuildError) as caught:
        scanner_build.compile_scanner(broken, tmp_path / "x.so")
    message = str(caught.value)
    assert "failed:" in message and "\n" not in message


class _Hook(scanner_build.ScannerBuildHook):
    def __init__(self, root: Path, directory: Path) -> None:  # no hatchling builder needed
        self._root, self._directory = str(root), str(directory)

    @property
    def root(self) -> str:  # type: ignore[override]
        return self._root

    @property
    def directory(self) -> str:  # type: ignore[override]
        return self._directory


def test_the_hook_ships_the_scanner_as_a_platform_wheel(tmp_path: Path, building: None) -> None:
    hook = _Hook(ROOT, tmp_path)
    build_data: dict[str, Any] = {"force_include": {}, "pure_python": True, "infer_tag": False}
    hook.initialize("standard", build_data)
    ((built, shipped),) = build_data["force_include"].items()
    assert Path(built).is_file()
    assert shipped == "jupyter_agent_memory/_linescan" + sysconfig.get_config_var("EXT_SUFFIX")
    assert build_data["pure_python"] is False and build_data["infer_tag"] is True
    hook.finalize("standard", build_data, "")
    assert not Path(built).exists()


def test_the_hook_keeps_the_wheel_pure_without_a_compiler_or_when_asked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    building: None,
) -> None:
    fresh = {"force_include": {}, "pure_python": True, "infer_tag": False}
    monkeypatch.setenv("PATH", str(tmp_path))
    build_data: dict[str, Any] = {**fresh, "force_include": {}}
    _Hook(ROOT, tmp_path).initialize("standard", build_data)
    assert build_data == fresh
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "compiled line scanner is not built (no C compiler" in err
    assert "the pure Python search is used instead" in err

    monkeypatch.setenv(scanner_build.PURE_ENV, "1")
    build_data = {**fresh, "force_include": {}}
    _Hook(ROOT, tmp_path).initialize("standard", build_data)
    assert build_data == fresh
    assert "JUPYTER_AGENT_MEMORY_PURE_PYTHON is set" in capsys.readouterr().err
