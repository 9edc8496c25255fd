"""The ``streambpe`` command line: ``train``, ``encode``, ``decode``, ``info``.

Progress and messages go to stderr; data goes to stdout or files. streambpe's
own errors and ``OSError`` print one line (``streambpe: error: ...``) and exit
with status 1; usage errors exit 2 (argparse's convention); Ctrl-C exits 130
after cleaning up. Any other exception is a bug and shows its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

from streambpe import __version__, backend
from streambpe._support.atomic import atomic_write
from streambpe._support.progress import (
    BarProgress,
    JsonLinesProgress,
    ProgressReporter,
    SilentProgress,
)
from streambpe._support.utf8 import decode_utf8_stream
from streambpe.errors import FormatError, StreamBPEError
from streambpe.formats import FORMATS
from streambpe.streaming.file_encoding import DTYPES, choose_dtype, ids_to_bytes
from streambpe.tokenizer import Tokenizer
from streambpe.train.trainer import train_bpe

_READ_BLOCK = 1 << 20


def _reporter(args: argparse.Namespace) -> ProgressReporter:
    if args.quiet or args.progress == "none":
        return SilentProgress()
    if args.progress == "json":
        return JsonLinesProgress()
    return BarProgress()


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


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streambpe", description="Train and apply byte-level BPE tokenizers on large files."
    )
    parser.add_argument("--version", action="version", version=f"streambpe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a tokenizer on a text file")
    train.add_argument("input", type=Path, help="UTF-8 training text")
    train.add_argument(
        "--vocab-size", type=int, required=True, help="ids wanted, bytes and specials included"
    )
    train.add_argument(
        "--special-token", action="append", default=[], metavar="TOKEN", help="repeat for several"
    )
    train.add_argument("--pattern", default="gpt2", help="gpt2 | cl100k | o200k | a regex")
    train.add_argument(
        "--workers", type=int, default=None, help="counting processes (default: cores)"
    )
    train.add_argument(
        "--out", type=Path, required=True, help="directory to write the tokenizer to"
    )
    train.add_argument("--format", choices=FORMATS, default="gpt2", help="tokenizer file format")
    train.add_argument("--cache", action="store_true", help="reuse word counts across runs")
    train.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    _add_common(train)

    encode = commands.add_parser("encode", help="encode text into token ids")
    encode.add_argument("input", help="text file, or - for stdin")
    encode.add_argument("--tokenizer", type=Path, required=True, help="tokenizer directory")
    encode.add_argument(
        "-o",
        "--output",
        type=Path,
        help="write raw little-endian ids here (else ids as text on stdout)",
    )
    encode.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    encode.add_argument(
        "--dtype", choices=sorted(DTYPES), help="output id type (default: smallest)"
    )
    encode.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    _add_common(encode)

    decode = commands.add_parser("decode", help="decode token ids back into text")
    decode.add_argument("input", help="a .bin of raw ids, or - to read ids as text from stdin")
    decode.add_argument("--tokenizer", type=Path, required=True, help="tokenizer directory")
    decode.add_argument(
        "--dtype", choices=sorted(DTYPES), help="id type of the .bin (default: as encode)"
    )
    decode.add_argument("-o", "--output", type=Path, help="write the text here (else stdout)")

    info = commands.add_parser(
        "info", help="show the version and backend, and describe a tokenizer directory if given"
    )
    info.add_argument("tokenizer", type=Path, nargs="?", help="a tokenizer directory")
    return parser


def _report(args: argparse.Namespace, summary: dict[str, object], line: str) -> None:
    # --json: the summary on stdout for programs; otherwise one line on stderr for
    # people, unless they asked for silence or for machine-readable progress only.
    if args.json:
        print(json.dumps(summary))
    elif not args.quiet and args.progress == "bar":
        print(line, file=sys.stderr)


def _run_train(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    vocab, merges = train_bpe(
        args.input,
        args.vocab_size,
        args.special_token,
        pattern=args.pattern,
        workers=args.workers,
        errors=args.errors,
        cache=args.cache,
        progress=_reporter(args),
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
        summary = {
            "output": str(args.output),
            "bytes": stats.bytes,
            "tokens": stats.tokens,
            "seconds": round(stats.seconds, 3),
            "tokens_per_second": round(stats.tokens_per_second),
            "dtype": stats.dtype,
        }
        _report(
            args,
            summary,
            f"{stats.tokens} tokens from {stats.bytes} bytes in {stats.seconds:.2f} s "
            f"({stats.tokens_per_second:,.0f} tokens/s) -> {args.output} ({stats.dtype})",
        )
        return 0
    if args.input == "-":
        batches = tokenizer.iter_id_batches(
            decode_utf8_stream(sys.stdin.buffer, "<stdin>", args.errors)
        )
    else:
        batches = tokenizer.iter_file_ids(
            args.input,
            workers=args.workers,
            errors=args.errors,
            progress=_reporter(args),
        )
    if args.output is not None:
        dtype = choose_dtype(tokenizer.n_vocab, args.dtype)
        with atomic_write(args.output) as sink:
            for batch in batches:
                sink.write(ids_to_bytes(batch, dtype))
        return 0
    first = True
    for batch in batches:
        if batch:
            sys.stdout.write(("" if first else " ") + " ".join(map(str, batch)))
            first = False
    sys.stdout.write("\n")
    return 0


def _binary_ids(stream: BinaryIO, dtype: str) -> Iterator[list[int]]:
    typecode = DTYPES[dtype][0]
    itemsize = array(typecode).itemsize
    leftover = b""
    while block := stream.read(_READ_BLOCK):
        block = leftover + block
        usable = len(block) - len(block) % itemsize
        leftover = block[usable:]
        values = array(typecode)
        values.frombytes(block[:usable])
        if sys.byteorder == "big":
            values.byteswap()
        yield values.tolist()
    if leftover:
        raise FormatError(
            getattr(stream, "name", "<input>"),
            None,
            f"the id file ends with {len(leftover)} stray byte(s): it is not a whole number "
            f"of {dtype} ids (wrong --dtype?)",
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
        batches = _binary_ids(source, dtype)
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
            "pattern": tokenizer.pattern,
            "merges": len(tokenizer.merges),
        }
    print(json.dumps(described, ensure_ascii=False, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _build_parser().parse_args(argv)
    commands = {
        "train": _run_train,
        "encode": _run_encode,
        "decode": _run_decode,
        "info": _run_info,
    }
    try:
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
