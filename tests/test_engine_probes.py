"""The lab's engine probes: the OpenMP thread-pool case study, the torch thread off and on, the slot comparison's
option checks and the decode timer."""

import json

import pytest

from lab.ops import omp_threads, slot_throughput, torch_pools


def test_the_omp_probe_measures_each_case_and_writes_its_record(tmp_path, monkeypatch):
    monkeypatch.setattr(omp_threads, "OMP_CASES", ("main", "worker_only"))  # two fresh processes keep it quick
    out = tmp_path / "omp.json"
    assert omp_threads.main(["--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["command"] == f"python -m lab.ops.omp_threads --out {out}"
    assert set(record["results"]) == {"main", "worker_only"}
    for case in record["results"].values():
        assert case["us"] > 0 and 0 < case["cores_busy"] <= 4


def test_the_torch_pools_probe_turns_the_torch_thread_off_by_running_calls_where_they_are_made(monkeypatch):
    import threading

    from raqa.models import torch_thread

    monkeypatch.setattr(
        torch_thread, "call_on_torch_thread", torch_thread.call_on_torch_thread
    )  # put back after the test
    monkeypatch.setattr(torch_thread, "one_pool", torch_thread.one_pool)
    assert torch_thread.call_on_torch_thread(lambda: threading.current_thread().name) == "raqa-torch"
    torch_pools.torch_thread_off()
    assert torch_thread.call_on_torch_thread(lambda: threading.current_thread().name) == threading.current_thread().name


@pytest.mark.parametrize("argv", [["--slots", "0,2"], ["--slots", ","], ["--questions", "0"]])
def test_the_slot_comparison_refuses_bad_options_before_loading_anything(argv, monkeypatch):
    monkeypatch.setattr(slot_throughput, "measure_slots", lambda *a: pytest.fail("measured despite bad options"))
    with pytest.raises(SystemExit) as stopped:
        slot_throughput.main(argv)
    assert stopped.value.code == 2


def test_the_decode_probe_times_a_streamed_reply_from_its_first_to_its_last_piece():
    import time

    from lab.ops import reader_decode
    from raqa.models.base import Usage

    class Steady:  # five pieces 20 ms apart, then the usage: 4 tokens after the first in 80 ms
        def reply(self, messages, max_new_tokens=64):
            for word in ("a", "b", "c", "d", "e"):
                time.sleep(0.02)
                yield word
            yield Usage(100, 5)

    assert 35 < reader_decode.decode_rate(Steady(), []) < 55


def test_the_line_and_load_records_parse_llama_cpps_counters():
    from lab.ops import reader_load

    class Server:
        text = "# HELP x\nllamacpp:prompt_tokens_total 100\nllamacpp:prompt_seconds_total 2.5\n"

        def handle_metrics(self):
            return self.text + "llamacpp:tokens_predicted_total 10\nllamacpp:tokens_predicted_seconds_total 0.5\n"

    class Backend:
        server = Server()

    before = reader_load.engine_counters(Backend())
    Server.text = "llamacpp:prompt_tokens_total 600\nllamacpp:prompt_seconds_total 7.5\n"
    used = reader_load.compute_used(before, reader_load.engine_counters(Backend()))
    assert used["prompt_tokens"] == 500 and used["limit_s"] == 5.0 and used["prompt_tok_s"] == 100.0
    assert reader_load.engine_counters(object()) is None and reader_load.compute_used(None, before) is None
