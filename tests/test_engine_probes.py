"""The lab's two engine probes: the OpenMP thread-pool case study and the slot comparison's option checks."""

import json

import pytest

from lab.ops import omp_threads, slot_throughput


def test_the_omp_probe_measures_each_case_and_writes_its_record(tmp_path, monkeypatch):
    monkeypatch.setattr(omp_threads, "CASES", ("main", "worker_only"))  # two fresh processes keep it quick
    out = tmp_path / "omp.json"
    assert omp_threads.main(["--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["command"] == f"python -m lab.ops.omp_threads --out {out}"
    assert set(record["results"]) == {"main", "worker_only"}
    for case in record["results"].values():
        assert case["us"] > 0 and 0 < case["cores_busy"] <= 4


@pytest.mark.parametrize("argv", [["--slots", "0,2"], ["--slots", ","], ["--questions", "0"]])
def test_the_slot_comparison_refuses_bad_options_before_loading_anything(argv, monkeypatch):
    monkeypatch.setattr(slot_throughput, "measure", lambda *a: pytest.fail("measured despite bad options"))
    with pytest.raises(SystemExit) as stopped:
        slot_throughput.main(argv)
    assert stopped.value.code == 2
