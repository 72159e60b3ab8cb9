"""Every command's JSON on every oracle store, both replica sets and the sample store is byte-identical to what main
265484a printed before the redesign of issue 27 (settings passed explicitly, errors at the bottom, single names).

``tests/fixtures/json-digests.json`` holds the sha256 of each invocation's stdout (plus any ndjson it wrote under
``out/``) and of its exit code, recorded from main 265484a by running the same invocation list through the
installed ``rmqinspect``; paths inside the repository read ``<REPO>``, the oracle and replica stores ``<SHARED>``
(wherever ``../shared`` is), the working directory ``<OUT>``. stderr (notes and warnings, sentences for people) is
not compared: the terminal work changed it on purpose (notes said once, recover's version paragraph once on a
table). Here the same invocations run in-process through click's CliRunner (no interpreter start per call), so a
refactor that changes one byte of any answer or an exit code fails with the store and the invocation named.

Two inputs of the machine, not of the store, are held fixed, both here and when the digests were recorded: gc's disk
ratio (the host partition's usage) and every file's mtime (the time ``../shared`` was copied onto the machine, which
decides what gc finds expired): each commit-log file reads as written at the store's last storeTimestamp.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import ORACLE, REPLICAS, REPO, SAMPLE_STORE

DIGESTS = REPO / "tests" / "fixtures" / "json-digests.json"
RECORDED_DISK_RATIO = 0.35  # "disk_ratio" in every gc.json recorded


def stores() -> dict[str, tuple[str, str | None]]:
    out: dict[str, tuple[str, str | None]] = {}
    for d in sorted(glob.glob(f"{ORACLE}/*/*")):
        if os.path.isfile(d + "/expected.json"):
            out[os.path.relpath(d, ORACLE).replace("/", "__")] = (d + "/store", d + "/expected.json")
    out["sample"] = (str(SAMPLE_STORE), None)
    return out


def replica_sets() -> dict[str, list[str]]:
    out = {}
    for d in sorted(glob.glob(f"{REPLICAS}/*/*")):
        members = sorted(p for p in glob.glob(d + "/*") if os.path.isdir(p))
        out[os.path.relpath(d, REPLICAS).replace("/", "__")] = [m + "/store" if os.path.isdir(m + "/store") else m
                                                                 for m in members]
    return out


def invoke(args: list[str], cwd: Path) -> tuple[str, str]:
    """(stdout + the ndjson written under out/, exit code + stderr) as the recording wrote them."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(cli, args, prog_name="rmqinspect", env={"COLUMNS": "200"})
        extra = ""
        for f in sorted(glob.glob(str(cwd) + "/out/**/*.ndjson", recursive=True)):
            extra += f"\n--- {os.path.relpath(f, cwd)}\n" + Path(f).read_text()
    finally:
        os.chdir(old)

    def clean(s: str) -> str:
        for shared in {str(ORACLE.parent), str(REPLICAS.parent)}:
            s = s.replace(shared, "<SHARED>")
        return s.replace(str(REPO), "<REPO>").replace(str(cwd), "<OUT>")

    return clean(r.stdout + extra), f"{r.exit_code}\n"


def pick(store: str, expected: str | None, tmp: Path) -> dict:
    """The message each invocation names: the first with a key and a UNIQ_KEY (from expected.json when the broker
    recorded one, else from the store's own decode)."""
    e = json.loads(Path(expected).read_text()) if expected else {}
    if e.get("messages"):
        m = next(x for x in e["messages"] if x.get("keys") and x.get("uniqKey"))
        return dict(key=m["keys"].split(" ")[0], topic=m["topic"], qid=str(m["queueId"]), off=m["physicalOffset"],
                    omid=m["offsetMsgId"], uniq=m["uniqKey"], now=e["messages"][-1]["storeTimestamp"] + 10**9)
    out, _ = invoke(["decode-commitlog", store, "--format", "ndjson"], tmp)
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    m = next(x for x in rows if x.get("keys") and x.get("uniq_key"))
    return dict(key=m["keys"][0], topic=m["topic"], qid=str(m["queue_id"]), off=m["physical_offset"],
                omid=m["offset_msg_id"], uniq=m["uniq_key"], now=rows[-1]["store_timestamp"] + 10**9)


def plan(s: str, p: dict) -> dict[str, list[str]]:
    J = ["--format", "json"]
    return {
        "summary": ["summary", s, *J],
        "summary-ndjson": ["summary", s, "--format", "ndjson"],
        "decode-all": ["decode-commitlog", s, "--format", "ndjson", "--body", "base64"],
        "decode-one": ["decode-commitlog", s, "--offset", str(p["off"]), *J],
        "decode-key": ["decode-commitlog", s, "--key", p["key"], *J],
        "cq-all": ["cq", s, "--all", *J],
        "cq-join": ["cq", s, "--topic", p["topic"], "--queue", p["qid"], "--join", *J],
        "cq-recovered": ["cq", s, "--topic", p["topic"], "--queue", p["qid"], "--as-recovered", *J],
        "index-lookup": ["index-lookup", s, "--topic", p["topic"], "--key", p["key"], "--explain", *J],
        "index-lookup-rec": ["index-lookup", s, "--topic", p["topic"], "--key", p["key"], "--as-recovered", *J],
        "msgid-offset": ["msgid", p["omid"], "--store", s, *J],
        "msgid-uniq": ["msgid", p["uniq"], "--store", s, "--topic", p["topic"], *J],
        "explain-missing": ["explain-missing", s, "--topic", p["topic"], "--key", "no-such-key", *J],
        "explain-found": ["explain-missing", s, "--topic", p["topic"], "--key", p["key"], *J],
        "verify": ["verify", s, "--format", "ndjson"],
        "verify-json": ["verify", s, *J],
        "recover": ["recover", s, "--dry-run", *J],
        "salvage": ["salvage", s, "--out", "out/salvage.ndjson", *J],
        "consumer-lag": ["consumer-lag", s, *J],
        "rebuild-dry": ["rebuild", s, "--dry-run", *J],
        "rebuild-out": ["rebuild", s, "--out", "out/rebuilt", *J],
        "store-info": ["store-info", s, *J],
        "fate-key": ["fate", s, "--key", p["key"], "--topic", p["topic"], *J],
        "fate-msgid": ["fate", s, "--msgid", p["uniq"], *J],
        "dump": ["dump", s, "--offset", str(p["off"] + 3), "--snap", *J],
        "dledger-peers": ["dledger-peers", s, s, *J],
        "peers-self": ["peers", s, s, *J],
        "config": ["config", s, *J],
        "rocksdb-cq": ["rocksdb-cq", s, "--list", *J],
        "batch-cq": ["batch-cq", s, *J],
        "timers": ["timers", s, *J],
        "txn": ["txn", s, "--format", "ndjson"],
        "txn-summary": ["txn", s, "--summary", *J],
        "gc": ["gc", s, "--dry-run", "--now", str(p["now"]), *J],
        "tiered": ["tiered-index-lookup", s, "--topic", p["topic"], "--key", p["key"], *J],
        "compact-index": ["compact-index", s, "--out", "out/compacted", *J],
        "export": ["export", s, "--out", "out/parquet", "--with-body", *J],
    }


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check(name: str, args: list[str], tmp: Path, recorded: dict[str, str], differ: list[str]) -> None:
    cwd = tmp / name.replace("/", "__")
    cwd.mkdir()
    out, rc = invoke(args, cwd)
    for suffix, text in ((".json", out), (".rc", rc)):
        want = recorded.get(name + suffix)
        if want is None:
            differ.append(f"{name}{suffix}: no digest recorded")
        elif sha(text) != want:
            differ.append(f"{name}{suffix}: rmqinspect {' '.join(args)}\n    now: {text[:300]!r}")


def hold_machine_inputs(monkeypatch, picked: dict) -> None:
    """gc's disk ratio and the files' mtimes, as the module docstring says (the recording ran 265484a, where the
    mtime reader was still named ``_mtime_ms``)."""
    from rmqinspect.analyses import gc

    monkeypatch.setattr(gc, "disk_used_ratio", lambda path: RECORDED_DISK_RATIO)
    for name in ("file_mtime_ms", "_mtime_ms"):
        if hasattr(gc, name):
            monkeypatch.setattr(gc, name, lambda path: picked["now"] - 10**9)


@pytest.fixture
def recorded() -> dict[str, str]:
    return json.loads(DIGESTS.read_text())


SCENARIOS = sorted(stores()) if ORACLE.is_dir() else ["<oracle missing>"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_command_prints_what_it_printed_before(scenario, tmp_path, recorded, monkeypatch):
    if scenario == "<oracle missing>":
        pytest.skip(f"oracle stores not found at {ORACLE} (../shared absent): the recorded digests cover them")
    store, expected = stores()[scenario]
    picked = pick(store, expected, tmp_path)
    hold_machine_inputs(monkeypatch, picked)
    invocations = plan(store, picked)
    assert {f"{scenario}/{n}.json" for n in invocations} <= set(recorded), "an invocation has no recorded digest"
    differ: list[str] = []
    for name, args in invocations.items():
        check(f"{scenario}/{name}", args, tmp_path, recorded, differ)
    assert not differ, "output changed since main 265484a:\n" + "\n".join(differ)


@pytest.mark.parametrize("replica_set", sorted(replica_sets()) or ["<replicas missing>"])
def test_peers_prints_what_it_printed_before(replica_set, tmp_path, recorded):
    if replica_set == "<replicas missing>":
        pytest.skip(f"replica sets not found at {REPLICAS} (../shared absent): the recorded digests cover them")
    members = replica_sets()[replica_set]
    differ: list[str] = []
    check(f"{replica_set}/peers", ["peers", *members, "--format", "json"], tmp_path, recorded, differ)
    check(f"{replica_set}/peers-ndjson", ["peers", *members, "--format", "ndjson"], tmp_path, recorded, differ)
    assert not differ, "output changed since main 265484a:\n" + "\n".join(differ)


def record(tmp: Path) -> dict[str, str]:
    """The digests of every invocation as the importable ``rmqinspect`` answers them."""
    digests: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as mp:
        for scenario, (store, expected) in sorted(stores().items()):
            picked = pick(store, expected, tmp)
            hold_machine_inputs(mp, picked)
            for name, args in plan(store, picked).items():
                cwd = tmp / f"{scenario}__{name}"
                cwd.mkdir()
                out, rc = invoke(args, cwd)
                digests[f"{scenario}/{name}.json"], digests[f"{scenario}/{name}.rc"] = sha(out), sha(rc)
    for replica_set, members in sorted(replica_sets().items()):
        for name, fmt in (("peers", "json"), ("peers-ndjson", "ndjson")):
            cwd = tmp / f"{replica_set}__{name}"
            cwd.mkdir()
            out, rc = invoke(["peers", *members, "--format", fmt], cwd)
            digests[f"{replica_set}/{name}.json"], digests[f"{replica_set}/{name}.rc"] = sha(out), sha(rc)
    return digests


if __name__ == "__main__":
    # python tests/test_json_unchanged.py: record the digests with the rmqinspect this interpreter imports, e.g.
    # that of a worktree at the commit to compare against: /tmp/base/.venv/bin/python tests/test_json_unchanged.py
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        DIGESTS.write_text(json.dumps(record(Path(tmp)), indent=0, sort_keys=True) + "\n")
