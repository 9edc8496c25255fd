"""The face's registry: names, model tables, plugins, ``register_encoding``, threads, pickling."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
import tiktoken.model
from tiktoken_cache import SHIPPED_ENCODINGS, seed_cache, tiny_encoding_spec

import streambpe.tiktoken as face
from streambpe.tiktoken import registry
from streambpe.tiktoken.core import Encoding

TESTS_DIR = Path(__file__).resolve().parent


@pytest.fixture(scope="module", autouse=True)
def offline_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Both tiktoken and the face read the seeded cache in this module."""
    folder = seed_cache(tmp_path_factory.mktemp("tiktoken-cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty registry, as in a new process; the session's is restored afterwards."""
    monkeypatch.setattr(registry, "ENCODINGS", {})
    monkeypatch.setattr(registry, "ENCODING_CONSTRUCTORS", None)
    monkeypatch.setattr(registry, "_REGISTERED_AT_RUN_TIME", {})


# --------------------------------------------------------------------------- names


def test_every_tiktoken_encoding_name_is_known() -> None:
    """Guards the table: the seven names, in tiktoken's order, before any registered ones."""
    names = face.list_encoding_names()
    assert names[:7] == tiktoken.list_encoding_names()


def test_public_names_are_tiktokens() -> None:
    """Guards the top-level names: everything tiktoken exports, plus register_encoding."""
    exported = {name for name in dir(tiktoken) if not name.startswith("_")}
    assert exported - {"core", "model", "registry", "load"} <= set(dir(face))
    assert face.__version__ == tiktoken.__version__
    assert callable(face.register_encoding)


def test_get_encoding_returns_one_shared_object() -> None:
    """Guards the once-per-process build."""
    assert face.get_encoding("r50k_base") is face.get_encoding("r50k_base")


def test_unknown_encoding_raises_tiktokens_value_error() -> None:
    """Guards the unknown-name error: tiktoken's first line, then the names we do know."""
    with pytest.raises(ValueError) as reference:
        tiktoken.get_encoding("no_such_encoding")
    with pytest.raises(ValueError) as ours:
        face.get_encoding("no_such_encoding")
    # The plugin line differs: tiktoken's own openai_public module is not a plugin here.
    assert str(ours.value).split("\n")[0] == str(reference.value).split("\n")[0]
    assert "Plugins found: []" in str(ours.value)
    assert "cl100k_base" in str(ours.value)
    with pytest.raises(ValueError, match="Expected a string in get_encoding"):
        face.get_encoding(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- models


def test_model_tables_equal_tiktokens() -> None:
    """Guards the model tables, prefix order included (the first matching prefix wins)."""
    from streambpe.tiktoken import model

    assert model.MODEL_TO_ENCODING == tiktoken.model.MODEL_TO_ENCODING
    assert list(model.MODEL_PREFIX_TO_ENCODING.items()) == list(
        tiktoken.model.MODEL_PREFIX_TO_ENCODING.items()
    )


@pytest.mark.parametrize(
    "model_name",
    [
        "gpt-5",
        "gpt-5-mini",
        "gpt-4.1",
        "gpt-4.1-nano",
        "gpt-4o",
        "gpt-4o-2024-05-13",
        "chatgpt-4o-latest",
        "o1",
        "o1-preview",
        "o3-mini",
        "o4-mini-2025",
        "gpt-oss-20b",
        "gpt-4",
        "gpt-4-32k",
        "gpt-3.5-turbo-0301",
        "gpt-35-turbo-16k",
        "ft:gpt-4o-mini:org",
        "ft:davinci-002:x",
        "text-embedding-3-large",
        "text-davinci-003",
        "code-davinci-edit-001",
        "davinci",
        "gpt2",
        "gpt-2",
    ],
)
def test_models_map_as_in_tiktoken(model_name: str) -> None:
    """Guards exact names and prefixes for every family the issue lists."""
    assert face.encoding_name_for_model(model_name) == tiktoken.encoding_name_for_model(model_name)


def test_unknown_model_raises_tiktokens_key_error() -> None:
    """Guards the unknown-model error: KeyError with tiktoken's message."""
    with pytest.raises(KeyError) as reference:
        tiktoken.encoding_name_for_model("llama-3")
    with pytest.raises(KeyError) as ours:
        face.encoding_name_for_model("llama-3")
    assert ours.value.args == reference.value.args


def test_encoding_for_model_is_the_registered_encoding() -> None:
    """Guards encoding_for_model: the shared encoding of the model's name."""
    assert face.encoding_for_model("gpt-4o") is face.get_encoding("o200k_base")
    assert face.encoding_for_model("gpt-oss-120b").name == "o200k_harmony"


# --------------------------------------------------------------------------- threads


@pytest.mark.usefixtures("fresh_registry")
def test_concurrent_first_calls_build_once() -> None:
    """Guards thread safety: threads racing for a new name share one build."""
    calls: list[int] = []

    def slow_constructor() -> dict[str, object]:
        calls.append(1)
        time.sleep(0.05)
        return tiny_encoding_spec()

    face.register_encoding("racy", slow_constructor)
    barrier = threading.Barrier(8)
    results: list[Encoding] = []

    def worker() -> None:
        barrier.wait()
        results.append(face.get_encoding("racy"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(result is results[0] for result in results)


@pytest.mark.usefixtures("fresh_registry")
def test_concurrent_first_calls_of_built_in_encodings() -> None:
    """Guards thread safety on the real path: loading from the cache on several threads."""
    barrier = threading.Barrier(6)
    results: dict[str, list[Encoding]] = {"r50k_base": [], "p50k_base": []}

    def worker(name: str) -> None:
        barrier.wait()
        results[name].append(face.get_encoding(name))

    threads = [
        threading.Thread(target=worker, args=(name,)) for name in ["r50k_base", "p50k_base"] * 3
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for found in results.values():
        assert len(found) == 3 and found[0] is found[1] is found[2]


# --------------------------------------------------------------------------- register_encoding


@pytest.mark.usefixtures("fresh_registry")
def test_register_encoding_takes_specs_or_encodings() -> None:
    """Guards register_encoding: a spec-returning constructor, an Encoding-returning one."""
    face.register_encoding("tiny_registered", tiny_encoding_spec)
    encoding = face.get_encoding("tiny_registered")
    assert encoding.encode("ab <|end|>", allowed_special="all") == [256, 32, 257]
    assert "tiny_registered" in face.list_encoding_names()
    face.register_encoding("direct", lambda: Encoding(**tiny_encoding_spec()))
    assert face.get_encoding("direct").encode("ab") == [256]


@pytest.mark.usefixtures("fresh_registry")
def test_register_encoding_refuses_taken_names_and_bad_arguments() -> None:
    """Guards register_encoding's errors: a known name, a non-callable, a bad name."""
    with pytest.raises(ValueError, match="'cl100k_base' is already registered"):
        face.register_encoding("cl100k_base", tiny_encoding_spec)
    with pytest.raises(TypeError, match="takes a constructor"):
        face.register_encoding("x", {"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty str"):
        face.register_encoding("", tiny_encoding_spec)


# --------------------------------------------------------------------------- pickling


@pytest.mark.parametrize("name", SHIPPED_ENCODINGS)
def test_registered_encodings_pickle_by_name_in_a_few_bytes(name: str) -> None:
    """Guards pickling by reference: a few dozen bytes, and the same object back."""
    encoding = face.get_encoding(name)
    data = pickle.dumps(encoding)
    assert len(data) < 100
    assert name.encode() in data
    assert pickle.loads(data) is encoding


@pytest.mark.usefixtures("fresh_registry")
def test_run_time_registration_pickles_into_a_fresh_process() -> None:
    """Guards pickles of run-time registrations: a new process registers and builds them."""
    face.register_encoding("tiny_registered", tiny_encoding_spec)
    data = pickle.dumps(face.get_encoding("tiny_registered"))
    assert len(data) < 200
    program = (
        "import pickle, sys\n"
        "encoding = pickle.loads(sys.stdin.buffer.read())\n"
        "print(encoding.name, encoding.encode('ab ab'))\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-c", program],
        input=data,
        capture_output=True,
        env=environment,
        check=True,
        timeout=120,
    )
    assert result.stdout.decode().split() == ["tiny_registered", "[256,", "32,", "256]"]


@pytest.mark.usefixtures("fresh_registry")
def test_lambda_registration_pickles_its_data() -> None:
    """Guards the fallback: a constructor pickle cannot name is replaced by the ranks."""
    face.register_encoding("by_lambda", lambda: tiny_encoding_spec())
    encoding = face.get_encoding("by_lambda")
    copy = pickle.loads(pickle.dumps(encoding))
    assert copy is not encoding
    assert copy.encode("ab ab") == encoding.encode("ab ab") == [256, 32, 256]


# --------------------------------------------------------------------------- plugins


def _write_plugin(folder: Path, module: str, body: str) -> None:
    package = folder / "tiktoken_ext"
    package.mkdir(exist_ok=True)
    (package / f"{module}.py").write_text(body, encoding="utf-8")


PLUGIN = """
def _spec():
    ranks = {bytes([i]): i for i in range(256)} | {b"zz": 256}
    return {"name": "plugin_zz", "pat_str": r"\\S+|\\s+", "mergeable_ranks": ranks,
            "special_tokens": {}}

ENCODING_CONSTRUCTORS = {"plugin_zz": _spec}
"""


@pytest.mark.usefixtures("fresh_registry")
def test_tiktoken_ext_plugins_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards plugins: a tiktoken_ext module's ENCODING_CONSTRUCTORS join the registry."""
    _write_plugin(tmp_path, "streambpe_test_plugin_ok", PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "plugin_zz" in face.list_encoding_names()
    encoding = face.get_encoding("plugin_zz")
    assert encoding.encode("zz z") == [256, 32, 122]
    assert pickle.loads(pickle.dumps(encoding)) is encoding
    with pytest.raises(ValueError, match="streambpe_test_plugin_ok"):
        face.get_encoding("missing_from_plugins")


@pytest.mark.usefixtures("fresh_registry")
def test_plugin_without_constructors_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the plugin contract: a module without ENCODING_CONSTRUCTORS is named."""
    _write_plugin(tmp_path, "streambpe_test_plugin_empty", "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="streambpe_test_plugin_empty does not define"):
        face.get_encoding("cl100k_base_not_cached_name")


@pytest.mark.usefixtures("fresh_registry")
def test_plugin_redefining_a_name_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards duplicates: a plugin may not take a name that is already defined."""
    body = PLUGIN.replace('{"plugin_zz": _spec}', '{"cl100k_base": _spec}')
    _write_plugin(tmp_path, "streambpe_test_plugin_dup", body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="Duplicate encoding name cl100k_base"):
        face.list_encoding_names()
