"""The ``streambpe`` command line, in-process through ``cli.main`` and once as ``python -m streambpe``.

Guards: ``train`` -> ``encode`` -> ``decode`` gives back the input bytes for
every tokenizer format; ids go to stdout as text or to a ``.bin``; progress
goes to stderr (JSON lines on request, nothing with ``--quiet``) and data to
stdout; every error is one ``streambpe: error: ...`` line with exit status 1
and no partial output; Ctrl-C exits 130 leaving no output and no worker.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from streaming_helpers import EOT, REPO_ROOT, listing, make_text, make_whitespace_text, read_ids

import streambpe.core
from streambpe.cli import main
from streambpe.tokenizer import Tokenizer

FORMATS = ["gpt2", "tiktoken", "hf"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small generated training corpus with ``<|endoftext|>`` between documents."""
    path = tmp_path_factory.mktemp("cli-corpus") / "corpus.txt"
    path.write_bytes(make_text(60_000, seed=21).encode("utf-8"))
    return path


@pytest.fixture(scope="module")
def tokenizer_dir(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer trained through the CLI (gpt2 format, 300 ids)."""
    out = tmp_path_factory.mktemp("cli-tok") / "tok"
    status = main(
        [
            *("train", str(corpus), "--vocab-size", "300", "--special-token", EOT),
            *("--out", str(out), "--workers", "1", "--quiet"),
        ]
    )
    assert status == 0
    return out


@pytest.fixture(scope="module")
def text_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Text to encode: several scripts, whitespace runs, CRLF, specials."""
    path = tmp_path_factory.mktemp("cli-text") / "input.txt"
    text = make_text(30_000, seed=22) + make_whitespace_text(5_000, seed=22) + "\r\nend"
    path.write_bytes(text.encode("utf-8"))
    return path


def error_line(stderr: str) -> str:
    """The single ``streambpe: error: ...`` line of ``stderr`` (asserts there is exactly one line)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("streambpe: error: "), stderr
    return lines[0]


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("format", FORMATS)
def test_train_encode_decode_round_trip(
    format: str,
    corpus: Path,
    text_file: Path,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """Train in each format, encode a file to ``.bin``, decode it: the exact input bytes come back."""
    out = tmp_path / f"tok-{format}"
    argv = ["train", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--out", str(out)]
    assert main([*argv, "--format", format, "--workers", "1", "--quiet"]) == 0
    assert (out / "streambpe.json").is_file()
    bin_path = tmp_path / "ids.bin"
    assert (
        main(["encode", "--tokenizer", str(out), str(text_file), "-o", str(bin_path), "--quiet"])
        == 0
    )
    capsysbinary.readouterr()
    assert main(["decode", "--tokenizer", str(out), str(bin_path)]) == 0
    decoded = capsysbinary.readouterr().out
    assert decoded == text_file.read_bytes()
    tok = Tokenizer.load(out)
    assert tok.n_vocab == 300
    assert read_ids(bin_path, "uint16") == tok.encode(text_file.read_bytes().decode("utf-8"))


def test_encode_without_output_prints_ids(
    tokenizer_dir: Path, text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``-o`` the ids are printed as whitespace-separated integers on stdout."""
    assert main(["encode", "--tokenizer", str(tokenizer_dir), str(text_file), "--quiet"]) == 0
    captured = capsys.readouterr()
    ids = [int(field) for field in captured.out.split()]
    assert ids == Tokenizer.load(tokenizer_dir).encode(text_file.read_bytes().decode("utf-8"))
    assert captured.err == ""


def test_encode_reads_stdin(
    tokenizer_dir: Path,
    text_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``encode -`` reads UTF-8 text from stdin (CRLF kept as is)."""
    data = text_file.read_bytes()
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")
    )
    assert main(["encode", "--tokenizer", str(tokenizer_dir), "-", "--quiet"]) == 0
    ids = [int(field) for field in capsys.readouterr().out.split()]
    assert ids == Tokenizer.load(tokenizer_dir).encode(data.decode("utf-8"))


def test_decode_reads_text_ids_from_stdin(
    tokenizer_dir: Path, capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``decode -`` reads ids as text, over several lines, and writes the bytes to stdout."""
    text = f"Hello wörld{EOT} 日本語\n\n  done"
    ids = Tokenizer.load(tokenizer_dir).encode(text)
    half = len(ids) // 2
    lines = " ".join(map(str, ids[:half])) + "\n" + "  ".join(map(str, ids[half:])) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    assert main(["decode", "--tokenizer", str(tokenizer_dir), "-"]) == 0
    assert capsysbinary.readouterr().out == text.encode("utf-8")


def test_decode_to_file(tokenizer_dir: Path, text_file: Path, tmp_path: Path) -> None:
    """``decode -o FILE`` writes the text to a file instead of stdout."""
    bin_path, back = tmp_path / "ids.bin", tmp_path / "back.txt"
    assert (
        main(
            ["encode", "--tokenizer", str(tokenizer_dir), str(text_file), "-o", str(bin_path), "-q"]
        )
        == 0
    )
    assert main(["decode", "--tokenizer", str(tokenizer_dir), str(bin_path), "-o", str(back)]) == 0
    assert back.read_bytes() == text_file.read_bytes()


# --------------------------------------------------------------------------- stderr and stdout


def json_lines(stderr: str) -> list[dict[str, object]]:
    """Parse every line of ``stderr`` as JSON (fails on any line that is not)."""
    records = []
    for line in stderr.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"stderr line is not JSON: {line!r}")
    return records


def test_progress_json_with_json_summary(
    tokenizer_dir: Path, text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--progress json --json``: stderr holds only progress records, stdout only the summary."""
    out = tmp_path / "ids.bin"
    argv = ["encode", "--tokenizer", str(tokenizer_dir), str(text_file), "-o", str(out)]
    assert main([*argv, "--progress", "json", "--json"]) == 0
    captured = capsys.readouterr()
    records = json_lines(captured.err)
    assert records and all(record["stage"] == "encoding" for record in records)
    assert records[-1]["done"] == records[-1]["total"] == text_file.stat().st_size
    summary = json.loads(captured.out)
    assert summary["tokens"] == out.stat().st_size // 2
    assert summary["bytes"] == text_file.stat().st_size
    assert summary["dtype"] == "uint16"


def _train_or_encode_argv(
    command: str, corpus: Path, tokenizer_dir: Path, text_file: Path, tmp_path: Path
) -> list[str]:
    """A small ``train`` or ``encode`` run, for tests about what goes to stderr."""
    if command == "train":
        out = str(tmp_path / "tok")
        return ["train", str(corpus), "--vocab-size", "300", "--out", out, "--workers", "1"]
    out = str(tmp_path / "ids.bin")
    return ["encode", "--tokenizer", str(tokenizer_dir), str(text_file), "-o", out]


@pytest.mark.parametrize("command", ["train", "encode"])
def test_progress_json_writes_only_json_lines(
    command: str,
    corpus: Path,
    tokenizer_dir: Path,
    text_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--progress json`` alone: a program reading stderr line by line must be able to parse every line."""
    argv = _train_or_encode_argv(command, corpus, tokenizer_dir, text_file, tmp_path)
    assert main([*argv, "--progress", "json"]) == 0
    records = json_lines(capsys.readouterr().err)
    assert records and all(
        {"stage", "done", "total", "unit", "elapsed"} <= set(record) for record in records
    )


@pytest.mark.parametrize("command", ["train", "encode"])
def test_quiet_writes_nothing_to_stderr(
    command: str,
    corpus: Path,
    tokenizer_dir: Path,
    text_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--quiet``: no progress bar, no summary, nothing at all on stderr (nor stdout)."""
    argv = _train_or_encode_argv(command, corpus, tokenizer_dir, text_file, tmp_path)
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_default_progress_goes_to_stderr_not_stdout(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--quiet`` there is progress on stderr, and stdout stays clean for data."""
    argv = [
        "train",
        str(corpus),
        "--vocab-size",
        "300",
        "--out",
        str(tmp_path / "tok"),
        "--workers",
        "1",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "counting" in captured.err


def test_train_json_summary(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``train --json`` prints one JSON object on stdout describing what was written."""
    out = tmp_path / "tok"
    argv = ["train", str(corpus), "--vocab-size", "300", "--special-token", EOT, "--out", str(out)]
    assert main([*argv, "--json", "--quiet", "--format", "hf", "--workers", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["vocab_size"] == 300
    assert summary["merges"] == 300 - 256 - 1
    assert summary["format"] == "hf"
    assert Path(str(summary["output"])) == out
    assert isinstance(summary["seconds"], float | int)


# --------------------------------------------------------------------------- errors


def test_encode_missing_input(
    tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing input file: one error line naming it, exit 1, no output file."""
    status = main(
        [
            "encode",
            "--tokenizer",
            str(tokenizer_dir),
            str(tmp_path / "gone.txt"),
            "-o",
            str(tmp_path / "o.bin"),
        ]
    )
    assert status == 1
    line = error_line(capsys.readouterr().err)
    assert "not found" in line and "gone.txt" in line
    assert listing(tmp_path) == set()


def test_train_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Training on a missing file: one error line, exit 1, no tokenizer directory."""
    status = main(
        [
            "train",
            str(tmp_path / "gone.txt"),
            "--vocab-size",
            "300",
            "--out",
            str(tmp_path / "tok"),
            "-q",
        ]
    )
    assert status == 1
    assert "gone.txt" in error_line(capsys.readouterr().err)
    assert not (tmp_path / "tok").exists()


def test_train_vocab_size_too_small(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--vocab-size`` below 256 + specials: the message says the minimum."""
    argv = [
        "train",
        str(corpus),
        "--vocab-size",
        "100",
        "--special-token",
        EOT,
        "--out",
        str(tmp_path / "tok"),
        "-q",
    ]
    assert main(argv) == 1
    line = error_line(capsys.readouterr().err)
    assert "vocab size 100 is too small" in line and "use --vocab-size 257" in line
    assert not (tmp_path / "tok").exists()


@pytest.mark.parametrize("to_file", [True, False])
def test_encode_invalid_utf8_names_the_offset(
    tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], to_file: bool
) -> None:
    """Invalid UTF-8: the error names the file and the byte offset, and suggests ``--errors replace``."""
    data = "naïve café ".encode() * 50 + b"\xff" + b" tail"
    source = tmp_path / "bad.txt"
    source.write_bytes(data)
    argv = ["encode", "--tokenizer", str(tokenizer_dir), str(source), "-q"]
    if to_file:
        argv += ["-o", str(tmp_path / "out.bin")]
    assert main(argv) == 1
    captured = capsys.readouterr()
    line = error_line(captured.err)
    offset = data.index(b"\xff")
    assert f"byte offset {offset}" in line
    assert "bad.txt" in line and "--errors replace" in line
    assert listing(tmp_path) == {"bad.txt"}


def test_encode_stdin_invalid_utf8_names_the_absolute_offset(
    tokenizer_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invalid UTF-8 on stdin past the first read block: the error names the offset in the stream."""
    data = "naïve café ".encode() * 250_000 + b"\xff tail"
    offset = data.index(b"\xff")
    assert offset > 2 * (1 << 20)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert main(["encode", "--tokenizer", str(tokenizer_dir), "-", "-q"]) == 1
    line = error_line(capsys.readouterr().err)
    assert str(offset) in line, f"expected byte offset {offset} in {line!r}"


@pytest.mark.parametrize("to_file", [True, False])
def test_errors_replace(
    tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], to_file: bool
) -> None:
    """``--errors replace`` encodes the U+FFFD-substituted text instead of failing."""
    data = "naïve café ".encode() * 50 + b"\xff\xe6\x97 x" + b" tail"
    source = tmp_path / "bad.txt"
    source.write_bytes(data)
    argv = ["encode", "--tokenizer", str(tokenizer_dir), str(source), "-q", "--errors", "replace"]
    if to_file:
        argv += ["-o", str(tmp_path / "out.bin")]
    assert main(argv) == 0
    expected = Tokenizer.load(tokenizer_dir).encode(data.decode("utf-8", errors="replace"))
    out = capsys.readouterr().out
    ids = read_ids(tmp_path / "out.bin", "uint16") if to_file else [int(f) for f in out.split()]
    assert ids == expected


@pytest.mark.parametrize("to_file", [True, False])
def test_decode_unknown_id(
    tokenizer_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    to_file: bool,
) -> None:
    """An id the tokenizer does not have: the error names it and the valid range; no output file."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("72 101 999999 108\n"))
    argv = ["decode", "--tokenizer", str(tokenizer_dir), "-"]
    if to_file:
        argv += ["-o", str(tmp_path / "out.txt")]
    assert main(argv) == 1
    line = error_line(capsys.readouterr().err)
    assert "999999" in line and "0..299" in line
    assert listing(tmp_path) == set()


def test_decode_rejects_non_integer_ids(
    tokenizer_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text ids that are not integers: the error names the stdin line."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("1 2\n3 x 4\n"))
    assert main(["decode", "--tokenizer", str(tokenizer_dir), "-"]) == 1
    assert "line 2" in error_line(capsys.readouterr().err)


def test_decode_truncated_bin(
    tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``.bin`` that is not a whole number of ids is reported, not half-decoded silently."""
    (tmp_path / "odd.bin").write_bytes(b"\x48\x00\x69\x00\x21")
    assert (
        main(
            [
                "decode",
                "--tokenizer",
                str(tokenizer_dir),
                str(tmp_path / "odd.bin"),
                "-o",
                str(tmp_path / "t.txt"),
            ]
        )
        == 1
    )
    assert "stray byte" in error_line(capsys.readouterr().err)
    assert not (tmp_path / "t.txt").exists()


def test_missing_tokenizer_directory(
    text_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tokenizer directory that does not exist is an error line, not a traceback."""
    assert main(["encode", "--tokenizer", str(tmp_path / "nope"), str(text_file)]) == 1
    assert "nope" in error_line(capsys.readouterr().err)


@pytest.fixture(scope="module")
def wide_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer with 65,792 ids (every byte pair merged), too many for uint16."""
    merges = [(bytes([left]), bytes([right])) for left in range(256) for right in range(256)]
    vocab = {i: bytes([i]) for i in range(256)}
    vocab |= {256 + i: left + right for i, (left, right) in enumerate(merges)}
    out = tmp_path_factory.mktemp("cli-wide") / "tok"
    Tokenizer(vocab, merges).save(out)
    return out


def test_errors_spell_options_for_the_command_line(
    wide_tokenizer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A suggested fix reads ``--dtype uint32`` / ``--errors replace``, never Python keywords."""
    source = tmp_path / "in.txt"
    source.write_bytes(b"fine text")
    argv = ["encode", "--tokenizer", str(wide_tokenizer_dir), str(source), "-q"]
    assert main([*argv, "-o", str(tmp_path / "out.bin"), "--dtype", "uint16"]) == 1
    line = error_line(capsys.readouterr().err)
    assert line.endswith("use --dtype uint32") and "dtype=" not in line
    source.write_bytes(b"bad \xff byte")
    assert main(argv) == 1
    line = error_line(capsys.readouterr().err)
    assert "pass --errors replace" in line and "errors=" not in line


@pytest.mark.parametrize(
    "argv",
    [["encode"], ["encode", "in.txt", "--tokenizer", "t", "--workers", "0"], ["frobnicate"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Usage errors follow argparse's convention: status 2 and a usage line on stderr."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("usage: streambpe")


def test_vocab_size_warning_is_one_line_even_when_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corpus too small for ``--vocab-size``: one ``streambpe: warning:`` line, no source line."""
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("low lower lowest", encoding="utf-8")
    argv = ["train", str(corpus), "--vocab-size", "400", "--out", str(tmp_path / "tok"), "-q"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert (
        lines[0].startswith("streambpe: warning: ") and "instead of the requested 400" in lines[0]
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param("Was it a dream? " * 40, "give id ", id="prose"),
        pytest.param("31373 995 198\n" * 40, "are digits and whitespace", id="text-ids"),
    ],
)
def test_decode_of_a_text_file_says_it_is_not_a_bin(
    tokenizer_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    problem: str,
) -> None:
    """A text file given to ``decode``: said to be no ``.bin``, with size, dtype and how to decode text ids."""
    source = tmp_path / "notes.txt"
    source.write_text(content, encoding="utf-8")
    argv = ["decode", "--tokenizer", str(tokenizer_dir), str(source), "-o", str(tmp_path / "o")]
    assert main(argv) == 1
    line = error_line(capsys.readouterr().err)
    assert "does not look like a .bin of ids for this tokenizer" in line
    assert f"read as uint16, its {len(content)} bytes {problem}" in line
    assert "streambpe decode -" in line and "unknown token id" not in line
    assert listing(tmp_path) == {"notes.txt"}


def test_encode_stdin_json_summary(
    tokenizer_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--json`` with stdin: with ``-o`` the summary is stdout; without, stderr's last line."""
    data = "naïve café, once more ".encode() * 30
    expected = Tokenizer.load(tokenizer_dir).encode(data.decode("utf-8"))
    argv = ["encode", "--tokenizer", str(tokenizer_dir), "-", "--json", "-q"]

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert [int(field) for field in captured.out.split()] == expected
    summary = json.loads(captured.err.splitlines()[-1])
    assert (summary["output"], summary["bytes"], summary["tokens"]) == (
        "-",
        len(data),
        len(expected),
    )

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert main([*argv, "-o", str(tmp_path / "ids.bin")]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert (summary["bytes"], summary["tokens"], summary["dtype"]) == (
        len(data),
        len(expected),
        "uint16",
    )
    assert captured.err == ""
    assert read_ids(tmp_path / "ids.bin", "uint16") == expected


def test_missing_output_parents_are_never_created(
    corpus: Path,
    tokenizer_dir: Path,
    text_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mistyped output path fails like ``cp``, naming the missing directory; nothing is created."""
    missing = tmp_path / "typo"
    ids = tmp_path / "ids.bin"
    assert main(["encode", "--tokenizer", str(tokenizer_dir), str(text_file), "-o", str(ids)]) == 0
    capsys.readouterr()
    runs = [
        ["train", str(corpus), "--vocab-size", "300", "--out", str(missing / "tok"), "-q"],
        ["encode", "--tokenizer", str(tokenizer_dir), str(text_file), "-o", str(missing / "x")],
        ["decode", "--tokenizer", str(tokenizer_dir), str(ids), "-o", str(missing / "x")],
    ]
    for argv in runs:
        assert main(argv) == 1, argv
        assert str(missing) in error_line(capsys.readouterr().err)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"hello"), encoding="utf-8"))
    assert main(["encode", "--tokenizer", str(tokenizer_dir), "-", "-o", str(missing / "x")]) == 1
    assert str(missing) in error_line(capsys.readouterr().err)
    assert listing(tmp_path) == {"ids.bin"}


# --------------------------------------------------------------------------- as a program


def run_module(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m streambpe ARGS`` with this checkout importable."""
    return subprocess.run(
        [sys.executable, "-m", "streambpe", *args],
        env=_child_env(),
        capture_output=True,
        timeout=60,
    )


def _child_env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def test_python_dash_m_entry_point(tokenizer_dir: Path, text_file: Path) -> None:
    """``python -m streambpe`` works: ``--version``, and ``encode`` printing the ids."""
    version = run_module("--version")
    assert version.returncode == 0 and version.stdout.startswith(b"streambpe ")
    result = run_module("encode", "--tokenizer", str(tokenizer_dir), str(text_file), "--quiet")
    assert result.returncode == 0, result.stderr
    ids = [int(field) for field in result.stdout.split()]
    assert ids == Tokenizer.load(tokenizer_dir).encode(text_file.read_bytes().decode("utf-8"))
    failed = run_module(
        "encode", "--tokenizer", str(tokenizer_dir), str(text_file.parent / "gone.txt")
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith(b"streambpe: error: ")


def _default_sigint() -> None:
    # A shell starts background jobs with SIGINT ignored, and an ignored signal
    # stays ignored across exec: a suite run with `... &` would hand that to the
    # child, which then rightly ignores Ctrl-C. Start it as a foreground job is.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["python", "native"])
def test_ctrl_c_exits_130_and_leaves_nothing(
    tokenizer_dir: Path, tmp_path: Path, backend: str
) -> None:
    """SIGINT during a two-worker encode: exit 130, a one-line note, no output, no worker left alive.

    The pure backend encodes on two processes, the compiled one on two threads.
    """
    if backend not in streambpe.core.available_backends():
        pytest.skip("the compiled core is not built")
    source = tmp_path / "big.txt"
    source.write_bytes(make_text(30_000_000, seed=23).encode("utf-8"))
    output = tmp_path / "out" / "ids.bin"
    output.parent.mkdir()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "streambpe", "encode", str(source), "-o", str(output)),
            *("--tokenizer", str(tokenizer_dir), "--workers", "2", "--progress", "json"),
        ],
        env={**_child_env(), "STREAMBPE_PURE_PYTHON": "1" if backend == "python" else "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    parent = psutil.Process(process.pid)
    deadline = time.monotonic() + 30
    workers: list[psutil.Process] = []

    def started() -> bool:
        # Two worker processes, or two pool threads beside the main one.
        if backend == "python":
            return len(workers) >= 2
        return parent.num_threads() >= 3

    while not started() and time.monotonic() < deadline and process.poll() is None:
        workers = parent.children(recursive=True)
        time.sleep(0.02)
    assert started(), "the encode finished or failed before its workers were seen"
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert b"interrupted" in stderr
    assert listing(output.parent) == set()
    _gone, alive = psutil.wait_procs(workers, timeout=5)
    assert alive == []
