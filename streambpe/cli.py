"""The ``streambpe`` command line: ``train``, ``encode``, ``encode-files``, ``decode``, ``info``.

Progress and messages go to stderr; data goes to stdout or files. streambpe's
own errors and ``OSError`` print one line (``streambpe: error: ...``) and exit
with status 1; usage errors exit 2 (argparse's convention); Ctrl-C exits 130
after cleaning up. Any other exception is a bug and shows its traceback.
Warnings about a result (a vocabulary smaller than asked for) print one line,
``streambpe: warning: ...``, even with ``--quiet``: they are not progress.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import warnings
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO, TypeAlias, TypeVar

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

from streambpe import __version__, backend
from streambpe._support.atomic import atomic_write
from streambpe._support.progress import (
    BarProgress,
    JsonLinesProgress,
    ProgressReporter,
    SilentProgress,
)
from streambpe._support.utf8 import decode_utf8_stream
from streambpe.core.split_steps import steps_to_data
from streambpe.errors import FormatError, StreamBPEError
from streambpe.formats import FORMATS, check_creatable
from streambpe.streaming.file_encoding import DTYPES, choose_dtype, ids_to_bytes
from streambpe.streaming.options import DEFAULT_SHARD_BYTES
from streambpe.tokenizer import Tokenizer
from streambpe.train.count_tasks import INPUT_FORMATS
from streambpe.train.options import CACHE_KEYS
from streambpe.train.trainer import train_bpe

_READ_BLOCK = 1 << 20
MIB = 1 << 20

ItemT = TypeVar("ItemT")

#: Options of ``streambpe train`` that ``train_bpe`` takes under the same names.
_TRAIN_KEYWORDS = (
    "pattern",
    "workers",
    "errors",
    "input_format",
    "text_field",
    "cache",
    "cache_key",
)

#: What ``add_subparsers`` returns: each ``_add_*_command`` adds one subcommand to it.
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _reporter(args: argparse.Namespace) -> ProgressReporter:
    if args.quiet or args.progress == "none":
        return SilentProgress()
    if args.progress == "json":
        return JsonLinesProgress()
    return BarProgress()


def _positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (a usage error otherwise)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    """An argparse type: a number above 0 (a usage error otherwise)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    parser.add_argument(
        "--progress",
        choices=["bar", "json", "none"],
        default="bar",
        help="progress on stderr: a bar (default), JSON lines for programs, or none",
    )
    parser.add_argument(
        "--errors",
        choices=["strict", "replace"],
        default="strict",
        help="invalid UTF-8: stop with the byte offset (default) or replace with U+FFFD",
    )


def _add_train_command(commands: _Commands) -> None:
    """``streambpe train``: learn a vocabulary and write it in a tokenizer format."""
    train = commands.add_parser("train", help="train a tokenizer on text files")
    train.add_argument(
        "input",
        nargs="+",
        help="UTF-8 training text: files, globs or fsspec URLs; each file is its own stream",
    )
    train.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default="auto",
        help="auto (by suffix: .jsonl/.ndjson, .parquet, else text), text, jsonl or parquet",
    )
    train.add_argument(
        "--text-field", default="text", help="jsonl field or parquet column holding the text"
    )
    train.add_argument(
        "--vocab-size", type=int, required=True, help="ids wanted, bytes and specials included"
    )
    train.add_argument(
        "--special-token", action="append", default=[], metavar="TOKEN", help="repeat for several"
    )
    train.add_argument("--pattern", default="gpt2", help="gpt2 | cl100k | o200k | a regex")
    train.add_argument(
        "--workers", type=_positive_int, default=None, help="counting processes (default: cores)"
    )
    train.add_argument(
        "--out", type=Path, required=True, help="directory to write the tokenizer to"
    )
    train.add_argument("--format", choices=FORMATS, default="gpt2", help="tokenizer file format")
    train.add_argument("--cache", action="store_true", help="reuse word counts across runs")
    train.add_argument(
        "--cache-key",
        choices=CACHE_KEYS,
        default="metadata",
        help="name inputs by size and mtime (default, reads nothing) or by a hash of their bytes",
    )
    train.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    _add_common(train)


def _add_encode_command(commands: _Commands) -> None:
    """``streambpe encode``: one text file or stdin to raw ids or ids as text."""
    encode = commands.add_parser("encode", help="encode text into token ids")
    encode.add_argument("input", help="text file, or - for stdin")
    encode.add_argument("--tokenizer", type=Path, required=True, help="tokenizer directory")
    encode.add_argument(
        "-o",
        "--output",
        type=Path,
        help="write raw little-endian ids here (else ids as text on stdout)",
    )
    encode.add_argument(
        "--workers", type=_positive_int, default=None, help="processes (default: cores)"
    )
    encode.add_argument(
        "--dtype", choices=sorted(DTYPES), help="output id type (default: smallest)"
    )
    encode.add_argument(
        "--json",
        action="store_true",
        help="print a JSON summary (tokens, bytes, seconds...): on stdout with -o; "
        "without -o the ids go to stdout, so the summary is the last line of stderr",
    )
    _add_common(encode)


def _add_encode_files_command(commands: _Commands) -> None:
    """``streambpe encode-files``: many files to resumable ``.bin`` shards and an index."""
    shards = commands.add_parser(
        "encode-files",
        help="encode many files into .bin shards and an index.json (resumable)",
    )
    shards.add_argument(
        "input", nargs="+", help="text files, globs or fsspec URLs; each file is its own stream"
    )
    shards.add_argument("--tokenizer", type=Path, required=True, help="tokenizer directory")
    shards.add_argument(
        "--out-dir",
        type=Path,
        required=True,
        help="folder for the shards and index.json (created if its parent exists); "
        "rerun the same command to finish an interrupted run",
    )
    shards.add_argument(
        "--shard-mb",
        type=_positive_float,
        default=DEFAULT_SHARD_BYTES / MIB,
        help=f"input MiB per shard (default {DEFAULT_SHARD_BYTES / MIB:g})",
    )
    shards.add_argument(
        "--workers", type=_positive_int, default=None, help="threads or processes (default: cores)"
    )
    shards.add_argument(
        "--dtype", choices=sorted(DTYPES), help="output id type (default: smallest)"
    )
    shards.add_argument(
        "--json", action="store_true", help="print a JSON summary (tokens, shards...) on stdout"
    )
    _add_common(shards)


def _add_decode_command(commands: _Commands) -> None:
    """``streambpe decode``: ids (a ``.bin`` or text on stdin) back to text."""
    decode = commands.add_parser("decode", help="decode token ids back into text")
    decode.add_argument(
        "input", help="a .bin of raw ids, or - to read whitespace-separated ids from stdin"
    )
    decode.add_argument("--tokenizer", type=Path, required=True, help="tokenizer directory")
    decode.add_argument(
        "--dtype", choices=sorted(DTYPES), help="id type of the .bin (default: as encode)"
    )
    decode.add_argument("-o", "--output", type=Path, help="write the text here (else stdout)")


def _add_info_command(commands: _Commands) -> None:
    """``streambpe info``: the version, the backend, and a tokenizer's description."""
    info = commands.add_parser(
        "info", help="show the version and backend, and describe a tokenizer directory if given"
    )
    info.add_argument("tokenizer", type=Path, nargs="?", help="a tokenizer directory")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streambpe", description="Train and apply byte-level BPE tokenizers on large files."
    )
    parser.add_argument("--version", action="version", version=f"streambpe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_train_command(commands)
    _add_encode_command(commands)
    _add_encode_files_command(commands)
    _add_decode_command(commands)
    _add_info_command(commands)
    return parser


def _report(
    args: argparse.Namespace, summary: dict[str, object], line: str, *, data_on_stdout: bool = False
) -> None:
    # --json: the summary on stdout for programs, unless stdout carries the data;
    # then it is stderr's last line. Otherwise one line on stderr for people,
    # unless they asked for silence or for machine-readable progress only.
    if args.json:
        print(json.dumps(summary), file=sys.stderr if data_on_stdout else sys.stdout)
    elif not args.quiet and args.progress == "bar":
        print(line, file=sys.stderr)


def _run_train(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_creatable(args.out)
    vocab, merges = train_bpe(
        args.input,
        args.vocab_size,
        args.special_token,
        progress=_reporter(args),
        **{name: getattr(args, name) for name in _TRAIN_KEYWORDS},
    )
    tokenizer = Tokenizer(vocab, merges, args.special_token, pattern=args.pattern)
    tokenizer.save(args.out, format=args.format)
    summary = {
        "output": str(args.out),
        "format": args.format,
        "vocab_size": len(vocab),
        "merges": len(merges),
        "seconds": round(time.perf_counter() - started, 3),
    }
    _report(
        args,
        summary,
        f"trained {len(vocab)} tokens ({len(merges)} merges) in {summary['seconds']} s "
        f"-> {args.out}",
    )
    return 0


class _CountingReader(io.RawIOBase):
    """Reads through to ``inner``, counting the bytes (stdin's size is known only at the end)."""

    def __init__(self, inner: BinaryIO) -> None:
        super().__init__()
        self._inner = inner
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        target = memoryview(buffer).cast("B")
        data = self._inner.read(len(target))
        target[: len(data)] = data
        self.bytes_read += len(data)
        return len(data)


@contextmanager
def _closing(iterator: Iterator[ItemT]) -> Iterator[Iterator[ItemT]]:
    """Close a generator on leaving, so an early exit stops its worker pool at once."""
    try:
        yield iterator
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def _report_encode(
    args: argparse.Namespace,
    *,
    output: str,
    n_bytes: int,
    tokens: int,
    seconds: float,
    dtype: str | None,
) -> None:
    rate = tokens / seconds if seconds > 0 else 0.0
    summary = {
        "output": output,
        "bytes": n_bytes,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(rate),
        "dtype": dtype,
    }
    _report(
        args,
        summary,
        f"{tokens} tokens from {n_bytes} bytes in {seconds:.2f} s "
        f"({rate:,.0f} tokens/s) -> {'stdout' if output == '-' else output}"
        + (f" ({dtype})" if dtype else ""),
        data_on_stdout=args.output is None,
    )


def _run_encode(args: argparse.Namespace) -> int:
    tokenizer = Tokenizer.load(args.tokenizer)
    if args.output is not None and args.input != "-":
        stats = tokenizer.encode_file(
            args.input,
            args.output,
            workers=args.workers,
            dtype=args.dtype,
            errors=args.errors,
            progress=_reporter(args),
        )
        _report_encode(
            args,
            output=str(args.output),
            n_bytes=stats.bytes,
            tokens=stats.tokens,
            seconds=stats.seconds,
            dtype=stats.dtype,
        )
        return 0
    started = time.perf_counter()
    stdin = _CountingReader(sys.stdin.buffer) if args.input == "-" else None
    if stdin is not None:
        text = decode_utf8_stream(io.BufferedReader(stdin, _READ_BLOCK), "<stdin>", args.errors)
        batches = tokenizer.iter_id_batches(text)
    else:
        batches = tokenizer.iter_file_id_batches(
            args.input,
            workers=args.workers,
            errors=args.errors,
            progress=_reporter(args),
        )
    tokens = 0
    dtype = None if args.output is None else choose_dtype(tokenizer.n_vocab, args.dtype)
    with _closing(batches):
        if dtype is not None:
            with atomic_write(args.output) as sink:
                for batch in batches:
                    sink.write(ids_to_bytes(batch, dtype))
                    tokens += len(batch)
        else:
            first = True
            for batch in batches:
                if batch:
                    sys.stdout.write(("" if first else " ") + " ".join(map(str, batch)))
                    first = False
                    tokens += len(batch)
            sys.stdout.write("\n")
            sys.stdout.flush()
    _report_encode(
        args,
        output="-" if args.output is None else str(args.output),
        n_bytes=stdin.bytes_read if stdin is not None else Path(args.input).stat().st_size,
        tokens=tokens,
        seconds=time.perf_counter() - started,
        dtype=dtype,
    )
    return 0


def _run_encode_files(args: argparse.Namespace) -> int:
    tokenizer = Tokenizer.load(args.tokenizer)
    stats = tokenizer.encode_files(
        args.input,
        args.out_dir,
        workers=args.workers,
        shard_bytes=max(1, round(args.shard_mb * MIB)),
        dtype=args.dtype,
        errors=args.errors,
        progress=_reporter(args),
    )
    summary = {
        "index": str(stats.index_path),
        "bytes": stats.bytes,
        "tokens": stats.tokens,
        "shards": stats.shards,
        "skipped": stats.skipped,
        "seconds": round(stats.seconds, 3),
        "dtype": stats.dtype,
    }
    kept = f", {stats.skipped} kept from an earlier run" if stats.skipped else ""
    _report(
        args,
        summary,
        f"{stats.tokens} tokens from {stats.bytes} bytes in {stats.seconds:.2f} s -> "
        f"{stats.shards} shards ({stats.dtype}{kept}), index {stats.index_path}",
    )
    return 0


def _not_ids(path: Path, dtype: str, problem: str) -> FormatError:
    """The error for an input that is not a ``.bin`` of this tokenizer's ids."""
    return FormatError(
        str(path),
        None,
        f"does not look like a .bin of ids for this tokenizer: read as {dtype}, its "
        f"{path.stat().st_size} bytes {problem}; to decode ids written as text, use "
        "`streambpe decode - < FILE` (whitespace-separated ids on stdin)",
    )


_TEXT_ID_BYTES = frozenset(b"0123456789 \t\r\n")


def _looks_like_text_ids(block: bytes) -> bool:
    """Whether ``block`` starts like whitespace-separated decimal ids.

    >>> _looks_like_text_ids(b"31373 995 198\\n"), _looks_like_text_ids(b"\\x8d\\x7a\\x00\\x00")
    (True, False)
    """
    head = block[:4096]
    return (
        _TEXT_ID_BYTES.issuperset(head)
        and any(byte in b"0123456789" for byte in head)
        and any(byte in b" \t\r\n" for byte in head)
    )


def _binary_ids(stream: BinaryIO, path: Path, dtype: str, n_vocab: int) -> Iterator[list[int]]:
    """The ids of a ``.bin``, block by block; a file that cannot be one raises FormatError.

    Ids written as text (``streambpe encode`` without ``-o``) are recognized by
    their first block being only digits and whitespace, which a real ``.bin``
    essentially never is; other text, or a ``.bin`` written for another
    tokenizer or ``--dtype``, shows up as an id out of range or a ragged end.
    """
    typecode = DTYPES[dtype][0]
    itemsize = array(typecode).itemsize
    leftover = b""
    position = 0
    while block := stream.read(_READ_BLOCK):
        if position == 0 and _looks_like_text_ids(block):
            raise _not_ids(path, dtype, "are digits and whitespace: ids written as text")
        block = leftover + block
        usable = len(block) - len(block) % itemsize
        leftover = block[usable:]
        values = array(typecode)
        values.frombytes(block[:usable])
        if sys.byteorder == "big":
            values.byteswap()
        ids = values.tolist()
        if ids and max(ids) >= n_vocab:
            index = next(i for i, token_id in enumerate(ids) if token_id >= n_vocab)
            raise _not_ids(
                path,
                dtype,
                f"give id {ids[index]} at position {position + index} (byte offset "
                f"{(position + index) * itemsize}), "
                f"but this tokenizer's ids end at {n_vocab - 1}",
            )
        position += len(ids)
        yield ids
    if leftover:
        raise _not_ids(
            path,
            dtype,
            f"end with {len(leftover)} stray byte(s) at byte offset {position * itemsize}, "
            "not a whole id (truncated, or the wrong --dtype?)",
        )


def _text_ids(stream: TextIO) -> Iterator[list[int]]:
    for line_number, line in enumerate(stream, start=1):
        try:
            yield [int(field) for field in line.split()]
        except ValueError:
            raise FormatError(
                "<stdin>", None, f"line {line_number}: expected whitespace-separated integer ids"
            ) from None


def _run_decode(args: argparse.Namespace) -> int:
    tokenizer = Tokenizer.load(args.tokenizer)
    if args.input == "-":
        batches = _text_ids(sys.stdin)
        source: BinaryIO | None = None
    else:
        dtype = choose_dtype(tokenizer.n_vocab, args.dtype)
        source = open(args.input, "rb")  # noqa: SIM115
        batches = _binary_ids(source, Path(args.input), dtype, tokenizer.n_vocab)
    try:
        if args.output is not None:
            with atomic_write(args.output) as sink:
                for batch in batches:
                    sink.write(tokenizer.decode_bytes(batch))
        else:
            sink_stdout = sys.stdout.buffer
            for batch in batches:
                sink_stdout.write(tokenizer.decode_bytes(batch))
            sink_stdout.flush()
    finally:
        if source is not None:
            source.close()
    return 0


def _run_info(args: argparse.Namespace) -> int:
    described: dict[str, object] = {"version": __version__, "backend": backend()}
    if args.tokenizer is not None:
        tokenizer = Tokenizer.load(args.tokenizer)
        described |= {
            "n_vocab": tokenizer.n_vocab,
            "special_tokens": tokenizer.special_tokens,
            "pattern": (
                tokenizer.pattern
                if isinstance(tokenizer.pattern, str)
                else steps_to_data(tokenizer.pattern)
            ),
            "pretokenizer_engine": tokenizer.pretokenizer_engine,
            "merges": len(tokenizer.merges),
        }
    if args.tokenizer is not None and tokenizer.pretokenizer_fallback is not None:
        described["pretokenizer_fallback"] = tokenizer.pretokenizer_fallback
    print(json.dumps(described, ensure_ascii=False, indent=2))
    return 0


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    # Python shows a warning with the source line that raised it, which reads
    # like a crash; on the command line it is one line about the result.
    print(f"streambpe: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _build_parser().parse_args(argv)
    commands = {
        "train": _run_train,
        "encode": _run_encode,
        "encode-files": _run_encode_files,
        "decode": _run_decode,
        "info": _run_info,
    }
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warning_line
            return commands[args.command](args)
    except KeyboardInterrupt:
        print("streambpe: interrupted; no partial output was kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except StreamBPEError as exc:
        print(f"streambpe: error: {exc.for_cli()}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"streambpe: error: {exc}", file=sys.stderr)
        return 1
